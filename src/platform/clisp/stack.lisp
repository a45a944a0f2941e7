;;;; The control stack on CLISP: how deep a recursive reader may still go
;;;; (src/platform/stack.lisp's names).  A CLISP that runs out of its C stack
;;;; does not signal a condition a handler could take: it prints "Program
;;;; stack overflow" and resets to the top level.  So the readers must stop
;;;; first, as on SBCL, by comparing the C stack pointer with a limit.  CLISP
;;;; gives neither, so both are found from outside: the stack pointer is
;;;; the address of a foreign variable CLISP allocates on the C stack
;;;; (FFI:WITH-FOREIGN-OBJECT), and the stack's extent is the [stack]
;;;; mapping of /proc/self/maps with the process's limit on its size.

(in-package #:binstore)

(defconstant +clisp-stack-reserve+ (* 512 1024)
  "Bytes of the C stack kept free besides the caller's margin: CLISP's own
frames are large (about 1.8 KB per call of a compiled function), and its
overflow handler needs room.")

(defun stack-pointer ()
  "An address within the current frame of the C stack (x86-64's grows
downward)."
  (ffi:with-foreign-object (here 'ffi:uint8 0)
    (ffi:foreign-address-unsigned (ffi:foreign-address here))))

(defun stack-size-limit ()
  "The bytes the main thread's stack may grow to: the soft limit in
/proc/self/limits, 8 MiB when it is unlimited or unknown."
  (or (ignore-errors
       (with-open-file (in "/proc/self/limits")
         (loop for line = (read-line in nil)
               while line
               when (and (>= (length line) 14) (string= "Max stack size" line :end2 14))
                 return (parse-integer line :start 26 :junk-allowed t))))
      (* 8 1024 1024)))

(defun stack-top ()
  "The highest address of the main thread's stack, from /proc/self/maps;
or the current stack pointer when it is not found."
  (or (ignore-errors
       (with-open-file (in "/proc/self/maps")
         (loop for line = (read-line in nil)
               while line
               when (search "[stack]" line)
                 return (parse-integer line :start (1+ (position #\- line)) :radix 16
                                            :junk-allowed t))))
      (stack-pointer)))

(defun stack-limit (margin)
  "The address of the control stack that a reader recursing in the current
thread must not go below, leaving MARGIN bytes free (and CLISP's reserve)."
  (declare (type (unsigned-byte 32) margin))
  (let ((bottom (- (stack-top) (stack-size-limit))))
    (+ bottom margin +clisp-stack-reserve+)))

(defun stack-exhausted-p (limit)
  "True when the current stack pointer has gone below LIMIT."
  (< (stack-pointer) limit))
