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

;;; CLISP has a second stack, its STACK of Lisp values (768 KiB as Debian's
;;; CLISP starts), whose overflow it does not survive either ("Lisp stack
;;; overflow. RESET").  Its pointer and bounds are C globals of lisp.run,
;;; which it keeps current when it calls out.  It grows upward here; both
;;; directions are checked.

(ffi:def-c-var lisp-stack-pointer (:name "STACK") (:type ffi:ulong)
  (:library :default) (:read-only t))
(ffi:def-c-var lisp-stack-start (:name "STACK_start") (:type ffi:ulong)
  (:library :default) (:read-only t))
(ffi:def-c-var lisp-stack-bound (:name "STACK_bound") (:type ffi:ulong)
  (:library :default) (:read-only t))

(defconstant +clisp-lisp-stack-reserve+ (* 128 1024)
  "Bytes of CLISP's STACK kept free when a reader stops: its handlers' and
the condition's frames.")

(defun lisp-stack-exhausted-p ()
  "True when CLISP's STACK has less than +CLISP-LISP-STACK-RESERVE+ bytes left."
  (let ((pointer lisp-stack-pointer) (bound lisp-stack-bound))
    (if (< lisp-stack-start bound)
        (> pointer (- bound +clisp-lisp-stack-reserve+))
        (< pointer (+ bound +clisp-lisp-stack-reserve+)))))

(defun stack-exhausted-p (limit)
  "True when the current C stack pointer has gone below LIMIT, or CLISP's
STACK of Lisp values is nearly full."
  (or (< (stack-pointer) limit)
      (lisp-stack-exhausted-p)))

;;; Room to grow.  binstore writes and reads containers at most
;;; +MAX-PHYSICAL-DEPTH+ (1000) deep, recursively.  CLISP's frames are large:
;;; a level of hash tables or of two-dimensional arrays takes over 8 KiB of C
;;; stack, so under Linux's usual 8 MiB limit storing tables 1000 deep
;;; overflowed the stack (which CLISP does not survive as a condition: it
;;; resets to its top level), and restoring structures 1000 deep, which
;;; binstore itself wrote, stopped at the readers' check.  The main thread's
;;; stack grows on demand up to the soft limit of the moment: binstore
;;; raises that limit, when lower, to +CLISP-STACK-ROOM+ (within the hard
;;; limit), when loaded and when a saved image starts.  16 MiB was enough
;;; for every container 1000 deep; 64 MiB leaves room for the caller's own
;;; frames and extension codecs.

(defconstant +clisp-stack-room+ (* 64 1024 1024)
  "The soft limit on the stack's size binstore ensures on CLISP, in bytes.")

(defun ensure-stack-room ()
  "Raise the process's soft limit on the stack's size to +CLISP-STACK-ROOM+
when it is lower and the hard limit allows (to the hard limit otherwise).
Return the soft limit now, NIL when unlimited."
  (multiple-value-bind (soft hard) (posix:rlimit :stack)
    (when soft                          ; NIL: unlimited
      (let ((wanted (if hard (min hard +clisp-stack-room+) +clisp-stack-room+)))
        (when (> wanted soft)
          ;; refused only if the hard limit changed meanwhile: the readers
          ;; then check against the limit there is
          (ignore-errors (setf (posix:rlimit :stack) (values wanted hard))))))
    (values (posix:rlimit :stack))))

(ensure-stack-room)
(call-when-image-starts 'ensure-stack-room)
