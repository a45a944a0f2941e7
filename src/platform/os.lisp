;;;; The operating system: the system calls binstore makes, and the few
;;;; facts about the system it needs (errno values, open flags, page sizes).
;;;;
;;;; Everything outside src/platform/ reaches the system through these names
;;;; and names no SB- symbol.  On SBCL each is a thin wrapper over SBCL's
;;;; POSIX binding or its own Unix interface, or an alien call where neither
;;;; has the call (mremap, madvise, mincore).
;;;;
;;;; One convention for every system call here: it returns its result (T
;;;; when there is none), or NIL and the errno of its failure, and it never
;;;; signals.  So a caller can make it with interrupts deferred and decide
;;;; what a failure means; ERRNO-TEXT turns an errno into words.  None
;;;; defers interrupts itself: the callers that take and give back
;;;; descriptors do (src/io/files.lisp).
;;;;
;;;; The Linux-only calls are behind #+linux, each with the fallback its
;;;; docstring states: remapping memory copies it elsewhere; populating,
;;;; collapsing into huge pages and counting mapped pages are refused, so
;;;; that prefaulting (src/io/prefault.lisp) does nothing.

(in-package #:binstore)

;;; Errors -------------------------------------------------------------------

(defconstant +eintr+ sb-posix:eintr "EINTR: a call interrupted by a signal.")
(defconstant +enoent+ sb-posix:enoent "ENOENT: no such file or directory.")
(defconstant +enotdir+ sb-posix:enotdir "ENOTDIR: a component of a path is not a directory.")
(defconstant +eacces+ sb-posix:eacces "EACCES: permission denied.")
(defconstant +erofs+ sb-posix:erofs "EROFS: a read-only file system.")
(defconstant +eperm+ sb-posix:eperm "EPERM: operation not permitted.")
(defconstant +eexist+ sb-posix:eexist "EEXIST: the file exists.")
(defconstant +einval+ sb-posix:einval "EINVAL: an invalid argument, or a call the system lacks.")
(defconstant +eopnotsupp+ sb-posix:eopnotsupp "EOPNOTSUPP (ENOTSUP): not supported here.")
(defconstant +enxio+ sb-posix:enxio "ENXIO: no such device (a FIFO without a reader).")

(defun errno-text (errno)
  "The system's text for the integer ERRNO (strerror(3)), a string."
  (sb-int:strerror errno))

;;; File names ---------------------------------------------------------------

(defun native-file-name (pathname)
  "The native name of the file PATHNAME (a physical pathname, not wild) as a
SIMPLE-STRING, naming it as a file even when it has no name part.  Signals
an ERROR when PATHNAME has no native name."
  (coerce (sb-ext:native-namestring pathname :as-file t) 'simple-string))

(defun native-name-octets (string)
  "The length in octets of STRING encoded as the system's file names are
\(UTF-8).  Signals an ERROR for a character with no encoding (a surrogate)."
  (length (sb-ext:string-to-octets string :external-format :utf-8)))

;;; Descriptors --------------------------------------------------------------

(defconstant +o-rdonly+ sb-posix:o-rdonly "open(2)'s O_RDONLY.")
(defconstant +o-wronly+ sb-posix:o-wronly "open(2)'s O_WRONLY.")
(defconstant +o-rdwr+ sb-posix:o-rdwr "open(2)'s O_RDWR.")
(defconstant +o-creat+ sb-posix:o-creat "open(2)'s O_CREAT.")
(defconstant +o-excl+ sb-posix:o-excl "open(2)'s O_EXCL.")
(defconstant +o-nofollow+ sb-posix:o-nofollow "open(2)'s O_NOFOLLOW.")
(defconstant +o-nonblock+ sb-posix:o-nonblock "open(2)'s O_NONBLOCK.")
(defconstant +o-noctty+ sb-posix:o-noctty "open(2)'s O_NOCTTY.")
(defconstant +o-directory+ sb-posix:o-directory "open(2)'s O_DIRECTORY.")
(defconstant +o-cloexec+ #+linux #o2000000 #-linux 0
  "O_CLOEXEC, which SBCL's POSIX binding does not export: descriptors binstore
opens are not inherited by programs started meanwhile (RUN-PROGRAM in
another thread).  0 where its value is not known here.")

(defun system-open (native flags mode)
  "open(2) the file named NATIVE (a simple-string) with FLAGS (a LOGIOR of
the +O-...+ constants) and MODE (permission bits for a file it creates,
less the umask), retried on EINTR: the descriptor, or NIL and the errno."
  (multiple-value-bind (fd errno) (sb-unix:unix-open native flags mode)
    (if fd (values fd nil) (values nil errno))))

(defun system-close (fd)
  "close(2) the descriptor FD, once (never retried: Linux frees the
descriptor even when close fails): T, or NIL and the errno."
  (multiple-value-bind (ok errno) (sb-unix:unix-close fd)
    (if ok (values t nil) (values nil errno))))

(declaim (inline system-read system-write))
(defun system-read (fd pointer count)
  "read(2) at most COUNT bytes from the descriptor FD to POINTER, once (not
retried on EINTR): the number read (0 at the end of the file), or NIL and
the errno.  Inline, so that POINTER is not boxed."
  (sb-unix:unix-read fd pointer count))

(defun system-write (fd pointer count)
  "write(2) at most COUNT bytes at POINTER to the descriptor FD, once (not
retried on EINTR): the number written, or NIL and the errno.  Inline, so
that POINTER is not boxed."
  (sb-unix:unix-write fd pointer 0 count))

