;;;; The control stack on ABCL: how deep a recursive reader may still go
;;;; (src/platform/stack.lisp's names).  The JVM tells no stack pointer, and
;;;; measuring a thread's depth (Thread.getStackTrace, StackWalker) costs
;;;; time in proportion to the depth at every check.  So ABCL's readers do
;;;; not stop themselves: they recurse until the JVM's StackOverflowError,
;;;; which ABCL signals as a STORAGE-CONDITION; RESTORE's decoder turns it
;;;; into RESTORE-LIMIT-EXCEEDED (WITH-STACK-OVERFLOW-REFUSED), once the
;;;; stack is unwound.  Data binstore writes nests at most
;;;; +MAX-PHYSICAL-DEPTH+ containers deep (1000), which the JVM's default
;;;; stacks hold.

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

(defmacro with-stack-overflow-refused ((ibuf) &body body)
  "Run BODY, a decoder reading from IBUF; when the stack overflows in it
\(ABCL's STORAGE-CONDITION), signal RESTORE-LIMIT-EXCEEDED (:nesting) at
IBUF's offset instead, from BODY's caller, the stack unwound."
  (let ((ib (gensym "IBUF")))
    `(let ((,ib ,ibuf))
       (handler-case (progn ,@body)
         (storage-condition ()
           (error 'restore-limit-exceeded
                  :limit :nesting :value +max-physical-depth+ :offset (ibuf-offset ,ib)
                  :message "the input nests deeper than the JVM's stack allows (binstore itself never writes more than +max-physical-depth+ levels)"))))))
