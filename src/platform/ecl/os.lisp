;;;; The operating system on ECL: the names of src/platform/os.lisp (SBCL's)
;;;; with the same contracts, each system call made by C inlined into the
;;;; compiled code (FFI:C-INLINE).  The convention is SBCL's: a call returns
;;;; its result (T when there is none), or NIL and the errno of its failure,
;;;; and never signals.  The constants are Linux x86-64's.

(in-package #:binstore)

(ffi:clines "#include <errno.h>"
            "#include <string.h>"
            "#include <fcntl.h>"
            "#include <unistd.h>"
            "#include <poll.h>"
            "#include <signal.h>"
            "#include <time.h>"
            "#include <sys/types.h>"
            "#include <sys/stat.h>"
            "#include <sys/mman.h>"
            "#include <sys/file.h>"
            "#include <sys/wait.h>")

;;; Errors -------------------------------------------------------------------

(defconstant +eintr+ 4 "EINTR: a call interrupted by a signal.")
(defconstant +enoent+ 2 "ENOENT: no such file or directory.")
(defconstant +enotdir+ 20 "ENOTDIR: a component of a path is not a directory.")
(defconstant +eacces+ 13 "EACCES: permission denied.")
(defconstant +erofs+ 30 "EROFS: a read-only file system.")
(defconstant +eperm+ 1 "EPERM: operation not permitted.")
(defconstant +eexist+ 17 "EEXIST: the file exists.")
(defconstant +einval+ 22 "EINVAL: an invalid argument, or a call the system lacks.")
(defconstant +eopnotsupp+ 95 "EOPNOTSUPP (ENOTSUP): not supported here.")
(defconstant +enxio+ 6 "ENXIO: no such device (a FIFO without a reader).")

(defun errno-text (errno)
  "The system's text for the integer ERRNO (strerror(3)), a string."
  (ffi:c-inline (errno) (:int) :cstring "strerror(#0)" :one-liner t))

;;; File names ---------------------------------------------------------------

(defun utf8-octets-of (string)
  "STRING's characters as UTF-8, followed by a zero byte: an octet vector
for C.  Signals an ERROR for a surrogate."
  (let ((out (make-array (1+ (* 4 (length string))) :element-type '(unsigned-byte 8)))
        (j 0))
    (flet ((put (b) (setf (aref out j) b) (incf j)))
      (loop for c across string
            for code = (char-code c)
            do (cond ((< code #x80) (put code))
                     ((< code #x800)
                      (put (logior #xC0 (ash code -6)))
                      (put (logior #x80 (logand code #x3F))))
                     ((<= #xD800 code #xDFFF)
                      (error "The character ~s has no UTF-8 encoding." c))
                     ((< code #x10000)
                      (put (logior #xE0 (ash code -12)))
                      (put (logior #x80 (logand (ash code -6) #x3F)))
                      (put (logior #x80 (logand code #x3F))))
                     (t
                      (put (logior #xF0 (ash code -18)))
                      (put (logior #x80 (logand (ash code -12) #x3F)))
                      (put (logior #x80 (logand (ash code -6) #x3F)))
                      (put (logior #x80 (logand code #x3F)))))))
    (setf (aref out j) 0)
    (values out j)))

(defun string-of-utf8-octets (octets count)
  "The string whose UTF-8 encoding is the first COUNT bytes of OCTETS
\(malformed sequences give one character per byte)."
  (with-output-to-string (s)
    (let ((i 0))
      (loop while (< i count)
            do (let* ((b (aref octets i))
                      (n (cond ((< b #x80) 1) ((< b #xE0) 2) ((< b #xF0) 3) (t 4))))
                 (if (or (= n 1) (> (+ i n) count))
                     (progn (write-char (code-char b) s) (incf i))
                     (let ((code (logand b (ash #xFF (- (1+ n))))))
                       (loop for k from 1 below n
                             do (setf code (logior (ash code 6)
                                                   (logand (aref octets (+ i k)) #x3F))))
                       (write-char (code-char code) s)
                       (incf i n))))))))

(defun native-file-name (pathname)
  "The native name of the file PATHNAME (a physical pathname, not wild) as a
SIMPLE-STRING, naming it as a file even when it has no name part."
  (let* ((name (namestring (translate-logical-pathname (pathname pathname))))
         (n (length name)))
    (when (and (> n 1) (char= (char name (1- n)) #\/))
      (setf name (subseq name 0 (1- n))))
    (coerce name 'simple-string)))

(defun native-name-octets (string)
  "The length in octets of STRING encoded as UTF-8."
  (nth-value 1 (utf8-octets-of string)))

(defmacro with-c-name ((var native) &body body)
  "Run BODY with VAR bound to NATIVE's UTF-8 octets, zero-terminated."
  `(let ((,var (utf8-octets-of ,native)))
     (with-pinned-objects (,var) ,@body)))

(defmacro c-call (args arg-types c-expression)
  "Evaluate the C expression C-EXPRESSION (#0... its ARGS) returning a long:
its value, and errno when it is negative."
  `(ffi:c-inline ,args ,arg-types (values :long :int)
                 ,(format nil "{ long r_; errno = 0; r_ = (long)(~a);
                     @(return 0) = r_; @(return 1) = (r_ < 0) ? errno : 0; }"
                          c-expression)
                 :one-liner nil :side-effects t))

(defmacro c-result (form &optional (success 'result))
  "FORM gives a result and an errno (C-CALL): SUCCESS (evaluated with
RESULT bound) and NIL, or NIL and the errno."
  `(multiple-value-bind (result errno) ,form
     (if (< result 0) (values nil errno) (values ,success nil))))

;;; Descriptors --------------------------------------------------------------

(defconstant +o-rdonly+ 0 "open(2)'s O_RDONLY.")
(defconstant +o-wronly+ 1 "open(2)'s O_WRONLY.")
(defconstant +o-rdwr+ 2 "open(2)'s O_RDWR.")
(defconstant +o-creat+ #o100 "open(2)'s O_CREAT.")
(defconstant +o-excl+ #o200 "open(2)'s O_EXCL.")
(defconstant +o-nofollow+ #o400000 "open(2)'s O_NOFOLLOW.")
(defconstant +o-nonblock+ #o4000 "open(2)'s O_NONBLOCK.")
(defconstant +o-noctty+ #o400 "open(2)'s O_NOCTTY.")
(defconstant +o-directory+ #o200000 "open(2)'s O_DIRECTORY.")
(defconstant +o-cloexec+ #o2000000 "open(2)'s O_CLOEXEC.")

(defun system-open (native flags mode)
  "open(2) the file named NATIVE with FLAGS and MODE, retried on EINTR: the
descriptor, or NIL and the errno."
  (with-c-name (name native)
    (loop
      (multiple-value-bind (fd errno)
          (c-call (name flags mode) (:object :int :int)
                  "open((const char*)(#0)->vector.self.b8, #1, (mode_t)#2)")
        (cond ((>= fd 0) (return (values fd nil)))
              ((/= errno +eintr+) (return (values nil errno))))))))

(defun system-close (fd)
  "close(2) the descriptor FD, once: T, or NIL and the errno."
  (c-result (c-call (fd) (:int) "close(#0)") t))

;;; Not inline (as SBCL's are): their C needs this file's headers.
(defun system-read (fd pointer count)
  "read(2) at most COUNT bytes from the descriptor FD to POINTER, once: the
number read (0 at the end of the file), or NIL and the errno."
  (c-result (c-call (fd pointer count) (:int :fixnum :fixnum)
                    "read(#0, (void*)#1, (size_t)#2)")))

(defun system-write (fd pointer count)
  "write(2) at most COUNT bytes at POINTER to the descriptor FD, once: the
number written, or NIL and the errno."
  (c-result (c-call (fd pointer count) (:int :fixnum :fixnum)
                    "write(#0, (const void*)#1, (size_t)#2)")))

(defun %stat (kind fd name)
  (ffi:c-inline (kind fd name) (:int :int :object) (values :int :long :long :long :long :long :long)
                "{ struct stat st_; int r_;
                   if (#0 == 0) r_ = fstat(#1, &st_);
                   else if (#0 == 1) r_ = stat((const char*)(#2)->vector.self.b8, &st_);
                   else r_ = lstat((const char*)(#2)->vector.self.b8, &st_);
                   @(return 0) = r_ < 0 ? errno : 0;
                   @(return 1) = st_.st_mode; @(return 2) = st_.st_uid;
                   @(return 3) = st_.st_gid; @(return 4) = st_.st_size;
                   @(return 5) = st_.st_dev; @(return 6) = st_.st_ino; }"
                :one-liner nil :side-effects t))

(defun system-file-status (file &key follow)
  "The status of FILE, a native file name (lstat(2), or stat(2) when FOLLOW)
or a descriptor (fstat(2)): its mode, owner, group, size in bytes, device
and inode numbers, six integers; or NIL and the errno."
  (multiple-value-bind (errno mode uid gid size device inode)
      (if (integerp file)
          (%stat 0 file nil)
          (with-c-name (name file) (%stat (if follow 1 2) -1 name)))
    (if (zerop errno)
        (values mode uid gid size device inode)
        (values nil errno))))

(defun file-mode-kind (mode)
  "The kind of file a stat(2) MODE says."
  (let ((type (logand mode #o170000)))
    (case type
      (#o100000 :regular)
      (#o040000 :directory)
      (#o120000 :symlink)
      (#o010000 :fifo)
      (#o020000 :character-device)
      (#o060000 :block-device)
      (#o140000 :socket)
      (t :unknown))))

(defun system-readlink (native)
  "readlink(2) the symbolic link NATIVE: its contents, a string, or NIL and
the errno."
  (let ((buffer (make-array 4096 :element-type '(unsigned-byte 8))))
    (with-c-name (name native)
      (with-pinned-objects (buffer)
        (multiple-value-bind (n errno)
            (c-call (name buffer) (:object :object)
                    "readlink((const char*)(#0)->vector.self.b8, (char*)(#1)->vector.self.b8, 4096)")
          (if (< n 0)
              (values nil errno)
              (values (string-of-utf8-octets buffer n) nil)))))))

(defun system-rename (from to)
  "rename(2) the file FROM to TO (native names): T, or NIL and the errno."
  (with-c-name (a from)
    (with-c-name (b to)
      (c-result (c-call (a b) (:object :object)
                        "rename((const char*)(#0)->vector.self.b8, (const char*)(#1)->vector.self.b8)")
                t))))

(defun system-unlink (native)
  "unlink(2) the file NATIVE: T, or NIL and the errno."
  (with-c-name (name native)
    (c-result (c-call (name) (:object) "unlink((const char*)(#0)->vector.self.b8)") t)))

(defun system-fsync (fd)
  "fsync(2) the descriptor FD: T, or NIL and the errno."
  (c-result (c-call (fd) (:int) "fsync(#0)") t))

(defun system-fchown (fd uid gid)
  "fchown(2) the descriptor FD to UID and GID, either NIL to leave it: T, or
NIL and the errno."
  (let ((uid (or uid -1)) (gid (or gid -1)))
    (c-result (c-call (fd uid gid) (:int :long :long) "fchown(#0, (uid_t)#1, (gid_t)#2)") t)))

(defun system-fchmod (fd mode)
  "fchmod(2) the descriptor FD to the permission bits MODE: T, or NIL and
the errno."
  (c-result (c-call (fd mode) (:int :int) "fchmod(#0, (mode_t)#1)") t))

(defun clear-fd-nonblocking (fd)
  "Make the descriptor FD block on reads and writes: T, or NIL and the errno."
  (c-result (c-call (fd) (:int)
                    "({ int f_ = fcntl(#0, F_GETFL);
                        f_ < 0 ? f_ : ((f_ & O_NONBLOCK) ? fcntl(#0, F_SETFL, f_ & ~O_NONBLOCK) : 0); })")
            t))

(defun wait-until-readable (fd)
  "Wait, without a timeout, until the descriptor FD has input to read or is
at its end.  Returns true."
  (loop
    (multiple-value-bind (r errno)
        (c-call (fd) (:int) "({ struct pollfd p_; p_.fd = #0; p_.events = POLLIN; p_.revents = 0;
                               poll(&p_, 1, -1); })")
      (when (or (>= r 0) (/= errno +eintr+))
        (return t)))))

(defun process-id ()
  "This process's id, an integer (getpid(2))."
  (ffi:c-inline () () :int "getpid()" :one-liner t))

;;; Memory -------------------------------------------------------------------

(defun map-memory (bytes)
  "mmap(2) BYTES of fresh memory, private, anonymous, readable and writable:
its address, an integer, or NIL and the errno."
  (multiple-value-bind (address errno)
      (c-call (bytes) (:fixnum)
              "({ void *m_ = mmap(0, (size_t)#0, PROT_READ|PROT_WRITE, MAP_PRIVATE|MAP_ANONYMOUS, -1, 0);
                  m_ == MAP_FAILED ? -1L : (long)m_; })")
    (if (< address 0) (values nil errno) (values address nil))))

(defun unmap-memory (address bytes)
  "munmap(2) the BYTES bytes at ADDRESS: T, or NIL and the errno."
  (c-result (c-call (address bytes) (:fixnum :fixnum) "munmap((void*)#0, (size_t)#1)") t))

(defun remap-memory (address bytes new-bytes)
  "Resize the mapping of BYTES bytes at ADDRESS to NEW-BYTES (mremap(2));
it may move.  The new address, or NIL and the errno."
  (multiple-value-bind (new errno)
      (c-call (address bytes new-bytes) (:fixnum :fixnum :fixnum)
              "({ void *m_ = mremap((void*)#0, (size_t)#1, (size_t)#2, 1 /* MREMAP_MAYMOVE */);
                  m_ == MAP_FAILED ? -1L : (long)m_; })")
    (if (< new 0) (values nil errno) (values new nil))))

;;; Pages ----------------------------------------------------------------------

(defconstant +page-bytes+ 4096 "The page size assumed: x86-64's.")
(defconstant +huge-page-bytes+ (* 2 1024 1024) "A transparent huge page on x86-64.")
(defconstant +madv-populate-write+ 23 "Linux's MADV_POPULATE_WRITE (5.14).")
(defconstant +madv-collapse+ 25 "Linux's MADV_COLLAPSE (6.1).")

(defun system-microseconds ()
  "Microseconds on a monotonic clock, an integer."
  (ffi:c-inline () () :int64-t
                "({ struct timespec t_; clock_gettime(CLOCK_MONOTONIC, &t_);
                    (int64_t)t_.tv_sec * 1000000 + t_.tv_nsec / 1000; })"
                :one-liner t))

(defun thp-never-p ()
  "Whether transparent huge pages are off (or unknown)."
  (let ((setting (ignore-errors
                  (with-open-file (in "/sys/kernel/mm/transparent_hugepage/enabled")
                    (read-line in nil)))))
    (or (null setting) (search "[never]" setting))))

;;; Advisory locks -------------------------------------------------------------

(defconstant +lock-shared+ 1 "flock(2)'s LOCK_SH.")
(defconstant +lock-exclusive+ 2 "flock(2)'s LOCK_EX.")

(defun system-flock (fd operation)
  "flock(2) the open file FD with OPERATION, waiting until it is granted;
retried on EINTR.  T, or NIL and the errno."
  (loop
    (multiple-value-bind (r errno) (c-call (fd operation) (:int :int) "flock(#0, #1)")
      (cond ((zerop r) (return (values t nil)))
            ((/= errno +eintr+) (return (values nil errno)))))))

;;; Processes ------------------------------------------------------------------

(defconstant +sigkill+ 9 "SIGKILL.")

(defun system-fork ()
  "fork(2): 0 in the child, the child's id in the parent; or NIL and the errno."
  (c-result (c-call () () "fork()")))

(defun system-kill (pid signal)
  "kill(2): send SIGNAL to the process PID.  T, or NIL and the errno."
  (c-result (c-call (pid signal) (:int :int) "kill(#0, #1)") t))

(defun system-wait-process (pid)
  "waitpid(2) for the child PID to end, retried on EINTR: :EXITED and its
exit status, or :SIGNALLED and the signal; or NIL and the errno."
  (loop
    (multiple-value-bind (r errno status)
        (ffi:c-inline (pid) (:int) (values :int :int :int)
                      "{ int s_ = 0; int r_ = waitpid(#0, &s_, 0);
                         @(return 0) = r_; @(return 1) = r_ < 0 ? errno : 0; @(return 2) = s_; }"
                      :one-liner nil :side-effects t)
      (cond ((>= r 0)
             (return (if (zerop (logand status #x7f))
                         (values :exited (ldb (byte 8 8) status))
                         (values :signalled (logand status #x7f)))))
            ((/= errno +eintr+) (return (values nil errno)))))))

(defun exit-process-now (code)
  "End this process at once with the exit status CODE, as _exit(2) does."
  (ffi:c-inline (code) (:int) :void "_exit(#0)" :one-liner t))

;;; Writing in place (the store's commits with durability :NONE) ------------

(defun system-pwrite (fd pointer count offset)
  "pwrite(2) at most COUNT bytes at POINTER to the descriptor FD at the file
OFFSET, once (not retried on EINTR): the number written, or NIL and the
errno."
  (c-result (c-call (fd pointer count offset) (:int :fixnum :fixnum :fixnum)
                    "pwrite(#0, (const void*)#1, (size_t)#2, (off_t)#3)")))

(defun system-ftruncate (fd length)
  "ftruncate(2) the file open on FD to LENGTH bytes: T, or NIL and the errno."
  (c-result (c-call (fd length) (:int :fixnum) "ftruncate(#0, (off_t)#1)") t))

(defun system-seek (fd offset)
  "lseek(2) the descriptor FD to OFFSET from the file's start: T, or NIL and
the errno."
  (c-result (c-call (fd offset) (:int :fixnum) "lseek(#0, (off_t)#1, SEEK_SET)") t))