(defun system-file-status (file &key follow)
  "The status of FILE, a native file name (lstat(2), or stat(2) when FOLLOW,
which follows a final symbolic link) or a descriptor (fstat(2)): its mode,
owner, group, size in bytes, device and inode numbers, six integers; or NIL
and the errno."
  (multiple-value-bind (ok errno-or-dev ino mode nlink uid gid rdev size)
      (cond ((integerp file) (sb-unix:unix-fstat file))
            (follow (sb-unix:unix-stat file))
            (t (sb-unix:unix-lstat file)))
    (declare (ignore nlink rdev))
    (if ok
        (values mode uid gid size errno-or-dev ino)
        (values nil errno-or-dev))))

(defun file-mode-kind (mode)
  "The kind of file a stat(2) MODE says: :REGULAR, :DIRECTORY, :SYMLINK,
:FIFO, :CHARACTER-DEVICE, :BLOCK-DEVICE, :SOCKET or :UNKNOWN."
  (let ((type (logand mode sb-posix:s-ifmt)))
    (cond ((= type sb-posix:s-ifreg) :regular)
          ((= type sb-posix:s-ifdir) :directory)
          ((= type sb-posix:s-iflnk) :symlink)
          ((= type sb-posix:s-ififo) :fifo)
          ((= type sb-posix:s-ifchr) :character-device)
          ((= type sb-posix:s-ifblk) :block-device)
          ((= type sb-posix:s-ifsock) :socket)
          (t :unknown))))

(defun system-readlink (native)
  "readlink(2) the symbolic link NATIVE: its contents, a string, or NIL and
the errno."
  (multiple-value-bind (link errno) (sb-unix:unix-readlink native)
    (if link (values link nil) (values nil errno))))

(defun system-rename (from to)
  "rename(2) the file FROM to TO (native names): T, or NIL and the errno."
  (multiple-value-bind (ok errno) (sb-unix:unix-rename from to)
    (if ok (values t nil) (values nil errno))))

(defun system-unlink (native)
  "unlink(2) the file NATIVE: T, or NIL and the errno."
  (multiple-value-bind (ok errno) (sb-unix:unix-unlink native)
    (if ok (values t nil) (values nil errno))))

