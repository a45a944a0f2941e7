;;;; The operating system on ABCL: the names of src/platform/os.lisp (SBCL's)
;;;; with the same contracts, over the JVM's java.nio.  The convention is
;;;; SBCL's: a call returns its result (T when there is none), or NIL and the
;;;; errno of its failure, and never signals.
;;;;
;;;; The JVM gives no descriptors, so this file keeps its own: a descriptor
;;;; is an index into a table of open java.nio.channels.FileChannels, each
;;;; with the path it was opened on (for fstat, fchmod and fchown, which Java
;;;; does on paths).  A Java exception becomes the errno Linux would have
;;;; given (JAVA-ERRNO).  Memory is the portable platform's: a pointer names
;;;; an octet vector and an offset (POINTER-OCTETS), and reads and writes go
;;;; straight into the vector's own java.nio.ByteBuffer.
;;;;
;;;; What the JVM cannot do is refused with an errno, as the SBCL platform
;;;; refuses Linux-only calls elsewhere: fork, kill with other signals than
;;;; SIGKILL, waiting for children (a JVM has none it forked), non-blocking
;;;; opens (a FIFO without a reader blocks the open), and prefaulting.

(in-package #:binstore)

;;; Errors -------------------------------------------------------------------

(defconstant +eperm+ 1 "EPERM: operation not permitted.")
(defconstant +enoent+ 2 "ENOENT: no such file or directory.")
(defconstant +eintr+ 4 "EINTR: a call interrupted by a signal.")
(defconstant +eio+ 5 "EIO: an input or output error.")
(defconstant +enxio+ 6 "ENXIO: no such device (a FIFO without a reader).")
(defconstant +ebadf+ 9 "EBADF: not an open descriptor, or not open for that.")
(defconstant +echild+ 10 "ECHILD: no child process.")
(defconstant +enomem+ 12 "ENOMEM: out of memory.")
(defconstant +eacces+ 13 "EACCES: permission denied.")
(defconstant +efault+ 14 "EFAULT: a bad address.")
(defconstant +eexist+ 17 "EEXIST: the file exists.")
(defconstant +exdev+ 18 "EXDEV: a rename across file systems.")
(defconstant +enotdir+ 20 "ENOTDIR: a component of a path is not a directory.")
(defconstant +eisdir+ 21 "EISDIR: a directory.")
(defconstant +einval+ 22 "EINVAL: an invalid argument, or a call the system lacks.")
(defconstant +enospc+ 28 "ENOSPC: no space left on the device.")
(defconstant +erofs+ 30 "EROFS: a read-only file system.")
(defconstant +enotempty+ 39 "ENOTEMPTY: a directory not empty.")
(defconstant +eloop+ 40 "ELOOP: too many symbolic links, or one where none may be.")
(defconstant +eopnotsupp+ 95 "EOPNOTSUPP (ENOTSUP): not supported here.")

(defparameter *errno-texts*
  '((1 . "Operation not permitted") (2 . "No such file or directory")
    (4 . "Interrupted system call") (5 . "Input/output error")
    (6 . "No such device or address") (9 . "Bad file descriptor")
    (10 . "No child processes") (12 . "Cannot allocate memory")
    (13 . "Permission denied") (14 . "Bad address") (17 . "File exists")
    (18 . "Invalid cross-device link") (20 . "Not a directory")
    (21 . "Is a directory") (22 . "Invalid argument")
    (28 . "No space left on device") (30 . "Read-only file system")
    (39 . "Directory not empty") (40 . "Too many levels of symbolic links")
    (95 . "Operation not supported"))
  "strerror(3)'s texts (glibc's) of the errnos this file gives.")

(defun errno-text (errno)
  "The system's text for the integer ERRNO (strerror(3)), a string."
  (or (cdr (assoc errno *errno-texts*))
      (format nil "Unknown error ~d" errno)))

(defparameter *exception-errnos*
  '(("java.nio.file.NoSuchFileException" . 2)
    ("java.io.FileNotFoundException" . 2)
    ("java.nio.file.FileAlreadyExistsException" . 17)
    ("java.nio.file.AccessDeniedException" . 13)
    ("java.nio.file.NotDirectoryException" . 20)
    ("java.nio.file.DirectoryNotEmptyException" . 39)
    ("java.nio.file.NotLinkException" . 22)
    ("java.nio.file.FileSystemLoopException" . 40)
    ("java.nio.file.AtomicMoveNotSupportedException" . 18)
    ("java.nio.channels.ClosedChannelException" . 9)
    ("java.nio.channels.NonReadableChannelException" . 9)
    ("java.nio.channels.NonWritableChannelException" . 9)
    ("java.lang.UnsupportedOperationException" . 95)
    ("java.lang.IllegalArgumentException" . 22)
    ("java.lang.OutOfMemoryError" . 12))
  "The errno of each Java exception class that says one by itself.")

