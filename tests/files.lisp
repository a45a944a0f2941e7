;;;; Files as places (src/io/files.lisp): what a store does to what is at
;;;; the path (symbolic links, hard links, owner and mode, FIFOs, devices,
;;;; directories), the errors that name the file, and that interrupts and
;;;; errors leave no descriptor open and no temporary file behind.

(in-package #:binstore-tests)

(def-suite files :in all
  :description "File places: links, special files, errors naming the file, interrupts.")
(in-suite files)

;;; Helpers

(defun native-file-name (pathname)
  "PATHNAME's native namestring, as the system sees it."
  (sb-ext:native-namestring pathname :as-file t))

(defun entry-names (directory)
  "The names of every entry of DIRECTORY (read with readdir, so FIFOs,
sockets, devices and dangling links too), sorted."
  (let ((dir (sb-posix:opendir (native-file-name directory)))
        (names '()))
    (unwind-protect
         (loop for entry = (sb-posix:readdir dir)
               until (sb-alien:null-alien entry)
               do (let ((name (sb-posix:dirent-name entry)))
                    (unless (member name '("." "..") :test #'string=)
                      (push name names))))
      (sb-posix:closedir dir))
    (sort names #'string<)))

(defun temporary-files (directory)
  "The names in DIRECTORY that end in .tmp: temporary files left behind."
  (remove-if-not (lambda (name)
                   (let ((n (length name)))
                     (and (> n 4) (string= ".tmp" name :start2 (- n 4)))))
                 (entry-names directory)))

(defun open-descriptors ()
  "Every descriptor this process has open, as (FD . what /proc/self/fd says
it refers to), leaving out the one that reads /proc itself."
  (let ((dir (sb-posix:opendir "/proc/self/fd/"))
        (result '()))
    (unwind-protect
         (loop for entry = (sb-posix:readdir dir)
               until (sb-alien:null-alien entry)
               do (let ((name (sb-posix:dirent-name entry)))
                    (unless (member name '("." "..") :test #'string=)
                      (let ((target (ignore-errors
                                     (sb-posix:readlink (format nil "/proc/self/fd/~a" name)))))
                        (unless (and target (eql 0 (search "/proc/" target)))
                          (push (cons (parse-integer name) target) result))))))
      (sb-posix:closedir dir))
    result))

(defun descriptors-into (directory)
  "The open descriptors that refer to a file in DIRECTORY (or to DIRECTORY
itself), deleted files included."
  (let ((prefix (string-right-trim "/" (native-file-name directory))))
    (remove-if-not (lambda (entry)
                     (and (cdr entry) (eql 0 (search prefix (cdr entry)))))
                   (open-descriptors))))

(defun check-no-leaks (directory before &optional (what ""))
  "FiveAM checks: no descriptor refers to DIRECTORY, no descriptor is open
that was not in BEFORE (an OPEN-DESCRIPTORS list; comparing the pairs, not
just their number, so that a stream closed meanwhile by a finalizer cannot
hide a leak nor fake one), and DIRECTORY holds no temporary file."
  (let ((into (descriptors-into directory)))
    (is (null into) "~d descriptor~:p left open into the directory ~a: ~s"
        (length into) what (subseq into 0 (min 3 (length into)))))
  (let ((new (set-difference (open-descriptors) before :test #'equal)))
    (is (null new) "~d descriptor~:p leaked ~a: ~s"
        (length new) what (subseq new 0 (min 3 (length new)))))
  (is (null (temporary-files directory)) "temporary files left ~a: ~s"
      what (temporary-files directory)))

(defun file-error-of (thunk)
  "The serious condition THUNK signals (NIL if none): an error, or a
SB-EXT:TIMEOUT, under a 60-second limit so that a store waiting for
something cannot hang the suite."
  (handler-case (progn (with-timeout (60) (funcall thunk)) nil)
    (serious-condition (c) c)))

(defun check-file-error (condition place &rest words)
  "FiveAM checks: CONDITION is a BINSTORE-FILE-ERROR (so a FILE-ERROR) whose
pathname is PLACE and whose report contains each of WORDS (any case)."
  (is (typep condition 'binstore::binstore-file-error)
      "expected a binstore-file-error about ~s, got ~s: ~a" place (type-of condition)
      (and condition (bounded-report condition)))
  (when (typep condition 'file-error)
    (is (equal place (file-error-pathname condition)) "pathname ~s, not ~s"
        (file-error-pathname condition) place))
  (when condition
    (let ((report (princ-to-string condition)))
      (is (< (length report) 400) "report too long: ~a" report)
      (dolist (word words)
        (is (search word report :test #'char-equal) "~s not in the report: ~a" word report)))))

(defun kind-at (pathname)
  "What is at PATHNAME, without following a final link: :regular,
:directory, :symlink, :fifo, :character-device, :block-device, :socket, or
NIL when nothing is."
  (let ((status (binstore::file-status (native-file-name pathname))))
    (and status (binstore::file-kind status))))

(defun file-octets (pathname)
  "The bytes of the file PATHNAME."
  (with-open-file (in pathname :element-type '(unsigned-byte 8))
    (let ((octets (make-array (file-length in) :element-type '(unsigned-byte 8))))
      (read-sequence octets in)
      octets)))

(defun write-octets-to-fd (fd octets)
  "write(2) every byte of OCTETS to the descriptor FD."
  (sb-sys:with-pinned-objects (octets)
    (let ((done 0))
      (loop while (< done (length octets))
            do (let ((n (sb-unix:unix-write fd octets done (- (length octets) done))))
                 (assert n)
                 (incf done n))))))

(defun make-special-file (pathname kind)
  "Make a special file at PATHNAME with mknod(2) (SB-POSIX has no MKNOD):
:character-device (like /dev/null), :block-device (like /dev/loop0) or
:socket.  True when made; NIL when the system does not allow it here (no
CAP_MKNOD, or no mknod symbol in this libc)."
  (let ((mode (logior #o666 (ecase kind
                              (:character-device sb-posix:s-ifchr)
                              (:block-device sb-posix:s-ifblk)
                              (:socket sb-posix:s-ifsock))))
        (device (ecase kind
                  (:character-device (+ (ash 1 8) 3))
                  (:block-device (+ (ash 7 8) 0))
                  (:socket 0))))
    (and (ignore-errors (sb-alien::find-dynamic-foreign-symbol-address "mknod"))
         (zerop (sb-alien:alien-funcall
                 (sb-alien:extern-alien "mknod" (function sb-alien:int sb-alien:c-string
                                                          sb-alien:unsigned-int sb-alien:unsigned-long))
                 (native-file-name pathname) mode device))
         (eq kind (kind-at pathname)))))

;;; Regular files: mode, owner, hard links

(test replaced-file-keeps-mode-and-owner
  "The new file has the old one's permission bits exactly (umask or not)
and, as root, its owner and group."
  (call-with-temporary-directory
   (lambda (directory)
     (let ((path (merge-pathnames "moded.bst" directory)))
       (dolist (mode '(#o640 #o666 #o600 #o755))
         (binstore:store path "old")
         (sb-posix:chmod (native-file-name path) mode)
         (binstore:store path *place-datum*)
         (is (= mode (logand #o7777 (sb-posix:stat-mode (sb-posix:stat (native-file-name path)))))
             "mode #o~o became #o~o" mode
             (logand #o7777 (sb-posix:stat-mode (sb-posix:stat (native-file-name path)))))
         (check-same *place-datum* (binstore:restore path)))
       (if (zerop (sb-posix:getuid))
           (progn
             (sb-posix:chown (native-file-name path) 4242 4343)
             (sb-posix:chmod (native-file-name path) #o4750)
             (binstore:store path "owned")
             (let ((stat (sb-posix:stat (native-file-name path))))
               (is (= 4242 (sb-posix:stat-uid stat)))
               (is (= 4343 (sb-posix:stat-gid stat)))
               (is (= #o4750 (logand #o7777 (sb-posix:stat-mode stat))) "set-uid bit lost"))
             (is (equal "owned" (binstore:restore path))))
           (skip "not root: the owner of a replaced file cannot be kept"))
       (is (equal '("moded.bst") (entry-names directory)))))))

(test hard-links-are-split
  "Replacing a file splits its hard links: the name stored to holds the new
data, the other name keeps the old."
  (call-with-temporary-directory
   (lambda (directory)
     (let ((a (merge-pathnames "a.bst" directory))
           (b (merge-pathnames "b.bst" directory)))
       (binstore:store a "old")
       (sb-posix:link (native-file-name a) (native-file-name b))
       (binstore:store a "new")
       (is (equal "new" (binstore:restore a)))
       (is (equal "old" (binstore:restore b)))
       (is (/= (sb-posix:stat-ino (sb-posix:stat (native-file-name a)))
               (sb-posix:stat-ino (sb-posix:stat (native-file-name b)))))
       (is (equal '("a.bst" "b.bst") (entry-names directory)))))))

;;; Symbolic links

(test symbolic-links-are-followed
  "A link, a chain of links (relative and absolute), and a dangling link: the
final target is replaced, every link stays a link, the temporary file is
made in the target's directory."
  (call-with-temporary-directory
   (lambda (directory)
     (let* ((sub (merge-pathnames "sub/" directory))
            (real (merge-pathnames "real.bst" sub))
            (link (merge-pathnames "link.bst" directory))
            (chain1 (merge-pathnames "chain1" directory))
            (chain2 (merge-pathnames "chain2" sub)))
       (ensure-directories-exist sub)
       (binstore:store real "original")
       ;; relative link into a subdirectory
       (sb-posix:symlink "sub/real.bst" (native-file-name link))
       (binstore:store link *place-datum*)
       (is (eq :symlink (kind-at link)))
       (is (equal "sub/real.bst" (sb-posix:readlink (native-file-name link))))
       (is (eq :regular (kind-at real)))
       (check-same *place-datum* (binstore:restore real))
       (check-same *place-datum* (binstore:restore link))
       ;; the temporary file is beside the target, not beside the link
       (let ((seen nil))
         (binstore::call-with-file-output
          (namestring link)
          (lambda (fd)
            (setf seen (list (temporary-files sub) (temporary-files directory)))
            (write-octets-to-fd fd (binstore:store nil "through the link"))))
         (is (= 1 (length (first seen))) "temporary files in the target's directory: ~s" seen)
         (is (null (second seen)) "temporary file beside the link: ~s" seen))
       (is (equal "through the link" (binstore:restore real)))
       ;; a chain: relative link -> absolute link -> relative link (from its own directory)
       (sb-posix:symlink (native-file-name chain2) (native-file-name chain1))
       (sb-posix:symlink "../sub/real.bst" (native-file-name chain2))
       (binstore:store (namestring chain1) (list :chained 42))
       (is (eq :symlink (kind-at chain1)))
       (is (eq :symlink (kind-at chain2)))
       (is (equal (list :chained 42) (binstore:restore real)))
       ;; a dangling link makes its target
       (let ((dangling (merge-pathnames "dangling.bst" directory))
             (made (merge-pathnames "made.bst" sub)))
         (sb-posix:symlink "sub/made.bst" (native-file-name dangling))
         (binstore:store dangling "made through a dangling link")
         (is (eq :symlink (kind-at dangling)))
         (is (eq :regular (kind-at made)))
         (is (equal "made through a dangling link" (binstore:restore made))))
       ;; a link to a directory that does not exist
       (let ((nowhere (merge-pathnames "nowhere.bst" directory)))
         (sb-posix:symlink "missing/file.bst" (native-file-name nowhere))
         (check-file-error (file-error-of (lambda () (binstore:store nowhere 1)))
                           nowhere "no such directory"))
       (is (equal '("chain1" "dangling.bst" "link.bst" "nowhere.bst" "sub") (entry-names directory)))
       (is (equal '("chain2" "made.bst" "real.bst") (entry-names sub)))))))

(test symbolic-link-loops-are-refused
  "A loop of links, and a chain longer than 40 links, signal
BINSTORE-FILE-ERROR and change nothing."
  (call-with-temporary-directory
   (lambda (directory)
     (let ((a (merge-pathnames "a" directory))
           (b (merge-pathnames "b" directory)))
       (sb-posix:symlink "b" (native-file-name a))
       (sb-posix:symlink (native-file-name a) (native-file-name b))
       (check-file-error (file-error-of (lambda () (binstore:store a 1)))
                         a "symbolic links")
       (is (eq :symlink (kind-at a)))
       (is (eq :symlink (kind-at b))))
     ;; 41 links, each to the next, the last to a file that does not exist
     (let ((first (namestring (merge-pathnames "l0" directory))))
       (loop for i below 41
             do (sb-posix:symlink (format nil "l~d" (1+ i))
                                  (native-file-name (merge-pathnames (format nil "l~d" i) directory))))
       (check-file-error (file-error-of (lambda () (binstore:store first 1)))
                         first "symbolic links")
       (is (null (kind-at (merge-pathnames "l41" directory))))
       ;; 40 links are followed
       (let ((second (namestring (merge-pathnames "l1" directory))))
         (binstore:store second "forty links")
         (is (eq :regular (kind-at (merge-pathnames "l41" directory))))
         (is (equal "forty links" (binstore:restore second)))
         ;; reading through 41 links fails in open(2) itself
         (check-file-error (file-error-of (lambda () (binstore:restore first)))
                           first "symbolic links")))
     (is (null (temporary-files directory))))))

;;; Special files

(defun call-with-thread (name function)
  "Run FUNCTION in a new thread called NAME; return a function that waits for
it (at most 60 seconds; then it is terminated) and returns its value, or
:TIMEOUT, or the error it signalled."
  (let ((thread (make-test-thread
                 (lambda () (handler-case (funcall function) (error (c) c)))
                 :name name)))
    (lambda ()
      (let ((result (sb-thread:join-thread thread :timeout 60 :default :timeout)))
        (when (eq result :timeout)
          (sb-thread:terminate-thread thread)
          (sb-thread:join-thread thread :timeout 10 :default nil))
        result))))

(test fifos-are-written-through
  "A FIFO is opened for writing, waiting for its reader, and written: not
replaced, no temporary file.  Restoring from a FIFO waits for its writer.
A store or restore waiting on a FIFO is interruptible (WITH-TIMEOUT) and
leaves no descriptor open."
  (call-with-temporary-directory
   (lambda (directory)
     (let* ((fifo (merge-pathnames "fifo" directory))
            (before (open-descriptors))
            (data (list *place-datum* (make-string 100000 :initial-element #\λ))))
       (sb-posix:mkfifo (native-file-name fifo) #o600)
       ;; store: the reader reads everything
       (let ((wait (call-with-thread
                    "fifo reader"
                    (lambda ()
                      (with-open-file (in fifo :element-type '(unsigned-byte 8))
                        (let ((out (make-array 0 :element-type '(unsigned-byte 8)
                                                 :adjustable t :fill-pointer 0))
                              (buffer (make-array 4096 :element-type '(unsigned-byte 8))))
                          (loop for n = (read-sequence buffer in)
                                while (plusp n)
                                do (loop for i below n do (vector-push-extend (aref buffer i) out)))
                          (coerce out '(simple-array (unsigned-byte 8) (*)))))))))
         (is (null (file-error-of (lambda () (binstore:store fifo data)))))
         (let ((octets (funcall wait)))
           (is (typep octets '(simple-array (unsigned-byte 8) (*))) "reader got ~s" octets)
           (when (typep octets '(simple-array (unsigned-byte 8) (*)))
             (check-same data (binstore:restore octets)))))
       (is (eq :fifo (kind-at fifo)))
       ;; restore: the writer writes stored bytes
       (let* ((octets (binstore:store nil data))
              (wait (call-with-thread
                     "fifo writer"
                     (lambda ()
                       (with-open-file (out fifo :direction :output :if-exists :append
                                                 :element-type '(unsigned-byte 8))
                         (write-sequence octets out))
                       :written))))
         (let ((restored (handler-case (with-timeout (60) (binstore:restore fifo))
                           (error (c) c))))
           (check-same data restored))
         (is (eq :written (funcall wait))))
       ;; nobody at the other end: both wait until interrupted
       (is (typep (file-error-of (lambda () (with-timeout (0.2) (binstore:store fifo data))))
                  'test-timeout))
       (is (typep (file-error-of (lambda () (with-timeout (0.2) (binstore:restore fifo))))
                  'test-timeout))
       (is (eq :fifo (kind-at fifo)))
       (check-no-leaks directory before "after the FIFOs")
       (is (equal '("fifo") (entry-names directory)))))))

(test character-devices-are-written-through
  "A character device (a node like /dev/null; /dev/null itself when mknod is
not allowed) is written through: it stays a device, no temporary file, and
its refusal to fsync (EINVAL) is not an error."
  (call-with-temporary-directory
   (lambda (directory)
     (let* ((node (merge-pathnames "null" directory))
            (device (if (make-special-file node :character-device) node #p"/dev/null"))
            (before (open-descriptors)))
       (is (eq :character-device (kind-at device)))
       (is (null (file-error-of (lambda () (binstore:store device *place-datum*)))))
       (is (null (file-error-of (lambda () (binstore:store (namestring device) "again")))))
       (is (eq :character-device (kind-at device)))
       (check-no-leaks directory before)
       (when (eq device node)
         (is (equal '("null") (entry-names directory))))
       ;; reading a device: /dev/null has no data
       (is (typep (file-error-of (lambda () (binstore:restore device)))
                  'binstore::end-of-data))))))

(test directories-block-devices-and-sockets-are-refused
  "Storing to a directory, a block device or a socket (directly or through a
link) signals BINSTORE-FILE-ERROR saying what it is, and leaves it there."
  (call-with-temporary-directory
   (lambda (directory)
     (let* ((subdir (merge-pathnames "subdir/" directory))
            (as-file (namestring (merge-pathnames "subdir" directory)))
            (link (merge-pathnames "to-subdir" directory))
            (block (merge-pathnames "block" directory))
            (socket (merge-pathnames "socket" directory)))
       (ensure-directories-exist subdir)
       (check-file-error (file-error-of (lambda () (binstore:store as-file 1)))
                         as-file "is a directory")
       (check-file-error (file-error-of (lambda () (binstore:store subdir 1)))
                         subdir "directory")
       (sb-posix:symlink "subdir" (native-file-name link))
       (check-file-error (file-error-of (lambda () (binstore:store link 1)))
                         link "a directory")
       (is (eq :directory (kind-at subdir)))
       (is (eq :symlink (kind-at link)))
       (if (make-special-file block :block-device)
           (progn
             (check-file-error (file-error-of (lambda () (binstore:store block 1)))
                               block "block device")
             (is (eq :block-device (kind-at block))))
           (skip "mknod of a block device is not allowed here"))
       (if (make-special-file socket :socket)
           (progn
             (check-file-error (file-error-of (lambda () (binstore:store socket 1)))
                               socket "socket")
             (is (eq :socket (kind-at socket))))
           (skip "mknod of a socket is not allowed here"))
       (is (null (temporary-files directory)))))))

;;; Errors that name the file

(test file-errors-name-the-file
  "Each way a file place can fail is a BINSTORE-FILE-ERROR whose pathname is
the place as given and whose message says what failed; never an
SB-POSIX:SYSCALL-ERROR, a TYPE-ERROR or a stream error."
  (call-with-temporary-directory
   (lambda (directory)
     (let ((missing-dir (namestring (merge-pathnames "no/such/dir/x.bst" directory)))
           (missing-file (merge-pathnames "absent.bst" directory))
           (wild (merge-pathnames "*.bst" directory))
           (wild-string (concatenate 'string (namestring directory) "data*.bst"))
           (regular (merge-pathnames "regular.bst" directory)))
       ;; storing
       (check-file-error (file-error-of (lambda () (binstore:store missing-dir 1)))
                         missing-dir "no such directory")
       (is (null (kind-at (merge-pathnames "no/" directory))))
       (check-file-error (file-error-of (lambda () (binstore:store wild 1)))
                         wild "wild")
       (check-file-error (file-error-of (lambda () (binstore:store wild-string 1)))
                         wild-string "wild")
       (binstore:store regular 1)
       (let ((under-a-file (concatenate 'string (namestring regular) "/x.bst")))
         (check-file-error (file-error-of (lambda () (binstore:store under-a-file 1)))
                           under-a-file "not a directory")
         (check-file-error (file-error-of (lambda () (binstore:restore under-a-file)))
                           under-a-file "not a directory"))
       ;; root may write almost anywhere, but sysfs refuses new files to everyone
       (let ((unwritable "/sys/binstore-test.bst"))
         (if (eq :directory (kind-at #p"/sys/"))
             (check-file-error (file-error-of (lambda () (binstore:store unwritable 1)))
                               unwritable "cannot create")
             (skip "no /sys here: no directory even root cannot write")))
       ;; restoring
       (check-file-error (file-error-of (lambda () (binstore:restore missing-file)))
                         missing-file "no such file")
       (check-file-error (file-error-of (lambda () (binstore:restore (namestring missing-file))))
                         (namestring missing-file) "no such file")
       (let ((as-file (string-right-trim "/" (namestring directory))))
         (check-file-error (file-error-of (lambda () (binstore:restore as-file)))
                           as-file "is a directory"))
       (check-file-error (file-error-of (lambda () (binstore:restore directory)))
                         directory "directory")
       (check-file-error (file-error-of (lambda () (binstore:restore wild)))
                         wild "wild")
       (is (equal '("regular.bst") (entry-names directory)))))))

;;; Errors and interrupts leave nothing behind

(test failing-writer-leaves-nothing-behind
  "When the function writing the file signals an error, the old file is
kept, the temporary file is removed and its descriptor closed; a
descriptor is closed after a normal return too; the same for reading."
  (call-with-temporary-directory
   (lambda (directory)
     (let ((path (merge-pathnames "kept.bst" directory))
           (before (open-descriptors))
           (fds '()))
       (binstore:store path "original")
       (dotimes (i 3)
         (is (equal "boom"
                    (handler-case
                        (binstore::call-with-file-output
                         path (lambda (fd)
                                (push fd fds)
                                (write-octets-to-fd fd (binstore:store nil "half written"))
                                (error "boom")))
                      (simple-error (c) (princ-to-string c)))))
         (is (equal "original" (binstore:restore path)))
         (check-no-leaks directory before (format nil "after error ~d" i)))
       ;; the same with the reusable atomic writer and an unstorable object
       (signals binstore:unstorable-object
         (binstore::call-with-atomic-file-output
          (native-file-name path) (lambda (fd) (binstore::call-with-fd-obuf
                                      fd nil (lambda (ob) (binstore::encode ob (list 1 #'car)))))))
       (is (equal "original" (binstore:restore path)))
       (check-no-leaks directory before "after an unstorable object")
       ;; a normal return closes the descriptor
       (binstore::call-with-file-output
        path (lambda (fd) (push fd fds) (write-octets-to-fd fd (binstore:store nil "replaced"))))
       (is (equal "replaced" (binstore:restore path)))
       (check-no-leaks directory before "after a normal return")
       ;; reading: an error in FN closes the descriptor
       (is (equal "read boom"
                  (handler-case (binstore::call-with-file-input
                                 path (lambda (fd size)
                                        (declare (ignore size))
                                        (push fd fds)
                                        (error "read boom")))
                    (simple-error (c) (princ-to-string c)))))
       (is (equal '(:fd :size)
                  (binstore::call-with-file-input
                   path (lambda (fd size)
                          (list (and (integerp fd) :fd)
                                (and (= size (length (file-octets path))) :size))))))
       (check-no-leaks directory before "after reading")
       (is (plusp (length fds)))
       (is (equal '("kept.bst") (entry-names directory)))))))

(defvar *throw-allowed* nil
  "True, in the worker thread of the interrupt test, while the catch its
interruptions throw to is in effect.")

(defun interrupted-lisp-code-p ()
  "True in an interruption that interrupted Lisp code.  An interruption that
lands in a foreign function (malloc, free: libc keeps locks there) must not
leave it by a non-local exit, or libc's lock stays held and the next malloc
hangs: a hazard of INTERRUPT-THREAD itself, which the test keeps out of.
binstore's own critical sections defer interrupts, and a deferred one runs
in Lisp code when they are enabled again, so it is still thrown from.
Reads the interrupted context's PC with raw pointers only: typed alien
code here (SB-VM:CONTEXT-PC) compares alien record types at run time, in
a hash table the interrupted code (an SB-POSIX call) may be filling."
  (let ((n sb-kernel:*free-interrupt-context-index*))
    (and (plusp n)
         (let* ((tls-words (ash (sb-alien:extern-alien "dynamic_values_bytes" (sb-alien:unsigned 32))
                                (- sb-vm:word-shift)))
                (context (sb-vm::current-thread-offset-sap (+ tls-words (1- n))))
                (pc (sb-alien:alien-funcall
                     (sb-alien:extern-alien "os_context_pc"
                                            (function sb-sys:system-area-pointer
                                                      sb-sys:system-area-pointer))
                     context)))
           (not (null (sb-di::code-header-from-pc pc)))))))

(defun interrupt-to-catch ()
  "The interruption of the interrupt test: throw out of whatever store or
restore the worker is in."
  (when (and *throw-allowed* (interrupted-lisp-code-p))
    (throw 'interrupted :interrupted)))

(defparameter *interrupted-datum*
  (loop for i below 40000
        collect (case (mod i 4)
                  (0 (format nil "string ~d" i))
                  (1 (make-array 20 :element-type 'double-float :initial-element (* i 1d0)))
                  (2 (list i (- i) (* i i)))
                  (t (expt 3 (mod i 90)))))
  "Data large enough that a store to a file and a restore take a few
milliseconds, so interruptions land all over them.")

(defun start-interrupted-worker (name function)
  "Start a thread called NAME that calls FUNCTION (with the iteration number)
over and over, at most 100000 times, until the returned stopper is called,
each call in a catch that INTERRUPT-TO-CATCH throws to.  Return the thread
and the stopper.  The thread's value is (:completed N :interrupted M), or
the report of an error that escaped."
  (let* ((stop nil)
         (thread
           (make-test-thread
            (lambda ()
              (handler-case
                  (let ((completed 0) (interrupted 0))
                    (loop for i below 100000
                          until stop
                          do (if (eq :interrupted
                                     (catch 'interrupted
                                       (let ((*throw-allowed* t))
                                         (funcall function i)
                                         :done)))
                                 (incf interrupted)
                                 (incf completed)))
                    (list :completed completed :interrupted interrupted))
                (error (c) (bounded-report c))))
            :name name)))
    (values thread (lambda () (setf stop t)))))

(defun finish-worker (thread stopper)
  "Stop the worker THREAD and wait for it, at most two minutes (then it is
terminated); return its value, or :TIMEOUT."
  (funcall stopper)
  (let ((result (sb-thread:join-thread thread :timeout 120 :default :timeout)))
    (when (eq result :timeout)
      (sb-thread:terminate-thread thread)
      (sb-thread:join-thread thread :timeout 10 :default nil))
    result))

(test interrupted-stores-leave-nothing-behind
  "Two threads store to a file and restore it over and over, one with data
that takes milliseconds, the other with a small datum (where opening and
closing are most of the time); a third restores the small file, replaced
all the while.  Each is interrupted a few hundred times by
INTERRUPT-THREAD with an interruption that throws out of whatever it is
doing, sometimes twice in a row.  Whatever the timing, afterwards: no
descriptor is left open, no temporary file is left, and each file, if
there, holds a whole datum."
  (call-with-temporary-directory
   (lambda (directory)
     (let ((path (merge-pathnames "interrupted.bst" directory))
           (small-path (merge-pathnames "small.bst" directory))
           (data *interrupted-datum*)
           (before (open-descriptors))
           (workers '()))
       ;; once before the interruptions: code run the first time (compiled
       ;; then, as CLOS constructors are) is SBCL's business, not this test's
       (binstore:store small-path 0)
       (binstore:restore small-path)
       (binstore:store path data)
       (binstore:restore path)
       (multiple-value-bind (thread stopper)
           (start-interrupted-worker "interrupted large stores"
                                     (lambda (i)
                                       (declare (ignore i))
                                       (binstore:store path data)
                                       (binstore:restore path)))
         (push (cons thread stopper) workers))
       (multiple-value-bind (thread stopper)
           (start-interrupted-worker "interrupted small stores"
                                     (lambda (i)
                                       (binstore:store small-path i)
                                       (dotimes (j 20)
                                         (binstore:restore small-path))))
         (push (cons thread stopper) workers))
       ;; the small file is replaced meanwhile: each restore finds a whole one
       (multiple-value-bind (thread stopper)
           (start-interrupted-worker "interrupted small restores"
                                     (lambda (i)
                                       (declare (ignore i))
                                       (dotimes (j 100)
                                         (binstore:restore small-path))))
         (push (cons thread stopper) workers))
       ;; A worker is sent interruptions only when it has run all those sent
       ;; before: SBCL runs queued interruptions nested in one another, and
       ;; dies past 8 (a collection that stops the worlds lets them pile up).
       (let ((sent (make-list (length workers) :initial-element 0))
             (ran (loop repeat (length workers) collect (list 0))))
         (loop for round below 300
               do (loop for (thread) in workers
                        for counter in ran
                        for cell on sent
                        when (= (car cell) (car counter))
                          do (loop repeat (if (zerop (mod round 3)) 2 1)
                                   do (handler-case
                                          (progn
                                            (sb-thread:interrupt-thread
                                             thread (let ((counter counter))
                                                      (lambda ()
                                                        (sb-ext:atomic-incf (car counter))
                                                        (interrupt-to-catch))))
                                            (incf (car cell)))
                                        (sb-thread:interrupt-thread-error () nil))))
                  ;; 0.5 to 12 ms, in an order that varies where the next lands
                  (sleep (* 0.0005 (1+ (mod (* round 37) 24))))))
       (dolist (worker workers)
         (let ((result (finish-worker (car worker) (cdr worker))))
           (is (and (consp result) (eq :completed (first result)))
               "a worker did not end normally: ~s" result)))
       (check-no-leaks directory before "after interrupted stores")
       (let ((entries (entry-names directory)))
         (is (subsetp entries '("interrupted.bst" "small.bst") :test #'string=)
             "unexpected files: ~s" entries)
         (when (member "interrupted.bst" entries :test #'string=)
           (check-same data (binstore:restore path) :identity nil))
         (when (member "small.bst" entries :test #'string=)
           (is (integerp (binstore:restore small-path)))))))))