(defmacro returning-errno (&body body)
  "Run BODY, calls into SBCL's POSIX binding; T, or NIL and the errno of the
error it signals for a failing call."
  `(handler-case (progn ,@body (values t nil))
     (sb-posix:syscall-error (e) (values nil (sb-posix:syscall-errno e)))))

(defun system-fsync (fd)
  "fsync(2) the descriptor FD: T, or NIL and the errno (EINVAL or ENOTSUP
from a file that cannot be synced, a directory on some file systems)."
  (returning-errno (sb-posix:fsync fd)))

(defun system-fchown (fd uid gid)
  "fchown(2) the descriptor FD to the owner UID and the group GID, either
NIL to leave it as it is: T, or NIL and the errno (EPERM when not permitted)."
  (returning-errno (sb-posix:fchown fd (or uid #xFFFFFFFF) (or gid #xFFFFFFFF))))

(defun system-fchmod (fd mode)
  "fchmod(2) the descriptor FD to the permission bits MODE (up to #o7777):
T, or NIL and the errno."
  (returning-errno (sb-posix:fchmod fd mode)))

(defun clear-fd-nonblocking (fd)
  "Make the descriptor FD block on reads and writes: clear O_NONBLOCK with
fcntl(2) when it is set.  T, or NIL and the errno."
  (returning-errno
    (let ((flags (sb-posix:fcntl fd sb-posix:f-getfl)))
      (when (logtest flags sb-posix:o-nonblock)
        (sb-posix:fcntl fd sb-posix:f-setfl (logandc2 flags sb-posix:o-nonblock))))))

(defun wait-until-readable (fd)
  "Wait, interruptibly and without a timeout, until the descriptor FD has
input to read or is at its end (a FIFO: until a writer opens it).  Returns
true; signals nothing of its own."
  (sb-sys:wait-until-fd-usable fd :input nil nil))

(defun process-id ()
  "This process's id, an integer (getpid(2))."
  (sb-posix:getpid))

;;; Memory -------------------------------------------------------------------

(defun map-memory (bytes)
  "mmap(2) BYTES (a whole number of pages) of fresh memory, private,
anonymous, readable and writable, reading as zeros: its address, an
integer, or NIL and the errno.  Give it back with UNMAP-MEMORY."
  (handler-case
      (values (pointer-address
               (sb-posix:mmap nil bytes
                              (logior sb-posix:prot-read sb-posix:prot-write)
                              (logior sb-posix:map-private sb-posix:map-anon)
                              -1 0))
              nil)
    (sb-posix:syscall-error (e) (values nil (sb-posix:syscall-errno e)))))

(defun unmap-memory (address bytes)
  "munmap(2) the BYTES bytes at ADDRESS, mapped by MAP-MEMORY or
REMAP-MEMORY: T, or NIL and the errno."
  (returning-errno (sb-posix:munmap (address-pointer address) bytes)))

#+linux
(defconstant +mremap-maymove+ 1 "MREMAP_MAYMOVE from <sys/mman.h>.")

(defun remap-memory (address bytes new-bytes)
  "Resize the mapping of BYTES bytes at ADDRESS (made by MAP-MEMORY or by
this) to NEW-BYTES (a whole number of pages), keeping what it holds up to
the smaller size; it may move.  Returns the new address, the old one then
no longer mapped; or NIL and the errno, the old mapping left as it was.
On Linux mremap(2) moves the pages, copying nothing; elsewhere a new
mapping is made, the bytes copied to it, and the old one unmapped."
  #+linux
  (let ((new (sb-alien:alien-funcall
              (sb-alien:extern-alien "mremap" (function sb-alien:unsigned-long
                                                        sb-alien:unsigned-long
                                                        sb-alien:unsigned-long
                                                        sb-alien:unsigned-long
                                                        sb-alien:int))
              address bytes new-bytes +mremap-maymove+)))
    (if (= new (ldb (byte 64 0) -1))    ; MAP_FAILED
        (values nil (sb-alien:get-errno))
        (values new nil)))
  #-linux
  (multiple-value-bind (new errno) (map-memory new-bytes)
    (cond ((null new) (values nil errno))
          (t (move-memory (address-pointer new) (address-pointer address) (min bytes new-bytes))
             (unmap-memory address bytes)
             (values new nil)))))

;;; Pages: what is mapped in, and mapping it in ahead of use (Linux only) ----

(defconstant +page-bytes+ 4096
  "The page size assumed: x86-64's.  Where pages are larger, mincore refuses
the unaligned addresses and nothing is done.")

(defconstant +huge-page-bytes+ (* 2 1024 1024)
  "The size of a transparent huge page on x86-64: what one entry of the
level above the page table maps.")

(defconstant +madv-populate-write+ 23 "Linux's MADV_POPULATE_WRITE (5.14).")
(defconstant +madv-collapse+ 25 "Linux's MADV_COLLAPSE (6.1).")

(declaim (inline memory-population-supported-p))
(defun memory-population-supported-p ()
  "Whether this system may have SYSTEM-POPULATE and SYSTEM-COLLAPSE (Linux:
the kernel may still refuse them, with EINVAL); elsewhere they always
refuse."
  #+linux t #-linux nil)

(defun system-unmapped-pages (start pages)
  "How many of the PAGES pages (1 to those of one huge page, 512) from the
page address START (an integer) are not mapped in, according to mincore(2);
NIL if it refuses, and always NIL but on Linux."
  (declare (type word start)
           (type (integer 1 #.(floor +huge-page-bytes+ +page-bytes+)) pages))
  #+linux
  (sb-alien:with-alien ((flags (array (sb-alien:unsigned 8)
                                      #.(floor +huge-page-bytes+ +page-bytes+))))
    (when (zerop (sb-alien:alien-funcall
                  (sb-alien:extern-alien "mincore"
                                         (function sb-alien:int sb-alien:unsigned-long
                                                   sb-alien:unsigned-long
                                                   (* (array (sb-alien:unsigned 8)
                                                             #.(floor +huge-page-bytes+
                                                                      +page-bytes+)))))
                  start (* pages +page-bytes+) (sb-alien:addr flags)))
      (loop for i below pages
            count (not (logbitp 0 (sb-alien:deref flags i))))))
  #-linux (progn start pages nil))

#+linux
(defun system-madvise (start bytes advice)
  "madvise(START, BYTES, ADVICE), START an integer address: 0, or the errno
of its failure."
  (declare (type word start bytes) (type fixnum advice))
  (if (zerop (sb-alien:alien-funcall
              (sb-alien:extern-alien "madvise"
                                     (function sb-alien:int sb-alien:unsigned-long
                                               sb-alien:unsigned-long sb-alien:int))
              start bytes advice))
      0
      (sb-alien:get-errno)))

(defun system-populate (start bytes)
  "Map in the BYTES bytes (whole pages) from the page address START,
writable, keeping what they hold: madvise(MADV_POPULATE_WRITE).  0, or the
errno of its failure: EINVAL from a kernel before 5.14, and always EINVAL
but on Linux."
  (declare (type word start bytes))
  #+linux (system-madvise start bytes +madv-populate-write+)
  #-linux (progn start bytes +einval+))

(defun system-collapse (start bytes)
  "Make the BYTES bytes (one aligned huge page) at START one huge page,
keeping what they hold: madvise(MADV_COLLAPSE).  0, or the errno of its
failure: EINVAL from a kernel before 6.1, and always EINVAL but on Linux."
  (declare (type word start bytes))
  #+linux (system-madvise start bytes +madv-collapse+)
  #-linux (progn start bytes +einval+))

(defun system-microseconds ()
  "Microseconds on a monotonic clock, an integer: CLOCK_MONOTONIC on Linux
\(not GET-INTERNAL-REAL-TIME: in this SBCL it reads the coarse clock, which
advances by 4 ms at a time), the internal real time elsewhere."
  #+linux
  (multiple-value-bind (seconds nanoseconds) (sb-unix::clock-gettime 1) ; CLOCK_MONOTONIC
    (+ (* seconds 1000000) (floor nanoseconds 1000)))
  #-linux
  (values (floor (* (get-internal-real-time) 1000000) internal-time-units-per-second)))

(defun thp-never-p ()
  "Whether the administrator has turned transparent huge pages off (or the
kernel has none: no file to tell); always true but on Linux."
  #+linux
  (let ((setting (ignore-errors
                  (with-open-file (in "/sys/kernel/mm/transparent_hugepage/enabled")
                    (read-line in nil)))))
    (or (null setting) (search "[never]" setting)))
  #-linux t)

;;; Advisory locks (the persistent store's lock file, src/store/locks.lisp) ---

(defconstant +lock-shared+ 1 "flock(2)'s LOCK_SH: many holders at once.")
(defconstant +lock-exclusive+ 2 "flock(2)'s LOCK_EX: one holder, no shared ones.")

(defun system-flock (fd operation)
  "flock(2) the open file FD with OPERATION (+LOCK-SHARED+ or
+LOCK-EXCLUSIVE+), waiting until it is granted; retried on EINTR, so a
signal handler may run (and leave by a non-local exit) while it waits.
The lock belongs to the open file description: it is given back when the
descriptor is closed, or when the process dies however it dies.  T, or NIL
and the errno."
  (loop
    (let ((result (sb-alien:alien-funcall
                   (sb-alien:extern-alien "flock" (function sb-alien:int sb-alien:int sb-alien:int))
                   fd operation)))
      (if (zerop result)
          (return (values t nil))
          (let ((errno (sb-alien:get-errno)))
            (unless (eql errno +eintr+)
              (return (values nil errno))))))))

;;; Processes (the persistent store's fault injection, tests/store-faults.lisp)

(defconstant +sigkill+ sb-posix:sigkill "SIGKILL: ends a process at once, no handler runs.")

(defun system-fork ()
  "fork(2): 0 in the child, the child's process id in the parent; or NIL
and the errno.  SBCL refuses (an ERROR) when other threads run: the child
would have only the calling one."
  (handler-case (values (sb-posix:fork) nil)
    (sb-posix:syscall-error (e) (values nil (sb-posix:syscall-errno e)))))

(defun system-kill (pid signal)
  "kill(2): send SIGNAL to the process PID.  T, or NIL and the errno."
  (returning-errno (sb-posix:kill pid signal)))

(defun system-wait-process (pid)
  "waitpid(2) for the child PID to end, retried on EINTR: :EXITED and its
exit status, or :SIGNALLED and the signal that ended it; or NIL and the
errno."
  (loop
    (handler-case
        (multiple-value-bind (done status) (sb-posix:waitpid pid 0)
          (declare (ignore done))
          (return (if (sb-posix:wifexited status)
                      (values :exited (sb-posix:wexitstatus status))
                      (values :signalled (sb-posix:wtermsig status)))))
      (sb-posix:syscall-error (e)
        (unless (eql (sb-posix:syscall-errno e) +eintr+)
          (return (values nil (sb-posix:syscall-errno e))))))))

(defun exit-process-now (code)
  "End this process at once with the exit status CODE, as _exit(2) does:
no unwinding, no exit hooks, no flushing of Lisp streams.  For a forked
child, which must not run the parent's cleanup code."
  (sb-ext:exit :code code :abort t))

;;; Writing in place (the store's commits with durability :NONE) ------------

(defun system-pwrite (fd pointer count offset)
  "pwrite(2) at most COUNT bytes at POINTER to the descriptor FD at the file
OFFSET, once (not retried on EINTR): the number written, or NIL and the
errno."
  (let ((written (sb-alien:alien-funcall
                  (sb-alien:extern-alien "pwrite" (function sb-alien:long sb-alien:int
                                                            sb-alien:system-area-pointer
                                                            sb-alien:unsigned-long sb-alien:long))
                  fd pointer count offset)))
    (if (minusp written)
        (values nil (sb-alien:get-errno))
        (values written nil))))

(defun system-ftruncate (fd length)
  "ftruncate(2) the file open on FD to LENGTH bytes: T, or NIL and the errno."
  (returning-errno (sb-posix:ftruncate fd length)))

(defun system-seek (fd offset)
  "lseek(2) the descriptor FD to OFFSET from the file's start: T, or NIL and
the errno."
  (returning-errno (sb-posix:lseek fd offset sb-posix:seek-set)))
