;;;; What SBCL, ECL and CLISP answer alike, as the standard says it: the
;;;; simple one-dimensional arrays binstore dispatches on are what TYPEP
;;;; makes of the standard type specifiers, and the decoder needs no guard
;;;; against the control stack's overflow, as its readers check the stack
;;;; (STACK-EXHAUSTED-P) before it overflows.  ABCL's answers differ: its
;;;; TYPEP takes an adjustable vector for a (SIMPLE-ARRAY * (*))
;;;; (abcl/objects.lisp), and its overflow becomes RESTORE-LIMIT-EXCEEDED
;;;; (abcl/stack.lisp).

(in-package #:binstore)

(deftype simple-1d-array ()
  "A simple one-dimensional array of any element type: (SIMPLE-ARRAY * (*))."
  '(simple-array * (*)))

(deftype simple-octet-vector ()
  "A simple vector of octets: (SIMPLE-ARRAY (UNSIGNED-BYTE 8) (*))."
  '(simple-array (unsigned-byte 8) (*)))

(defmacro with-stack-overflow-refused ((ibuf) &body body)
  "Run BODY, a decoder reading from IBUF: BODY itself, as its readers check
the stack (STACK-EXHAUSTED-P) before it overflows."
  (declare (ignore ibuf))
  `(progn ,@body))

(defmacro counting-nesting ((on-too-deep &optional (decoder :restore)) &body body)
  "Run BODY, a reader one level deeper in a decoder's recursion (DECODER
:RESTORE, or :REFERENCE for the reference decoders): BODY itself, as the
readers check the stack (STACK-EXHAUSTED-P) before it overflows;
ON-TOO-DEEP is not evaluated.  (ABCL counts the levels instead:
abcl/stack.lisp.)"
  (declare (ignore on-too-deep decoder))
  `(progn ,@body))
