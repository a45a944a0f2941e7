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

;;; ABCL's own handling of a StackOverflowError is not reliable: at times
;;; it fails inside (a ClassCastException in Lisp.stackError, which ends
;;; the thread) instead of signalling.  So the decoder counts its levels
;;; and refuses input before the JVM's stack can overflow: its default
;;; stack held 2,000 levels of nested symbols' packages and overflowed
;;; before 4,000 (measured 2026-11-27); data binstore writes nests at most
;;; +MAX-PHYSICAL-DEPTH+ (1000) containers, each with a few levels of
;;; headers inside.

(defvar *nesting* 0
  "How many levels of the decoder's recursion this thread is in.")

(defconstant +nesting-limit+ 2000
  "The levels of RESTORE's recursion ABCL allows (a container's contents, a
symbol's package, a ratio's parts ...): the 1000 containers of the
deepest data binstore writes and their headers' objects, within what the
JVM's stack holds.")

(defconstant +reference-nesting-limit+ 250
  "The levels of the reference decoders' recursion (EXPLAIN,
FILE-STATISTICS, the reference decoder) ABCL allows: each level takes more
of the JVM's stack than RESTORE's, which overflowed between 600 and 900
levels of nested packages called from the top level (measured
2026-11-27), and at 500 called from the test suite, a few hundred frames
deeper.  Deeper data is refused by them (RESTORE-LIMIT-EXCEEDED), never a
crash.")

(defmacro counting-nesting ((on-too-deep &optional (decoder :restore)) &body body)
  "Run BODY, a reader one level deeper in a decoder's recursion, unless
that is more levels than DECODER (:RESTORE, or :REFERENCE for the
reference decoders) allows, +NESTING-LIMIT+ or +REFERENCE-NESTING-LIMIT+:
then evaluate ON-TOO-DEEP, which signals."
  `(let ((*nesting* (1+ *nesting*)))
     (when (> *nesting* ,(ecase decoder
                          (:restore '+nesting-limit+)
                          (:reference '+reference-nesting-limit+)))
       ,on-too-deep)
     ,@body))
