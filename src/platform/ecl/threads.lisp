;;;; Threads on ECL (src/platform/threads.lisp's names), for the progress
;;;; watcher.

(in-package #:binstore)

(defun start-thread (function name)
  "Run FUNCTION (no arguments) in a new thread called NAME; return the thread."
  (mp:process-run-function name function))

(defun wait-for-thread (thread)
  "Wait until THREAD has returned."
  (mp:process-join thread))

(defun make-signal ()
  "A signal one thread raises and another waits for: a lock and a flag.
\(ECL 21.2 refuses a timed wait on a condition variable, \"Timed condition
variables are not supported\", so WAIT-FOR-SIGNAL looks at the flag every
10 ms; the waiter, the progress watcher, wakes at intervals anyway.)"
  (cons (mp:make-lock) nil))

(defun raise-signal (signal)
  "Raise SIGNAL: a thread in WAIT-FOR-SIGNAL returns true."
  (mp:with-lock ((car signal))
    (setf (cdr signal) t)))

(defun wait-for-signal (signal seconds)
  "Wait up to SECONDS for SIGNAL; true when it was raised."
  (let ((deadline (+ (get-internal-real-time)
                     (* seconds internal-time-units-per-second))))
    (loop
      (when (mp:with-lock ((car signal))
              (shiftf (cdr signal) nil))
        (return t))
      (let ((left (/ (- deadline (get-internal-real-time))
                     internal-time-units-per-second)))
        (when (<= left 0) (return nil))
        (sleep (min left 1/100))))))
