;;;; Threads, for the one job binstore gives a thread of its own: watching a
;;;; long store or restore to report its progress (src/progress.lisp).

(in-package #:binstore)

(defun start-thread (function name)
  "Run FUNCTION (no arguments) in a new thread called NAME; return the thread."
  (sb-thread:make-thread function :name name))

(defun wait-for-thread (thread)
  "Wait until THREAD has returned."
  (sb-thread:join-thread thread :default nil))

(defun make-signal ()
  "A signal one thread raises and another waits for (a semaphore)."
  (sb-thread:make-semaphore :count 0))

(defun raise-signal (signal)
  "Raise SIGNAL: a thread in WAIT-FOR-SIGNAL returns true."
  (sb-thread:signal-semaphore signal))

(defun wait-for-signal (signal seconds)
  "Wait up to SECONDS for SIGNAL; true when it was raised."
  (and (sb-thread:wait-on-semaphore signal :timeout seconds) t))
