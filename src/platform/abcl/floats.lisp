;;;; IEEE 754 bits of floats on ABCL: the names src/platform/portable/floats.lisp
;;;; gives CLISP (what the portable MEM-SINGLE and MEM-DOUBLE store and load,
;;;; and the platform's SINGLE-FLOAT-FROM-BITS and DOUBLE-FLOAT-FROM-BITS).
;;;;
;;;; ABCL's floats are the JVM's, with NaNs, infinities, denormals and -0.0,
;;;; and its SYSTEM package converts them to bits and back exactly (Java's
;;;; Float.floatToRawIntBits and friends), NaN payloads included; the
;;;; portable versions, which decode floats arithmetically, have no NaN.

(in-package #:binstore)

(defun single-float-bits (x)
  "The 32 IEEE 754 bits of the single float X, an unsigned integer."
  (ldb (byte 32 0) (sys:single-float-bits x)))

(defun double-float-bits (x)
  "The 64 IEEE 754 bits of the double float X, an unsigned integer."
  (logior (ash (ldb (byte 32 0) (sys:double-float-high-bits x)) 32)
          (sys:double-float-low-bits x)))

(defun single-float-from-bits (bits)
  "The single float whose IEEE 754 encoding is BITS, a (signed-byte 32) or
an (unsigned-byte 32)."
  (sys:make-single-float (ldb (byte 32 0) bits)))

(defun double-float-from-bits* (bits)
  "The double float whose IEEE 754 encoding is the unsigned 64-bit BITS."
  (sys:make-double-float bits))

(defun double-float-from-bits (high low)
  "The double float whose IEEE 754 encoding has HIGH, a (signed-byte 32),
as its upper 32 bits and LOW, an (unsigned-byte 32), as its lower."
  (sys:make-double-float (logior (ash (ldb (byte 32 0) high) 32) low)))

(declaim (inline float-nan-p))
(defun float-nan-p (x)
  "True when the float X is a NaN."
  (sys:float-nan-p x))
