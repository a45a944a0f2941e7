;;;; Working memory kept between calls: a kept buffer must never carry
;;;; anything from one call into the next, nor keep restored data alive.

(in-package #:binstore-tests)

(def-suite scratch :in all
  :description "Buffers kept between calls start each call empty.")
(in-suite scratch)

(defun fresh-strings (n)
  (loop for i below n collect (format nil "s~d" i)))

(defun kept-buffer (kind)
  "The buffer binstore keeps of KIND, or NIL."
  (svref binstore::**scratch** kind))

(test (kept-table-starts-empty :fixture format-2-defaults)
  ;; A large store leaves its table behind; a store that follows, of data
  ;; sharing objects with the first, must write exactly what it writes with
  ;; nothing kept (a stale entry would turn a first occurrence into a
  ;; reference to an id the second output never defined).
  (let* ((strings (fresh-strings 100000))
         (second (list (nth 5 strings) (nth 99999 strings) (nth 5 strings)))
         (expected (progn (binstore:release-scratch)
                          (binstore:store nil second))))
    (dolist (lists '(nil t))
      (binstore:store nil strings :support-shared-list-structures lists)
      (is (not (null (kept-buffer binstore::+scratch-table+))))
      (is (equalp expected (binstore:store nil second)))
      (let ((restored (binstore:restore (binstore:store nil second))))
        (is (equal second restored))
        (is (eq (first restored) (third restored)))))))

(test (kept-id-vectors-hold-nothing :fixture format-2-defaults)
  ;; After a restore, the id vectors kept for the next one are all zero, so
  ;; they do not keep the restored objects alive, and a second restore
  ;; reading other data resolves its references to its own objects.
  (let* ((strings (fresh-strings 50000))
         ;; a reference into the middle of a run fills its entries up to it;
         ;; single conses (CONS records) between runs are runs of one
         (pairs (loop for i below 1000 collect (cons i (format nil "p~d" i))))
         (data (list strings pairs strings (nthcdr 100 strings) (nth 500 pairs)))
         (bytes (binstore:store nil data :support-shared-list-structures t)))
    (binstore:release-scratch)
    (let ((restored (binstore:restore bytes)))
      (is (eq (first restored) (third restored)))
      (is (eq (nthcdr 100 (first restored)) (fourth restored)))
      (is (eq (nth 500 (second restored)) (fifth restored)))
      (check-same data restored :conses t))
    ;; (the conses by id are kept with the runs' lengths, as a pair)
    (dolist (kind (list binstore::+scratch-refs+ binstore::+scratch-cons-refs+))
      (let ((kept (kept-buffer kind)))
        (is (not (null kept)))
        (dolist (vector (if (consp kept) (list (car kept) (cdr kept)) (list kept)))
          (is (every (lambda (x) (eql x 0)) vector)))))
    (let* ((other (vector (vector "x" "y") "z"))
           (shared (list other other)))
      (is (equalp shared (binstore:restore (binstore:store nil shared))))
      (let ((restored (binstore:restore (binstore:store nil shared))))
        (is (eq (first restored) (second restored)))))))

(test (scratch-limit-and-release :fixture format-2-defaults)
  (binstore:release-scratch)
  (let ((binstore:*scratch-limit* 0))
    (binstore:store nil (fresh-strings 100000))
    (is (null (kept-buffer binstore::+scratch-table+))))
  (binstore:store nil (fresh-strings 100000))
  (is (not (null (kept-buffer binstore::+scratch-table+))))
  (is (plusp (binstore:release-scratch)))
  (is (null (kept-buffer binstore::+scratch-table+)))
  (is (zerop (binstore:release-scratch))))

(test (kept-output-region :fixture format-2-defaults)
  ;; (STORE NIL ...) keeps its output region: the next store writes into it,
  ;; and nothing of the previous output shows through in a shorter one.
  (binstore:release-scratch)
  (let ((long (make-list 300000 :initial-element "long output"))
        (short (list 1 2 3)))
    (let ((expected (binstore:store nil short)))
      (binstore:store nil long)
      (let ((region (kept-buffer binstore::+scratch-output+)))
        (is (typep region 'binstore::region))
        (is (>= (binstore::region-size region) (length (binstore:store nil long)))))
      (is (equalp expected (binstore:store nil short)))
      ;; a spilling vector takes the kept region too, and gives it back
      (let ((vector (make-array 2 :element-type '(unsigned-byte 8) :fill-pointer 0 :adjustable t)))
        (is (equalp expected (binstore:store vector short)))
        (is (not (null (kept-buffer binstore::+scratch-output+))))))
    (let ((binstore:*scratch-limit* 1000))
      (binstore:release-scratch)
      (binstore:store nil long)
      (is (null (kept-buffer binstore::+scratch-output+)) "a region over the limit was kept"))
    (binstore:store nil short)
    (is (not (null (kept-buffer binstore::+scratch-output+))))
    (is (plusp (binstore:release-scratch)))
    (is (null (kept-buffer binstore::+scratch-output+)))))

(test (small-stores-allocate-little :fixture format-2-defaults)
  ;; A store of a little data takes its table from the kept ones and makes
  ;; its class descriptor table only for instances: into a vector with
  ;; room, it allocates a few hundred bytes, not the 25 KB a fresh table and
  ;; hash table cost.  Restoring it allocated 2.9 KB, most of it a fresh
  ;; vector of objects by id.
  (binstore:release-scratch)
  (let ((data (list 1 2 "abc" 4.5d0 :key (vector 1 2)))
        (buffer (make-array 1000 :element-type '(unsigned-byte 8) :fill-pointer 0)))
    (binstore:store buffer data)
    (let ((before (bytes-consed)))
      (dotimes (i 1000)
        (setf (fill-pointer buffer) 0)
        (binstore:store buffer data))
      (let ((per-store (/ (- (bytes-consed) before) 1000)))
        (is (< per-store 4096) "~,1f bytes consed per store" per-store)))
    (is (equal (subseq data 0 5) (subseq (binstore:restore buffer) 0 5)))
    ;; and restoring it allocates the result and little more (the vector of
    ;; objects by id is kept even when small)
    (let ((before (bytes-consed)))
      (dotimes (i 1000)
        (binstore:restore buffer))
      (let ((per-restore (/ (- (bytes-consed) before) 1000)))
        (is (< per-restore 2048) "~,1f bytes consed per restore" per-restore)))))

(defun bytes-consed-per-call (n fn)
  "The bytes FN conses a call, averaged over N calls after one to warm up."
  (funcall fn)
  (let ((before (bytes-consed)))
    (dotimes (i n)
      (funcall fn))
    (/ (- (bytes-consed) before) n)))

(test (stores-and-restores-make-no-garbage-per-object :fixture format-2-defaults)
  ;; What a store into a vector with room allocates does not grow with the
  ;; data, and a restore allocates the result: a fixed few kilobytes at
  ;; most besides.  Each part of the data below once made garbage for
  ;; each object: a list written in two walks, a cons of its length and
  ;; tail (one-element lists of vectors: 16 bytes each); a block of a
  ;; list's cars, a boxed address (a list of numbers and conses, shared
  ;; structures tracked: 16 bytes per number between conses); a block of
  ;; a fixnum vector, and every copy of a payload, two boxed addresses; a
  ;; payload or a long string written or read, its address; a run of new
  ;; boxes taken in the table, its word of seen bits (16 bytes per 4 KiB of
  ;; boxes, passed to a function not inline).
  (let* ((count 5000)
         (lists (let ((v (make-array count)))
                  (dotimes (i count v)
                    (setf (svref v i) (list (vector i))))))
         (mixed (loop for i below count collect (+ i 0.5d0) collect (cons i i)))
         (fixnums (loop repeat 20
                        collect (make-array 5000 :element-type 'fixnum :initial-element 7)))
         (doubles (loop for size from 100 below 900
                        collect (make-array size :element-type 'double-float
                                                 :initial-element 1d0)))
         (boxes (loop for i below 100000 collect (+ i 0.25d0)))
         (strings (loop for i below 1000
                        collect (coerce (make-string 200 :initial-element (code-char (+ 65 (mod i 26))))
                                        'simple-base-string)))
         (buffer (make-array 4000000 :element-type '(unsigned-byte 8) :fill-pointer 0)))
    (loop for (data . options) in (list (list lists) (list mixed :support-shared-list-structures t)
                                        (list fixnums) (list doubles) (list boxes)
                                        (list strings))
          for name in '(lists mixed fixnums doubles boxes strings)
          do (flet ((store-into ()
                      (setf (fill-pointer buffer) 0)
                      (apply #'binstore:store buffer data options)))
               (let ((consed (bytes-consed-per-call 20 #'store-into)))
                 (is (< consed 8192) "~a: ~d bytes consed per store" name consed))))
    ;; the restore: the list's conses and the vectors or strings (a header
    ;; and a length, then the elements, and for a base string a zero byte,
    ;; in 16-byte granules), little else
    (dolist (data (list fixnums doubles strings))
      (let* ((bytes (binstore:store nil data))
             (result (reduce #'+ data
                             :key (lambda (v)
                                    (+ 16 (* 16 (ceiling (+ 16 (if (stringp v)
                                                                   (1+ (length v))
                                                                   (* 8 (length v))))
                                                         16))))))
             (consed (bytes-consed-per-call 20 (lambda () (binstore:restore bytes)))))
        (is (< consed (+ result 4096)) "~d bytes consed per restore of ~d" consed result)))))

(defun heap-object-p (x)
  "True when X is not on a thread's stack: anything binstore keeps."
  (not (sb-ext:stack-allocated-p x)))

(test (kept-buffers-live-in-the-heap :fixture format-2-defaults)
  ;; The states of a call live on its stack; whatever they hold that
  ;; outlives the call (the kept tables, regions and id vectors) must not.
  (binstore:release-scratch)
  ;; a small restore keeps the id vector it started with
  (let* ((shared (list "a"))
         (data (list shared shared)))
    (check-same data (binstore:restore (binstore:store nil data)))
    (is (heap-object-p (kept-buffer binstore::+scratch-refs+))))
  (binstore:release-scratch)
  (let* ((strings (fresh-strings 3000))
         (data (list strings strings (nthcdr 10 strings)))
         (bytes (binstore:store nil data :support-shared-list-structures t)))
    (check-same data (binstore:restore bytes) :conses t)
    (binstore:store (make-broadcast-stream) data)
    (dolist (kind (list binstore::+scratch-table+ binstore::+scratch-cons-table+
                        binstore::+scratch-output+ binstore::+scratch-refs+
                        binstore::+scratch-cons-refs+ binstore::+scratch-staging+))
      (let ((kept (kept-buffer kind)))
        (is (not (null kept)) "nothing kept of kind ~d" kind)
        (is (heap-object-p kept))
        (when (consp kept)
          (is (heap-object-p (car kept)))
          (is (heap-object-p (cdr kept))))))))

(defun octet-vector-bytes (n)
  "Bytes of the heap an octet vector of N elements takes: a header and a
length, then the octets, in 16-byte granules."
  (* 16 (ceiling (+ 16 n) 16)))

(defun allocates-only-p (expected fn)
  "True when FN allocates EXPECTED bytes a call: less than one 16-byte
granule more, on average over 20,000 calls.  (SBCL counts the bytes of a
thread's allocation region when it closes it, so a count over few calls is
off by up to a region.)"
  (< (bytes-consed-per-call 20000 fn) (+ expected 16)))

(test (small-calls-allocate-only-their-result :fixture format-2-defaults)
  ;; A store or restore of a little data keeps its states on the stack and
  ;; its working memory from one call to the next: into a vector with room,
  ;; or from one, it allocates nothing but what it returns.  Before, storing
  ;; 42 allocated 430 bytes, restoring it 300.
  (let ((buffer (make-array 100 :element-type '(unsigned-byte 8) :fill-pointer 0))
        (foreign (sb-alien:make-alien (sb-alien:unsigned 8) 100)))
    (unwind-protect
         (dolist (data (list 42 (list 1 -2 3)))
           (is (allocates-only-p 0 (lambda ()
                                     (setf (fill-pointer buffer) 0)
                                     (binstore:store buffer data)))
               "a store of ~s into a vector" data)
           (let ((sap (sb-alien:alien-sap foreign)))
             (is (allocates-only-p 0 (lambda () (binstore:store-to-sap sap 100 data)))
                 "a store of ~s to raw memory" data))
           (is (allocates-only-p (octet-vector-bytes (length (binstore:store nil data)))
                                 (lambda () (binstore:store nil data)))
               "a store of ~s to a fresh vector" data)
           (let ((bytes (binstore:store nil data))
                 (result (if (consp data) (* 16 (length data)) 0)))
             (is (allocates-only-p result (lambda () (binstore:restore bytes)))
                 "a restore of ~s" data)
             (sb-sys:with-pinned-objects (bytes)
               (let ((sap (sb-sys:vector-sap bytes)))
                 (is (allocates-only-p result (lambda ()
                                                (binstore:restore-from-sap sap (length bytes))))
                     "a restore of ~s from raw memory" data)))))
      (sb-alien:free-alien foreign))))

(test (small-calls-through-streams-allocate-little :fixture format-2-defaults)
  ;; The vector a stream is staged through is kept between calls: a store
  ;; of a little data to a stream allocates nothing, a restore from a file
  ;; stream little besides its result.  Each made its 64 KiB vector before.
  (binstore:release-scratch)
  (let ((data (list 1 "two" 3d0 :four #\5 (list 6)))
        (sink (make-broadcast-stream)))
    (is (allocates-only-p 0 (lambda () (binstore:store sink data))))
    (is (not (null (kept-buffer binstore::+scratch-staging+))))
    (call-with-temporary-directory
     (lambda (directory)
       (let ((path (merge-pathnames "staging.bin" directory)))
         (binstore:store path data)
         (with-open-file (in path :element-type '(unsigned-byte 8))
           (is (< (bytes-consed-per-call 2000 (lambda ()
                                                (file-position in 0)
                                                (binstore:restore in)))
                  1024))
           (file-position in 0)
           (is (equal data (binstore:restore in)))))))))

(test (threads-share-the-kept-buffers :fixture format-2-defaults)
  "Three threads store and restore, small data and large, into fresh
vectors, vectors with room and streams, while a fourth collects: the kept
buffers pass from thread to thread (and regions are unmapped when two are
given back), yet every output equals the one made alone and every copy the
data."
  (binstore:release-scratch)
  (let* ((small (list 1 "two" 3d0 :four (list 5)))
         (large (list (fresh-strings 20000) (loop for i below 20000 collect (cons i i))))
         (cases (loop for data in (list small large)
                      append (loop for lists in '(nil t)
                                   collect (list data lists
                                                 (binstore:store nil data :support-shared-list-structures lists)))))
         (done nil)
         (collector (make-test-thread
                     (lambda () (loop until done do (gc) (sleep 0.005)))))
         (results '()))
    (unwind-protect
         (let ((workers
                 (loop for k below 3
                       collect (let ((k k))
                                 (make-option-thread
                                  (lambda ()
                                    (let ((buffer (make-array 10 :element-type '(unsigned-byte 8)
                                                                 :fill-pointer 0 :adjustable t)))
                                      (loop for round below 30
                                            always (destructuring-bind (data lists expected)
                                                       (nth (mod (+ k round) (length cases)) cases)
                                                     (setf (fill-pointer buffer) 0)
                                                     (and (equalp expected (binstore:store nil data :support-shared-list-structures lists))
                                                          (equalp expected (binstore:store buffer data :support-shared-list-structures lists))
                                                          (equalp expected (stream-octets
                                                                            (binstore:store (make-instance 'octet-output-stream) data
                                                                                            :support-shared-list-structures lists)))
                                                          (equalp data (binstore:restore expected))
                                                          (equalp data (binstore:restore buffer))
                                                          (equalp data (binstore:restore (make-instance 'octet-input-stream
                                                                                                        :octets expected)))))))))))))
           (setf results (mapcar #'join-test-thread workers)))
      (setf done t)
      (join-test-thread collector))
    (is (equal '(t t t) results))))

(defclass nesting-output-stream (octet-output-stream)
  ((inner :initarg :inner :reader nesting-inner)
   (copies :initform '() :accessor nesting-copies))
  (:documentation "An octet stream that stores and restores INNER each time
it is written to: a store running inside a store."))

(defmethod stream-write-sequence :before ((stream nesting-output-stream) sequence
                                                  &optional start end)
  (declare (ignore sequence start end))
  (let ((inner (nesting-inner stream)))
    (push (binstore:restore (binstore:store nil inner)) (nesting-copies stream))
    (let ((buffer (make-array 4 :element-type '(unsigned-byte 8) :fill-pointer 0 :adjustable t)))
      (push (binstore:restore (binstore:store buffer inner)) (nesting-copies stream)))))

(test (stores-inside-stores :fixture format-2-defaults)
  "A store whose output stream itself stores and restores (through the
stream's write method) gets no buffer the outer store holds: the staging
vector, the output region and the tables are taken, not shared, and both
outputs are exact."
  (binstore:release-scratch)
  (let* ((outer (list (fresh-strings 30000) (loop for i below 20000 collect (* i 1.5d0))))
         (inner (list (fresh-strings 2000) "inner" (vector 1 2 3)))
         (expected (binstore:store nil outer))
         (stream (make-instance 'nesting-output-stream :inner inner)))
    (binstore:store stream outer)
    (is (equalp expected (stream-octets stream)))
    (is (plusp (length (nesting-copies stream))))
    (is (every (lambda (copy) (equalp inner copy)) (nesting-copies stream)))))
