;;;; The control stack on ABCL: how deep a recursive reader may still go
;;;; (src/platform/stack.lisp's names).  The JVM tells no stack pointer, and
;;;; measuring a thread's depth (Thread.getStackTrace, StackWalker) costs
;;;; time in proportion to the depth at every check.  So ABCL's readers do
;;;; not stop themselves: they recurse until the JVM's StackOverflowError,
;;;; which ABCL signals as a STORAGE-CONDITION (not a BINSTORE-ERROR; see
;;;; doc/PORTING.md).  Data binstore writes nests at most +MAX-PHYSICAL-DEPTH+
;;;; containers deep (1000), which the JVM's default stacks hold.

(in-package #:binstore)

(defun stack-limit (margin)
  "0: no limit is known on ABCL (see above)."
  (declare (ignore margin))
  0)

(declaim (inline stack-exhausted-p))
(defun stack-exhausted-p (limit)
  "NIL: on ABCL the JVM signals a stack overflow itself (see above)."
  (declare (ignore limit))
  nil)
