;;;; The lock of a persistent store: flock(2) on a separate lock file.
;;;;
;;;; Why a separate file: a commit renames a new file over the store, so
;;;; the store's name points to a new inode after every commit.  A lock on
;;;; the store file itself would be a lock on the old inode: a process
;;;; waiting for it would get it after the commit and read a file nobody
;;;; locks any more, while the next writer locks the new one.  That is how
;;;; Ruby's PStore with ultra_safe loses two thirds of concurrent updates.
;;;; The lock file, the store's file name followed by ".lock", is never
;;;; renamed nor deleted, so every process locks the same inode.
;;;;
;;;; Why flock: it is released when the descriptor is closed or the process
;;;; dies, however it dies (SIGKILL included), and two descriptors opened
;;;; separately in one process exclude each other as two processes do, so
;;;; threads are covered too.  fcntl locks would be dropped when any
;;;; descriptor of the process on that file is closed, and do not exclude
;;;; two threads of one process.  Each transaction opens the lock file and
;;;; closes it at its end: about 5 microseconds.

(in-package #:binstore)

(defun ensure-lock-file (lock-file place)
  "Create the lock file LOCK-FILE (a native name), empty, with #o666 less
the umask, unless it exists.  A failure signals BINSTORE-FILE-ERROR about
PLACE."
  (let ((errno (without-interrupts
                 (multiple-value-bind (fd errno)
                     (system-open lock-file (logior +o-rdonly+ +o-creat+ +o-cloexec+) #o666)
                   (when fd (%close fd))
                   errno))))
    (when errno
      (if (eql errno +enotdir+)
          (file-fail place "cannot create the lock file ~a: a component is not a directory"
                     lock-file)
          (errno-fail place errno "cannot create the lock file ~a" lock-file)))))

(defun call-with-store-lock (lock-file mode place fn)
  "Call FN, with no arguments, holding the lock of the store whose lock file
is LOCK-FILE (a native name, created when missing): shared when MODE is
:SHARED, exclusive when it is :EXCLUSIVE.  Waits as long as it takes.
The lock is given back when FN returns or leaves by a non-local exit (its
descriptor is closed with interrupts deferred, see CALL-WITH-OPEN-FD).
Failures signal BINSTORE-FILE-ERROR about PLACE."
  (flet ((locked (fd errno)
           (when errno
             (errno-fail place errno "cannot open the lock file ~a" lock-file))
           (multiple-value-bind (ok errno)
               (system-flock fd (ecase mode
                                  (:shared +lock-shared+)
                                  (:exclusive +lock-exclusive+)))
             (unless ok
               (errno-fail place errno "cannot lock ~a" lock-file)))
           (funcall fn)))
    ;; CALL-WITH-OPEN-FD opens with no permission bits, right for an
    ;; existing file only: a missing lock file is made, then opened again
    (call-with-open-fd lock-file (logior +o-rdonly+ +o-cloexec+)
                       (lambda (fd errno)
                         (if (eql errno +enoent+)
                             (progn
                               (ensure-lock-file lock-file place)
                               (call-with-open-fd lock-file (logior +o-rdonly+ +o-cloexec+)
                                                  #'locked))
                             (locked fd errno))))))
