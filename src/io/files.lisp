;;;; Files as places: where STORE writes a file and RESTORE reads one.
;;;;
;;;; Writing replaces the file atomically: a temporary file in the same
;;;; directory is written, synced, renamed over the old one, and the
;;;; directory is synced, so a crash leaves the old file or the new one.

(in-package #:binstore)

(defun file-mode-for (target)
  "The permission bits for a file written at TARGET: those of the file it
replaces, or #o666 (masked by the umask) for a new one."
  (handler-case (logand #o7777 (sb-posix:stat-mode (sb-posix:stat target)))
    (sb-posix:syscall-error () #o666)))

(defun sync-directory (directory)
  (let ((fd (sb-posix:open directory sb-posix:o-rdonly)))
    (unwind-protect (sb-posix:fsync fd)
      (sb-posix:close fd))))

(defun call-with-file-output (place fn)
  "Call FN with a file descriptor open for writing a new file that replaces
the file PLACE (a string or pathname) when FN returns normally; return the
pathname."
  (let* ((path (merge-pathnames place))
         (target (sb-ext:native-namestring (translate-logical-pathname path) :as-file t))
         (directory (sb-ext:native-namestring
                     (make-pathname :name nil :type nil :version nil
                                    :defaults (translate-logical-pathname path))))
         (temp (format nil "~a.~36r~36r.tmp" target (random (expt 36 6)) (sb-posix:getpid)))
         (fd (sb-posix:open temp (logior sb-posix:o-wronly sb-posix:o-creat sb-posix:o-excl)
                            (file-mode-for target)))
         (done nil))
    (unwind-protect
         (progn
           (funcall fn fd)
           (sb-posix:fsync fd)
           (sb-posix:close fd)
           (setf fd nil)
           (sb-posix:rename temp target)
           (setf done t)
           (sync-directory (if (string= directory "") "." directory))
           path)
      (unless done
        (when fd (sb-posix:close fd))
        (ignore-errors (sb-posix:unlink temp))))))

(defun call-with-file-input (place fn)
  "Open the file PLACE for reading and call FN with its file descriptor and
its size in bytes; close it afterwards and return what FN returns."
  (with-open-file (stream place :element-type '(unsigned-byte 8))
    (funcall fn (sb-sys:fd-stream-fd stream) (file-length stream))))
