;;;; The control stack on ECL: how deep a recursive reader may still go
;;;; (src/platform/stack.lisp's names).  ECL's stack grows downward on
;;;; x86-64; the thread's environment keeps the limit at which ECL itself
;;;; signals a stack overflow.

(in-package #:binstore)

(defun stack-limit (margin)
  "The address of the control stack that a reader recursing in the current
thread must not go below, leaving MARGIN bytes free."
  (declare (type (unsigned-byte 32) margin))
  (+ (ffi:c-inline () () :fixnum "(cl_fixnum)(ecl_process_env()->cs_limit)" :one-liner t)
     margin))

(declaim (inline stack-exhausted-p))
(defun stack-exhausted-p (limit)
  "True when the current thread's stack pointer has gone past LIMIT, or
when fewer than 256 entries are left in ECL's frame stack (a BLOCK, CATCH
or handler each level of a reader may establish) or its binding stack.
ECL overflows those long before its control stack (its frame stack holds
about 2,000 frames), and an overflow of the frame stack while a reader
unwinds ended the process (status 0, nothing printed): EXPLAIN of input
nesting 2,500 levels deep did."
  (declare (type fixnum limit))
  (ffi:c-inline (limit) (:fixnum) :bool
                "({ char here_; cl_env_ptr e_ = ecl_process_env();
                    (cl_fixnum)&here_ < #0
                    || e_->frs_top + 256 >= e_->frs_limit
                    || e_->bds_top + 256 >= e_->bds_limit; })"
                :one-liner t))
