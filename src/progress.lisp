;;;; Progress reports for long stores and restores (the :PROGRESS option).
;;;;
;;;; A thread of binstore's watches the operation's buffer and reports the
;;;; bytes done a few times a second; the loops of the encoder and decoder
;;;; do not know it is there, so a store or restore without :PROGRESS pays
;;;; nothing, and one with it pays only the thread.

(in-package #:binstore)

(defvar *progress* nil
  "What STORE and RESTORE report their progress to: NIL (nothing), T (a
line on *ERROR-OUTPUT* a few times a second), or a function called with the
bytes done so far and the bytes in all when known (NIL otherwise), at most
four times a second while the call lasts, then once at its end.  The
function runs in another thread (it must not rely on the caller's dynamic
bindings); a condition it signals ends the reports, and STORE or RESTORE
signals it once it has finished its work.  Overridden per call by
:PROGRESS.")

(defconstant +progress-interval+ 1/4
  "Seconds between two progress reports.")

(defstruct (progress-watch (:constructor make-progress-watch (report total)))
  "One watched call: the function to REPORT to, the TOTAL bytes (or NIL),
the buffer being watched (an OBUF or IBUF while it exists), the bytes DONE
once it is gone, the watching THREAD, the signal that stops it, and the
condition the report function signalled."
  report total
  (buffer nil)
  (done 0)
  (thread nil)
  (stop (make-signal))
  (condition nil))

(defun progress-line-reporter (verb stream)
  "The report function of :PROGRESS T: a line on STREAM."
  (lambda (done total)
    (if total
        (format stream "~&binstore: ~a ~,1f of ~,1f MB (~d%)~%" verb (/ done 1d6) (/ total 1d6)
                (if (zerop total) 100 (floor (* 100 done) total)))
        (format stream "~&binstore: ~a ~,1f MB~%" verb (/ done 1d6)))
    (force-output stream)))

(defun watched-bytes (watch)
  "The bytes WATCH's buffer has been through (written to an OBUF, read from
an IBUF), or its DONE once the buffer is gone."
  (let ((buffer (progress-watch-buffer watch)))
    (etypecase buffer
      (null (progress-watch-done watch))
      (obuf (obuf-total buffer))
      (ibuf (ibuf-offset buffer)))))

(defun report-progress (watch)
  "Call WATCH's report function with the bytes done; keep what it signals."
  (unless (progress-watch-condition watch)
    (handler-case (funcall (progress-watch-report watch)
                           (watched-bytes watch) (progress-watch-total watch))
      (error (condition)
        (setf (progress-watch-condition watch) condition)))))

(defun stop-watching (watch)
  "Stop WATCH's thread and wait for it; keep the bytes done and forget the
buffer (which may live on the stack of the call being watched)."
  (let ((thread (progress-watch-thread watch)))
    (when thread
      (setf (progress-watch-thread watch) nil)
      (raise-signal (progress-watch-stop watch))
      (wait-for-thread thread))
    (when (progress-watch-buffer watch)
      (setf (progress-watch-done watch) (watched-bytes watch)
            (progress-watch-buffer watch) nil))))

(defun call-watching (watch buffer fn)
  "Call FN (no arguments) with WATCH (a PROGRESS-WATCH, or NIL: nothing to
do) watching BUFFER, an OBUF or IBUF, from a thread of its own; stop the
thread before BUFFER's extent ends.  Return FN's values."
  (if (null watch)
      (funcall fn)
      (progn
        (setf (progress-watch-buffer watch) buffer
              (progress-watch-thread watch)
              (start-thread (lambda ()
                              (loop until (wait-for-signal (progress-watch-stop watch)
                                                           +progress-interval+)
                                    do (report-progress watch)))
                            "binstore progress"))
        (unwind-protect (funcall fn)
          (stop-watching watch)))))

(defun call-with-progress (progress verb total fn)
  "Call FN with a PROGRESS-WATCH reporting to PROGRESS (see *PROGRESS*;
VERB names the work in a line; TOTAL is the bytes in all, or NIL), or with
NIL when PROGRESS is NIL; FN watches its buffer with CALL-WATCHING.  Report
once more when FN returns; then signal what the report function signalled.
Return FN's values."
  (if (null progress)
      (funcall fn nil)
      (let ((watch (make-progress-watch (if (eq progress t)
                                            (progress-line-reporter verb *error-output*)
                                            (progn (check-type progress function) progress))
                                        total)))
        (multiple-value-prog1 (unwind-protect (funcall fn watch)
                                (stop-watching watch))
          (report-progress watch)
          (let ((condition (progress-watch-condition watch)))
            (when condition
              (error condition)))))))
