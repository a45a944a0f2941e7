;;;; Files as places: where STORE writes a file and RESTORE reads one.
;;;;
;;;; What storing to a file name does (the paragraph the README repeats):
;;;;
;;;;   Storing to a file name never writes into the old file.  A regular
;;;;   file is replaced atomically: the data goes to a new temporary file in
;;;;   the same directory (NAME, a dot, a unique suffix, .tmp), which is synced, renamed over the
;;;;   old file, and the directory is synced; a crash or an error leaves the
;;;;   old file or the new one, never a mix, and no temporary file.  The new
;;;;   file gets the old one's permission bits exactly (the umask does not
;;;;   apply) and, where the system permits, its owner and group: root keeps
;;;;   both; another user keeps the group if they belong to it, and the file
;;;;   becomes theirs.  ACLs, extended attributes and times are not copied.
;;;;   A new file gets #o666 less the umask.  Because the file is replaced,
;;;;   hard links to it are split: the name stored to holds the new data,
;;;;   every other name keeps the old data.  A symbolic link (or a chain of
;;;;   them, relative or absolute) is followed and its final target
;;;;   replaced the same way, with the temporary file in the target's
;;;;   directory; the link itself stays a link, and a dangling link makes
;;;;   its target (whose directory must exist).  More than 40 links in a
;;;;   chain (a loop) is an error.  A FIFO or a character device (a
;;;;   terminal, /dev/null) is written through: opened for writing, never
;;;;   created, truncated or renamed; a FIFO is waited on until a reader
;;;;   opens it.  A directory, a block device or a socket is refused.  A file
;;;;   that cannot be used, and any open, sync, rename or close that fails,
;;;;   signals BINSTORE-FILE-ERROR (a FILE-ERROR) naming the place as given
;;;;   and saying what failed; a write that fails (a full disk, a FIFO whose
;;;;   reader left) is the STORE-ERROR of the writer.  Restoring from a file
;;;;   name follows links, reads a FIFO or device to its end, and refuses a
;;;;   directory the same way.
;;;;
;;;; Interrupts: descriptors are taken and given back with interrupts
;;;; deferred (open + recording the descriptor, close + forgetting it,
;;;; rename + noting it, unlink), and so are the other short system calls
;;;; (stat, readlink, fcntl, fchown, fchmod: SBCL's POSIX binding and its
;;;; Unix interface may call malloc there, which a non-local exit must not
;;;; leave).  Interrupts are enabled only around the long parts: FN, fsync,
;;;; waiting for a FIFO.  So an interrupt that leaves by a non-local exit
;;;; (WITH-TIMEOUT, INTERRUPT-THREAD) never leaks a descriptor, never closes
;;;; one twice, and never leaves a temporary file.
;;;;
;;;; Every system call goes through the platform layer (src/platform/os.lisp),
;;;; whose calls return an errno instead of signalling.

