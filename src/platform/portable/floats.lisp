;;;; IEEE 754 bits of floats, in portable Common Lisp: what the portable
;;;; platform's MEM-SINGLE and MEM-DOUBLE store and load, and the platform's
;;;; SINGLE-FLOAT-FROM-BITS and DOUBLE-FLOAT-FROM-BITS.
;;;;
;;;; Built on INTEGER-DECODE-FLOAT and SCALE-FLOAT, which are exact.  What
;;;; a Lisp has no float for is its own: CLISP has no NaN, no infinities, no
;;;; denormals and no negative zero.  Bits of a NaN, an infinity or a
;;;; denormal then signal UNREPRESENTABLE-FLOAT (a RESTORE-ERROR); the bits
;;;; of -0.0 give 0.0, CLISP's only zero (its (- 0.0) is 0.0).

(in-package #:binstore)

(define-condition unrepresentable-float (restore-error) ()
  (:documentation "The input holds a float this Lisp has no float for: a
NaN, an infinity or a denormal on a Lisp without them (CLISP)."))

(defun unrepresentable-float (what bits)
  (error 'unrepresentable-float
         :message (format nil "the float with IEEE 754 bits #x~x is ~a, which ~a ~a does not have"
                          bits what (lisp-implementation-type) (lisp-implementation-version))))

(defmacro define-float-bits (type &key bits-name from-bits-name precision bias
                                    most-positive least-positive least-normalized)
  "Define BITS-NAME, the IEEE bits of a float of TYPE, and FROM-BITS-NAME,
its inverse, for a format of PRECISION significand bits (the hidden one
counted) and exponent BIAS."
  (let* ((width (if (eq type 'single-float) 32 64))
         (fraction-bits (1- precision))
         (exponent-bits (- width precision))
         (exponent-max (1- (ash 1 exponent-bits)))
         (denormal-exponent (- 1 bias fraction-bits)))
    `(progn
       (defun ,bits-name (x)
         ,(format nil "The ~d IEEE 754 bits of the ~(~a~) X, an unsigned integer."
                  width type)
         (declare (type ,type x))
         (let ((sign (if (minusp (float-sign x)) ,(ash 1 (1- width)) 0)))
           (cond ((/= x x)              ; a NaN (not on CLISP): a quiet one
                  (logior sign ,(ash exponent-max fraction-bits) ,(ash 1 (1- fraction-bits))))
                 ((> (abs x) ,most-positive) ; an infinity (not on CLISP)
                  (logior sign ,(ash exponent-max fraction-bits)))
                 ((zerop x) sign)
                 (t
                  (multiple-value-bind (m e) (integer-decode-float x)
                    ;; M * 2^E, M normalized to PRECISION bits
                    (let* ((shift (- ,precision (integer-length m)))
                           (m (ash m shift))
                           (e (- e shift))
                           (biased (+ e ,(+ bias fraction-bits))))
                      (if (plusp biased)
                          (logior sign (ash biased ,fraction-bits) (ldb (byte ,fraction-bits 0) m))
                          ;; a denormal: its exponent is the least one
                          (logior sign (ash m (- e ,denormal-exponent))))))))))
       (defun ,from-bits-name (bits)
         ,(format nil "The ~(~a~) whose ~d IEEE 754 bits are the unsigned integer BITS.
Signals UNREPRESENTABLE-FLOAT for a NaN, an infinity or a denormal this Lisp
does not have." type width)
         (let* ((negative (logbitp ,(1- width) bits))
                (biased (ldb (byte ,exponent-bits ,fraction-bits) bits))
                (fraction (ldb (byte ,fraction-bits 0) bits))
                (magnitude
                  (cond ((= biased ,exponent-max)
                         (unrepresentable-float (if (zerop fraction) "an infinity" "a NaN") bits))
                        ((and (zerop biased) (zerop fraction)) (coerce 0 ',type))
                        ((zerop biased)
                         (if (< ,least-positive ,least-normalized)
                             (scale-float (coerce fraction ',type) ,denormal-exponent)
                             (unrepresentable-float "a denormal" bits)))
                        (t (scale-float (coerce (logior fraction ,(ash 1 fraction-bits)) ',type)
                                        (- biased ,(+ bias fraction-bits)))))))
           (if negative (- magnitude) magnitude))))))

(define-float-bits single-float
  :bits-name single-float-bits :from-bits-name single-float-of-bits
  :precision 24 :bias 127
  :most-positive most-positive-single-float :least-positive least-positive-single-float
  :least-normalized least-positive-normalized-single-float)

(define-float-bits double-float
  :bits-name double-float-bits :from-bits-name double-float-of-bits
  :precision 53 :bias 1023
  :most-positive most-positive-double-float :least-positive least-positive-double-float
  :least-normalized least-positive-normalized-double-float)

;;; The platform's names (src/platform/objects.lisp's contracts).

(defun single-float-from-bits (bits)
  "The single float whose IEEE 754 encoding is BITS, a (signed-byte 32)."
  (single-float-of-bits (ldb (byte 32 0) bits)))

(defun double-float-from-bits (high low)
  "The double float whose IEEE 754 encoding has HIGH, a (signed-byte 32),
as its upper 32 bits and LOW, an (unsigned-byte 32), as its lower."
  (double-float-of-bits (logior (ash (ldb (byte 32 0) high) 32) low)))

(defun double-float-from-bits* (bits)
  "The double float whose IEEE 754 encoding is the unsigned 64-bit BITS."
  (double-float-of-bits bits))

(declaim (inline float-nan-p))
(defun float-nan-p (x)
  "True when the float X is a NaN (never on CLISP, which has none)."
  (/= x x))
