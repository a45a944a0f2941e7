;;;; The platform's objects: how SBCL lays out numbers, arrays, structures,
;;;; instances and symbols, for the codecs that write and rebuild them
;;;; faster than the standard operators can.
;;;;
;;;; Each function here has the contract its docstring states and nothing
;;;; SBCL-specific in its interface; the codecs call these and name no SB-
;;;; symbol.  Small ones are inline, so the code compiled is SBCL's own.

(in-package #:binstore)

;;; Floats.

(declaim (inline float-nan-p))
(defun float-nan-p (x)
  "True when the float X is a NaN."
  (sb-ext:float-nan-p x))
