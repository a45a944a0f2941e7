;;;; Threads on CLISP (src/platform/threads.lisp's names).  This CLISP has
;;;; none: the progress watcher (src/progress.lisp) gets no thread, so a
;;;; store or restore watched with :PROGRESS reports once, when it ends
;;;; (CALL-WITH-PROGRESS's last report), and not every quarter second.

(in-package #:binstore)

(defun start-thread (function name)
  "NIL: no thread is started on CLISP, which has none, and FUNCTION is not
called (its caller, the progress watcher, then reports only at the end)."
  (declare (ignore function name))
  nil)

(defun wait-for-thread (thread)
  "Nothing to wait for: no thread is started on CLISP."
  (declare (ignore thread))
  nil)

(defun make-signal ()
  "A signal: a cell raised by RAISE-SIGNAL (one thread: no waiting)."
  (list nil))

(defun raise-signal (signal)
  "Raise SIGNAL."
  (setf (car signal) t))

(defun wait-for-signal (signal seconds)
  "True when SIGNAL was raised (then lowered again); otherwise NIL after
SECONDS, as no other thread could raise it meanwhile."
  (if (car signal)
      (progn (setf (car signal) nil) t)
      (progn (sleep seconds) nil)))