(in-package #:binstore)

(defconstant +max-symlinks+ 40
  "The longest chain of symbolic links followed to the file a store writes,
as Linux's own limit for path lookup.")

(defconstant +temporary-name-octets+ 200
  "The longest part of a file's name, in UTF-8 octets, kept in its temporary
file's name, so that the temporary name stays below NAME_MAX (255).")

;;; Errors -------------------------------------------------------------------

(defun file-fail (place control &rest arguments)
  "Signal a BINSTORE-FILE-ERROR whose FILE-ERROR-PATHNAME is PLACE (as the
caller gave it) and whose message is CONTROL applied to ARGUMENTS."
  (error 'binstore-file-error :pathname place
                              :message (apply #'format nil control arguments)))

(defun errno-fail (place errno control &rest arguments)
  "Signal a BINSTORE-FILE-ERROR about PLACE: CONTROL applied to ARGUMENTS
says what failed, followed by the system's text for ERRNO."
  (file-fail place "~?: ~a" control arguments (errno-text errno)))

(defun call-deferred (function)
  "Call FUNCTION, a short system call of the platform layer (which returns
its value, or NIL and an errno, and never signals), with interrupts
deferred (so that no non-local exit leaves it half done, inside malloc or
with a result not yet recorded); return its value, or NIL and the errno.
Nothing is signalled out of the deferred section."
  (without-interrupts
    (multiple-value-bind (value errno) (funcall function)
      (if errno (values nil errno) (values value nil)))))

(defun call-reporting-errors (place ignored-errnos function control &rest arguments)
  "Call FUNCTION with CALL-DEFERRED and return its value.  A system call
failing with an errno in IGNORED-ERRNOS makes it return NIL; any other
errno signals a BINSTORE-FILE-ERROR about PLACE saying CONTROL applied to
ARGUMENTS and the system's text for the errno."
  (multiple-value-bind (value errno) (call-deferred function)
    (cond ((null errno) value)
          ((member errno ignored-errnos) nil)
          (t (apply #'errno-fail place errno control arguments)))))

;;; Names and kinds of files -------------------------------------------------

(defun place-native-namestring (place)
  "Return the native namestring of the file PLACE (a string or pathname,
merged with *DEFAULT-PATHNAME-DEFAULTS*, logical pathnames translated) and
the merged pathname.  A wild pathname, a name with neither name nor type
\(a directory's), or one that cannot be turned into a native name signals
BINSTORE-FILE-ERROR."
  (let ((path (handler-case (merge-pathnames place)
                (error () (file-fail place "not a valid file name")))))
    (when (wild-pathname-p path)
      (file-fail place "is a wild pathname; a file place must name one file"))
    (unless (or (pathname-name path) (pathname-type path))
      (file-fail place "is a directory name, not a file name"))
    (values (handler-case (native-file-name (translate-logical-pathname path))
              (error () (file-fail place "cannot be turned into a native file name")))
            path)))

(defun split-native-namestring (native)
  "Return NATIVE's directory part, up to and including its last slash (\"\"
when it has none), and the name after it."
  (let ((slash (position #\/ native :from-end t)))
    (if slash
        (values (subseq native 0 (1+ slash)) (subseq native (1+ slash)))
        (values "" native))))

(defstruct (file-status (:constructor make-file-status
                            (mode uid gid size &optional device inode))
                        (:copier nil) (:predicate nil))
  "What binstore uses of stat(2)'s answer about a file.  A structure, not
SBCL's POSIX binding's STAT, a CLOS instance whose first construction
compiles code.  DEVICE and INODE, which name the file, are NIL on a
platform that does not give them."
  (mode 0 :type (unsigned-byte 32) :read-only t)
  (uid 0 :type (unsigned-byte 32) :read-only t)
  (gid 0 :type (unsigned-byte 32) :read-only t)
  (size 0 :type (unsigned-byte 63) :read-only t)
  (device nil :type (or null (unsigned-byte 64)) :read-only t)
  (inode nil :type (or null (unsigned-byte 64)) :read-only t))

(defun file-status (file &key follow)
  "Return the FILE-STATUS of FILE, a native file name (lstat(2), or stat(2)
when FOLLOW, which follows a final symbolic link) or a descriptor
\(fstat(2)); or NIL and the errno.  Runs with interrupts deferred and never
signals."
  (without-interrupts
    (multiple-value-bind (mode-or-nil uid-or-errno gid size device inode)
        (system-file-status file :follow follow)
      (if mode-or-nil
          (values (make-file-status mode-or-nil uid-or-errno gid size device inode) nil)
          (values nil uid-or-errno)))))

(defun file-kind (status)
  "The kind of file the FILE-STATUS STATUS describes: :REGULAR, :DIRECTORY,
:SYMLINK, :FIFO, :CHARACTER-DEVICE, :BLOCK-DEVICE, :SOCKET or :UNKNOWN."
  (file-mode-kind (file-status-mode status)))

(defun kind-description (kind)
  "KIND (see FILE-KIND) in words, with its article."
  (ecase kind
    (:regular "a regular file")
    (:directory "a directory")
    (:symlink "a symbolic link")
    (:fifo "a FIFO")
    (:character-device "a character device")
    (:block-device "a block device")
    (:socket "a socket")
    (:unknown "a file of unknown kind")))

(defun resolve-file-target (native place)
  "Follow the native file name NATIVE through symbolic links to the file a
store should write: return its native name and its FILE-STATUS, or NIL
for the status when it does not exist (a new file, or a dangling link's
target).  A relative link is read relative to the link's own directory.  A
chain of more than +MAX-SYMLINKS+ links (a loop), or a name that cannot be
looked at (a component that is not a directory, no permission), signals
BINSTORE-FILE-ERROR about PLACE."
  (loop repeat (1+ +max-symlinks+)
        do (multiple-value-bind (stat errno) (file-status native)
             (cond ((and (null stat) (eql errno +enoent+))
                    (return-from resolve-file-target (values native nil)))
                   ((null stat)
                    (errno-fail place errno "cannot look at ~a" native))
                   ((eq (file-kind stat) :symlink)
                    (let ((link (multiple-value-bind (link errno)
                                    (without-interrupts (system-readlink native))
                                  (or link
                                      (errno-fail place errno
                                                  "cannot read the symbolic link ~a" native)))))
                      (setf native
                            (coerce (if (and (plusp (length link)) (char= (char link 0) #\/))
                                        link
                                        (concatenate 'string
                                                     (split-native-namestring native) link))
                                    'simple-string))))
                   (t (return-from resolve-file-target (values native stat))))))
  (file-fail place "too many levels of symbolic links (more than ~d; a loop?)" +max-symlinks+))

;;; Taking and giving back descriptors.  The system calls (SYSTEM-OPEN,
;;; SYSTEM-CLOSE, SYSTEM-RENAME, SYSTEM-UNLINK) return an errno instead of
;;; signalling, so they can run with interrupts deferred.

(defun %close (fd)
  "close(2) FD once (never retried: Linux frees the descriptor even when
close fails): NIL, or the errno of a failure."
  (nth-value 1 (system-close fd)))

(defun call-with-open-fd (native flags fn)
  "open(2) NATIVE with FLAGS and call FN with the descriptor, or with NIL
and the errno when it cannot be opened; close the descriptor afterwards,
however FN exits, and return what FN returns.  The descriptor is opened and
recorded, and closed and forgotten, with interrupts deferred, so a
non-local exit (an error in FN, WITH-TIMEOUT, INTERRUPT-THREAD) closes it
exactly once; FN runs with interrupts enabled."
  (let ((fd nil))
    (without-interrupts
      (unwind-protect
           (with-local-interrupts
             (let ((errno (without-interrupts
                            (multiple-value-bind (new errno) (system-open native flags 0)
                              (setf fd new)
                              errno))))
               (funcall fn fd errno)))
        (when fd
          (%close fd)
          (setf fd nil))))))

(defun %rename (from to)
  "rename(2) FROM to TO: NIL, or the errno of a failure."
  (nth-value 1 (system-rename from to)))

(defun %unlink (native)
  "unlink(2) NATIVE: NIL, or the errno of a failure."
  (nth-value 1 (system-unlink native)))

(defun clear-nonblocking (fd place native)
  "Make the descriptor FD, opened O_NONBLOCK so that opening could not
block, block again for reads and writes."
  (call-reporting-errors
   place '()
   (lambda () (clear-fd-nonblocking fd))
   "cannot set ~a to blocking mode" native))

(defun sync-fd (fd place native &optional ignored-errnos)
  "fsync(2) FD, the open file NATIVE, with interrupts as they are (a sync
can take long); a failure whose errno is not in IGNORED-ERRNOS signals
BINSTORE-FILE-ERROR about PLACE."
  (multiple-value-bind (ok errno) (system-fsync fd)
    (unless (or ok (member errno ignored-errnos))
      (errno-fail place errno "cannot sync ~a to disk" native))))

(defun sync-directory (directory place)
  "fsync(2) the directory DIRECTORY (a native name, \"\" for the current
one), so that a rename in it survives a crash.  A directory that cannot be
opened for reading (EACCES: write and search permission only) or synced
\(EINVAL, ENOTSUP: file systems that do not sync directories) is left
alone; any other failure signals BINSTORE-FILE-ERROR about PLACE.  Safe
against interrupts like the file output functions."
  (let ((directory (if (string= directory "") "." directory)))
    (call-with-open-fd
     directory (logior +o-rdonly+ +o-directory+ +o-cloexec+)
     (lambda (fd errno)
       (cond ((null errno)
              (sync-fd fd place directory (list +einval+ +eopnotsupp+)))
             ((eql errno +eacces+))
             (t (errno-fail place errno
                            "the file was replaced, but its directory ~a cannot be opened to sync it"
                            directory)))))))

;;; Writing ------------------------------------------------------------------

(define-global **temporary-counter** (list 0)
  "Counts the temporary names made by this process (in its CAR), so two
threads storing to one file at once try different names.")

(defun temporary-name (directory name)
  "A fresh name, in DIRECTORY (ending in a slash, or \"\"), for the temporary
file that will replace the file NAME there: NAME (cut to
+TEMPORARY-NAME-OCTETS+ octets), a dot, a suffix made of the process id,
a counter and the clock, and .tmp.  Only probably unused: the caller
creates it with O_EXCL and tries another on EEXIST."
  (let ((stem name))
    (loop while (> (native-name-octets stem)
                   +temporary-name-octets+)
          do (setf stem (subseq stem 0 (floor (* 3 (length stem)) 4))))
    (coerce (format nil "~a~a.~36r~36r~36r.tmp" directory stem
                    (process-id)
                    (atomic-incf (car **temporary-counter**))
                    (mod (get-internal-real-time) (expt 36 4)))
            'simple-string)))

(defun %open-temporary (directory name mode)
  "Create a new file for writing in DIRECTORY, named after NAME (see
TEMPORARY-NAME), with MODE (less the umask): return its descriptor and
native name, or NIL, NIL and the errno.  Never signals, so it can run with
interrupts deferred."
  (loop repeat 100
        do (let ((temp (temporary-name directory name)))
             (multiple-value-bind (fd errno)
                 (system-open temp (logior +o-wronly+ +o-creat+ +o-excl+ +o-nofollow+ +o-cloexec+)
                              mode)
               (cond (fd (return-from %open-temporary (values fd temp nil)))
                     ((/= errno +eexist+) (return-from %open-temporary (values nil nil errno))))))
        finally (return (values nil nil +eexist+))))

(defun temporary-file-fail (place directory errno)
  "Signal the BINSTORE-FILE-ERROR about PLACE for a temporary file that could
not be created in DIRECTORY with ERRNO; a directory that does not exist
says so."
  (let ((shown (if (string= directory "") "." directory)))
    (if (and (eql errno +enoent+) (null (file-status shown :follow t)))
        (file-fail place "cannot create a file in ~a: no such directory" shown)
        (errno-fail place errno "cannot create a temporary file in ~a" shown))))

(defun call-with-atomic-file-output (target fn &key (place target) (sync t))
  "Replace the file TARGET (a native file name) atomically with the bytes
FN writes, and return the values of FN.

FN is called with a descriptor (an integer) open for writing a new
temporary file in TARGET's directory, to write to with write(2); it must
not close it.  When FN returns, the file is synced, closed and renamed
over TARGET, then the directory is synced: a crash leaves either the old
file or the new one.  When TARGET is a regular file, the new file gets its
permission bits exactly and, where permitted (EPERM is ignored), its owner
and group, else its group alone; a new TARGET gets #o666 less the umask.

TARGET must not exist or be a regular file: anything else, a symbolic link
included (resolve those first with RESOLVE-FILE-TARGET), signals
BINSTORE-FILE-ERROR, as does any failing system call.  When FN or a later
step fails or is left by a non-local exit, even from an interrupt, the
temporary file is closed once and deleted and TARGET is left as it was.
Errors name PLACE (default TARGET): the place as the user gave it.

SYNC NIL (the persistent store's :DURABILITY :NONE) leaves out both syncs:
the replacement is still atomic for other processes and survives the
writer's crash, but a power cut may lose it or, on some file systems,
leave an empty file."
  (multiple-value-bind (directory name) (split-native-namestring target)
    (when (string= name "")
      (file-fail place "~a is a directory name, not a file name" target))
    (let* ((old (multiple-value-bind (stat errno) (file-status target)
                  (cond (stat stat)
                        ((eql errno +enoent+) nil)
                        ((eql errno +enotdir+)
                         (file-fail place "cannot create a file in ~a: not a directory" directory))
                        (t (errno-fail place errno "cannot look at ~a" target)))))
           (kind (and old (file-kind old)))
           (fd nil)
           (temp nil)
           (renamed nil))
      (when (and kind (not (eq kind :regular)))
        (file-fail place "~a is ~a, not a regular file" target (kind-description kind)))
      (without-interrupts
        (unwind-protect
             (with-local-interrupts
               ;; take: the descriptor and the name are recorded before an
               ;; interrupt can run
               (let ((errno (without-interrupts
                              (multiple-value-bind (new-fd new-temp errno)
                                  (%open-temporary directory name (if old #o600 #o666))
                                (setf fd new-fd temp new-temp)
                                errno))))
                 (when errno
                   (temporary-file-fail place directory errno)))
               (when old
                 ;; owner first: fchown may clear the set-id bits fchmod sets.
                 ;; Not root: the owner cannot be given away, the group may.
                 (unless (call-reporting-errors place (list +eperm+)
                                                (lambda ()
                                                  (system-fchown fd (file-status-uid old)
                                                                 (file-status-gid old)))
                                                "cannot give ~a the owner of ~a" temp target)
                   (call-reporting-errors place (list +eperm+)
                                          (lambda ()
                                            (system-fchown fd nil (file-status-gid old)))
                                          "cannot give ~a the group of ~a" temp target))
                 (call-reporting-errors place '()
                                        (lambda () (system-fchmod fd (logand #o7777 (file-status-mode old))))
                                        "cannot give ~a the permissions of ~a" temp target))
               (multiple-value-prog1 (funcall fn fd)
                 (when sync
                   (sync-fd fd place temp))
                 ;; give back: closed once, forgotten at once
                 (let ((errno (without-interrupts
                                (prog1 (%close fd) (setf fd nil)))))
                   (when errno
                     (errno-fail place errno "cannot close ~a" temp)))
                 (let ((errno (without-interrupts
                                (let ((errno (%rename temp target)))
                                  (unless errno (setf renamed t))
                                  errno))))
                   (when errno
                     (errno-fail place errno "cannot rename ~a to ~a" temp target)))
                 (when sync
                   (sync-directory directory place))))
          ;; interrupts deferred here: nothing can cut this short
          (when fd
            (%close fd)
            (setf fd nil))
          (when (and temp (not renamed))
            (%unlink temp)
            (setf temp nil)))))))

(defun %open-device-for-output (native)
  "Open the FIFO or character device NATIVE for writing, without blocking,
creating or truncating: the descriptor, or NIL and the errno (ENXIO for a
FIFO no reader has open)."
  (system-open native (logior +o-wronly+ +o-nonblock+ +o-noctty+ +o-nofollow+ +o-cloexec+)
               0))

(defun call-with-device-output (target kind fn &key (place target))
  "Write through to TARGET, an existing FIFO or character device (KIND,
:FIFO or :CHARACTER-DEVICE): call FN with a descriptor open for writing it
and return FN's values.  Nothing is created, truncated or renamed.  A FIFO
that no reader has open is waited for, interruptibly, polling every few
milliseconds up to 50.  After FN, the descriptor is synced (EINVAL and
ENOTSUP, from devices that cannot be synced, are ignored) and closed.  The
descriptor is taken and given back with interrupts deferred, so a
non-local exit never leaks it or closes it twice.  Failures signal
BINSTORE-FILE-ERROR naming PLACE (default TARGET)."
  (let ((fd nil)
        (delay 0.001))
    (without-interrupts
      (unwind-protect
           (with-local-interrupts
             (loop
               (let ((errno (without-interrupts
                              (multiple-value-bind (new errno) (%open-device-for-output target)
                                (setf fd new)
                                errno))))
                 (cond ((null errno) (return))
                       ((and (eql errno +enxio+) (eq kind :fifo))
                        (sleep delay)
                        (setf delay (min 0.05 (* 2 delay))))
                       (t (errno-fail place errno "cannot open ~a for writing" target)))))
             (let ((now (file-kind (multiple-value-bind (status errno) (file-status fd)
                                     (or status (errno-fail place errno "cannot look at ~a" target))))))
               (unless (member now '(:fifo :character-device))
                 (file-fail place "~a was replaced by ~a while being opened"
                            target (kind-description now))))
             (clear-nonblocking fd place target)
             (multiple-value-prog1 (funcall fn fd)
               (sync-fd fd place target (list +einval+ +eopnotsupp+))
               (let ((errno (without-interrupts
                              (prog1 (%close fd) (setf fd nil)))))
                 (when errno
                   (errno-fail place errno "cannot close ~a" target)))))
        (when fd
          (%close fd)
          (setf fd nil))))))

(defun call-with-file-output (place fn)
  "Call FN with a file descriptor (an integer, to write to with write(2), not
to close) on which it writes the new contents of the file PLACE (a string
or pathname); return the merged pathname of PLACE.

A regular file, or one that does not exist, is replaced atomically by
CALL-WITH-ATOMIC-FILE-OUTPUT when FN returns normally, and left alone when
it does not.  Symbolic links are followed (RESOLVE-FILE-TARGET) and their
final target replaced; the links stay.  A FIFO or a character device is
written through (CALL-WITH-DEVICE-OUTPUT).  A directory, a block device, a
socket, a wild pathname, a directory that does not exist, and any failing
system call signal BINSTORE-FILE-ERROR with PLACE as FILE-ERROR-PATHNAME."
  (multiple-value-bind (native path) (place-native-namestring place)
    (multiple-value-bind (target stat) (resolve-file-target native place)
      (let ((kind (and stat (file-kind stat))))
        (case kind
          ((nil :regular) (call-with-atomic-file-output target fn :place place))
          ((:fifo :character-device) (call-with-device-output target kind fn :place place))
          (t (if (string= target native)
                 (file-fail place "is ~a; a store writes only a regular file, a FIFO or a character device"
                            (kind-description kind))
                 (file-fail place "links to ~a, which is ~a; a store writes only a regular file, a FIFO or a character device"
                            target (kind-description kind)))))))
    path))

;;; Reading ------------------------------------------------------------------

(defun call-with-file-input (place fn)
  "Open the file PLACE (a string or pathname) for reading and call FN with its
descriptor (an integer, to read with read(2), not to close) and its size in
bytes (0 for a FIFO or a device, which are read to their end); return what
FN returns.  Symbolic links are followed.  A FIFO is waited on,
interruptibly, until a writer opens it.

The descriptor is opened and recorded, and closed and forgotten, with
interrupts deferred, so a non-local exit (an error in FN, WITH-TIMEOUT,
INTERRUPT-THREAD) closes it exactly once.  A file that does not exist or
cannot be opened, a directory, and a wild pathname signal
BINSTORE-FILE-ERROR with PLACE as FILE-ERROR-PATHNAME."
  (let ((native (place-native-namestring place)))
    (call-with-open-fd
     native (logior +o-rdonly+ +o-nonblock+ +o-noctty+ +o-cloexec+)
     (lambda (fd errno)
       (when errno
         (errno-fail place errno "cannot open for reading"))
       (let* ((status (multiple-value-bind (status errno) (file-status fd)
                        (or status (errno-fail place errno "cannot look at ~a" native))))
              (kind (file-kind status)))
         (case kind
           (:directory (file-fail place "is a directory"))
           (:fifo (wait-until-readable fd)))
         (clear-nonblocking fd place native)
         (funcall fn fd (if (eq kind :regular) (file-status-size status) 0)))))))
