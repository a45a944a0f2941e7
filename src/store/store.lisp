;;;; The persistent store: the object OPEN-STORE returns, the state it
;;;; keeps of its file between transactions, loading that state and
;;;; committing a new one.  Transactions (transactions.lisp) call these
;;;; with the store's lock held (locks.lisp).
;;;;
;;;; The state of a store file is its payload: the root table, one hash
;;;; table of every root, stored by STORE as one record, so identity and
;;;; sharing between roots survive.  A store keeps the last payload it read
;;;; or wrote, as a SNAPSHOT, for two reasons:
;;;;   - a commit whose new payload equals it byte for byte writes nothing
;;;;     (bytes, not a checksum: two states with one checksum are never
;;;;     taken for one);
;;;;   - a transaction on a file whose header shows the same generation,
;;;;     nonce, length and checksum does not read the file again: a
;;;;     read-only one reuses the roots restored for an earlier one, a
;;;;     read-write one restores its own copy from the kept payload.

(in-package #:binstore)

(defstruct (snapshot (:constructor make-snapshot
                         (generation nonce crc payload
                          &optional (version 0) (offset 0) (size 0) (longest 0)))
                     (:copier nil) (:predicate nil))
  "One committed state of a store file, as read from it or written to it:
its header's GENERATION (0: no file), NONCE and CRC, the PAYLOAD octets,
and ROOTS, the root table restored from them for read-only transactions
\(NIL until one needs it).  A read-write transaction never gets ROOTS: it
restores a copy of its own, which it may change.  VERSION is the file's
format version (0: no file), OFFSET where the payload is in it, SIZE the
file's size and LONGEST the size its header allows: what a commit in place
needs to know."
  (generation 0 :type (unsigned-byte 64) :read-only t)
  (nonce 0 :type (unsigned-byte 32) :read-only t)
  (crc 0 :type (unsigned-byte 32) :read-only t)
  (payload nil :type (simple-array (unsigned-byte 8) (*)) :read-only t)
  (version 0 :type (unsigned-byte 16) :read-only t)
  (offset 0 :type (unsigned-byte 64) :read-only t)
  (size 0 :type (unsigned-byte 64) :read-only t)
  (longest 0 :type (unsigned-byte 64) :read-only t)
  (roots nil))

(defstruct (persistent-store (:constructor %make-persistent-store
                                 (place file lock-file durability read-only))
                             (:copier nil))
  "A persistent store, made by OPEN-STORE: a file holding a table of named
roots, read and changed in transactions (WITH-TRANSACTION)."
  (place nil :read-only t)              ; as given to OPEN-STORE, for messages
  (file "" :type simple-string :read-only t) ; native name, links resolved
  (lock-file "" :type simple-string :read-only t)
  (durability :fsync :type (member :fsync :none) :read-only t)
  (read-only nil :read-only t)
  (open t)
  ;; the last state read or written; replaced whole, never changed in
  ;; place, so threads sharing the store see one state or the other
  (snapshot nil :type (or null snapshot))
  ;; the descriptor of the file, kept between transactions (kept-file.lisp)
  (kept (make-kept-file-cell) :type simple-vector :read-only t))

(defmethod print-object ((store persistent-store) stream)
  (print-unreadable-object (store stream :type t :identity t)
    (format stream "~a~:[ closed~;~]~:[~; read-only~]"
            (persistent-store-file store) (persistent-store-open store)
            (persistent-store-read-only store))))

(defun store-path (store)
  "The file of the persistent store STORE: the path given to OPEN-STORE,
merged with *DEFAULT-PATHNAME-DEFAULTS*."
  (merge-pathnames (persistent-store-place store)))

;;; The root table as bytes --------------------------------------------------

(defun make-root-table ()
  "A new, empty root table: roots are named by keys compared with EQUAL."
  (make-hash-table :test 'equal))

(defun serialize-roots (table)
  "The payload of a store file holding the root table TABLE.  The options
are given, not taken from the special variables, so that a file's format
and its identity and sharing do not depend on the caller's bindings."
  (store nil table :track-references t :support-shared-list-structures t
                   :output-magic-number t :output-end-marker nil
                   :compression nil :max-to-write nil))

(defun deserialize-roots (payload place offset)
  "The root table in PAYLOAD, read from the store file PLACE, where it is at
OFFSET (for the offsets in messages).  Bytes that
are not a root table signal STORE-CORRUPTED (the payload's checksum
matched, so a program other than binstore wrote them)."
  (let ((table (handler-bind ((invalid-input
                                (lambda (condition)
                                  (corrupted place
                                             (+ offset (or (restore-error-offset condition) 0))
                                             (invalid-input-expected condition)
                                             "the payload is not valid binstore data: ~a"
                                             (binstore-error-message condition)))))
                 (restore payload :max-to-read nil :require-header t))))
    (unless (and (hash-table-p table) (eq (format-hash-table-test table) 'equal))
      (corrupted place offset "an EQUAL hash table of roots"
                 "the payload holds ~a, not a root table" (brief table)))
    table))

(defun octets= (a b)
  "Whether the octet vectors A and B hold the same bytes: compared eight at
a time, as a store file of 100 MB is compared at each commit."
  (declare (type (simple-array (unsigned-byte 8) (*)) a b)
           (optimize speed))
  (let ((length (length a)))
    (and (= length (length b))
         (with-pinned-objects (a b)
           (let ((pa (vector-pointer a))
                 (pb (vector-pointer b))
                 (words (floor length 8)))
             (and (loop for i of-type index below (* 8 words) by 8
                        always (= (mem-u64 pa i) (mem-u64 pb i)))
                  (loop for i of-type index from (* 8 words) below length
                        always (= (mem-u8 pa i) (mem-u8 pb i)))))))))

;;; Loading ------------------------------------------------------------------

(defun empty-snapshot (store)
  "The state of STORE's file when it does not exist: no roots."
  (let ((cached (persistent-store-snapshot store)))
    (if (and cached (zerop (snapshot-generation cached)))
        cached
        (setf (persistent-store-snapshot store)
              (make-snapshot 0 0 0 (serialize-roots (make-root-table)))))))

(defun open-store-file (store holder)
  "Open STORE's file for reading, and for writing too unless the store is
read-only or the file may not be written, as a KEPT-FILE put in the CAR of
HOLDER (with interrupts deferred, so that the cleanup that closes it sees
it): NIL, or the errno of a failure."
  (let ((file (persistent-store-file store)))
    (flet ((try (flags)
             (without-interrupts
               (multiple-value-bind (fd errno) (system-open file (logior flags +o-cloexec+) 0)
                 (when fd
                   (setf (car holder) (make-kept-file fd (= flags +o-rdwr+))))
                 errno))))
      (if (persistent-store-read-only store)
          (try +o-rdonly+)
          (let ((errno (try +o-rdwr+)))
            (if (member errno (list +eacces+ +erofs+))
                (try +o-rdonly+)
                errno))))))

(defun load-snapshot (store holder)
  "The state of STORE's file now, to be called with the store's lock held:
the kept SNAPSHOT when the file's header shows the same commit (only the
header is read), else a new one read from the file and checked, which is
kept.  A file that does not exist is a store without roots.  A damaged
file signals STORE-CORRUPTED; one that cannot be read, BINSTORE-FILE-ERROR.
HOLDER is a cons whose CAR is the KEPT-FILE to read through, or NIL: when
it is not open on the file the store's name names now, it is closed, and
the file opened again; either way the CAR is the descriptor the
transaction is to commit through (or NIL when there is no file), which its
caller closes or keeps."
  (let ((file (persistent-store-file store))
        (place (persistent-store-place store))
        (kept (car holder))
        (status nil))
    (when kept
      (setf status (file-status file :follow t))
      (unless (and status (kept-file-names-p kept status))
        (setf status nil)
        (without-interrupts
          (setf (car holder) nil)
          (close-kept-file kept))))
    (unless (car holder)
      (let ((errno (open-store-file store holder)))
        (cond ((eql errno +enoent+)
               (return-from load-snapshot (empty-snapshot store)))
              (errno (errno-fail place errno "cannot open the store file ~a" file)))
        (setf status (multiple-value-bind (status errno) (file-status (kept-file-fd (car holder)))
                       (or status (errno-fail place errno "cannot look at ~a" file))))
        (note-kept-file-identity (car holder) status)))
    (let ((fd (kept-file-fd (car holder)))
          (kind (file-kind status)))
      (unless (eq kind :regular)
        (file-fail place "~a is ~a; a persistent store is a regular file"
                   file (kind-description kind)))
      (multiple-value-bind (ok errno) (system-seek fd 0)
        (unless ok (errno-fail place errno "cannot read the store file")))
      (let ((header (read-store-header fd (file-status-size status) place))
            (cached (persistent-store-snapshot store)))
        (if (and cached
                 (= (snapshot-generation cached) (store-header-generation header))
                 (= (snapshot-nonce cached) (store-header-nonce header))
                 (= (snapshot-crc cached) (store-header-crc header))
                 (= (snapshot-version cached) (store-header-version header))
                 (= (snapshot-offset cached) (store-header-offset header))
                 (= (snapshot-size cached) (file-status-size status))
                 (= (length (snapshot-payload cached)) (store-header-length header)))
            cached
            (setf (persistent-store-snapshot store)
                  (make-snapshot (store-header-generation header)
                                 (store-header-nonce header)
                                 (store-header-crc header)
                                 (read-store-payload fd header place)
                                 (store-header-version header)
                                 (store-header-offset header)
                                 (file-status-size status)
                                 (store-header-longest header))))))))

(defun call-with-store-file (store fn)
  "Call FN with a HOLDER for LOAD-SNAPSHOT and COMMIT-PAYLOAD: a cons whose
CAR is the descriptor STORE kept, taken for this call (or NIL).  However
FN exits, the descriptor in the CAR then is given back to STORE, for the
next transaction."
  (let ((holder (list nil))
        (cell (persistent-store-kept store)))
    (without-interrupts
      (unwind-protect
           (progn
             (setf (car holder) (take-kept-file cell))
             (with-local-interrupts
               (funcall fn holder)))
        (let ((kept (car holder)))
          (when kept
            (setf (car holder) nil)
            (give-back-kept-file cell kept)))))))

(defun snapshot-shared-roots (snapshot place)
  "The root table of SNAPSHOT shared by read-only transactions: restored
the first time one asks, then kept with the snapshot."
  (or (snapshot-roots snapshot)
      (setf (snapshot-roots snapshot)
            (deserialize-roots (snapshot-payload snapshot) place (snapshot-offset snapshot)))))

;;; Committing ---------------------------------------------------------------

(define-global **nonce-counter** (list 0)
  "Counts the commits of this process (in its CAR), mixed into their nonces.")

(defun commit-nonce ()
  "A 32-bit number that differs, with near certainty, from one commit to
the next, across processes (forked ones too, which share a random state):
the CRC32C of the process id, a counter and the clock."
  (let ((seed (make-array 24 :element-type '(unsigned-byte 8))))
    ;; the bytes of the numbers, not their printed forms: FORMAT took 2 µs
    (setf (octets-le seed 0 4) (ldb (byte 32 0) (process-id))
          (octets-le seed 4 8) (ldb (byte 64 0) (atomic-incf (car **nonce-counter**)))
          (octets-le seed 12 8) (ldb (byte 64 0) (system-microseconds))
          (octets-le seed 20 4) (ldb (byte 32 0) (get-universal-time)))
    (crc32c seed)))

(defun in-place-offset (snapshot length)
  "Where a commit in place puts a payload of LENGTH bytes in the file whose
state is SNAPSHOT: just after the header when it fits before the live
payload, else just after the live payload.  Either way it overlaps no
byte of the live payload nor of the header."
  (let ((live (snapshot-offset snapshot)))
    (if (<= (+ +store-header-bytes+ length) live)
        +store-header-bytes+
        (+ live (length (snapshot-payload snapshot))))))

(defun in-place-file-size (old-size end)
  "The size a store file of OLD-SIZE bytes is left at by a commit in place
whose payload ends at END: cut to END only when the file is more than four
times that, else as it is (or END, when that is longer).  Bytes past the
payload belong to no state, but cutting them at every commit cost a
truncation and, at the next commit past the end, new blocks (the cycle of
three places a growing payload takes, IN-PLACE-OFFSET, reaches about three
payloads); so they are kept while they are at most three quarters of
the file."
  (if (> old-size (* 4 end))
      end
      (max old-size end)))

(defun commit-payload (store snapshot payload holder)
  "Make PAYLOAD the state of STORE's file, whose state is SNAPSHOT, unless
it equals SNAPSHOT's payload byte for byte; to be called with the store's
exclusive lock held, HOLDER's CAR the descriptor LOAD-SNAPSHOT left there
\(closed here when the commit replaces the file).  Returns true when it
wrote.  A failure signals, leaving the file as it was.

With durability :FSYNC the file is replaced atomically: a new file in the
same directory, synced, renamed over it, the directory synced; its header
allows no byte past the payload.  With :NONE the commit is made in place
\(WRITE-STORE-IN-PLACE): no new file, no sync, which a killed process
cannot tear but a power cut may lose.  A commit in place may leave bytes
past the payload (when it fails, or is killed, while writing past the
end), so it is made only in a file whose header allows any length; the
first commit with :NONE to a file without one (or to no file) replaces the
file, unsynced, with one whose header does."
  (unless (octets= payload (snapshot-payload snapshot))
    (let ((generation (1+ (snapshot-generation snapshot)))
          (nonce (commit-nonce))
          (file (persistent-store-file store))
          (place (persistent-store-place store)))
      (if (and (eq (persistent-store-durability store) :none)
               (= (snapshot-version snapshot) +store-version+)
               (= (snapshot-longest snapshot) +any-file-length+))
          (let* ((offset (in-place-offset snapshot (length payload)))
                 (end (+ offset (length payload)))
                 (size (in-place-file-size (snapshot-size snapshot) end))
                 ;; any length: a commit in place that fails or is killed
                 ;; while writing its payload past the end leaves the file
                 ;; longer, with this state intact
                 (header (encode-store-header generation nonce offset payload
                                              +any-file-length+)))
            (flet ((write-in-place (fd errno)
                     (when errno
                       (errno-fail place errno "cannot open the store file ~a" file))
                     (write-store-in-place fd header payload offset size
                                           (snapshot-size snapshot) place)))
              (let ((kept (car holder)))
                (if (and kept (kept-file-writable kept))
                    (write-in-place (kept-file-fd kept) nil)
                    (call-with-open-fd file (logior +o-wronly+ +o-cloexec+)
                                       #'write-in-place))))
            (setf (persistent-store-snapshot store)
                  (make-snapshot generation nonce (header-payload-crc header) payload
                                 +store-version+ offset size +any-file-length+)))
          (let* ((end (+ +store-header-bytes+ (length payload)))
                 (longest (if (eq (persistent-store-durability store) :none) +any-file-length+ end))
                 (header (encode-store-header generation nonce +store-header-bytes+ payload
                                              longest)))
            (call-with-atomic-file-output file
                                          (lambda (fd) (write-store-frame fd header payload))
                                          :place place
                                          :sync (eq (persistent-store-durability store) :fsync))
            ;; the name now names the new file: the descriptor is on the old one
            (let ((kept (car holder)))
              (when kept
                (without-interrupts
                  (setf (car holder) nil)
                  (close-kept-file kept))))
            (setf (persistent-store-snapshot store)
                  (make-snapshot generation nonce (header-payload-crc header) payload
                                 +store-version+ +store-header-bytes+ end longest))))
      t)))

;;; Opening and closing ------------------------------------------------------

(defun open-store (path &key (durability :fsync) read-only)
  "Open the persistent store in the file PATH (a string or pathname) and
return it, a PERSISTENT-STORE.  The file need not exist: a store without
roots, created by its first commit that sets one.  When it exists it is
read and checked now: a file that is not a store, of a newer version, or
damaged signals STORE-CORRUPTED; one that cannot be used (a directory, a
missing directory) signals BINSTORE-FILE-ERROR.  A symbolic link is
followed, once, here, and its final target is the file (a commit replaces
the target; the link stays).

DURABILITY is :FSYNC (the default) or :NONE.  With :FSYNC a commit syncs
the new file and its directory before it returns, so it survives a power
cut; with :NONE it does not, so it survives the process's crash but a
power cut may lose recent commits (never mix two states).  READ-ONLY true
makes every transaction read-only (a shared lock; writing signals
TRANSACTION-ERROR).

The lock file PATH.lock is created beside the file (the target of a link)
and kept: it is what processes lock (see WITH-TRANSACTION)."
  (unless (member durability '(:fsync :none))
    (error 'binstore-error
           :message (format nil "~s is not a durability: :fsync or :none" durability)))
  (multiple-value-bind (native) (place-native-namestring path)
    (multiple-value-bind (target status) (resolve-file-target native path)
      (when (and status (not (eq (file-kind status) :regular)))
        (file-fail path "~a is ~a; a persistent store is a regular file"
                   target (kind-description (file-kind status))))
      (let ((store (%make-persistent-store path target
                                           (coerce (concatenate 'string target ".lock")
                                                   'simple-string)
                                           durability (and read-only t))))
        (close-kept-file-when-collected store (persistent-store-kept store))
        (call-with-store-lock (persistent-store-lock-file store) :shared path
                              (lambda ()
                                (call-with-store-file store
                                                      (lambda (holder)
                                                        (load-snapshot store holder)))))
        store))))
