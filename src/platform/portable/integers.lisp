;;;; Bignum digits in portable Common Lisp (src/platform/objects.lisp's
;;;; names): 64-bit digits, two's complement, least significant first, as
;;;; on SBCL, taken with LDB, which is exact on any Lisp (and quadratic in
;;;; the bignum's size, where SBCL reads its digits in place).

(in-package #:binstore)

(declaim (inline bignum-digit-count bignum-digit))
(defun bignum-digit-count (bignum)
  "The number of 64-bit digits of the bignum BIGNUM (two's complement, with
its sign bit)."
  (1+ (floor (integer-length bignum) 64)))

(defun bignum-digit (bignum i)
  "The Ith 64-bit digit of the bignum BIGNUM, an (unsigned-byte 64)."
  (ldb (byte 64 (* 64 i)) bignum))

(defun make-digits (count)
  "A fresh vector of COUNT digits, to be filled with (SETF DIGIT) and then
given to DIGITS-INTEGER."
  (cl:make-array count :initial-element 0))

(defun (setf digit) (value digits i)
  "Set the Ith digit of DIGITS (from MAKE-DIGITS) to VALUE."
  (setf (svref digits i) value))

(defun digits-integer (digits count)
  "The integer whose two's complement digits are the COUNT digits of DIGITS
\(from MAKE-DIGITS), assembled by halves (not digit by digit, which is
quadratic)."
  (declare (type simple-vector digits))
  (labels ((unsigned (start end)
             (if (= (- end start) 1)
                 (svref digits start)
                 (let ((mid (floor (+ start end) 2)))
                   (logior (ash (unsigned mid end) (* 64 (- mid start)))
                           (unsigned start mid))))))
    (if (zerop count)
        0
        (let ((u (unsigned 0 count)))
          (if (logbitp 63 (svref digits (1- count)))
              (- u (ash 1 (* 64 count)))
              u)))))
