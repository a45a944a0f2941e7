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
  "A signal one thread raises and another waits for."
  (list (mp:make-lock) (mp:make-condition-variable) nil))

(defun raise-signal (signal)
  "Raise SIGNAL: a thread in WAIT-FOR-SIGNAL returns true."
  (destructuring-bind (lock cv raised) signal
    (declare (ignore raised))
    (mp:with-lock (lock)
      (setf (third signal) t)
      (mp:condition-variable-broadcast cv))))

(defun wait-for-signal (signal seconds)
  "Wait up to SECONDS for SIGNAL; true when it was raised."
  (destructuring-bind (lock cv raised) signal
    (declare (ignore raised))
    (let ((deadline (+ (get-internal-real-time)
                       (* seconds internal-time-units-per-second))))
      (mp:with-lock (lock)
        (loop
          (when (third signal)
            (setf (third signal) nil)
            (return t))
          (let ((left (/ (- deadline (get-internal-real-time))
                         internal-time-units-per-second)))
            (when (<= left 0) (return nil))
            (mp:condition-variable-timedwait cv lock left)))))))
