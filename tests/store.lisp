;;;; The persistent store (src/store/): transactions and roots, identity
;;;; across roots and commits, unchanged commits writing nothing, the
;;;; checksum, damaged and foreign files, failures leaving the file as it
;;;; was, locking between processes, and writers killed mid-commit (the
;;;; program is tests/store-faults.lisp).

(in-package #:binstore-tests)

(def-suite persistent-store :in all
  :description "OPEN-STORE and WITH-TRANSACTION: roots, commits, aborts,
damage, locks, killed writers.")
(in-suite persistent-store)

;;; Helpers

(defun call-with-store-file (function)
  "Call FUNCTION with the path of a store file (not yet existing) in a fresh
temporary directory, and the directory; the directory is deleted after."
  (call-with-temporary-directory
   (lambda (directory)
     (funcall function (merge-pathnames "test.store" directory) directory))))

(defmacro with-store-file ((path &optional (directory (gensym "DIRECTORY"))) &body body)
  `(call-with-store-file (lambda (,path ,directory)
                           (declare (ignorable ,directory))
                           ,@body)))

(defun put-roots (path &rest keys-and-values)
  "Commit the roots KEYS-AND-VALUES (a plist) to the store PATH."
  (binstore:with-store (store path)
    (binstore:with-transaction (store)
      (loop for (key value) on keys-and-values by #'cddr
            do (setf (binstore:root store key) value)))))

(defun put-file-octets (path octets)
  "Make OCTETS the bytes of the file PATH, in place, as damage would."
  (with-open-file (out path :direction :output :element-type '(unsigned-byte 8)
                            :if-exists :overwrite :if-does-not-exist :create)
    (write-sequence octets out)
    ;; :overwrite keeps the old length: cut what is past the new end
    (finish-output out))
  (sb-posix:truncate (native-file-name path) (length octets))
  path)

(defun file-inode (path)
  (sb-posix:stat-ino (sb-posix:stat (native-file-name path))))

(defun corruption-of (thunk)
  "The STORE-CORRUPTED THUNK signals, or NIL when it signals none."
  (handler-case (progn (funcall thunk) nil)
    (binstore:store-corrupted (condition) condition)))

(defun bit-crc32c (octets)
  "CRC32C one bit at a time, straight from its definition: the reference
the table-driven one is checked against."
  (let ((crc #xFFFFFFFF))
    (loop for octet across octets
          do (setf crc (logxor crc octet))
             (dotimes (bit 8)
               (setf crc (if (logbitp 0 crc)
                             (logxor (ash crc -1) #x82F63B78)
                             (ash crc -1)))))
    (logxor crc #xFFFFFFFF)))

;;; The checksum

(defun call-with-crc32c-tables-only (function)
  "Call FUNCTION with the CRC32 instruction taken for absent, so that
CRC32C runs on its tables alone."
  (let ((known binstore::**crc32c-instruction**))
    (setf binstore::**crc32c-instruction** nil)
    (unwind-protect (funcall function)
      (setf binstore::**crc32c-instruction** known))))

(defun check-crc32c-values ()
  "The checks of CRC32C-KNOWN-VALUES, with CRC32C as it is now."
  (flet ((crc (octets) (binstore::crc32c (coerce octets '(simple-array (unsigned-byte 8) (*))))))
    (is (= #xE3069283 (crc (map 'vector #'char-code "123456789"))))
    (is (= 0 (crc #())))
    (is (= #x8A9136AA (crc (make-array 32 :initial-element 0))))
    (is (= #x62A8AB43 (crc (make-array 32 :initial-element #xFF))))
    (is (= #x46DD794E (crc (coerce (loop for i below 32 collect i) 'vector))))
    (let ((random (make-random-state t)))
      (loop for length from 0 to 40
            do (let ((octets (coerce (loop repeat length collect (random 256 random))
                                     '(simple-array (unsigned-byte 8) (*)))))
                 (is (= (bit-crc32c octets) (binstore::crc32c octets))
                     "length ~d" length)
                 (when (> length 4)
                   (is (= (bit-crc32c (subseq octets 3 (- length 1)))
                          (binstore::crc32c octets :start 3 :end (- length 1))))))))))

(test crc32c-known-values
  "CRC32C against published values (RFC 3720 B.4 and the usual check
value) and against a bitwise CRC on every length up to 40 and random data,
both through the processor's CRC32 instruction (where it has one) and
through the tables alone; and the two agree on a long random vector at
every start and end within its first and last words."
  (check-crc32c-values)
  (call-with-crc32c-tables-only #'check-crc32c-values)
  (let* ((random (make-random-state t))
         (octets (coerce (loop repeat 10000 collect (random 256 random))
                         '(simple-array (unsigned-byte 8) (*)))))
    (loop for start below 9
          do (loop for end from (- 10000 9) to 10000
                   do (is (= (binstore::crc32c octets :start start :end end)
                             (call-with-crc32c-tables-only
                              (lambda () (binstore::crc32c octets :start start :end end)))))))))

(test crc32c-in-three-lanes
  "Inputs long enough for CRC32C's stripes of three lanes (three times
+CRC32C-LANE-BYTES+ and more), at lengths just under, at and over a whole
number of stripes and from unaligned starts, give what the tables alone
and the bitwise CRC give."
  (let* ((random (make-random-state t))
         (lane binstore::+crc32c-lane-bytes+)
         (octets (coerce (loop repeat (+ (* 7 lane) 64) collect (random 256 random))
                         '(simple-array (unsigned-byte 8) (*)))))
    (dolist (length (list (1- (* 3 lane)) (* 3 lane) (1+ (* 3 lane)) (+ (* 3 lane) 8)
                          (* 6 lane) (+ (* 6 lane) 13) (+ (* 7 lane) 57)))
      (dolist (start '(0 1 5))
        (let ((end (+ start length)))
          (is (= (call-with-crc32c-tables-only
                  (lambda () (binstore::crc32c octets :start start :end end)))
                 (binstore::crc32c octets :start start :end end))
              "length ~d from ~d" length start)
          (is (= (bit-crc32c (subseq octets start end))
                 (binstore::crc32c octets :start start :end end))
              "length ~d from ~d, bitwise" length start))))))

;;; Roots and transactions

(test roots-round-trip
  "Roots of many kinds come back equal from a store opened afresh; a missing
root gives the default and NIL; ROOT-KEYS lists the keys; DELETE-ROOT
removes one; INCF works on a root."
  (with-store-file (path)
    (let ((values (list 42 -7/3 1.5d0 "a string" #\x :keyword '(1 (2 3) #(4 5))
                        (make-array 3 :element-type '(unsigned-byte 8) :initial-contents '(1 2 3))
                        (let ((h (make-hash-table :test 'equal)))
                          (setf (gethash "k" h) '(v)) h))))
      (binstore:with-store (store path)
        (binstore:with-transaction (store)
          (loop for value in values
                for i from 0
                do (setf (binstore:root store (format nil "root ~d" i)) value))
          (setf (binstore:root store :gone) 1
                (binstore:root store '(:a list key)) :listed)))
      (binstore:with-store (store path)
        (binstore:with-transaction (store)
          (is (eq t (binstore:delete-root store :gone)))
          (is (eq nil (binstore:delete-root store :never)))
          (incf (binstore:root store :count 10))
          (incf (binstore:root store :count 10))))
      (binstore:with-store (store path)
        (binstore:with-transaction (store :read-only t)
          (loop for value in values
                for i from 0
                do (is (same-data-p value (binstore:root store (format nil "root ~d" i)))
                       "root ~d" i))
          (is (equal '(:default nil)
                     (multiple-value-list (binstore:root store :gone :default))))
          (is (equal '(:listed t) (multiple-value-list (binstore:root store (list :a 'list 'key)))))
          (is (= 12 (binstore:root store :count)))
          (is (= (+ (length values) 2) (length (binstore:root-keys store))))
          (is (member :count (binstore:root-keys store))))))))

(test identity-across-roots
  "One object under two roots, and a circular list, are one object after
commits, across a store opened afresh, and after a later commit that
changed another root."
  (with-store-file (path)
    (let* ((shared (list "shared" 1 2))
           (circle (list 1 2 3)))
      (setf (cdr (last circle)) circle)
      (put-roots path :a shared :b (vector shared shared) :circle circle)
      (put-roots path :other 1)
      (binstore:with-store (store path)
        (binstore:with-transaction (store :read-only t)
          (let ((a (binstore:root store :a))
                (b (binstore:root store :b))
                (c (binstore:root store :circle)))
            (is (equal shared a))
            (is (eq a (aref b 0)))
            (is (eq a (aref b 1)))
            (is (eq c (cdddr c)))
            (is (= 1 (binstore:root store :other)))))))))

(test non-local-exits-abort
  "An error, a THROW and ABORT-TRANSACTION leave the file byte for byte as
it was, and the roots unchanged, even when the body changed a root's
contents in place; COMMIT-TRANSACTION commits and returns NIL; a normal
exit returns the body's values."
  (with-store-file (path)
    (put-roots path :list (list 1 2 3) :n 1)
    (let ((before (file-octets path)))
      (binstore:with-store (store path)
        (signals error
          (binstore:with-transaction (store)
            (setf (binstore:root store :n) 2)
            (setf (car (binstore:root store :list)) :changed)
            (error "leave")))
        (is (eq :thrown
                (catch :out
                  (binstore:with-transaction (store)
                    (setf (binstore:root store :n) 3)
                    (throw :out :thrown)))))
        (is (null (binstore:with-transaction (store)
                    (setf (binstore:root store :n) 4)
                    (binstore:abort-transaction store)
                    (error "not reached"))))
        (is (equalp before (file-octets path)))
        (is (equal '((1 2 3) 1)
                   (binstore:with-transaction (store :read-only t)
                     (list (binstore:root store :list) (binstore:root store :n)))))
        (is (null (binstore:with-transaction (store)
                    (setf (binstore:root store :n) 5)
                    (binstore:commit-transaction store)
                    (error "not reached"))))
        (is (equal '(5 :second)
                   (multiple-value-list
                    (binstore:with-transaction (store :read-only t)
                      (values (binstore:root store :n) :second)))))))))

(test unchanged-commits-write-nothing
  "A read-write transaction that changes nothing, or sets a root to an equal
value, leaves the file alone: same inode, same bytes.  A transaction on a
file that does not exist and sets nothing creates none."
  (with-store-file (path)
    (binstore:with-store (store path)
      (binstore:with-transaction (store)
        (binstore:root-keys store))
      (is (null (probe-file path)))
      (binstore:with-transaction (store)
        (setf (binstore:root store :a) (list 1 "two")))
      (let ((inode (file-inode path))
            (bytes (file-octets path)))
        (binstore:with-transaction (store)
          (binstore:root store :a))
        (binstore:with-transaction (store)
          (setf (binstore:root store :a) (list 1 "two")))
        (is (= inode (file-inode path)))
        (is (equalp bytes (file-octets path)))
        (binstore:with-transaction (store)
          (setf (binstore:root store :a) (list 1 "three")))
        (is (/= inode (file-inode path)))))))

(test read-only-transactions-reuse-roots
  "Two read-only transactions on an unchanged file get the same root
objects (the file is not read again); after another store object commits,
the next one sees the new state."
  (with-store-file (path)
    (put-roots path :a (list 1 2))
    (binstore:with-store (reader path)
      (let ((first (binstore:with-transaction (reader :read-only t) (binstore:root reader :a)))
            (second (binstore:with-transaction (reader :read-only t) (binstore:root reader :a))))
        (is (eq first second))
        (put-roots path :a (list 3 4))
        (let ((third (binstore:with-transaction (reader :read-only t) (binstore:root reader :a))))
          (is (equal '(3 4) third))
          (is (not (eq first third))))))))

(test misuse-signals-transaction-error
  "Roots outside a transaction, nested transactions (on one store object or
two of one file), writes in a read-only transaction or store, and a closed
store signal TRANSACTION-ERROR, a STORE-ERROR, naming the store's file."
  (with-store-file (path)
    (put-roots path :a 1)
    (binstore:with-store (store path)
      (flet ((misuse (thunk)
               (handler-case (progn (funcall thunk) nil)
                 (binstore:transaction-error (condition) condition))))
        (dolist (thunk (list (lambda () (binstore:root store :a))
                             (lambda () (setf (binstore:root store :a) 2))
                             (lambda () (binstore:root-keys store))
                             (lambda () (binstore:delete-root store :a))
                             (lambda () (binstore:commit-transaction store))
                             (lambda () (binstore:abort-transaction store))
                             (lambda () (binstore:with-transaction (store)
                                          (binstore:with-transaction (store :read-only t))))
                             (lambda () (binstore:with-transaction (store :read-only t)
                                          (setf (binstore:root store :a) 2)))
                             (lambda () (binstore:with-transaction (store :read-only t)
                                          (binstore:delete-root store :a)))
                             (lambda () (binstore:with-store (other path)
                                          (binstore:with-transaction (store)
                                            (binstore:with-transaction (other)))))
                             (lambda () (binstore:with-store (other path :read-only t)
                                          (binstore:with-transaction (other)
                                            (setf (binstore:root other :a) 2))))))
          (let ((condition (misuse thunk)))
            (is (typep condition 'binstore:store-error))
            (is (typep condition 'binstore:binstore-error))
            (when condition
              (is (equal path (binstore:transaction-error-place condition)))
              (is (search (namestring path) (princ-to-string condition)))))))
      (is (= 1 (binstore:with-transaction (store :read-only t) (binstore:root store :a)))))
    (let ((store (binstore:open-store path)))
      (binstore:close-store store)
      (signals binstore:transaction-error
        (binstore:with-transaction (store :read-only t))))
    (signals binstore:binstore-error (binstore:open-store path :durability :sometimes))))

(test durability-none-commits
  ":DURABILITY :NONE commits the same file a :FSYNC store reads."
  (with-store-file (path)
    (binstore:with-store (store path :durability :none)
      (binstore:with-transaction (store)
        (setf (binstore:root store :a) "quick")))
    (binstore:with-store (store path)
      (is (equal "quick" (binstore:with-transaction (store) (binstore:root store :a)))))))

(defun le-field (octets offset bytes)
  "The little-endian unsigned integer of BYTES bytes at OFFSET in OCTETS."
  (loop for k below bytes sum (ash (aref octets (+ offset k)) (* 8 k))))

(test commits-in-place
  "With :DURABILITY :NONE the first commit to a file written with :FSYNC
replaces it with one whose header allows commits in place; the next ones
are made in place: the file keeps its inode, the payload alternates
between just after the header and just after the live one, the file is
never more than four times as long as the payload's end (it is cut when
it would be, after a large state gives way to a small one), and every
state is read by another store."
  (with-store-file (path)
    (put-roots path :a "x")
    (let ((inode nil)
          (offsets '()))
      (binstore:with-store (store path :durability :none)
        (binstore:with-transaction (store)
          (setf (binstore:root store :a) "first"))
        (is (= #xFFFFFFFFFFFFFFFF (le-field (file-octets path) 40 8)))
        (setf inode (file-inode path))
        (loop for i from 0 below 8
              for length = (+ 1000 (* 10 i))
              do (binstore:with-transaction (store)
                   (setf (binstore:root store :a) (make-string length :initial-element #\y)))
                 (let ((octets (file-octets path)))
                   (push (le-field octets 24 8) offsets)
                   (is (= 2 (le-field octets 8 2)))
                   (is (<= (length octets)
                           (* 4 (+ (le-field octets 24 8) (le-field octets 32 8))))))
                 (is (= inode (file-inode path)))
                 (binstore:with-store (other path :read-only t)
                   (is (= length (length (binstore:with-transaction (other)
                                           (binstore:root other :a))))))))
      (is (member 56 offsets))
      (is (find-if (lambda (offset) (> offset 56)) offsets))
      ;; a large state, then a small one: the file is cut to the small
      ;; one's end once it is more than four times that
      (binstore:with-store (store path :durability :none)
        (binstore:with-transaction (store)
          (setf (binstore:root store :a) (make-string 50000 :initial-element #\l)))
        (is (< 50000 (length (file-octets path))))
        (dotimes (i 2)
          (binstore:with-transaction (store)
            (setf (binstore:root store :a) (format nil "small ~d" i))))
        (let ((octets (file-octets path)))
          (is (< (length octets) 1000))
          (is (= (length octets) (+ (le-field octets 24 8) (le-field octets 32 8))))
          (is (= inode (file-inode path)))))
      ;; a commit with :FSYNC makes the file whole again: payload at 56,
      ;; the file exactly as long as header and payload
      (put-roots path :a "z")
      (let ((octets (file-octets path)))
        (is (= 56 (le-field octets 24 8)))
        (is (= (length octets) (+ 56 (le-field octets 32 8)) (le-field octets 40 8)))))))

(test interrupted-commit-in-place
  "A commit in place whose payload write fails (a full disk) leaves the
state as it was, though the file may be longer; the store goes on, and a
store opened afresh reads the file."
  (with-store-file (path)
    (put-roots path :a (make-string 3000 :initial-element #\x))
    (binstore:with-store (store path :durability :none)
      (let ((binstore::*commit-write-fault*
              (lambda ()
                (error 'binstore:store-error :message "write failed: No space left on device"))))
        (dotimes (i 2)
          (signals binstore:store-error
            (binstore:with-transaction (store)
              (setf (binstore:root store :a) (make-string (+ 4000 i) :initial-element #\n))))))
      (is (= 3000 (length (binstore:with-transaction (store) (binstore:root store :a)))))
      (binstore:with-store (other path)
        (is (= 3000 (length (binstore:with-transaction (other) (binstore:root other :a))))))
      (binstore:with-transaction (store)
        (setf (binstore:root store :a) "new"))
      (binstore:with-store (other path)
        (is (equal "new" (binstore:with-transaction (other) (binstore:root other :a))))))))

(test version-1-files
  "A version 1 file (a 40-byte header, the payload at 40) is read, and its
first commit, even with :DURABILITY :NONE, writes a whole version 2 file."
  (with-store-file (path)
    (let* ((table (let ((table (make-hash-table :test 'equal)))
                    (setf (gethash :a table) "old format")
                    table))
           (payload (binstore::serialize-roots table))
           (header (make-array 40 :element-type '(unsigned-byte 8) :initial-element 0)))
      (replace header #(#x89 #x42 #x53 #x54 #x4F #x52 #x45 #x0A))
      (flet ((put (value offset bytes)
               (dotimes (k bytes) (setf (aref header (+ offset k)) (ldb (byte 8 (* 8 k)) value)))))
        (put 1 8 2) (put 40 10 2) (put 12345 12 4) (put 7 16 8) (put (length payload) 24 8)
        (put (bit-crc32c payload) 32 4)
        (put (bit-crc32c (subseq header 0 36)) 36 4))
      (put-file-octets path (concatenate '(vector (unsigned-byte 8)) header payload))
      (binstore:with-store (store path :durability :none)
        (is (equal "old format" (binstore:with-transaction (store) (binstore:root store :a))))
        (binstore:with-transaction (store)
          (setf (binstore:root store :b) 2)))
      (let ((octets (file-octets path)))
        (is (= 2 (le-field octets 8 2)))
        (is (= 8 (le-field octets 16 8))))
      (binstore:with-store (store path)
        (is (equal '("old format" 2)
                   (binstore:with-transaction (store)
                     (list (binstore:root store :a) (binstore:root store :b)))))))))

(test symbolic-link-followed
  "A store opened through a symbolic link replaces the link's target; the
link stays a link, and the lock file is beside the target."
  (with-store-file (path directory)
    (let ((link (merge-pathnames "link.store" directory)))
      (sb-posix:symlink "test.store" (native-file-name link))
      (put-roots link :a 1)
      (is (eq :symlink (binstore::file-kind (binstore::file-status (native-file-name link)))))
      (is (probe-file (merge-pathnames "test.store.lock" directory)))
      (binstore:with-store (store path)
        (is (= 1 (binstore:with-transaction (store) (binstore:root store :a))))))))

;;; Damaged and foreign files

(test damaged-files-signal-store-corrupted
  "Every single-bit flip of a store file, every cut, bytes appended, and an
empty file signal STORE-CORRUPTED naming the file and an offset inside it,
whether found when the store is opened or by a later transaction; never a
value."
  (with-store-file (path)
    (put-roots path :a (list "some text" 12345) :b #(1 2 3))
    (let* ((good (file-octets path))
           (size (length good))
           (problems 0))
      (flet ((check (octets what)
               (put-file-octets path octets)
               (let ((condition (corruption-of (lambda () (binstore:open-store path)))))
                 (unless (and condition
                              (equal path (file-error-pathname condition))
                              (<= 0 (binstore:store-corrupted-offset condition) size))
                   (incf problems)
                   (when (<= problems 5)
                     (fail "~a: ~a" what (or condition "no STORE-CORRUPTED")))))))
        (dotimes (i size)
          (dolist (bit '(0 3 7))
            (let ((octets (copy-seq good)))
              (setf (aref octets i) (logxor (aref octets i) (ash 1 bit)))
              (check octets (format nil "bit ~d of byte ~d flipped" bit i)))))
        (dotimes (cut size)
          (check (subseq good 0 cut) (format nil "cut at ~d" cut)))
        (check (concatenate '(vector (unsigned-byte 8)) good #(0)) "a byte appended"))
      (is (zerop problems) "~d damaged files not reported" problems)
      ;; found by a transaction of a store opened before: another store
      ;; committed, and that new file is damaged.  (Damage done in place to
      ;; the very file a store last read, its header intact, is not looked
      ;; for: the store keeps that state's bytes and goes on from them.)
      (put-file-octets path good)
      (binstore:with-store (store path)
        (put-roots path :c 3)
        (let ((octets (file-octets path)))
          (setf (aref octets (1- (length octets))) (logxor 1 (aref octets (1- (length octets)))))
          (put-file-octets path octets)
          (let ((condition (corruption-of (lambda () (binstore:with-transaction (store :read-only t))))))
            (is (typep condition 'binstore:store-corrupted))
            (is (typep condition 'file-error))
            (is (eql binstore::+store-header-bytes+ (and condition (binstore:store-corrupted-offset condition)))))
          ;; and a write transaction writes nothing over it
          (signals binstore:store-corrupted
            (binstore:with-transaction (store) (setf (binstore:root store :a) 1)))
          (is (equalp octets (file-octets path))))))))

(test foreign-and-newer-files
  "A file that is not a store, a store of a newer format version, and a
directory are refused with clear conditions, and left as they were."
  (with-store-file (path directory)
    (let ((text (map '(vector (unsigned-byte 8)) #'char-code "just some text, not a store")))
      (put-file-octets path text)
      (let ((condition (corruption-of (lambda () (binstore:open-store path)))))
        (is (eql 0 (binstore:store-corrupted-offset condition)))
        (is (search "not a store file" (princ-to-string condition)))
        (is (search "89 42 53 54 4F 52 45 0A" (binstore:store-corrupted-expected condition))))
      (is (equalp text (file-octets path)))
      ;; nor written over
      (signals binstore:store-corrupted (put-roots path :a 1))
      (is (equalp text (file-octets path))))
    (delete-file path)
    (put-roots path :a 1)
    (let ((newer (file-octets path)))
      (setf (aref newer 8) 3)
      (put-file-octets path newer)
      (let ((condition (corruption-of (lambda () (binstore:open-store path)))))
        (is (eql 8 (binstore:store-corrupted-offset condition)))
        (is (search "version 3, newer" (princ-to-string condition))))
      (is (equalp newer (file-octets path))))
    (put-file-octets path #())
    (is (search "empty" (princ-to-string (corruption-of (lambda () (binstore:open-store path))))))
    (signals binstore:binstore-file-error (binstore:open-store directory))
    (let ((condition (handler-case (binstore:open-store (merge-pathnames "sub/x.store" directory))
                       (binstore:binstore-file-error (c) c))))
      (is (typep condition 'binstore:binstore-file-error)))))

(test unusable-directory
  "A store under a path whose directory part is a regular file (ENOTDIR:
what an unwritable directory is for root, whom permissions do not stop)
signals BINSTORE-FILE-ERROR naming the place."
  (with-store-file (path directory)
    (put-roots path :a 1)
    (let* ((place (merge-pathnames "test.store/inner.store" directory))
           (condition (handler-case (binstore:open-store place)
                        (binstore:binstore-file-error (c) c))))
      (is (typep condition 'binstore:binstore-file-error))
      (is (equal place (and condition (file-error-pathname condition)))))))

(test failed-write-leaves-the-old-state
  "A commit whose write fails (a full disk, injected between the header
and the payload) signals STORE-ERROR, leaves the file byte for byte as it
was and no temporary file, and the store goes on working."
  (with-store-file (path directory)
    (put-roots path :a (make-string 5000 :initial-element #\x))
    (let ((before (file-octets path)))
      (binstore:with-store (store path)
        (let ((binstore::*commit-write-fault*
                (lambda ()
                  (error 'binstore:store-error :message "write failed: No space left on device"))))
          (signals binstore:store-error
            (binstore:with-transaction (store)
              (setf (binstore:root store :a) "new"))))
        (is (equalp before (file-octets path)))
        (is (null (temporary-files directory)))
        (is (= 5000 (length (binstore:with-transaction (store) (binstore:root store :a)))))
        (binstore:with-transaction (store)
          (setf (binstore:root store :a) "new"))
        (is (equal "new" (binstore:with-transaction (store) (binstore:root store :a))))))))

(test unstorable-root-aborts
  "A root that cannot be stored makes the commit signal UNSTORABLE-OBJECT,
and the file keeps its old bytes."
  (with-store-file (path)
    (put-roots path :a 1)
    (let ((before (file-octets path)))
      (binstore:with-store (store path)
        (signals binstore:unstorable-object
          (binstore:with-transaction (store)
            (setf (binstore:root store :f) #'car))))
      (is (equalp before (file-octets path))))))

;;; Threads and processes

(test threads-share-a-store
  "Two threads incrementing a root through one store object, and a third
through its own, lose no increment."
  (with-store-file (path)
    (binstore:with-store (store path :durability :none)
      (binstore:with-store (other path :durability :none)
        (let ((threads (list (make-test-thread
                              (lambda () (dotimes (i 100)
                                           (binstore:with-transaction (store)
                                             (incf (binstore:root store :n 0))))))
                             (make-test-thread
                              (lambda () (dotimes (i 100)
                                           (binstore:with-transaction (store)
                                             (incf (binstore:root store :n 0))))))
                             (make-test-thread
                              (lambda () (dotimes (i 100)
                                           (binstore:with-transaction (other)
                                             (incf (binstore:root other :n 0)))))))))
          (mapc #'join-test-thread threads)
          (is (= 300 (binstore:with-transaction (store :read-only t)
                       (binstore:root store :n)))))))))

(test kept-descriptor-follows-the-file
  "A store keeps its file's descriptor between transactions, and leaves it
when the name names another file: one replaced by another store's :FSYNC
commit, removed, or made again."
  (with-store-file (path)
    (binstore:with-store (kept path :durability :none)
      (binstore:with-store (other path :durability :fsync)
        (binstore:with-transaction (kept) (setf (binstore:root kept :n) 1))
        (binstore:with-transaction (kept) (incf (binstore:root kept :n)))
        ;; a rename over the file
        (binstore:with-transaction (other) (incf (binstore:root other :n) 10))
        (is (= 13 (binstore:with-transaction (kept) (incf (binstore:root kept :n)))))
        (is (= 13 (binstore:with-transaction (other :read-only t) (binstore:root other :n))))
        ;; the file removed: no roots; the next commit makes a file again
        (delete-file path)
        (is (equal '() (binstore:with-transaction (kept :read-only t)
                         (binstore:root-keys kept))))
        (binstore:with-transaction (kept) (setf (binstore:root kept :n) 100))
        (is (= 100 (binstore:with-transaction (other :read-only t) (binstore:root other :n))))
        (is (= 101 (binstore:with-transaction (kept) (incf (binstore:root kept :n)))))
        (is (= 101 (binstore:with-transaction (other :read-only t) (binstore:root other :n))))))))

(test kept-descriptor-is-closed
  "A store holds at most one descriptor between transactions, whatever
their number, and none once closed."
  (with-store-file (path)
    (let ((before (length (open-descriptors))))
      (binstore:with-store (store path :durability :none)
        (dotimes (i 50)
          (binstore:with-transaction (store) (setf (binstore:root store :i) i)))
        (binstore:with-transaction (store :read-only t) (binstore:root store :i))
        (is (<= (length (open-descriptors)) (1+ before))))
      (is (= before (length (open-descriptors)))))))

(test forked-child-uses-its-own-descriptor
  "A child forked after its parent's store kept a descriptor opens its own
\(the kept one shares the parent's file position): parent and child
incrementing a counter through the same store object lose nothing."
  (with-store-file (path)
    (binstore:with-store (store path :durability :none)
      (binstore:with-transaction (store) (setf (binstore:root store :n) 0))
      (let ((pid (fork-child (lambda ()
                               (dotimes (i 200)
                                 (binstore:with-transaction (store)
                                   (incf (binstore:root store :n))))))))
        (dotimes (i 200)
          (binstore:with-transaction (store)
            (incf (binstore:root store :n))))
        (is (equal '(:exited 0) (multiple-value-list (wait-child pid))))
        (is (= 400 (binstore:with-transaction (store :read-only t)
                     (binstore:root store :n))))))))

(test processes-race-for-a-counter
  "4 processes each incrementing a counter root 500 times, each increment
its own :FSYNC transaction, end at exactly 2,000."
  (call-with-temporary-directory
   (lambda (directory)
     (multiple-value-bind (counter bad) (run-counter-race directory :processes 4 :increments 500)
       (is (null bad) "children failed: ~s" bad)
       (is (= 2000 counter))))))

(test killed-writers-never-lose-a-commit
  "40 writer processes killed with SIGKILL at random moments: after each
kill the store holds exactly one committed state, no acknowledged commit
is lost, and a last writer commits normally (tests/store-faults.lisp)."
  (call-with-temporary-directory
   (lambda (directory)
     (multiple-value-bind (failures committed) (run-kills directory 40)
       (is (null failures) "~d failures, the first: ~{~a~^; ~}"
           (length failures) (subseq failures 0 (min 3 (length failures))))
       (is (>= committed 5))))))
