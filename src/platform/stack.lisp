;;;; The control stack: how deep a recursive reader may still go.
;;;;
;;;; The decoders recurse once per level of nesting, so hostile input could
;;;; nest deeply enough to exhaust the control stack; they compare the stack
;;;; pointer with a limit instead and signal a clean error.  Which side of
;;;; the limit is "too deep" depends on the direction the stack grows,
;;;; which SBCL records as an internal feature: checked here, not assumed.

(in-package #:binstore)

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun stack-grows-downward-p ()
    "Whether this SBCL's control stack grows toward lower addresses, as a
feature expression for #+ (SBCL keeps the fact among its internal features,
not in *FEATURES*)."
    (if (member :stack-grows-downward-not-upward sb-impl:+internal-features+)
        '(:and)
        '(:or))))

(defun stack-limit (margin)
  "The address of the control stack, an unsigned integer, that a reader
recursing in the current thread must not go past, leaving MARGIN bytes of
the stack free (for handlers and the debugger).  Compare it with
STACK-EXHAUSTED-P."
  (declare (type (unsigned-byte 32) margin))
  #+#.(binstore::stack-grows-downward-p)
  (+ (sb-kernel:get-lisp-obj-address sb-vm:*control-stack-start*) margin)
  #-#.(binstore::stack-grows-downward-p)
  (- (sb-kernel:get-lisp-obj-address sb-vm:*control-stack-end*) margin))

(declaim (inline stack-exhausted-p))
(defun stack-exhausted-p (limit)
  "True when the current thread's stack pointer has gone past LIMIT, a value
of STACK-LIMIT taken in this thread: one comparison."
  (declare (type word limit))
  #+#.(binstore::stack-grows-downward-p)
  (< (pointer-address (sb-kernel:current-sp)) limit)
  #-#.(binstore::stack-grows-downward-p)
  (> (pointer-address (sb-kernel:current-sp)) limit))
