;;;; The payloads of fixed size: the in-tag small integers, the integers of
;;;; one to eight bytes after their tag, the floats and the complexes of
;;;; floats.  Each is decoded here only: from raw memory (the window loops,
;;;; which check the bounds themselves) and through an IBUF (the decoder's
;;;; dispatch, which refills).  Every caller passes a constant tag, or one
;;;; it has just dispatched on, so the tests on TAG below fold away and each
;;;; inlined use is the load it stands for.

(in-package #:binstore)

(declaim (inline small-int-value fixed-payload-bytes fixed-integer-value fixed-float-value
                 read-fixed-integer read-fixed-float))

(defun small-int-value (tag)
  "The integer an in-tag small integer's TAG (+FIRST-SMALL-INT-TAG+ or
above) stands for."
  (declare (type (unsigned-byte 8) tag))
  (- tag +small-int-bias+))

(defun fixed-payload-bytes (tag)
  "The bytes after TAG of a number of fixed size: 1, 2, 4 or 8 for the
integer tags, 4 or 8 for the floats, 8 or 16 for the complexes of floats."
  (case tag
    ((#.+tag-uint8+ #.+tag-negint8+) 1)
    (#.+tag-int16+ 2)
    ((#.+tag-int32+ #.+tag-single-float+) 4)
    ((#.+tag-int64+ #.+tag-double-float+ #.+tag-complex-single+) 8)
    (#.+tag-complex-double+ 16)))

(defun fixed-integer-value (sap q tag)
  "The integer TAG encodes with its payload at SAP+Q: TAG is an in-tag small
integer (no payload) or +TAG-UINT8+, +TAG-NEGINT8+, +TAG-INT16+,
+TAG-INT32+ or +TAG-INT64+."
  (declare (type (unsigned-byte 8) tag))
  (cond ((>= tag +first-small-int-tag+) (small-int-value tag))
        ((= tag +tag-uint8+) (mem-u8 sap q))
        ((= tag +tag-negint8+) (- -1 (mem-u8 sap q)))
        ((= tag +tag-int16+) (mem-s16 sap q))
        ((= tag +tag-int32+) (mem-s32 sap q))
        (t (mem-s64 sap q))))

(defun fixed-float-value (sap q tag)
  "The number TAG encodes with its payload at SAP+Q: TAG is
+TAG-SINGLE-FLOAT+, +TAG-DOUBLE-FLOAT+, +TAG-COMPLEX-SINGLE+ or
+TAG-COMPLEX-DOUBLE+ (a complex is its real part, then its imaginary part).
A complex is a fresh box; so is a double-float, unless the caller stores
it unboxed."
  (declare (type (unsigned-byte 8) tag))
  (cond ((= tag +tag-double-float+) (mem-double sap q))
        ((= tag +tag-complex-double+)
         (float-complex (mem-double sap q) (mem-double sap (+ q 8))))
        ((= tag +tag-single-float+) (mem-single sap q))
        (t (float-complex (mem-single sap q) (mem-single sap (+ q 4))))))

(defun read-fixed-integer (ib tag)
  "Read from IB the payload of the integer tag TAG (not a small integer),
just consumed; return its integer, as FIXED-INTEGER-VALUE."
  (declare (type ibuf ib) (type (unsigned-byte 8) tag))
  (let* ((size (fixed-payload-bytes tag))
         (p (need ib size)))
    (setf (ibuf-pos ib) (+ p size))
    (fixed-integer-value (ibuf-sap ib) p tag)))

(defun read-fixed-float (ib tag)
  "Read from IB the payload of TAG, a float or complex tag just consumed;
return its number, as FIXED-FLOAT-VALUE.  A complex is read a part at a
time, so that input cut inside it is reported at the part it cuts."
  (declare (type ibuf ib) (type (unsigned-byte 8) tag))
  (flet ((part (tag)
           (let* ((size (fixed-payload-bytes tag))
                  (p (need ib size)))
             (setf (ibuf-pos ib) (+ p size))
             (fixed-float-value (ibuf-sap ib) p tag))))
    (declare (inline part))
    (cond ((= tag +tag-complex-double+)
           (let ((re (part +tag-double-float+)))
             (complex re (part +tag-double-float+))))
          ((= tag +tag-complex-single+)
           (let ((re (part +tag-single-float+)))
             (complex re (part +tag-single-float+))))
          (t (part tag)))))
