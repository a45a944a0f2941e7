;;;; Local functions inlined, on the Lisps that inline them: SBCL, CLISP
;;;; and ABCL.  ECL inlines none, and has its own INLINE-FLET
;;;; (src/platform/ecl/memory.lisp).

(in-package #:binstore)

(defmacro inline-flet (definitions &body body)
  "FLET of DEFINITIONS around BODY, each function declared inline.  The
functions take required parameters only, are only called by name, and
their free variables are ones no call site rebinds (ECL's INLINE-FLET makes
them local macros)."
  `(flet ,definitions
     (declare (inline ,@(mapcar #'first definitions)))
     ,@body))
