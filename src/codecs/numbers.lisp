;;;; Numbers: integers of every size, floats, ratios and complexes.

(in-package #:binstore)

(declaim (ftype function write-object))

;;; Integers ---------------------------------------------------------

(defmacro with-reserved ((sap offset ob n) &body body)
  "Reserve N bytes in OB and run BODY with SAP and OFFSET addressing them:
one bounds check for a tag and its payload together."
  `(let* ((,offset (reserve ,ob ,n))
          (,sap (obuf-sap ,ob)))
     ,@body))

(declaim (inline write-fixnum))
(defun write-fixnum (ob n)
  "Write the integer N, which fits in 64 signed bits, in its shortest form."
  (declare (type (signed-byte 64) n))
  (cond ((<= +smallest-in-tag-integer+ n +largest-in-tag-integer+)
         (write-u8 ob (+ n +small-int-bias+)))
        ((<= 0 n 255) (write-tag+u8 ob +tag-uint8+ n))
        ((<= -256 n -1) (write-tag+u8 ob +tag-negint8+ (- -1 n)))
        ((typep n '(signed-byte 16))
         (with-reserved (sap p ob 3)
           (setf (sb-sys:sap-ref-8 sap p) +tag-int16+
                 (sb-sys:signed-sap-ref-16 sap (1+ p)) n)))
        ((typep n '(signed-byte 32))
         (with-reserved (sap p ob 5)
           (setf (sb-sys:sap-ref-8 sap p) +tag-int32+
                 (sb-sys:signed-sap-ref-32 sap (1+ p)) n)))
        (t
         (with-reserved (sap p ob 9)
           (setf (sb-sys:sap-ref-8 sap p) +tag-int64+
                 (sb-sys:signed-sap-ref-64 sap (1+ p)) n)))))

(defun write-bignum (ob n)
  "Write an integer outside 64 signed bits: sign and magnitude, little-endian."
  (declare (type integer n))
  (let* ((magnitude (abs n))
         (nbytes (ceiling (integer-length magnitude) 8))
         (full-words (floor nbytes 8)))
    (write-u8 ob +tag-bignum+)
    (write-varint ob (+ (* 2 nbytes) (if (minusp n) 1 0)))
    (dotimes (i full-words)
      (write-u64 ob (sb-bignum::%bignum-ref magnitude i)))
    (let ((last (if (< full-words (sb-bignum:%bignum-length magnitude))
                    (sb-bignum::%bignum-ref magnitude full-words)
                    0)))
      (dotimes (i (- nbytes (* 8 full-words)))
        (write-u8 ob (ldb (byte 8 (* 8 i)) last))))))

(defun octets->integer (ib nbytes)
  "Read NBYTES little-endian bytes as a non-negative integer.  Halves are
combined recursively, so a huge magnitude costs O(n log n), not O(n^2)."
  (labels ((build (nwords last-bytes)
             ;; NWORDS full 64-bit words, then LAST-BYTES (0..7) more bytes
             (if (<= nwords 2)
                 (let ((v 0) (shift 0))
                   (dotimes (i nwords)
                     (setf v (logior v (ash (read-u64 ib) shift)))
                     (incf shift 64))
                   (dotimes (i last-bytes v)
                     (setf v (logior v (ash (read-u8 ib) shift)))
                     (incf shift 8)))
                 (let* ((low-words (floor nwords 2))
                        (low (build low-words 0))
                        (high (build (- nwords low-words) last-bytes)))
                   (logior low (ash high (* 64 low-words)))))))
    (multiple-value-bind (words rest) (floor nbytes 8)
      (build words rest))))

(defun read-bignum (rs)
  (let* ((ib (rs-ibuf rs))
         (v (read-varint ib))
         (nbytes (ash v -1)))
    (check-count ib nbytes 1 "a bignum")
    (charge rs (+ 16 nbytes))
    (let ((magnitude (octets->integer ib nbytes)))
      (register rs (if (logbitp 0 v) (- magnitude) magnitude)))))

;;; Floats -----------------------------------------------------------
;;; Written as their IEEE 754 bits through sap-ref, so -0.0, infinities and
;;; NaN payloads survive exactly.

(declaim (inline write-single-float write-double-float))
(defun write-single-float (ob x)
  (declare (type single-float x))
  (with-reserved (sap p ob 5)
    (setf (sb-sys:sap-ref-8 sap p) +tag-single-float+
          (sb-sys:sap-ref-single sap (1+ p)) x)))

(defun write-double-float (ob x)
  (declare (type double-float x))
  (with-reserved (sap p ob 9)
    (setf (sb-sys:sap-ref-8 sap p) +tag-double-float+
          (sb-sys:sap-ref-double sap (1+ p)) x)))

;;; Ratios and complexes ----------------------------------------------
;;; Their parts are integers or floats, never containers, so they nest at
;;; most one level.

(defun write-ratio (ss x)
  (write-u8 (ss-obuf ss) +tag-ratio+)
  (write-object ss (numerator x))
  (write-object ss (denominator x)))

(defun read-integer-part (rs what)
  (let ((n (read-object rs)))
    (unless (integerp n)
      (restore-invalid rs (format nil "~a is ~s, not an integer" what (type-of n))
                       "an integer"))
    n))

(defun read-ratio (rs)
  (let* ((num (read-integer-part rs "a ratio's numerator"))
         (den (read-integer-part rs "a ratio's denominator")))
    (unless (> den 1)
      (restore-invalid rs (format nil "ratio denominator ~d" den) "a denominator above 1"))
    (register rs (/ num den))))

(defun write-complex (ss x)
  ;; Dispatch on the complex's own type, so that the float parts are read
  ;; unboxed (REALPART of an unknown complex conses a fresh float).
  (declare (optimize speed))
  (let ((ob (ss-obuf ss)))
    (etypecase x
      ((complex double-float)
       (with-reserved (sap p ob 17)
         (setf (sb-sys:sap-ref-8 sap p) +tag-complex-double+
               (sb-sys:sap-ref-double sap (+ p 1)) (realpart x)
               (sb-sys:sap-ref-double sap (+ p 9)) (imagpart x))))
      ((complex single-float)
       (with-reserved (sap p ob 9)
         (setf (sb-sys:sap-ref-8 sap p) +tag-complex-single+
               (sb-sys:sap-ref-single sap (+ p 1)) (realpart x)
               (sb-sys:sap-ref-single sap (+ p 5)) (imagpart x))))
      ((complex rational)
       (write-u8 ob +tag-complex-rational+)
       (write-object ss (realpart x))
       (write-object ss (imagpart x))))))

(defun read-complex-rational (rs)
  (flet ((part (what)
           (let ((x (read-object rs)))
             (unless (rationalp x)
               (restore-invalid rs (format nil "~a is ~s" what (type-of x)) "a rational"))
             x)))
    (let* ((re (part "a complex's real part"))
           (im (part "a complex's imaginary part")))
      (when (zerop im)
        (restore-invalid rs "a rational complex with a zero imaginary part"
                         "a non-zero imaginary part"))
      (register rs (complex re im)))))

(defun read-complex-single (rs)
  (let* ((ib (rs-ibuf rs))
         (re (read-single ib)))
    (register rs (complex re (read-single ib)))))

(defun read-complex-double (rs)
  (let* ((ib (rs-ibuf rs))
         (re (read-double ib)))
    (register rs (complex re (read-double ib)))))
