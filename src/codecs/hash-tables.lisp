;;;; Hash tables.
;;;;
;;;;   HASH-TABLE flags [test-name] size rehash-size rehash-threshold n | n (key value)
;;;; flags: bits 0-2 the test (0 eq, 1 eql, 2 equal, 3 equalp, 4 a named
;;;; custom test whose name follows as an object), bits 3-5 the weakness
;;;; (0 none, 1 :key, 2 :value, 3 :key-and-value, 4 :key-or-value), bit 6
;;;; synchronized.  Everything up to n is the header; the pairs are the
;;;; contents.

(in-package #:binstore)

(defparameter +hash-table-tests+ #(eq eql equal equalp))
(defparameter +hash-table-weaknesses+ #(nil :key :value :key-and-value :key-or-value))

(defun write-hash-table-header (ss h)
  (let* ((ob (ss-obuf ss))
         (test (format-hash-table-test h))
         (test-code (or (position test +hash-table-tests+) 4))
         (weakness (position (hash-table-weakness h) +hash-table-weaknesses+)))
    (write-u8 ob (logior test-code (ash weakness 3)
                         (if (hash-table-synchronized-p h) 64 0)))
    (when (= test-code 4)
      (write-object ss test))
    (write-varint ob (hash-table-size h))
    (write-object ss (format-rehash-size h))      ; on SBCL HASH-TABLE-REHASH-SIZE
    (write-object ss (format-rehash-threshold h)) ; and HASH-TABLE-REHASH-THRESHOLD
    (write-varint ob (hash-table-count h))
    nil))

(defun write-hash-table-tag+header (ss h)
  (write-u8 (ss-obuf ss) +tag-hash-table+)
  (write-hash-table-header ss h))

(defun write-hash-table-contents (ss h)
  (let ((n 0))
    (maphash (lambda (k v)
               (write-object ss k)
               (write-object ss v)
               (incf n))
             h)
    (unless (= n (hash-table-count h))
      (error 'store-error :message "a hash table changed while it was being stored"))))

;;; Decoding -----------------------------------------------------------

(defun read-hash-table-header (rs)
  "Make the table; return it and the number of pairs to fill."
  (let* ((ib (rs-ibuf rs))
         (flags (read-u8 ib))
         (test-code (logand flags 7))
         (weakness-code (ldb (byte 3 3) flags)))
    (unless (and (<= test-code 4) (<= weakness-code 4) (< flags 128))
      (restore-invalid rs (format nil "hash table flags #x~2,'0x" flags)
                       "a test code 0-4 and weakness code 0-4"))
    (let* ((test (if (= test-code 4)
                     (let ((name (read-object rs)))
                       (unless (and name (symbolp name))
                         (restore-invalid rs "a custom hash table test that is not a symbol"
                                          "the name of a hash table test"))
                       name)
                     (svref +hash-table-tests+ test-code)))
           (size (read-varint ib))
           (rehash-size (read-object rs))
           (threshold (read-object rs))
           (count (check-count ib (read-varint ib) 2 "a hash table")))
      ;; NaNs first: comparing one would trap
      (unless (and (typep rehash-size '(or integer float))
                   (not (and (floatp rehash-size) (float-nan-p rehash-size)))
                   ;; bounded, or growing the table would overflow SBCL's index type
                   (typep rehash-size '(or (integer 1 #.(expt 2 30)) (float (1.0) 1000.0))))
        (restore-invalid rs (format nil "rehash size ~a" (brief rehash-size))
                         "an integer in [1, 2^30] or a float in (1.0, 1000.0]"))
      (unless (and (realp threshold)
                   (not (and (floatp threshold) (float-nan-p threshold)))
                   (< 0 threshold) (<= threshold 1))
        (restore-invalid rs (format nil "rehash threshold ~a" (brief threshold))
                         "a real in (0, 1]"))
      (charge rs (* 48 (+ 8 (max size count))))
      (values
       (handler-case
           (make-hash-table-as-stored :test test :size size :rehash-size rehash-size
                                      :rehash-threshold threshold
                                      :weakness (svref +hash-table-weaknesses+ weakness-code)
                                      :synchronized (logbitp 6 flags))
         (error ()
           (restore-invalid rs (format nil "~s is not a hash table test here" test)
                            "a hash table test defined in this image")))
       count))))

(defun insert-pairs (rs h pairs)
  "Add PAIRS, a list (key value key value ...), to H.  EQ and EQL hash on
identity and accept anything.  The other tests hash contents, and some keys
cannot be hashed (SBCL's EQUALP hash rejects a NaN; a custom test runs user
code that may reject a key it never expected): that is invalid input."
  (if (identity-hashed-table-p h)
      (loop for (key value) on pairs by #'cddr
            do (setf (gethash key h) value))
      (let ((key nil))
        (handler-case
            (with-float-traps-masked (:invalid :overflow :divide-by-zero :inexact)
              (loop for (k value) on pairs by #'cddr
                    do (setf key k
                             (gethash k h) value)))
          (error (e)
            (restore-invalid rs (format nil "the table's test ~s cannot hash key ~a: ~a"
                                        (format-hash-table-test h) (brief key) e)
                             "a key the hash table test accepts"))))))

(defun fill-hash-table (rs h count)
  "Read COUNT pairs into H.  EQ and EQL tables hash on identity and take the
pairs at once (IDENTITY-HASHED-TABLE-P: not on ABCL).  Other tests hash on
contents: if some container of this record still awaits its FILL, a key may
be incomplete, so the pairs are inserted only when the record is complete
\(INSERT-POSTPONED-PAIRS).  So are always an EQ or EQL table's where they
hash contents too (ABCL): a key may be a cons still being read around it."
  (if (identity-hashed-table-p h)
      (dotimes (i count h)
        (let ((key (read-object rs)))
          (setf (gethash key h) (read-object rs))))
      (let ((pairs (loop repeat (* 2 count) collect (read-object rs))))
        (if (or (and (rs-pending rs) (plusp (hash-table-count (rs-pending rs))))
                (member (format-hash-table-test h) '(eq eql)))
            (push (cons h pairs) (rs-postponed rs))
            (insert-pairs rs h pairs))
        h)))

(defun insert-postponed-pairs (rs)
  "Insert the pairs postponed while the record had unfilled containers; the
most recently read tables first, since they may be keys of earlier ones."
  (loop for (h . pairs) in (rs-postponed rs)
        do (insert-pairs rs h pairs))
  (setf (rs-postponed rs) '()))
