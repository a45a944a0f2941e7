;;;; Threads on ABCL (src/platform/threads.lisp's names), for the progress
;;;; watcher: ABCL's THREADS package, over Java threads.

(in-package #:binstore)

(defun start-thread (function name)
  "Run FUNCTION (no arguments) in a new thread called NAME; return the thread."
  (threads:make-thread function :name name))

(defun wait-for-thread (thread)
  "Wait until THREAD has returned."
  (threads:thread-join thread))

(defun make-signal ()
  "A signal one thread raises and another waits for: a cell, raised when
its CAR is true, which THREADS:OBJECT-WAIT and THREADS:OBJECT-NOTIFY-ALL
synchronize on."
  (list nil))

(defun raise-signal (signal)
  "Raise SIGNAL: a thread in WAIT-FOR-SIGNAL returns true."
  (threads:synchronized-on signal
    (setf (car signal) t)
    (threads:object-notify-all signal)))

(defun wait-for-signal (signal seconds)
  "Wait up to SECONDS for SIGNAL; true when it was raised (then lowered
again)."
  (let ((deadline (+ (get-internal-real-time)
                     (* seconds internal-time-units-per-second))))
    (threads:synchronized-on signal
      (loop
        (when (car signal)
          (setf (car signal) nil)
          (return t))
        (let ((left (/ (- deadline (get-internal-real-time))
                       internal-time-units-per-second)))
          (when (<= left 0) (return nil))
          (threads:object-wait signal (float left 1d0)))))))