(defparameter *reason-errnos*
  '(("Not a directory" . 20) ("Is a directory" . 21)
    ("Too many levels of symbolic links" . 40) ("NOFOLLOW_LINKS" . 40)
    ("No space left on device" . 28) ("Read-only file system" . 30)
    ("Operation not permitted" . 1) ("Permission denied" . 13)
    ("No such file or directory" . 2) ("File exists" . 17)
    ("No such device or address" . 6) ("Invalid argument" . 22)
    ("Invalid cross-device link" . 18) ("Directory not empty" . 39))
  "The errno of a java.io.IOException whose message (or reason) holds the
system's text.")

(defun java-errno (condition)
  "The errno Linux gives for the failure the JAVA:JAVA-EXCEPTION CONDITION
reports: by the exception's class, else by the system's text in its
message, else EIO."
  (let* ((throwable (java:java-exception-cause condition))
         (class (java:jcall "getName" (java:jcall "getClass" throwable)))
         (message (or (ignore-errors (java:jcall "getMessage" throwable)) "")))
    (or (cdr (assoc class *exception-errnos* :test #'string=))
        (cdr (assoc-if (lambda (text) (search text message)) *reason-errnos*))
        +eio+)))

(defmacro returning-errno (&body body)
  "BODY's values, or NIL and the errno of the Java exception it threw."
  `(handler-case (progn ,@body)
     (java:java-exception (condition) (values nil (java-errno condition)))))

;;; The channel's methods, looked up once (see abcl/octets.lisp).

(define-java-method **channel-read** "java.nio.channels.FileChannel" "read" "java.nio.ByteBuffer")
(define-java-method **channel-write** "java.nio.channels.FileChannel" "write" "java.nio.ByteBuffer")
(define-java-method **channel-pwrite** "java.nio.channels.FileChannel" "write"
  "java.nio.ByteBuffer" "long")
(define-java-method **channel-seek** "java.nio.channels.FileChannel" "position" "long")
(define-java-method **channel-size** "java.nio.channels.FileChannel" "size")
(define-java-method **channel-truncate** "java.nio.channels.FileChannel" "truncate" "long")
(define-java-method **channel-force** "java.nio.channels.FileChannel" "force" "boolean")
(define-java-method **channel-close** "java.nio.channels.FileChannel" "close")
(define-java-method **channel-lock** "java.nio.channels.FileChannel" "lock"
  "long" "long" "boolean")

;;; File names ---------------------------------------------------------------

(defun native-file-name (pathname)
  "The native name of the file PATHNAME (a physical pathname, not wild) as a
SIMPLE-STRING, naming it as a file even when it has no name part."
  (let* ((name (namestring (translate-logical-pathname (pathname pathname))))
         (n (length name)))
    (when (and (> n 1) (char= (char name (1- n)) #\/))
      (setf name (subseq name 0 (1- n))))
    (coerce name 'simple-string)))

(defun native-name-octets (string)
  "The length in octets of STRING encoded as UTF-8.  Signals an ERROR for a
surrogate, which has no encoding."
  (loop for c across string
        for code = (char-code c)
        sum (cond ((< code #x80) 1)
                  ((< code #x800) 2)
                  ((<= #xD800 code #xDFFF)
                   (error "The character ~s has no UTF-8 encoding." c))
                  ((< code #x10000) 3)
                  (t 4))))

(defun java-path (native)
  "The java.nio.file.Path of the native file name NATIVE."
  (java:jcall "toPath" (java:jnew "java.io.File" native)))

(defun link-options (follow)
  "The LinkOption array that makes a java.nio.file.Files call follow a
final symbolic link (FOLLOW) or not."
  (let ((options (java:jnew-array "java.nio.file.LinkOption" (if follow 0 1))))
    (unless follow
      (java:jarray-set options (java:jfield "java.nio.file.LinkOption" "NOFOLLOW_LINKS") 0))
    options))

;;; Descriptors --------------------------------------------------------------
;;; The flags are Linux x86-64's, as the callers combine them; SYSTEM-OPEN
;;; turns them into java.nio's open options.

(defconstant +o-rdonly+ 0 "open(2)'s O_RDONLY.")
(defconstant +o-wronly+ 1 "open(2)'s O_WRONLY.")
(defconstant +o-rdwr+ 2 "open(2)'s O_RDWR.")
(defconstant +o-creat+ #o100 "open(2)'s O_CREAT.")
(defconstant +o-excl+ #o200 "open(2)'s O_EXCL.")
(defconstant +o-noctty+ #o400 "open(2)'s O_NOCTTY (nothing on the JVM).")
(defconstant +o-trunc+ #o1000 "open(2)'s O_TRUNC.")
(defconstant +o-nonblock+ #o4000 "open(2)'s O_NONBLOCK (nothing on the JVM).")
(defconstant +o-directory+ #o200000 "open(2)'s O_DIRECTORY.")
(defconstant +o-nofollow+ #o400000 "open(2)'s O_NOFOLLOW.")
(defconstant +o-cloexec+ #o2000000 "open(2)'s O_CLOEXEC (nothing on the JVM).")

(defstruct (descriptor (:constructor make-descriptor (channel path)))
  "An open file: its FileChannel, the java.nio.file.Path it was opened on,
and the lock SYSTEM-FLOCK took on it (with the channel it took it through,
when that is another one), released when it is closed."
  channel
  path
  (lock-channel nil))

(define-global **descriptors** (cl:make-array 16 :initial-element nil)
  "The open descriptors: the DESCRIPTOR at index FD, NIL where none is.
0, 1 and 2 are never given, as a process's standard streams hold them.")

(define-global **descriptors-lock** (threads:make-mutex)
  "Held while a descriptor is given or taken back.")

(defun add-descriptor (descriptor)
  "Record DESCRIPTOR under the lowest free number from 3; return that."
  (threads:with-mutex (**descriptors-lock**)
    (let ((fd (or (position nil **descriptors** :start 3)
                  (let ((n (length **descriptors**)))
                    (setf **descriptors** (replace (cl:make-array (* 2 n) :initial-element nil)
                                                   **descriptors**))
                    n))))
      (setf (svref **descriptors** fd) descriptor)
      fd)))

(defun find-descriptor (fd)
  "The DESCRIPTOR open as FD, or NIL."
  (let ((table **descriptors**))
    (and (typep fd 'fixnum) (< 2 fd (length table)) (svref table fd))))

(defmacro with-descriptor ((var fd) &body body)
  "Run BODY with VAR bound to the DESCRIPTOR open as FD, its Java exceptions
returned as errnos (RETURNING-ERRNO); NIL and EBADF when FD is not open."
  `(let ((,var (find-descriptor ,fd)))
     (if ,var
         (returning-errno ,@body)
         (values nil +ebadf+))))

(defun open-options (flags)
  "A java.util.Set of the StandardOpenOptions and LinkOptions that do what
open(2)'s FLAGS do."
  (let ((set (java:jnew "java.util.HashSet")))
    (flet ((add (name) (java:jcall "add" set (java:jfield "java.nio.file.StandardOpenOption" name))))
      (case (logand flags 3)
        (#.+o-rdonly+ (add "READ"))
        (#.+o-wronly+ (add "WRITE"))
        (t (add "READ") (add "WRITE")))
      (when (logtest flags +o-creat+)
        (add (if (logtest flags +o-excl+) "CREATE_NEW" "CREATE")))
      (when (logtest flags +o-trunc+)
        (add "TRUNCATE_EXISTING"))
      (when (logtest flags +o-nofollow+)
        (java:jcall "add" set (java:jfield "java.nio.file.LinkOption" "NOFOLLOW_LINKS"))))
    set))

(defun permission-attributes (mode)
  "A FileAttribute array giving a new file the permission bits of MODE (the
process's umask still applies, as to open(2)'s mode)."
  (let ((text (with-output-to-string (s)
                (loop for bit from 8 downto 0
                      do (write-char (if (logbitp bit mode) (char "xwr" (mod bit 3)) #\-) s))))
        (attributes (java:jnew-array "java.nio.file.attribute.FileAttribute" 1)))
    (java:jarray-set attributes
                     (java:jstatic "asFileAttribute" "java.nio.file.attribute.PosixFilePermissions"
                                   (java:jstatic "fromString"
                                                 "java.nio.file.attribute.PosixFilePermissions"
                                                 text))
                     0)
    attributes))

(defun open-channel (path flags mode)
  "A FileChannel on PATH opened as open(2) would with FLAGS and MODE; Java
exceptions pass.  Java ignores CREATE for a channel opened only for
reading, so such a file is created first (Files.createFile)."
  (when (and (logtest flags +o-creat+) (= (logand flags 3) +o-rdonly+))
    (handler-case (java:jstatic "createFile" "java.nio.file.Files" path
                                (permission-attributes mode))
      (java:java-exception (condition)
        (unless (and (= (java-errno condition) +eexist+)
                     (not (logtest flags +o-excl+)))
          (error condition))))
    (setf flags (logandc2 flags (logior +o-creat+ +o-excl+))))
  (java:jstatic "open" "java.nio.channels.FileChannel" path (open-options flags)
                (if (logtest flags +o-creat+)
                    (permission-attributes mode)
                    (java:jnew-array "java.nio.file.attribute.FileAttribute" 0))))

(defun system-open (native flags mode)
  "open(2) the file named NATIVE with FLAGS and MODE: the descriptor, or NIL
and the errno.  O_DIRECTORY opens a directory for reading (for fsync)."
  (returning-errno
    (let ((path (java-path native)))
      (if (and (logtest flags +o-directory+)
               (not (java:jstatic "isDirectory" "java.nio.file.Files" path (link-options t))))
          (values nil (if (java:jstatic "exists" "java.nio.file.Files" path (link-options nil))
                          +enotdir+
                          +enoent+))
          (values (add-descriptor (make-descriptor (open-channel path flags mode) path))
                  nil)))))

(defun system-close (fd)
  "close(2) the descriptor FD, once: T, or NIL and the errno.  The number is
free again whether closing failed or not, as on Linux."
  (let ((descriptor (threads:with-mutex (**descriptors-lock**)
                      (let ((d (find-descriptor fd)))
                        (when d (setf (svref **descriptors** fd) nil))
                        d))))
    (if descriptor
        (returning-errno
          (let ((lock-channel (descriptor-lock-channel descriptor)))
            (when lock-channel
              (java:jcall **channel-close** lock-channel)))
          (java:jcall **channel-close** (descriptor-channel descriptor))
          t)
        (values nil +ebadf+))))

;;; The bytes at a pointer, as ByteBuffers (abcl/octets.lisp): one for each
;;; run of one octet vector (MAP-OCTET-RUNS); memory of another kind (a
;;; string's characters) through a copy.

(defun transfer (pointer count transfer-run &key into-memory)
  "Move at most COUNT bytes at POINTER to or from a channel (INTO-MEMORY:
from it) with TRANSFER-RUN, a function of a ByteBuffer over a run and the
bytes done before it, which returns the number of bytes it moved (-1 at
the end of a file): run after run while each moves all of its bytes.  The
number of bytes moved."
  (let ((total 0))
    (flet ((run (octets start end done)
             ;; a run after a short one is not moved: the bytes moved must
             ;; be the first TOTAL of the COUNT
             (when (= total done)
               (incf total (max 0 (funcall transfer-run (octets-buffer octets start end) done))))))
      (unless (map-octet-runs #'run pointer count)
        (let ((copy (cl:make-array count :element-type '(unsigned-byte 8))))
          (unless into-memory
            (dotimes (k count) (setf (aref copy k) (mem-u8 pointer k))))
          (run copy 0 count 0)
          (when into-memory
            (dotimes (k total) (setf (mem-u8 pointer k) (aref copy k)))))))
    total))

(defun system-read (fd pointer count)
  "read(2) at most COUNT bytes from the descriptor FD to POINTER, once: the
number read (0 at the end of the file), or NIL and the errno."
  (with-descriptor (d fd)
    (transfer pointer count
              (lambda (buffer done)
                (declare (ignore done))
                (java:jcall **channel-read** (descriptor-channel d) buffer))
              :into-memory t)))

(defun system-write (fd pointer count)
  "write(2) at most COUNT bytes at POINTER to the descriptor FD, once: the
number written, or NIL and the errno."
  (with-descriptor (d fd)
    (transfer pointer count
              (lambda (buffer done)
                (declare (ignore done))
                (java:jcall **channel-write** (descriptor-channel d) buffer)))))

(defun system-pwrite (fd pointer count offset)
  "pwrite(2) at most COUNT bytes at POINTER to the descriptor FD at the file
OFFSET, once: the number written, or NIL and the errno."
  (with-descriptor (d fd)
    (transfer pointer count
              (lambda (buffer done)
                (java:jcall **channel-pwrite** (descriptor-channel d) buffer (+ offset done))))))

(defun system-seek (fd offset)
  "lseek(2) the descriptor FD to OFFSET from the file's start: T, or NIL and
the errno."
  (with-descriptor (d fd)
    (java:jcall **channel-seek** (descriptor-channel d) offset)
    t))

(defun system-ftruncate (fd length)
  "ftruncate(2) the file open on FD to LENGTH bytes: T, or NIL and the errno.
\(FileChannel.truncate only shortens: a longer length is reached by writing
a zero byte at its end.)"
  (with-descriptor (d fd)
    (let ((channel (descriptor-channel d)))
      (if (< length (java:jcall **channel-size** channel))
          (java:jcall **channel-truncate** channel length)
          (when (plusp length)
            (let ((zero (java:jstatic "allocate" "java.nio.ByteBuffer" 1)))
              (java:jcall **channel-pwrite** channel zero (1- length)))))
      t)))

(defun system-fsync (fd)
  "fsync(2) the descriptor FD (FileChannel.force): T, or NIL and the errno."
  (with-descriptor (d fd)
    (java:jcall **channel-force** (descriptor-channel d) t)
    t))

;;; File status ----------------------------------------------------------------

(defun system-file-status (file &key follow)
  "The status of FILE, a native file name (lstat(2), or stat(2) when FOLLOW)
or a descriptor (fstat(2)): its mode, owner, group, size in bytes, device
and inode numbers, six integers; or NIL and the errno."
  (flet ((status (path follow size)
           (let ((attributes (java:jstatic "readAttributes" "java.nio.file.Files" path
                                           "unix:mode,uid,gid,size,dev,ino"
                                           (link-options follow))))
             (values (java:jcall "get" attributes "mode")
                     (java:jcall "get" attributes "uid")
                     (java:jcall "get" attributes "gid")
                     (or size (java:jcall "get" attributes "size"))
                     (java:jcall "get" attributes "dev")
                     (java:jcall "get" attributes "ino")))))
    (if (integerp file)
        (with-descriptor (d file)
          (status (descriptor-path d) t (java:jcall **channel-size** (descriptor-channel d))))
        (returning-errno (status (java-path file) follow nil)))))

(defun file-mode-kind (mode)
  "The kind of file a stat(2) MODE says."
  (case (logand mode #o170000)
    (#o100000 :regular)
    (#o040000 :directory)
    (#o120000 :symlink)
    (#o010000 :fifo)
    (#o020000 :character-device)
    (#o060000 :block-device)
    (#o140000 :socket)
    (t :unknown)))

(defun system-readlink (native)
  "readlink(2) the symbolic link NATIVE: its contents, a string, or NIL and
the errno."
  (returning-errno
    (java:jcall "toString" (java:jstatic "readSymbolicLink" "java.nio.file.Files"
                                         (java-path native)))))

(defun system-rename (from to)
  "rename(2) the file FROM to TO (native names), replacing TO: T, or NIL and
the errno.  Files.move with ATOMIC_MOVE, which is rename(2) on Linux."
  (returning-errno
    (let ((options (java:jnew-array "java.nio.file.CopyOption" 1)))
      (java:jarray-set options (java:jfield "java.nio.file.StandardCopyOption" "ATOMIC_MOVE") 0)
      (java:jstatic "move" "java.nio.file.Files" (java-path from) (java-path to) options)
      t)))

(defun system-unlink (native)
  "unlink(2) the file NATIVE: T, or NIL and the errno."
  (returning-errno
    (java:jstatic "delete" "java.nio.file.Files" (java-path native))
    t))

(defun system-fchown (fd uid gid)
  "fchown(2) the descriptor FD to UID and GID, either NIL to leave it: T, or
NIL and the errno.  (On the path FD was opened on.)"
  (with-descriptor (d fd)
    (flet ((set-id (attribute id)
             (when id
               (java:jstatic "setAttribute" "java.nio.file.Files" (descriptor-path d)
                             attribute (java:jnew "java.lang.Integer" id) (link-options nil)))))
      (set-id "unix:uid" uid)
      (set-id "unix:gid" gid)
      t)))

(defun system-fchmod (fd mode)
  "fchmod(2) the descriptor FD to the permission bits MODE: T, or NIL and
the errno.  (On the path FD was opened on.)"
  (with-descriptor (d fd)
    (java:jstatic "setAttribute" "java.nio.file.Files" (descriptor-path d)
                  "unix:mode" (java:jnew "java.lang.Integer" mode) (link-options nil))
    t))

(defun clear-fd-nonblocking (fd)
  "Make the descriptor FD block on reads and writes: T (every channel this
file opens blocks)."
  (declare (ignore fd))
  t)

(defun wait-until-readable (fd)
  "Wait until the descriptor FD has input to read: at once, as reading a
channel waits itself.  Returns true."
  (declare (ignore fd))
  t)

(defun process-id ()
  "This process's id, an integer."
  (java:jcall "pid" (java:jstatic "current" "java.lang.ProcessHandle")))

;;; Memory -------------------------------------------------------------------

(defun map-memory (bytes)
  "BYTES of fresh memory, zero, readable and writable: on ABCL octet
vectors, a chunks segment of its own (MAKE-OCTET-MEMORY, in
portable/memory.lisp).  Its address, an integer, or NIL and the errno
\(ENOMEM when the heap cannot hold it)."
  (handler-case (values (make-octet-memory bytes) nil)
    (storage-condition () (values nil +enomem+))))

(defun unmap-memory (address bytes)
  "Release the memory MAP-MEMORY gave at ADDRESS: T."
  (declare (ignore bytes))
  (free-octet-memory address)
  t)

(defun remap-memory (address bytes new-bytes)
  "Resize the memory of BYTES bytes at ADDRESS to NEW-BYTES, keeping its
contents; it stays where it is (whole chunks are kept).  The address, or
NIL and the errno."
  (declare (ignore bytes))
  (handler-case (values (resize-octet-memory address new-bytes) nil)
    (storage-condition () (values nil +enomem+))))

;;; Pages ----------------------------------------------------------------------

(defconstant +page-bytes+ 4096 "The page size assumed: x86-64's.")
(defconstant +huge-page-bytes+ (* 2 1024 1024) "A transparent huge page on x86-64.")
(defconstant +madv-populate-write+ 23 "Linux's MADV_POPULATE_WRITE (5.14).")
(defconstant +madv-collapse+ 25 "Linux's MADV_COLLAPSE (6.1).")

(defun system-microseconds ()
  "Microseconds on a monotonic clock, an integer (System.nanoTime)."
  (floor (java:jstatic "nanoTime" "java.lang.System") 1000))

(defun thp-never-p ()
  "True: binstore's memory on ABCL is the JVM's, which it does not ask for
huge pages."
  t)

;;; Advisory locks -------------------------------------------------------------
;;; FileChannel.lock is a POSIX record lock over the whole file, which the
;;; JVM also keeps per process: a second lock on a file this process has
;;; locked throws OverlappingFileLockException, where flock(2) would wait.
;;; SYSTEM-FLOCK waits then, polling.  An exclusive lock needs a channel
;;; open for writing, which a descriptor opened O_RDONLY (as flock(2) takes)
;;; is not: the lock is taken through a second channel opened for writing.

(defconstant +lock-shared+ 1 "flock(2)'s LOCK_SH.")
(defconstant +lock-exclusive+ 2 "flock(2)'s LOCK_EX.")
(defconstant +java-long-max+ (1- (expt 2 63))
  "Java's Long.MAX_VALUE: a lock's extent that covers the whole file.")

(defun lock-channel (descriptor operation)
  "The channel to lock DESCRIPTOR's file through for OPERATION."
  (if (= operation +lock-exclusive+)
      (or (descriptor-lock-channel descriptor)
          (setf (descriptor-lock-channel descriptor)
                (open-channel (descriptor-path descriptor) +o-rdwr+ 0)))
      (descriptor-channel descriptor)))

(defun system-flock (fd operation)
  "flock(2) the open file FD with OPERATION (+LOCK-SHARED+ or
+LOCK-EXCLUSIVE+), waiting until it is granted: T, or NIL and the errno.
The lock lasts until FD is closed."
  (with-descriptor (d fd)
    (let ((channel (lock-channel d operation))
          (delay 0.001))
      (loop
        (handler-case
            (return (progn (java:jcall **channel-lock** channel 0 +java-long-max+
                                       (= operation +lock-shared+))
                           t))
          (java:java-exception (condition)
            (if (string= (java:jcall "getName" (java:jcall "getClass"
                                                           (java:java-exception-cause condition)))
                         "java.nio.channels.OverlappingFileLockException")
                (progn (sleep delay)
                       (setf delay (min 0.05 (* 2 delay))))
                (error condition))))))))

;;; Processes ------------------------------------------------------------------

(defconstant +sigkill+ 9 "SIGKILL.")

(defun system-fork ()
  "fork(2): refused on the JVM, which cannot fork: NIL and EOPNOTSUPP."
  (values nil +eopnotsupp+))

(defun system-kill (pid signal)
  "kill(2): send SIGNAL to the process PID.  The JVM sends SIGKILL only
\(ProcessHandle.destroyForcibly); other signals give EOPNOTSUPP.  T, or NIL
and the errno."
  (if (/= signal +sigkill+)
      (values nil +eopnotsupp+)
      (returning-errno
        (let ((handle (java:jstatic "of" "java.lang.ProcessHandle" pid)))
          (if (java:jcall "isPresent" handle)
              (progn (java:jcall "destroyForcibly" (java:jcall "get" handle)) t)
              (values nil 3))))))       ; ESRCH

(defun system-wait-process (pid)
  "waitpid(2) for the child PID: the JVM has no children SYSTEM-FORK made,
so NIL and ECHILD."
  (declare (ignore pid))
  (values nil +echild+))

(defun exit-process-now (code)
  "End this process at once with the exit status CODE, as _exit(2) does
\(Runtime.halt: no shutdown hooks, no finalizers)."
  (java:jcall "halt" (java:jstatic "getRuntime" "java.lang.Runtime") code))
