;;;; The persistent store's benchmark (`make bench-store'), in one run, side
;;;; by side on this machine:
;;;;
;;;;   seed workload   the store made with "hoge" * N under one key, then
;;;;                   1,000 transactions each appending "hoge" to it, for
;;;;                   N = 1,000, 10,000 and 100,000:
;;;;                     Ruby PStore (bench/pstore.rb), default and ultra_safe
;;;;                     binstore, :durability :fsync and :none
;;;;                     the floor: the same 1,000 file replacements of the
;;;;                     same sizes done directly through the platform layer
;;;;                     (write, fsync, rename, fsync of the directory), no
;;;;                     lock, no serialization, no checksum
;;;;   read-only       one read-only transaction on an unchanged 10 MB store,
;;;;                   kept state (the file's header read) and cold (a store
;;;;                   just opened on it: the file read, checked, restored)
;;;;   big commit      a transaction changing one small root of a 100 MB
;;;;                   store (:fsync)
;;;;
;;;; Each figure is the minimum of 5 runs (3 for the 100 MB store), each in
;;;; a fresh directory under /tmp.  Results go to stdout and to
;;;; bench/results/store.md.

(defpackage #:binstore-bench-store
  (:use #:common-lisp)
  (:export #:main))

(in-package #:binstore-bench-store)

(defparameter *seed-sizes* '(1000 10000 100000))
(defparameter *runs* (parse-integer (or (uiop:getenv "RUNS") "5")))
(defparameter *transactions* 1000)

(defun now ()
  "Microseconds on a monotonic clock."
  (binstore::system-microseconds))

(defun call-with-fresh-directory (fn)
  (let ((directory (uiop:ensure-directory-pathname
                    (format nil "/tmp/binstore-bench-store-~36r/" (random (expt 36 8) (make-random-state t))))))
    (ensure-directories-exist directory)
    (unwind-protect (funcall fn directory)
      (uiop:delete-directory-tree directory :validate t :if-does-not-exist :ignore))))

(defun best-of (runs fn)
  "The least value of RUNS calls of FN (each after a full GC), each in a
fresh directory: FN takes the directory and returns microseconds."
  (loop repeat runs
        minimize (progn (sb-ext:gc :full t)
                        (call-with-fresh-directory fn))))

(defun hoge (n)
  (let ((string (make-string (* 4 n))))
    (dotimes (i n string)
      (replace string "hoge" :start1 (* 4 i)))))

;;; The seed workload

(defun seed-binstore (n durability directory)
  "Microseconds of the 1,000 transactions on a binstore store in DIRECTORY."
  (let ((path (merge-pathnames "seed.store" directory)))
    (binstore:with-store (store path :durability durability)
      (binstore:with-transaction (store)
        (setf (binstore:root store "hoge") (hoge n)))
      (let ((start (now)))
        (dotimes (i *transactions*)
          (binstore:with-transaction (store)
            (setf (binstore:root store "hoge")
                  (concatenate 'string (binstore:root store "hoge") "hoge"))))
        (- (now) start)))))

(defun seed-frame-sizes (n)
  "The sizes of the 1,000 files binstore's seed workload writes: header and
payload of each state."
  (loop for i from 1 to *transactions*
        collect (let ((table (binstore::make-root-table)))
                  (setf (gethash "hoge" table) (hoge (+ n i)))
                  (+ binstore::+store-header-bytes+
                     (length (binstore::serialize-roots table))))))

(defun replace-file (directory target octets size)
  "Replace TARGET (a native name in the native DIRECTORY) with the first
SIZE bytes of OCTETS: a temporary file written, fsynced, closed, renamed
over it, and the directory fsynced; straight system calls."
  (let ((temp (concatenate 'string target ".tmp"))
        (flags (logior binstore::+o-wronly+ binstore::+o-creat+ binstore::+o-cloexec+)))
    (let ((fd (binstore::system-open temp flags #o644)))
      (sb-sys:with-pinned-objects (octets)
        (binstore::write-fully fd (sb-sys:sap-int (sb-sys:vector-sap octets)) size))
      (binstore::system-fsync fd)
      (binstore::system-close fd))
    (binstore::system-rename temp target)
    (let ((fd (binstore::system-open directory (logior binstore::+o-rdonly+ binstore::+o-directory+) 0)))
      (binstore::system-fsync fd)
      (binstore::system-close fd))))

(defun seed-floor (sizes octets directory)
  "Microseconds of the floor in DIRECTORY: 1,000 replacements of the file
by the first SIZES bytes of OCTETS."
  (let* ((native (sb-ext:native-namestring directory))
         (target (concatenate 'string native "seed.store")))
    (replace-file native target octets (first sizes))
    (let ((start (now)))
      (dolist (size sizes)
        (replace-file native target octets size))
      (- (now) start))))

(defun copy-root (root)
  "A new string with the characters of ROOT, written by the fastest means
SBCL has (REPLACE on declared strings: a memory copy)."
  (declare (type (simple-array character (*)) root) (optimize speed))
  (replace (make-string (length root)) root))

(defun seed-sbcl-floor (n directory)
  "Microseconds of the in-place floor in DIRECTORY: the least any store that
gives each transaction its own copy of the roots and commits in place
must do on SBCL, for the seed workload's 1,000 transactions.  Each takes
the store's lock, looks at the file (stat) and reads its 56-byte header,
makes the copy of the root (a string of as many characters, written: what
a restore must write), lets the program make its new string from it (the
workload's own CONCATENATE), writes an octet vector as long as the new
state's bytes (what a serializer must write), and writes those bytes then
a header (two pwrite).  No serialization, no restore, no checksum."
  (let* ((native (sb-ext:native-namestring directory))
         (file (concatenate 'string native "seed.store"))
         (lock (concatenate 'string native "seed.store.lock"))
         (header (make-array 56 :element-type '(unsigned-byte 8)))
         (read (make-array 56 :element-type '(unsigned-byte 8)))
         (root (hoge n)))
    (binstore::ensure-lock-file lock file)
    (let ((fd (binstore::system-open file (logior binstore::+o-rdwr+ binstore::+o-creat+
                                                  binstore::+o-cloexec+)
                                     #o644)))
      (unwind-protect
           (let ((start (now)))
             (dotimes (i *transactions*)
               (binstore::call-with-store-lock
                lock :exclusive file
                (lambda ()
                  (binstore::file-status file :follow t)
                  (binstore::system-seek fd 0)
                  (binstore::read-fully fd read 0 56 file)
                  (let* ((copy (copy-root root))
                         (new (concatenate 'string copy "hoge"))
                         (bytes (make-array (+ (length new) 32) :element-type '(unsigned-byte 8)
                                                                 :initial-element 104)))
                    (binstore::write-octets-at fd bytes (if (evenp i) 56 (+ 56 (length bytes) 8)) file)
                    (binstore::write-octets-at fd header 0 file)
                    (setf root new)))))
             (- (now) start))
        (binstore::system-close fd)))))

(defun seed-row (n)
  "The seed workload's figures for N, in milliseconds: PStore, PStore
ultra_safe, binstore :none, binstore :fsync, the floor, the SBCL floor in
place.  The six are measured in turn within each of the *RUNS* rounds, so
that a slow spell of the shared disk hits them alike; the minimum of each
is kept."
  (let* ((sizes (seed-frame-sizes n))
         (octets (make-array (reduce #'max sizes) :element-type '(unsigned-byte 8)
                                                   :initial-element 104))
         (best (make-list 6 :initial-element nil)))
    (dotimes (run *runs*)
      (let* ((ruby (seed-ruby n))
             (figures (list (cdr (assoc "plain" ruby :test #'string=))
                            (cdr (assoc "ultra_safe" ruby :test #'string=))
                            (/ (best-of 1 (lambda (d) (seed-binstore n :none d))) 1000d0)
                            (/ (best-of 1 (lambda (d) (seed-binstore n :fsync d))) 1000d0)
                            (/ (best-of 1 (lambda (d) (seed-floor sizes octets d))) 1000d0)
                            (/ (best-of 1 (lambda (d) (seed-sbcl-floor n d))) 1000d0))))
        (setf best (mapcar (lambda (old new) (if (and old new) (min old new) (or old new)))
                           best figures))))
    (cons n best)))

(defun seed-ruby (n)
  "One run of Ruby PStore's seed workload for N by bench/pstore.rb: an alist
of (mode . milliseconds), modes \"plain\" and \"ultra_safe\"; NIL when ruby
cannot be run."
  (let ((script (asdf:system-relative-pathname "binstore" "bench/pstore.rb")))
    (handler-case
        (let ((output (uiop:run-program (list "ruby" (namestring script) "1" (princ-to-string n))
                                        :output :string :error-output t)))
          (with-input-from-string (in output)
            (loop for line = (read-line in nil)
                  while line
                  collect (let ((words (uiop:split-string line)))
                            (cons (second words)
                                  (let ((*read-default-float-format* 'double-float))
                                    (read-from-string (fourth words))))))))
      (error (condition)
        (format t "~&ruby PStore not measured: ~a~%" condition)
        nil))))

;;; Read-only transactions and a big commit

(defun ten-megabytes ()
  "About 10 MB of stored data: 100,000 strings of 100 characters."
  (loop for i below 100000
        collect (let ((s (make-string 100 :initial-element #\x)))
                  (replace s (princ-to-string i)))))

(defun read-only-times ()
  "Microseconds of one read-only transaction on an unchanged 10 MB store:
with the state kept, and in a store just opened (the open and the first
transaction: read, checked, restored); and the file's size."
  (let ((size 0) (cold 0) (kept 0))
    (setf cold
          (best-of *runs*
                   (lambda (directory)
                     (let ((path (merge-pathnames "ten.store" directory)))
                       (binstore:with-store (store path)
                         (binstore:with-transaction (store)
                           (setf (binstore:root store :data) (ten-megabytes))))
                       (setf size (with-open-file (in path) (file-length in)))
                       (let ((start (now)))
                         (binstore:with-store (store path)
                           (binstore:with-transaction (store :read-only t)
                             (binstore:root store :data)))
                         (- (now) start))))))
    (setf kept
          (best-of 1
                   (lambda (directory)
                     (let ((path (merge-pathnames "ten.store" directory)))
                       (binstore:with-store (store path)
                         (binstore:with-transaction (store)
                           (setf (binstore:root store :data) (ten-megabytes)))
                         (binstore:with-transaction (store :read-only t)
                           (binstore:root store :data))
                         (loop repeat 1000
                               minimize (let ((start (now)))
                                          (binstore:with-transaction (store :read-only t)
                                            (binstore:root store :data))
                                          (- (now) start))))))))
    (values kept cold size)))

(defun big-commit-times ()
  "A transaction changing one small root of a 100 MB store (:fsync), and
its parts measured alone: restoring the transaction's own copy of the
roots, serializing them, comparing with the file's bytes and computing the
CRC32C, and the floor (the durable replacement of a file of that size).
A plist of microseconds, and :SIZE, the file's bytes."
  (let ((size 0) (parts (list :restore nil :serialize nil :compare-crc nil :replace nil)))
    (flet ((note (key start)
             (let ((time (- (now) start)))
               (setf (getf parts key) (min time (or (getf parts key) time))))))
      (let ((total
              (best-of 3
                       (lambda (directory)
                         (let ((path (merge-pathnames "big.store" directory)))
                           (binstore:with-store (store path)
                             (binstore:with-transaction (store)
                               (setf (binstore:root store :big)
                                     (make-array (* 100 1000 1000) :element-type '(unsigned-byte 8)
                                                                   :initial-element 7)
                                     (binstore:root store :small) 0))
                             (setf size (with-open-file (in path) (file-length in)))
                             (sb-ext:gc :full t)
                             (prog1 (let ((start (now)))
                                      (binstore:with-transaction (store)
                                        (incf (binstore:root store :small)))
                                      (- (now) start))
                               (let* ((payload (binstore::snapshot-payload
                                                (binstore::persistent-store-snapshot store)))
                                      (table (let ((start (now)))
                                               (prog1 (binstore::deserialize-roots payload path binstore::+store-header-bytes+)
                                                 (note :restore start))))
                                      (bytes (let ((start (now)))
                                               (prog1 (binstore::serialize-roots table)
                                                 (note :serialize start)))))
                                 (let ((start (now)))
                                   (binstore::octets= bytes payload)
                                   (binstore::crc32c bytes)
                                   (note :compare-crc start))
                                 (let ((native (sb-ext:native-namestring directory))
                                       (start (now)))
                                   (replace-file native (concatenate 'string native "floor")
                                                 bytes (length bytes))
                                   (note :replace start))))))))))
        (list* :total total :size size parts)))))

;;; The report

(defun main ()
  "Run every measurement; print the tables and write bench/results/store.md."
  (let* ((rows (loop for n in *seed-sizes*
                     collect (seed-row n))))
    (multiple-value-bind (kept cold ten-size) (read-only-times)
      (let ((big (big-commit-times)))
        (let ((report
                (with-output-to-string (out)
                  (format out "# Persistent store benchmark (make bench-store)~%~%")
                  (format out "One run, every figure measured side by side on the same machine ~
                               (2 vCPUs, ext4 on virtio, shared with other jobs: noisy). ~
                               Minimum of ~d runs; the five figures of a row are measured in turn within each run.~%~%" *runs*)
                  (format out "## Seed workload: 1,000 transactions appending \"hoge\", ms in all~%~%")
                  (format out "| N | PStore | PStore ultra_safe | binstore :none | binstore :fsync | floor | SBCL floor in place | :none / PStore | :none / SBCL floor | :fsync / floor |~%")
                  (format out "|---|---|---|---|---|---|---|---|---|---|~%")
                  (loop for (n plain ultra none fsync floor sbcl-floor) in rows
                        do (format out "| ~:d | ~@[~,1f~] | ~@[~,1f~] | ~,1f | ~,1f | ~,1f | ~,1f | ~@[~,2f~] | ~,2f | ~,2f |~%"
                                   n plain ultra none fsync floor sbcl-floor
                                   (and plain (/ none plain)) (/ none sbcl-floor) (/ fsync floor)))
                  (format out "~%PStore: Ruby ~a, in place with no fsync (default) or temporary file ~
                               renamed with no fsync (ultra_safe). binstore :none: in place (the payload ~
                               beside the live one, then the header), no fsync. binstore :fsync and the floor: temporary file, fsync, rename, ~
                               fsync of the directory. SBCL floor in place: per transaction, the lock, a stat, ~
                               the header read, the root's copy made and written, the program's new string, an octet ~
                               vector as long as the new state written, two pwrite; no serialization, restore nor checksum ~
                               (doc/STORE.md, \"What a transaction costs\"). SBCL with a heap of ~:d MB (~:d MB allocated ~
                               between collections), each run after a full collection.~%~%"
                          (string-trim '(#\Newline)
                                       (ignore-errors (uiop:run-program '("ruby" "-e" "print RUBY_VERSION")
                                                                        :output :string)))
                          (round (sb-ext:dynamic-space-size) 1000000)
                          (round (sb-ext:bytes-consed-between-gcs) 1000000))
                  (format out "## Other transactions~%~%")
                  (format out "| what | µs |~%|---|---|~%")
                  (format out "| read-only transaction, unchanged ~,1f MB store, state kept (header read only) | ~:d |~%"
                          (/ ten-size 1d6) kept)
                  (format out "| the same in a store just opened (file read, CRC32C checked, roots restored) | ~:d |~%" cold)
                  (format out "| read-write transaction changing one small root of a ~,1f MB store (:fsync) | ~:d |~%"
                          (/ (getf big :size) 1d6) (getf big :total))
                  (format out "| of which, measured alone: restoring the transaction's own copy of the roots | ~:d |~%"
                          (getf big :restore))
                  (format out "| serializing the roots again | ~:d |~%" (getf big :serialize))
                  (format out "| comparing with the file's bytes, and the CRC32C | ~:d |~%" (getf big :compare-crc))
                  (format out "| the floor: a durable replacement of a file that size | ~:d |~%" (getf big :replace))
                  (format out "~%A commit rewrites the whole file: the roots are one object graph in one ~
                               record, so changing one small root costs a restore, a serialization, a ~
                               comparison, a checksum and a durable write of everything.~%"))))
          (write-string report)
          (let ((file (asdf:system-relative-pathname "binstore" "bench/results/store.md")))
            (with-open-file (out file :direction :output :if-exists :supersede)
              (write-string report out))
            (format t "~&Written to ~a~%" (namestring file))))))))
