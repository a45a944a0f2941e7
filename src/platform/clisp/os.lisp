;;;; The operating system on CLISP: the names of src/platform/os.lisp
;;;; (SBCL's) with the same contracts, through CLISP's FFI to the C library
;;;; (FFI:DEF-CALL-OUT).  The convention is SBCL's: a call returns its result
;;;; (T when there is none), or NIL and the errno of its failure, and never
;;;; signals.  The errno is CLISP's own record of it (POSIX:ERRNO, saved
;;;; right after the call: reading C's errno later finds it overwritten),
;;;; given as a number.  Constants and struct stat's layout are Linux
;;;; x86-64's.
;;;;
;;;; Memory given to the system: the virtual addresses of the portable
;;;; platform are Lisp vectors, which the collector moves, so read(2) and
;;;; write(2) go through a foreign buffer (malloc'ed once, grown as needed)
;;;; that the bytes are copied to or from a block at a time.  Not done on
;;;; CLISP: fork (the store's fault-injection tests), prefaulting and huge
;;;; pages (no memory of binstore's own outside the heap).

(in-package #:binstore)

(defmacro define-libc (name c-name (&rest arguments) return-type)
  "Define NAME, the C library's function C-NAME."
  `(ffi:def-call-out ,name (:name ,c-name) (:library :default) (:language :stdc)
     (:arguments ,@arguments) (:return-type ,return-type)))

(define-libc libc-open "open" ((path ffi:c-pointer) (flags ffi:int) (mode ffi:int)) ffi:int)
(define-libc libc-close "close" ((fd ffi:int)) ffi:int)
(define-libc libc-read "read" ((fd ffi:int) (buffer ffi:c-pointer) (count ffi:size_t)) ffi:ssize_t)
(define-libc libc-write "write" ((fd ffi:int) (buffer ffi:c-pointer) (count ffi:size_t)) ffi:ssize_t)
(define-libc libc-pwrite "pwrite" ((fd ffi:int) (buffer ffi:c-pointer) (count ffi:size_t)
                                (offset ffi:sint64))
  ffi:ssize_t)
(define-libc libc-lseek "lseek" ((fd ffi:int) (offset ffi:sint64) (whence ffi:int)) ffi:sint64)
(define-libc libc-ftruncate "ftruncate" ((fd ffi:int) (length ffi:sint64)) ffi:int)
(define-libc libc-fsync "fsync" ((fd ffi:int)) ffi:int)
(define-libc libc-fchown "fchown" ((fd ffi:int) (uid ffi:int) (gid ffi:int)) ffi:int)
(define-libc libc-fchmod "fchmod" ((fd ffi:int) (mode ffi:int)) ffi:int)
(define-libc libc-fcntl "fcntl" ((fd ffi:int) (command ffi:int) (argument ffi:long)) ffi:int)
(define-libc libc-flock "flock" ((fd ffi:int) (operation ffi:int)) ffi:int)
(define-libc libc-fstat "fstat" ((fd ffi:int) (buffer ffi:c-pointer)) ffi:int)
(define-libc libc-stat "stat" ((path ffi:c-pointer) (buffer ffi:c-pointer)) ffi:int)
(define-libc libc-lstat "lstat" ((path ffi:c-pointer) (buffer ffi:c-pointer)) ffi:int)
(define-libc libc-readlink "readlink" ((path ffi:c-pointer) (buffer ffi:c-pointer) (size ffi:size_t))
  ffi:ssize_t)
(define-libc libc-rename "rename" ((from ffi:c-pointer) (to ffi:c-pointer)) ffi:int)
(define-libc libc-unlink "unlink" ((path ffi:c-pointer)) ffi:int)
(define-libc libc-poll "poll" ((fds ffi:c-pointer) (count ffi:ulong) (timeout ffi:int)) ffi:int)
(define-libc libc-getpid "getpid" () ffi:int)
(define-libc libc-kill "kill" ((pid ffi:int) (signal ffi:int)) ffi:int)
(define-libc libc-waitpid "waitpid" ((pid ffi:int) (status ffi:c-pointer) (options ffi:int)) ffi:int)
(define-libc libc-exit "_exit" ((status ffi:int)) nil)
(define-libc libc-strerror "strerror" ((errno ffi:int)) ffi:c-string)
(define-libc libc-malloc "malloc" ((size ffi:size_t)) ffi:c-pointer)
(define-libc libc-free "free" ((pointer ffi:c-pointer)) nil)
(define-libc libc-clock-gettime "clock_gettime" ((clock ffi:int) (timespec ffi:c-pointer)) ffi:int)

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

(defparameter *errno-numbers*
  '((:eperm . 1) (:enoent . 2) (:esrch . 3) (:eintr . 4) (:eio . 5) (:enxio . 6)
    (:e2big . 7) (:enoexec . 8) (:ebadf . 9) (:echild . 10) (:eagain . 11) (:enomem . 12)
    (:eacces . 13) (:efault . 14) (:enotblk . 15) (:ebusy . 16) (:eexist . 17) (:exdev . 18)
    (:enodev . 19) (:enotdir . 20) (:eisdir . 21) (:einval . 22) (:enfile . 23) (:emfile . 24)
    (:enotty . 25) (:etxtbsy . 26) (:efbig . 27) (:enospc . 28) (:espipe . 29) (:erofs . 30)
    (:emlink . 31) (:epipe . 32) (:edom . 33) (:erange . 34) (:edeadlk . 35)
    (:enametoolong . 36) (:enolck . 37) (:enosys . 38) (:enotempty . 39) (:eloop . 40)
    (:ewouldblock . 11) (:eoverflow . 75) (:eopnotsupp . 95) (:enotsup . 95) (:edquot . 122))
  "Linux x86-64's errno numbers, by the keywords POSIX:ERRNO names them with.")

(defun last-errno ()
  "The errno of the C call just made, a number (EINVAL for one this file
does not know: never met in binstore's calls)."
  (let ((errno (posix:errno)))
    (cond ((integerp errno) errno)
          ((cdr (assoc errno *errno-numbers*)))
          (t +einval+))))

(defmacro c-result (form &optional (success 'result))
  "FORM is a C call returning a negative number on failure: SUCCESS
\(evaluated with RESULT bound) and NIL, or NIL and the errno."
  `(let ((result ,form))
     (if (< result 0) (values nil (last-errno)) (values ,success nil))))

(defun errno-text (errno)
  "The system's text for the integer ERRNO (strerror(3)), a string."
  (libc-strerror errno))

;;; Foreign memory -------------------------------------------------------------

(defvar *io-buffer* nil "The foreign buffer system calls read into and write from.")
(defvar *io-buffer-bytes* 0 "Its size in bytes.")

(defun io-buffer (bytes)
  "The foreign buffer, of at least BYTES bytes (grown when smaller)."
  ;; a saved image's foreign pointers are invalid in the next process
  (unless (and *io-buffer* (ffi:validp *io-buffer*))
    (forget-io-buffer))
  (when (< *io-buffer-bytes* bytes)
    (when *io-buffer* (libc-free *io-buffer*))
    (let ((size (max bytes 65536 (* 2 *io-buffer-bytes*))))
      (setf *io-buffer* (libc-malloc size)
            *io-buffer-bytes* size)))
  *io-buffer*)

(defun forget-io-buffer ()
  "Forget the foreign buffer (an image saved keeps no malloc'ed memory)."
  (setf *io-buffer* nil *io-buffer-bytes* 0))

(defun octets-to-foreign (foreign offset octets start count)
  "Store COUNT bytes of the octet vector OCTETS from START at FOREIGN plus
OFFSET bytes."
  (unless (zerop count)
    (setf (ffi:memory-as foreign (ffi:parse-c-type `(ffi:c-array ffi:uint8 ,count)) offset)
          (if (and (zerop start) (= count (length octets)))
              octets
              (subseq octets start (+ start count))))))

(defun foreign-to-octets (foreign offset octets start count)
  "Store COUNT bytes at FOREIGN plus OFFSET bytes in the octet vector
OCTETS from START."
  (unless (zerop count)
    (replace octets (ffi:memory-as foreign (ffi:parse-c-type `(ffi:c-array ffi:uint8 ,count))
                                   offset)
             :start1 start)))

(defun memory-to-foreign (foreign pointer count)
  "Copy COUNT bytes at the virtual POINTER to FOREIGN: a run of one octet
vector at a time, or byte by byte from memory of another kind."
  (unless (map-octet-runs (lambda (octets start end done)
                            (octets-to-foreign foreign done octets start (- end start)))
                          pointer count)
    (let ((copy (make-array count :element-type '(unsigned-byte 8))))
      (dotimes (k count) (setf (aref copy k) (mem-u8 pointer k)))
      (octets-to-foreign foreign 0 copy 0 count))))

(defun foreign-to-memory (foreign pointer count)
  "Copy COUNT bytes at FOREIGN to the virtual POINTER: a run of one octet
vector at a time, or byte by byte to memory of another kind."
  (unless (map-octet-runs (lambda (octets start end done)
                            (foreign-to-octets foreign done octets start (- end start)))
                          pointer count)
    (let ((copy (make-array count :element-type '(unsigned-byte 8))))
      (foreign-to-octets foreign 0 copy 0 count)
      (dotimes (k count) (setf (mem-u8 pointer k) (aref copy k))))))

(defconstant +longest-transfer+ (* 4 1024 1024)
  "The most bytes one read(2) or write(2) is asked to move: the foreign
buffer stays this small, and the vector CLISP's FFI makes of a block of
foreign bytes stays far below its longest (2^24 - 1 elements).  Callers
retry short reads and writes, which a system call may always give.")

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
  "The length in octets of STRING encoded as UTF-8."
  (length (ext:convert-string-to-bytes string charset:utf-8)))

(defun call-with-c-name (native function)
  "Call FUNCTION with a foreign copy of NATIVE's UTF-8, zero-terminated,
freed after."
  (let* ((octets (ext:convert-string-to-bytes native charset:utf-8))
         (n (length octets))
         (foreign (libc-malloc (1+ n))))
    (unwind-protect
         (progn (octets-to-foreign foreign 0 octets 0 n)
                (setf (ffi:memory-as foreign 'ffi:uint8 n) 0)
                (funcall function foreign))
      (libc-free foreign))))

(defmacro with-c-name ((var native) &body body)
  "Run BODY with VAR bound to a foreign copy of NATIVE's name, zero-terminated."
  `(call-with-c-name ,native (lambda (,var) ,@body)))

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
      (let ((fd (libc-open name flags mode)))
        (if (>= fd 0)
            (return (values fd nil))
            (let ((errno (last-errno)))
              (unless (= errno +eintr+) (return (values nil errno)))))))))

(defun system-close (fd)
  "close(2) the descriptor FD, once: T, or NIL and the errno."
  (c-result (libc-close fd) t))

(defun system-read (fd pointer count)
  "read(2) at most COUNT bytes from the descriptor FD to POINTER, once: the
number read (0 at the end of the file), or NIL and the errno."
  (let* ((count (min count +longest-transfer+))
         (buffer (io-buffer count))
         (n (libc-read fd buffer count)))
    (if (< n 0)
        (values nil (last-errno))
        (progn (foreign-to-memory buffer pointer n)
               (values n nil)))))

(defun system-write (fd pointer count)
  "write(2) at most COUNT bytes at POINTER to the descriptor FD, once: the
number written, or NIL and the errno."
  (let* ((count (min count +longest-transfer+))
         (buffer (io-buffer count)))
    (memory-to-foreign buffer pointer count)
    (c-result (libc-write fd buffer count))))

(defun system-pwrite (fd pointer count offset)
  "pwrite(2) at most COUNT bytes at POINTER to the descriptor FD at the file
OFFSET, once (not retried on EINTR): the number written, or NIL and the
errno."
  (let* ((count (min count +longest-transfer+))
         (buffer (io-buffer count)))
    (memory-to-foreign buffer pointer count)
    (c-result (libc-pwrite fd buffer count offset))))

(defconstant +stat-bytes+ 144 "sizeof (struct stat) on Linux x86-64.")

(defun stat-fields (buffer)
  "The mode, owner, group, size, device and inode in a struct stat at
BUFFER (x86-64 Linux's layout)."
  (values (ffi:memory-as buffer 'ffi:uint32 24)
          (ffi:memory-as buffer 'ffi:uint32 28)
          (ffi:memory-as buffer 'ffi:uint32 32)
          (ffi:memory-as buffer 'ffi:sint64 48)
          (ffi:memory-as buffer 'ffi:uint64 0)
          (ffi:memory-as buffer 'ffi:uint64 8)))

(defun system-file-status (file &key follow)
  "The status of FILE, a native file name (lstat(2), or stat(2) when FOLLOW)
or a descriptor (fstat(2)): its mode, owner, group, size in bytes, device
and inode numbers, six integers; or NIL and the errno."
  (let ((buffer (libc-malloc +stat-bytes+)))
    (unwind-protect
         (let ((r (cond ((integerp file) (libc-fstat file buffer))
                        (t (with-c-name (name file)
                             (if follow (libc-stat name buffer) (libc-lstat name buffer)))))))
           (if (< r 0)
               (values nil (last-errno))
               (stat-fields buffer)))
      (libc-free buffer))))

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
  (let ((buffer (io-buffer 4096)))
    (with-c-name (name native)
      (let ((n (libc-readlink name buffer 4096)))
        (if (< n 0)
            (values nil (last-errno))
            (let ((octets (make-array n :element-type '(unsigned-byte 8))))
              (foreign-to-octets buffer 0 octets 0 n)
              (values (ext:convert-string-from-bytes octets charset:utf-8) nil)))))))

(defun system-rename (from to)
  "rename(2) the file FROM to TO (native names): T, or NIL and the errno."
  (with-c-name (a from)
    (with-c-name (b to)
      (c-result (libc-rename a b) t))))

(defun system-unlink (native)
  "unlink(2) the file NATIVE: T, or NIL and the errno."
  (with-c-name (name native)
    (c-result (libc-unlink name) t)))

(defun system-fsync (fd)
  "fsync(2) the descriptor FD: T, or NIL and the errno."
  (c-result (libc-fsync fd) t))

(defun system-fchown (fd uid gid)
  "fchown(2) the descriptor FD to UID and GID, either NIL to leave it: T, or
NIL and the errno."
  (c-result (libc-fchown fd (or uid -1) (or gid -1)) t))

(defun system-fchmod (fd mode)
  "fchmod(2) the descriptor FD to the permission bits MODE: T, or NIL and
the errno."
  (c-result (libc-fchmod fd mode) t))

(defconstant +f-getfl+ 3 "fcntl(2)'s F_GETFL.")
(defconstant +f-setfl+ 4 "fcntl(2)'s F_SETFL.")

(defun clear-fd-nonblocking (fd)
  "Make the descriptor FD block on reads and writes: T, or NIL and the errno."
  (let ((flags (libc-fcntl fd +f-getfl+ 0)))
    (cond ((< flags 0) (values nil (last-errno)))
          ((logtest flags +o-nonblock+)
           (c-result (libc-fcntl fd +f-setfl+ (logandc2 flags +o-nonblock+)) t))
          (t (values t nil)))))

(defun wait-until-readable (fd)
  "Wait, without a timeout, until the descriptor FD has input to read or is
at its end.  Returns true."
  (let ((pollfd (libc-malloc 8)))
    (unwind-protect
         (loop
           ;; struct pollfd: int fd; short events (POLLIN = 1); short revents
           (setf (ffi:memory-as pollfd 'ffi:sint32 0) fd
                 (ffi:memory-as pollfd 'ffi:sint16 4) 1
                 (ffi:memory-as pollfd 'ffi:sint16 6) 0)
           (when (or (>= (libc-poll pollfd 1 -1) 0) (/= (last-errno) +eintr+))
             (return t)))
      (libc-free pollfd))))

(defun process-id ()
  "This process's id, an integer (getpid(2))."
  (libc-getpid))

;;; Memory -------------------------------------------------------------------

(defun map-memory (bytes)
  "BYTES of fresh memory, zero, readable and writable: on CLISP octet
vectors of 1 MiB, a chunks segment of its own (MAKE-OCTET-MEMORY, in
portable/memory.lisp), so that it may be larger than CLISP's longest
vector.  Its address, an integer, or NIL and the errno (ENOMEM when the
heap cannot hold it)."
  (handler-case (values (make-octet-memory bytes) nil)
    (storage-condition () (values nil 12)))) ; ENOMEM

(defun unmap-memory (address bytes)
  "Release the memory MAP-MEMORY gave at ADDRESS: T."
  (declare (ignore bytes))
  (free-octet-memory address)
  t)

(defun remap-memory (address bytes new-bytes)
  "Resize the memory of BYTES bytes at ADDRESS to NEW-BYTES, keeping its
contents.  On CLISP it stays where it is (its whole chunks are kept, only
the last one is copied): the address, or NIL and the errno."
  (declare (ignore bytes))
  (handler-case (values (resize-octet-memory address new-bytes) nil)
    (storage-condition () (values nil 12)))) ; ENOMEM

;;; Pages ----------------------------------------------------------------------

(defconstant +page-bytes+ 4096 "The page size assumed: x86-64's.")
(defconstant +huge-page-bytes+ (* 2 1024 1024) "A transparent huge page on x86-64.")
(defconstant +madv-populate-write+ 23 "Linux's MADV_POPULATE_WRITE (5.14).")
(defconstant +madv-collapse+ 25 "Linux's MADV_COLLAPSE (6.1).")

(defun system-microseconds ()
  "Microseconds on a monotonic clock, an integer."
  (let ((timespec (io-buffer 16)))
    (libc-clock-gettime 1 timespec)         ; CLOCK_MONOTONIC
    (+ (* 1000000 (ffi:memory-as timespec 'ffi:sint64 0))
       (floor (ffi:memory-as timespec 'ffi:sint64 8) 1000))))

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
    (if (zerop (libc-flock fd operation))
        (return (values t nil))
        (let ((errno (last-errno)))
          (unless (= errno +eintr+) (return (values nil errno)))))))

;;; Processes ------------------------------------------------------------------

(defconstant +sigkill+ 9 "SIGKILL.")

(defun system-fork ()
  "NIL and EOPNOTSUPP: binstore does not fork CLISP (its tests that kill
writers mid-commit are SBCL's)."
  (values nil +eopnotsupp+))

(defun system-kill (pid signal)
  "kill(2): send SIGNAL to the process PID.  T, or NIL and the errno."
  (c-result (libc-kill pid signal) t))

(defun system-wait-process (pid)
  "waitpid(2) for the child PID to end, retried on EINTR: :EXITED and its
exit status, or :SIGNALLED and the signal; or NIL and the errno."
  (let ((status-buffer (libc-malloc 4)))
    (unwind-protect
         (loop
           (let ((r (libc-waitpid pid status-buffer 0)))
             (if (>= r 0)
                 (let ((status (ffi:memory-as status-buffer 'ffi:sint32 0)))
                   (return (if (zerop (logand status #x7f))
                               (values :exited (ldb (byte 8 8) status))
                               (values :signalled (logand status #x7f)))))
                 (let ((errno (last-errno)))
                   (unless (= errno +eintr+) (return (values nil errno)))))))
      (libc-free status-buffer))))

(defun exit-process-now (code)
  "End this process at once with the exit status CODE, as _exit(2) does."
  (libc-exit code))

;;; Writing in place -----------------------------------------------------------

(defun system-ftruncate (fd length)
  "ftruncate(2) the file open on FD to LENGTH bytes: T, or NIL and the errno."
  (c-result (libc-ftruncate fd length) t))

(defun system-seek (fd offset)
  "lseek(2) the descriptor FD to OFFSET from the file's start: T, or NIL and
the errno."
  (c-result (libc-lseek fd offset 0) t))
