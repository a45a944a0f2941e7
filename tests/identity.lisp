;;;; Identity: sharing and cycles survive a round trip, within the limits each
;;;; option promises.

(in-package #:binstore-tests)

(def-suite identity :in all
  :description "Shared parts restore EQ, cycles close, options keep their promises.")
(in-suite identity)

(defun shareable-objects ()
  "One fresh object of each kind that restores as one object when shared."
  (list (copy-seq "a string")
        (coerce "base" 'simple-base-string)
        (make-array 3 :element-type '(unsigned-byte 8) :initial-contents '(1 2 3))
        (make-array '(2 2) :initial-element :x)
        (make-array 4 :element-type 'character :fill-pointer 2 :initial-element #\z)
        (vector 1 2)
        (expt 2 100)
        (make-double-float #x40091EB8 #x51EB851F)
        3/7
        #c(1d0 2d0)
        (make-gen-point :x 1)
        (make-gen-raw :d 2d0)
        (make-instance 'gen-node :label "node")
        (make-hash-table)
        (make-pathname :name "shared" :type "txt")
        (make-condition 'gen-condition :detail 1 :extra 2)))

(test shared-objects-restore-eq
  (dolist (object (shareable-objects))
    (let ((restored (round-trip (list object (vector object) object))))
      (check-same (list object (vector object) object) restored)
      (is (eq (first restored) (third restored)) "~s was not restored once" object)
      (is (eq (first restored) (aref (second restored) 0)) "~s was not restored once" object)))
  ;; All kinds at once, each shared between a list and a hash table.
  (let* ((objects (shareable-objects))
         (table (make-hash-table :test 'eq)))
    (loop for object in objects for i from 0
          do (setf (gethash i table) object))
    (check-same (list objects table) (round-trip (list objects table)))))

(test equal-but-distinct-objects-stay-distinct
  (let* ((data (list (copy-seq "same") (copy-seq "same") (vector 1) (vector 1)
                     (make-gen-point) (make-gen-point)))
         (restored (round-trip data)))
    (check-same data restored)
    (is (not (eq (first restored) (second restored))))
    (is (not (eq (third restored) (fourth restored))))
    (is (not (eq (fifth restored) (sixth restored))))))

(test cycles-through-containers
  (let ((vector (vector 1 nil 3)))
    (setf (aref vector 1) vector)
    (let ((restored (round-trip vector)))
      (check-same vector restored)
      (is (eq restored (aref restored 1)))))
  (let ((table (make-hash-table :test 'eq)))
    (setf (gethash table table) table
          (gethash :self table) table)
    (let ((restored (round-trip table)))
      (check-same table restored)
      (is (eq restored (gethash :self restored)))
      (is (eq restored (gethash restored restored)))))
  (let ((point (make-gen-point)))
    (setf (gen-point-x point) point)
    (let ((restored (round-trip point)))
      (check-same point restored)
      (is (eq restored (gen-point-x restored)))))
  (let ((node (make-instance 'gen-node)))
    (setf (gen-node-left node) node
          (gen-node-right node) (vector node))
    (let ((restored (round-trip node)))
      (check-same node restored)
      (is (eq restored (gen-node-left restored)))
      (is (eq restored (aref (gen-node-right restored) 0)))))
  (let ((condition (make-condition 'gen-condition :extra nil)))
    (setf (slot-value condition 'detail) (list condition))
    (check-same condition (round-trip condition)))
  ;; A longer cycle crossing every kind of container.
  (let ((table (make-hash-table :test 'equal))
        (point (make-gen-point))
        (node (make-instance 'gen-node))
        (array (make-array '(2 2) :initial-element nil)))
    (setf (gethash "next" table) point
          (gen-point-y point) node
          (gen-node-label node) array
          (aref array 1 1) (list :back table))
    (check-same table (round-trip table))))


(test displaced-arrays-inside-their-own-targets
  "A displaced array held by its own target (directly, or through a list, a
table or a chain of displacements) restores as one array, by both decoders
and in every tracking mode: the array takes its id only once its target is
read, so the target's contents are written after it (LATER and FILL)."
  (flet ((check-shape (make-data find-inner)
           (dolist (options '(() (:support-shared-list-structures nil)
                              (:support-shared-list-structures t)))
             (let* ((data (funcall make-data))
                    (octets (apply #'binstore:store nil data options)))
               (is (funcall find-inner data) "the data's own inner array")
               (dolist (copy (list (binstore:restore octets)
                                   (first (binstore::reference-restore octets))))
                 (check-same data copy :conses (getf options :support-shared-list-structures t))
                 (is (funcall find-inner copy) "one array after ~s" options))))))
    ;; the target holds the array in a one-element vector
    (check-shape (lambda ()
                   (let* ((target (make-array 10 :initial-element 0))
                          (a (make-array '(3 1 3) :displaced-to target :displaced-index-offset 1)))
                     (setf (svref target 0) (vector a))
                     a))
                 (lambda (a) (eq a (svref (svref (array-displacement a) 0) 0))))
    ;; the array is met first through a list, then as the table key within
    (check-shape (lambda ()
                   (let* ((target (make-array 4 :initial-element nil))
                          (a (make-array 3 :displaced-to target :displaced-index-offset 1))
                          (table (make-hash-table :test 'equal)))
                     (setf (gethash a table) (list a)
                           (svref target 0) table)
                     (list a target)))
                 (lambda (data)
                   (destructuring-bind (a target) data
                     (let ((table (svref target 0)))
                       (and (eq target (array-displacement a))
                            (eq a (loop for k being the hash-keys of table return k))
                            (eq a (first (gethash a table))))))))
    ;; a chain: A displaced to B displaced to a two-dimensional T array
    ;; holding A
    (check-shape (lambda ()
                   (let* ((base (make-array '(2 3) :initial-element :x))
                          (b (make-array 5 :displaced-to base :displaced-index-offset 1))
                          (a (make-array 2 :displaced-to b :displaced-index-offset 3)))
                     (setf (aref base 0 0) a)
                     a))
                 (lambda (a)
                   (let* ((b (array-displacement a))
                          (base (array-displacement b)))
                     (eq a (aref base 0 0)))))))
(test shared-list-structure
  (flet ((round-trip-lists (data)
           (round-trip data :support-shared-list-structures t)))
    ;; Shared tails.
    (let* ((tail (list 3 4))
           (data (list (list* 1 tail) (list* 2 tail)))
           (restored (round-trip-lists data)))
      (check-same data restored :conses t)
      (is (eq (cdr (first restored)) (cdr (second restored)))))
    ;; A cdr-circular list.
    (let ((circle (list 1 2 3)))
      (setf (cdr (last circle)) circle)
      (let ((restored (round-trip-lists circle)))
        (check-same circle restored :conses t)
        (is (eq restored (cdddr restored)))))
    ;; A list that ends by pointing into its middle.
    (let ((lasso (list 1 2 3 4)))
      (setf (cdr (last lasso)) (cdr lasso))
      (let ((restored (round-trip-lists lasso)))
        (check-same lasso restored :conses t)
        (is (eq (cdr restored) (nthcdr 4 restored)))))
    ;; A car-circular list.
    (let ((knot (list nil 2)))
      (setf (car knot) knot)
      (let ((restored (round-trip-lists knot)))
        (check-same knot restored :conses t)
        (is (eq restored (car restored)))))
    ;; One cons referenced from a vector and from a list.
    (let* ((cell (cons 1 2))
           (data (vector cell (list cell)))
           (restored (round-trip-lists data)))
      (check-same data restored :conses t)
      (is (eq (aref restored 0) (first (aref restored 1)))))))

(test conses-inside-runs
  "The decoder fills a run's cons ids only when they are first referenced:
references into the middle of runs, in any order, including from a car of
the run being read, reach the right conses."
  (let* ((long (loop for i below 300 collect i))
         (other (list :a :b :c :d))
         (picks '(250 3 299 0 120 121 4 250 1))
         (data (list long other
                     (mapcar (lambda (k) (nthcdr k long)) picks)
                     (nthcdr 2 other) (nthcdr 1 other))))
    ;; a car of OTHER that points further along OTHER
    (setf (car other) (nthcdr 3 other))
    (let ((restored (round-trip data :support-shared-list-structures t)))
      (check-same data restored :conses t)
      (loop for k in picks
            for tail in (third restored)
            do (is (eq (nthcdr k (first restored)) tail) "tail ~d is not shared" k))
      (let ((other (second restored)))
        (is (eq (car other) (nthcdr 3 other)))
        (is (eq (fourth restored) (nthcdr 2 other)))
        (is (eq (fifth restored) (nthcdr 1 other)))))))

(test long-lists-built-in-pieces
  "Lists long enough to be read a piece at a time (READ-LIST-IN-PIECES), of
lengths about the threshold and the piece, restore equal in every mode;
with conses tracked, references to conses in any piece, a shared tail and a
cycle back into the middle reach the right conses."
  (let ((threshold (floor binstore::+large-object-bytes+ 16))
        (piece (floor binstore::+look-bytes+ 16)))
    (dolist (n (list (1- threshold) threshold (1+ threshold)
                     (+ threshold (* 5 piece)) (+ threshold (* 5 piece) 1)
                     (+ threshold (* 3 piece) 7)))
      (let* ((long (loop for i below n collect (if (evenp i) i (* i 0.5d0))))
             (picks (list 0 1 (1- piece) piece (1+ piece) (floor n 2) (- n 2) (1- n)))
             (data (list long (mapcar (lambda (k) (nthcdr k long)) picks)
                         (list* :head (nthcdr (1+ piece) long)))))
        (dolist (mode '((:track-references nil) (:track-references t)))
          (is (equalp data (apply #'round-trip data mode)) "~d conses, ~s" n mode))
        (let ((restored (round-trip data :support-shared-list-structures t)))
          (check-same data restored :conses t)
          (loop for k in picks
                for tail in (second restored)
                do (is (eq (nthcdr k (first restored)) tail) "~d conses: tail ~d" n k))
          (is (eq (cdr (third restored)) (nthcdr (1+ piece) (first restored)))))
        ;; a long list whose end points back into its middle
        (let ((lasso (copy-list long)))
          (setf (cdr (last lasso)) (nthcdr (+ piece 3) lasso))
          (let ((restored (round-trip lasso :support-shared-list-structures t)))
            (is (eq (nthcdr n restored) (nthcdr (+ piece 3) restored)) "~d conses: the lasso" n)))))))

(test references-ahead-into-long-lists
  "A long list is read a piece at a time, each piece made when the one
before is read (READ-LIST-IN-PIECES), yet its cons ids are all given at
its start: a car may name a cons of a piece not made yet, which makes the
rest of the list then (COMPLETE-OPEN-RUN).  Cars naming conses further on
in their own list, from the first piece to the last, from a piece to the
next, from inside a long list nested in another to the outer one's
unmade conses, restore as those conses."
  (let* ((threshold (floor binstore::+large-object-bytes+ 16))
         (piece (floor binstore::+look-bytes+ 16)))
    (dolist (n (list threshold (+ threshold (* 3 piece) 5)))
      (flet ((long () (loop for i below n collect i)))
        ;; (from . to): the car of cons FROM is the cons TO
        (dolist (links (list (list (cons 0 (- n 1)))
                             (list (cons 0 (- n 3)) (cons 10 2000) (cons (- n 2) 5))
                             (list (cons (1- piece) piece) (cons piece (1+ piece)))
                             (list (cons 3 (* 2 piece)) (cons (* 2 piece) (+ 3 (* 3 piece))))))
          (let ((list (long)))
            (loop for (from . to) in links
                  do (setf (car (nthcdr from list)) (nthcdr to list)))
            (let ((restored (round-trip list :support-shared-list-structures t)))
              (is (= n (length restored)))
              (loop for (from . to) in links
                    do (is (eq (car (nthcdr from restored)) (nthcdr to restored))
                           "~d conses: the car of cons ~d is not cons ~d" n from to)))))
        ;; a long list inside a long list, naming conses of both ahead
        (let ((outer (long))
              (inner (long)))
          (setf (car (nthcdr 5 outer)) inner
                (car inner) (nthcdr (- n 3) outer)
                (car (nthcdr 7 inner)) (nthcdr (- n 1) inner)
                (car (nthcdr (- n 2) outer)) (nthcdr (1+ piece) inner))
          (let* ((restored (round-trip outer :support-shared-list-structures t))
                 (inner (nth 5 restored)))
            (is (= n (length restored) (length inner)))
            (is (eq (car inner) (nthcdr (- n 3) restored)))
            (is (eq (nth 7 inner) (nthcdr (- n 1) inner)))
            (is (eq (nth (- n 2) restored) (nthcdr (1+ piece) inner)))
            (is (equal (loop for i from 8 below n collect i) (nthcdr 8 inner)))))))))

(test references-into-runs-of-boxes
  "A long run of doubles or complexes, in a list or a simple vector, takes
its ids without storing its boxes by id, until a reference is met.
References to the first, middle and
last boxes, forwards and backwards, from the same list and from later
containers, across runs broken by other objects and short runs stored by id
at once, restore EQ to the right box, in every mode; and the kept vector
of objects by id holds nothing afterwards."
  (flet ((boxes (n from)
           (loop for i below n
                 collect (if (evenp i) (+ from i 0.5d0) (complex (+ from i 1d0) -1d0)))))
    (let* ((long (boxes 1000 0))
           (short (boxes 10 5000))
           (broken (append (boxes 40 2000) (list "break") (boxes 60 3000)))
           (vector (coerce (boxes 500 4000) 'simple-vector))
           (picks '(0 500 999 500 10 998 1))
           ;; a list whose later elements refer back into its own run
           (own (let ((run (boxes 100 6000)))
                  (append run (list (nth 99 run) (nth 0 run) (nth 50 run)))))
           (data (list long short broken vector own
                       (mapcar (lambda (k) (nth k long)) picks)
                       (vector (svref vector 499) (svref vector 0) (nth 3 short)
                               (nth 41 broken) (nth 39 broken) (nth 100 broken))
                       (svref vector 250))))
      (dolist (lists '(nil t))
        (binstore:release-scratch)
        (let ((restored (round-trip data :support-shared-list-structures lists)))
          (check-same data restored)
          (destructuring-bind (long short broken vector own picked refs one) restored
            (loop for k in picks
                  for x in picked
                  do (is (eq (nth k long) x) "box ~d of the long run" k))
            (is (eq (svref vector 499) (svref refs 0)))
            (is (eq (svref vector 0) (svref refs 1)))
            (is (eq (nth 3 short) (svref refs 2)))
            (is (eq (nth 41 broken) (svref refs 3)))
            (is (eq (nth 39 broken) (svref refs 4)))
            (is (eq (nth 100 broken) (svref refs 5)))
            (is (eq (svref vector 250) one))
            (is (eq (nth 99 own) (nth 100 own)))
            (is (eq (nth 0 own) (nth 101 own)))
            (is (eq (nth 50 own) (nth 102 own)))
            ;; distinct boxes stay distinct
            (is (not (eq (nth 1 long) (nth 3 long))))))
        (let ((kept (svref binstore::**scratch** binstore::+scratch-refs+)))
          (is (and kept (every (lambda (x) (eql x 0)) kept)))))
      ;; a run reaching past the end of the vector of objects by id (made
      ;; with an entry for each 32 bytes of input, 281 here, and not grown
      ;; for a lazy run), then at once references into it
      (let* ((run (loop for i below 1000 collect (+ i 0.25d0)))
             (past (list run (nth 999 run) (nth 700 run))))
        (binstore:release-scratch)
        (let ((restored (round-trip past)))
          (check-same past restored)
          (is (eq (nth 999 (first restored)) (second restored)))
          (is (eq (nth 700 (first restored)) (third restored)))))
      ;; with no reference after them, runs are never stored by id: what
      ;; is stored around them, and only that, is cleared after
      (let ((plain (list (copy-seq "s1") long (copy-seq "s2") vector (copy-seq "s3"))))
        (binstore:release-scratch)
        (check-same plain (round-trip plain))
        (let ((kept (svref binstore::**scratch** binstore::+scratch-refs+)))
          (is (and kept (every (lambda (x) (eql x 0)) kept))))))))

(test cons-references-as-leaves
  "References to conses are read straight from the window (alone, in runs of
a list or a vector, and as the car or cdr of a CONS of two leaves) and
through the general path (from a Gray stream's window, to a cons whose
entry is not filled yet, to the cons being read): a tangled graph of conses
and pairs of references restore with the same shape.  With 300 conses in
the graph every reference is a SHORT-CONS-REF; with 2,500, those to cons
ids past 2047 are CONS-REFs with a varint."
  (dolist (size '(300 2500))
    (cons-references-as-leaves size)))

(defun cons-references-as-leaves (size)
  (let* ((state (seeded-random-state 7))
         (graph (coerce (loop repeat size collect (cons nil nil)) 'simple-vector))
         (run (list 1 2 3 4 5 6))
         (self (cons nil nil))
         (data (list graph
                     run
                     ;; a reference to a run's first cons (filled when the run
                     ;; is made) and one into it (filled when first read)
                     (cons run (nthcdr 3 run))
                     (cons (nthcdr 3 run) run)
                     (cons 7 (nthcdr 4 run))
                     (cons (nthcdr 5 run) 8)
                     self
                     (vector (nthcdr 1 run) run (nthcdr 2 run) 9 (nthcdr 1 run)))))
    (dotimes (i (* 10 size))
      (setf (car (svref graph (random size state))) (svref graph (random size state))
            (cdr (svref graph (random size state))) (svref graph (random size state))))
    (setf (car self) self
          (cdr self) self)
    (let ((octets (binstore:store nil data :support-shared-list-structures t)))
      ;; pairs of references were written, in the short form and (past
      ;; cons id 2047) the long one
      (flet ((cons-then-p (test)
               (loop for i from 0 below (1- (length octets))
                     thereis (and (= (aref octets i) binstore::+tag-cons+)
                                  (funcall test (aref octets (1+ i)))))))
        (is (cons-then-p #'binstore::short-cons-ref-tag-p))
        (when (> size 2048)
          (is (cons-then-p (lambda (tag) (= tag binstore::+tag-cons-ref+))))))
      (dolist (restored (list (binstore:restore octets)
                              (binstore:restore (make-instance 'octet-input-stream
                                                               :octets octets))))
        (check-same data restored :conses t)
        (destructuring-bind (graph* run* a b c d self* v) restored
          (declare (ignore graph*))
          (is (eq run* (car a)))
          (is (eq (nthcdr 3 run*) (cdr a)))
          (is (eq (nthcdr 3 run*) (car b)))
          (is (eq run* (cdr b)))
          (is (eq (nthcdr 4 run*) (cdr c)))
          (is (eq (nthcdr 5 run*) (car d)))
          (is (and (eq self* (car self*)) (eq self* (cdr self*))))
          (is (eq (nthcdr 1 run*) (svref v 0)))
          (is (eq run* (svref v 1)))
          (is (eq (nthcdr 2 run*) (svref v 2)))
          (is (eq (nthcdr 1 run*) (svref v 4))))))))

(test int64-runs-with-shared-list-structures
  "Lists of 8-byte integers are written packed with shared list structures
too, and their conses still take ids."
  (let* ((big (list (expt 2 40) (- (expt 2 50)) (expt 2 61)))
         (data (list big (cdr big)))
         (bytes (binstore:store nil data :support-shared-list-structures t)))
    (is (find binstore::+tag-int64-list+ bytes))
    (let ((restored (binstore:restore bytes)))
      (check-same data restored :conses t)
      (is (eq (cdr (first restored)) (second restored))))))

(test no-reference-tracking
  (let ((data (list 1 "two" (vector 3 (list 4.5d0 (expt 2 80))) (make-gen-point :x #p"/p")
                    (make-instance 'gen-node :left :l) (filled-table '(:k "v")))))
    (check-same data (round-trip data :track-references nil) :identity nil)
    (check-same data (let ((binstore:*track-references* nil)) (round-trip data)) :identity nil))
  ;; Shared parts come back as equal copies.
  (let* ((string (copy-seq "shared"))
         (vector (vector 1 2))
         (point (make-gen-point :x 1))
         (data (list string string vector vector point point))
         (restored (round-trip data :track-references nil)))
    (check-same data restored :identity nil)
    (is (not (eq (first restored) (second restored))))
    (is (not (eq (third restored) (fourth restored))))
    (is (not (eq (fifth restored) (sixth restored))))))

(defun every-option-combination ()
  "A plist of STORE options for each combination of the boolean options."
  (let ((combinations '()))
    (dolist (references '(t nil))
      (dolist (lists '(t nil))
        (dolist (magic '(t nil))
          (dolist (end '(t nil))
            (push (list :track-references references :support-shared-list-structures lists
                        :output-magic-number magic :output-end-marker end)
                  combinations)))))
    combinations))

(test any-options-restore-with-defaults
  (let ((data (list 1 "two" :three (make-symbol "FOUR") (vector 5.0d0 (list 6))
                    (make-gen-point :x 7) (filled-table '("eight" 8) :test 'equal)))
        (file (merge-pathnames (format nil "binstore-options-~d.bst" (random 1000000 (make-random-state t)))
                               (uiop:temporary-directory))))
    (unwind-protect
         (dolist (options (every-option-combination))
           ;; only a record stored without the header must say so
           (let ((require-header (getf options :output-magic-number t)))
             (check-same data (binstore:restore (apply #'binstore:store nil data options)
                                                :require-header require-header))
             (apply #'binstore:store file data options)
             (check-same data (binstore:restore file :require-header require-header))))
      (when (probe-file file) (delete-file file)))))

(test uninterned-symbols
  (let* ((symbol (make-symbol "LONELY"))
         (twin (make-symbol "LONELY"))
         (data (list symbol (vector symbol) twin symbol))
         (bytes (binstore:store nil data))
         (first-restore (binstore:restore bytes))
         (second-restore (binstore:restore bytes)))
    (check-same data first-restore)
    (destructuring-bind (a v b c) first-restore
      (is (null (symbol-package a)))
      (is (string= "LONELY" (symbol-name a)))
      (is (eq a c))
      (is (eq a (aref v 0)))
      (is (not (eq a b)))
      (is (not (eq a symbol))))
    ;; Each restore makes its own symbols.
    (is (not (eq (first first-restore) (first second-restore))))
    ;; Kept one per store even without reference tracking.
    (let ((restored (round-trip data :track-references nil)))
      (is (eq (first restored) (fourth restored)))
      (is (not (eq (first restored) (third restored)))))))

(test identity-table-kernel
  "The table's unchecked accesses rely on its vectors' shapes: installing
others is refused.  Ids are the order of adding, survive growth, the switch
from seen bits to hashing, and collections in either state; a released
table is the next one made, empty."
  (let ((table (binstore::make-identity-table)))
    ;; an odd number of words, 3 slots (not a power of two), no slots
    (signals error (binstore::install-slots table (make-array 9 :initial-element 0)))
    (signals error (binstore::install-slots table (make-array 6 :initial-element 0)))
    (signals error (binstore::install-slots table (make-array 0)))
    (signals error (binstore::install-blocks table (make-array 4 :element-type 'fixnum)
                                             (make-array 4 :element-type '(unsigned-byte 64))
                                             (make-array 8 :element-type '(unsigned-byte 32))))
    (signals error (binstore::install-blocks table (make-array 4 :element-type 'fixnum)
                                             (make-array 16 :element-type '(unsigned-byte 64))
                                             (make-array 6 :element-type '(unsigned-byte 32))))
    ;; objects far apart in the heap, and runs of neighbours: many blocks
    (let ((objects (loop for i below 5000
                         collect (if (zerop (mod i 7)) (make-array (* 40 (mod i 13))) (list i)))))
      (flet ((all-have-their-ids ()
               (loop for object in objects for id from 0
                     always (= id (binstore::identity-table-get table object)))))
        (is (loop for object in objects
                  always (and (= -1 (binstore::identity-table-get table object))
                              (= -1 (binstore::identity-table-get-or-add table object)))))
        (is (not (binstore::it-hashed table)))
        (gc :full t)             ; objects move: the seen bits are set afresh
        (is (loop for object in objects for id from 0
                  always (= id (binstore::identity-table-get-or-add table object))))
        (is (binstore::it-hashed table))        ; met again: hashed
        (is (all-have-their-ids))
        (gc :full t)             ; and the hash table is rebuilt
        (is (all-have-their-ids))
        (is (= -1 (binstore::identity-table-get table (list 'new))))
        (binstore::release-identity-table table)
        (let ((next (binstore::make-identity-table)))
          (is (eq table next))
          (is (= 0 (binstore::it-count next)))
          (is (not (binstore::it-hashed next)))
          (is (= -1 (binstore::identity-table-get next (first objects))))
          (is (= -1 (binstore::identity-table-get-or-add next (second objects))))
          (is (= 0 (binstore::identity-table-get next (second objects))))
          (binstore::release-identity-table next))))))

(test runs-of-references
  "Lists and vectors of references, small and with varint ids, run after run
and between other elements: each restores EQ to the object it names."
  (let* ((strings (loop for i below 300 collect (format nil "s~d" i)))
         (doubles (loop for i below 40 collect (float i 1d0)))
         (mixed (loop for i below 2000
                      collect (if (zerop (mod i 3)) i (nth (mod (* 7 i) 300) strings))))
         (data (list (append strings (reverse strings)) doubles (reverse doubles)
                     (coerce (append strings strings) 'vector) mixed
                     (coerce mixed 'vector))))
    (dolist (lists '(nil t))
      (let ((copy (binstore:restore (binstore:store nil data :track-references t
                                                              :support-shared-list-structures lists))))
        (check-same data copy)
        (destructuring-bind (twice doubles reversed vector mixed mixed-vector) copy
          (is (loop for i below 300
                    always (and (eq (nth i twice) (nth (- 599 i) twice))
                                (eq (nth i twice) (aref vector i))
                                (eq (nth i twice) (aref vector (+ 300 i))))))
          (is (loop for i below 40 always (eq (nth i doubles) (nth (- 39 i) reversed))))
          (is (loop for i below 2000
                    for x in mixed
                    ;; EQL: a fixnum is not EQ to itself on every Lisp (ABCL)
                    always (and (eql x (aref mixed-vector i))
                                (if (zerop (mod i 3))
                                    (eql x i)
                                    (eq x (nth (mod (* 7 i) 300) twice)))))))))))

(test runs-of-next-references
  "The same objects met again in the order they were first written are
written as NEXT-REFs, one byte each: from a list, a vector, short lists of
symbols (written in one piece), pairs, and runs broken by other references
and by integers, they restore EQ to the objects they name, from a vector
and from a stream read a window at a time, and the reference decoder reads
the same."
  (let* ((strings (loop for i below 100 collect (format nil "s~d" i)))
         (pool (loop for i below 3000 collect (make-symbol (format nil "G~d" i))))
         (data (list pool
                     (copy-list pool)
                     (coerce pool 'vector)
                     (loop for (a b c) on pool by #'cdddr collect (list a b c))
                     (loop for (a b) on pool by #'cddr collect (cons a b))
                     (loop for x in pool for i from 0
                           collect x
                           when (zerop (mod i 7)) collect i
                           when (zerop (mod i 11)) collect (nth 50 strings))
                     strings (copy-list strings) (reverse strings) (copy-list strings))))
    (flet ((check (copy)
             (destructuring-bind (pool* again vector triples pairs broken
                                  strings* s2 s3 s4) copy
               (is (= 3000 (length (remove-duplicates pool*))))
               (is (every #'eq pool* again))
               (is (every #'eq pool* vector))
               (is (every #'eq pool* (loop for triple in triples append triple)))
               (is (every #'eq pool* (loop for (a . b) in pairs collect a collect b)))
               (is (every #'eq pool* (remove-if-not #'symbolp broken)))
               (is (every #'eq strings* s2))
               (is (every #'eq strings* (reverse s3)))
               (is (every #'eq strings* s4)))))
      (dolist (lists '(nil t))
        (let ((octets (binstore:store nil data :support-shared-list-structures lists)))
          ;; a next-ref a byte: far fewer bytes than a short-ref each
          (is (< (count binstore::+tag-next-ref+ octets) (length octets)))
          (is (> (count binstore::+tag-next-ref+ octets) 8000))
          (check (binstore:restore octets))
          (check (binstore:restore (make-instance 'octet-input-stream :octets octets)))
          (check (first (binstore::reference-restore octets))))))))

(test uninterned-symbol-names
  "Uninterned symbols come back with their names' characters, as base
strings when those are all base characters (as SBCL makes them), short or
long, read from the window or not."
  (let* ((names (list "G1" "" (make-string 63 :initial-element #\a)
                      (make-string 64 :initial-element #\b) (make-string 300 :initial-element #\c)
                      "αβγ" "mixedλ" (coerce "base" 'simple-base-string)
                      (coerce '(#\x #\Nul #\Rubout) 'string)))
         (symbols (mapcar #'make-symbol names)))
    (dolist (back (list (binstore:restore (binstore:store nil symbols))
                        (binstore:restore (make-instance 'octet-input-stream
                                                         :octets (binstore:store nil symbols)))))
      (is (equal names (mapcar #'symbol-name back)))
      (is (every (lambda (symbol) (null (symbol-package symbol))) back))
      (is (every (lambda (symbol name)
                   (eq (typep (symbol-name symbol) 'base-string)
                       (every (lambda (c) (typep c 'base-char)) name)))
                 back names)))))

(test identity-table-marks
  "Objects written as their parts (containers, ratios) are marked when first
looked up and take their ids after their parts.  Walks of many runs of the
heap at once (more than the table keeps chunks of) give every object its id;
the id is kept when the table starts hashing, or a collection moves objects,
between the mark and the id."
  (let* (;; six runs of neighbours, each in chunks of its own, walked together
         (runs (loop repeat 6 collect (make-list 2000 :initial-element 0)))
         (walk (loop for k below 2000
                     nconc (loop for run in runs collect (nthcdr k run)))))
    ;; twice: the second time in the released table, walked backwards (the
    ;; chunks it remembered must be forgotten with its bits)
    (dolist (walk (list walk (reverse walk)))
      (let ((table (binstore::make-identity-table)))
        (is (loop for object in walk for id from 0
                  always (and (= -1 (binstore::identity-table-get table object t))
                              (= id (binstore::identity-table-add-marked table object)))))
        (is (not (binstore::it-hashed table)))
        (is (loop for object in walk for id from 0
                  always (= id (binstore::identity-table-get table object))))
        (binstore::release-identity-table table))))
  (flet ((mark-then (between)
           ;; X marked, BETWEEN run on the table, then X given its id: met
           ;; again, X must answer that id
           (let ((table (binstore::make-identity-table))
                 (x (make-array 3))
                 (y (make-array 3)))
             (binstore::identity-table-get-or-add table (list 'first))
             (prog1 (and (= -1 (binstore::identity-table-get table x t))
                         (progn (funcall between table y) t)
                         (let ((id (binstore::it-count table)))
                           (and (= id (binstore::identity-table-add-marked table x))
                                (= id (binstore::identity-table-get table x t))
                                (= id (binstore::identity-table-get table x)))))
               (binstore::release-identity-table table)))))
    (is (mark-then (lambda (table y)
                     ;; a collection, then another object: the bits are set afresh
                     (gc :full t)
                     (binstore::identity-table-get-or-add table (list y)))))
    (is (mark-then (lambda (table y)
                     ;; Y met again: the table starts hashing
                     (binstore::identity-table-get-or-add table y)
                     (binstore::identity-table-get-or-add table y)
                     (assert (binstore::it-hashed table)))))))

;; SBCL's collector alone moves some objects and not others: a full
;; collection moves every small object not pinned, one of the nursery none
;; that survived a full one.
#+sbcl
(test identity-table-reindexes-only-what-moved
  "After a collection the table checks whether any of its objects moved
before it indexes them afresh (REINDEX): in seen bits and hashing, a full
collection is seen to have moved them, and afterwards every object has
its id; a collection that moved none of them leaves the table as it was,
its hash table the same vector."
  (dolist (hashing '(nil t))
    (let* ((table (binstore::make-identity-table))
           (objects (loop for i below 5000 collect (list i))))
      (dolist (object objects)
        (binstore::identity-table-get-or-add table object))
      (when hashing
        ;; met again: from now on the table answers from its hash table
        (binstore::identity-table-get-or-add table (first objects)))
      (is (eq hashing (binstore::it-hashed table)))
      (gc :full t)
      (is (not (binstore::without-collections
                 (binstore::indexed-where-they-are-p table)))
          "a full collection moved none of ~d objects (hashing ~a)" (length objects) hashing)
      (is (loop for object in objects for id from 0
                always (= id (binstore::identity-table-get table object))))
      ;; the objects are old now: collecting the nursery leaves them be
      (let ((slots (binstore::it-slots table))
            (epoch (binstore::current-gc-epoch)))
        (gc)
        (is (not (eq epoch (binstore::current-gc-epoch))))
        (is (loop for object in objects for id from 0
                  always (= id (binstore::identity-table-get table object))))
        (is (eq slots (binstore::it-slots table))
            "the table was indexed afresh though none of its objects moved (hashing ~a)"
            hashing))
      (binstore::release-identity-table table))))

;; Not on CLISP, which has no threads.
#-clisp
(test identity-while-collections-move-objects
  "Stores while another thread keeps collecting: objects move under the
table in every state (seen bits, the switch to hashing, hashing), and
every shared object still comes back as one."
  (let* ((done nil)
         (collector (make-test-thread
                     (lambda () (loop until done do (gc) (sleep 0.001)))))
         (strings (loop for i below 20000 collect (format nil "s~d" i)))
         (doubles (loop for i below 20000 collect (float i 1d0)))
         ;; a long unshared stretch, then everything again: references
         (data (list (append strings doubles) (vector strings doubles)
                     (mapcar #'list strings))))
    (unwind-protect
         (dotimes (i 4)
           (dolist (lists '(nil t))
             (let ((copy (binstore:restore
                          (binstore:store nil data :track-references t
                                                   :support-shared-list-structures lists))))
               (check-same data copy)
               (is (eq (first (first copy)) (first (aref (second copy) 0))))
               (is (eq (first (aref (second copy) 1)) (elt (first copy) 20000))))))
      (setf done t)
      (join-test-thread collector))))

(test identity-table-runs-claimed-in-blocks
  "A run claimed a block at a time (IDENTITY-TABLE-CLAIM-RUN with a limit,
then IDENTITY-TABLE-CLAIM-MORE), with a full collection between the
blocks, gives its conses consecutive ids, and a later run stops at a cons
of it."
  (dolist (block (list 2 binstore::+short-claim+ 1024))
    (let* ((table (binstore::make-identity-table :runs t
                                                 :scratch-kind binstore::+scratch-cons-table+))
           (first-list (make-list 3000 :initial-element 1))
           (second-list (list* 5 6 (nthcdr 1000 first-list))))
      (multiple-value-bind (n next) (binstore::identity-table-claim-run table first-list block)
        (let ((total n))
          (is (= block n))
          (loop while (consp next)
                do (collect-moving-objects) ; between two blocks: the conses move
                   (multiple-value-bind (more rest)
                       (binstore::identity-table-claim-more table next block)
                     (is (= (min block (- 3000 total)) more))
                     (when (zerop more)  ; stuck: TOTAL falls short below
                       (return))
                     (incf total more)
                     (setf next rest)))
          (is (= 3000 total))
          (is (null next))))
      (gc :full t)
      (multiple-value-bind (n tail) (binstore::identity-table-claim-run table second-list 10)
        (is (= 2 n))
        (is (eq tail (nthcdr 1000 first-list))))
      (is (loop for c on first-list for id from 0
                always (= id (binstore::identity-table-get table c))))
      (is (= 3000 (binstore::identity-table-get table second-list)))
      (binstore::release-identity-table table))))

(test identity-table-runs
  "A table of runs gives a run's conses consecutive ids, ends a run at a
cons it has, and keeps the ids through collections and the switch to
hashing, with a run still open."
  (let* ((table (binstore::make-identity-table :runs t
                                               :scratch-kind binstore::+scratch-cons-table+))
         (first-list (make-list 3000 :initial-element 1))
         (second-list (list* 5 6 (nthcdr 1000 first-list))))
    (flet ((claim-run (list)
             ;; claim from LIST on; the number claimed and where it stopped
             (binstore::identity-table-start-run table list)
             (let ((n 0) (c list))
               (loop while (and (consp c) (binstore::identity-table-claim table c))
                     do (incf n)
                        (when (= n 1500) (gc :full t)) ; mid-run: objects move
                        (setf c (cdr c)))
               (values n c))))
      (multiple-value-bind (n tail) (claim-run first-list)
        (is (= 3000 n))
        (is (null tail)))
      (multiple-value-bind (n tail) (claim-run second-list)
        (is (= 2 n))
        (is (eq tail (nthcdr 1000 first-list))))
      (is (not (binstore::it-hashed table)))
      (gc :full t)
      (is (= 1000 (binstore::identity-table-get table (nthcdr 1000 first-list))))
      (is (binstore::it-hashed table))
      (is (loop for c on first-list for id from 0
                always (= id (binstore::identity-table-get table c))))
      (is (= 3000 (binstore::identity-table-get table second-list)))
      (is (= 3001 (binstore::identity-table-get table (cdr second-list))))
      (let ((third-list (list 7 8 9)))
        (multiple-value-bind (n tail) (claim-run third-list)
          (is (= 3 n))
          (is (null tail)))
        (is (= 3002 (binstore::identity-table-get table third-list))))
      (binstore::release-identity-table table))))

(test repeated-doubles-in-runs-of-doubles
  "Runs of doubles alone, or of complexes of doubles alone, in a list or a
simple vector, read by the loops that hold the seen bits they set in a
register: a box repeated right after itself, a few later (in the same word
of bits), some hundred later (another word) and thousands later (another
chunk), restores EQ to its first occurrence and nothing else is merged; so
too with a collection in the middle of storing."
  (flet ((copies (data collect)
           (if collect
               (let* ((done nil)
                      (collector (make-test-thread
                                  (lambda () (loop until done do (gc) (sleep 0.0005))))))
                 (unwind-protect
                      (loop repeat 20
                            collect (binstore:restore
                                     (binstore:store nil data :track-references t)))
                   (setf done t)
                   (join-test-thread collector)))
               (list (binstore:restore (binstore:store nil data :track-references t))))))
    ;; CLISP has no threads to collect from
    (dolist (collect '(nil #-clisp t))
      (dolist (make (list (lambda (i) (+ 0.25d0 i))
                          (lambda (i) (complex (+ 0.25d0 i) -2d0))))
        (dolist (container '(list simple-vector))
          (let* ((n 6000)
                 (repeats '((1 . 0) (5 . 2) (6 . 2) (300 . 40) (301 . 300) (5000 . 700)
                            (5999 . 5998)))
                 (numbers (make-array n)))
            (dotimes (i n)
              (let ((repeat (assoc i repeats)))
                (setf (aref numbers i)
                      (if repeat (aref numbers (cdr repeat)) (funcall make i)))))
            (let ((data (coerce numbers container)))
              (dolist (copy (copies data collect))
                (let ((objects (coerce copy 'vector))
                      (distinct (make-hash-table :test 'eq)))
                  (is (equalp data copy))
                  (is (typep copy container))
                  (is (loop for (at . of) in repeats
                            always (eq (aref objects at) (aref objects of)))
                      "~s, collecting ~s" container collect)
                  (loop for x across objects do (setf (gethash x distinct) t))
                  (is (= (- n (length repeats)) (hash-table-count distinct))))))))))))

(test repeated-numbers-in-runs-of-fresh-ones
  "Long lists of fresh doubles and complexes, written by the loop that gives
new numbers their ids without a call, with some repeated: right after
themselves, a few elements later, thousands later (in another chunk of the
heap), and among fixnums and singles.  Each repeat restores EQ to its first
occurrence, and every other number restores as an object of its own."
  (dolist (n '(50 300 5000 70000))
    (dolist (make (list (lambda (i) (+ 0.5d0 i))
                        (lambda (i) (complex (+ 0.5d0 i) 1d0))))
      (let* ((repeats (list (cons 1 0) (cons 9 3) (cons (floor n 2) 2)
                            (cons (1- n) (floor n 2))))
             (numbers (make-array n))
             (data '()))
        (dotimes (i n)
          (let ((repeat (assoc i repeats)))
            (setf (aref numbers i)
                  (if repeat (aref numbers (cdr repeat)) (funcall make i)))
            (push (aref numbers i) data)
            (when (zerop (mod i 7)) (push i data))
            (when (zerop (mod i 11)) (push 1.5f0 data))))
        (setf data (nreverse data))
        (let* ((copy (binstore:restore (binstore:store nil data :track-references t)))
               (objects (coerce (remove-if-not (lambda (x) (typep x '(or double-float complex)))
                                               copy)
                                'vector))
               (distinct (make-hash-table :test 'eq)))
          (check-same data copy)
          (is (= n (length objects)))
          (loop for (at . of) in repeats
                do (is (eq (aref objects at) (aref objects of))
                       "element ~d (n ~d) is not the one at ~d" at n of))
          (loop for x across objects do (setf (gethash x distinct) t))
          (is (= (- n (length repeats)) (hash-table-count distinct))
              "n ~d: ~d distinct objects" n (hash-table-count distinct)))))))

;; Not on CLISP, which has no threads.
#-clisp
(test bytes-do-not-depend-on-collections
  "A store with shared list structures writes the same bytes whether or not
collections move the data while it runs: a collection in the middle of
claiming a run of conses must not end the run early (on a bit set for an
address the collection has since given to another cons) nor let a cons
written before pass unseen."
  (let* ((tail (loop for i below 3000 collect (float i 1d0)))
         (data (loop for i below 60
                     collect (append (loop for j below 2000 collect (+ j i)) tail)))
         (expected (binstore:store nil data :support-shared-list-structures t))
         (done nil)
         (round 0)
         ;; At most 20 collections a store: enough to land in the middle of
         ;; claiming runs, few enough that the test stays short.  Unbounded,
         ;; back-to-back collections stop the storing thread most of the
         ;; time: the test took 2 minutes (10 before REINDEX held them off).
         (collector (make-test-thread
                     (lambda ()
                       (loop with seen = -1 and made = 0
                             until done
                             do (unless (eql seen round) (setf seen round made 0))
                                (when (< made 20) (gc) (incf made))
                                (sleep 0.0002))))))
    (unwind-protect
         (is (loop for r below 40
                   always (progn
                            (setf round r)
                            (equalp expected
                                    (binstore:store nil data :support-shared-list-structures t)))))
      (setf done t)
      (join-test-thread collector))
    (let ((copy (binstore:restore expected)))
      (check-same data copy)
      (is (eq (nthcdr 2000 (first copy)) (nthcdr 2000 (second copy)))))))

(test identity-table-box-runs
  "Boxes given ids as box runs (from a list, from a vector, and a run too
short for one, which takes entries), between objects with entries, keep
their ids through the switch to hashing and through collections, and
MAP-OBJECTS gives every object in id order.  Releasing the table drops the
runs."
  (let* ((table (binstore::make-identity-table))
         (list (loop for i below 10 collect (+ 0.5d0 i)))
         (vector (coerce (loop for i below 6 collect (+ 100.5d0 i)) 'simple-vector))
         (pair (list 200.5d0 201.5d0))
         (first (list 'first))
         (middle (list 'middle))
         (last (list 'last)))
    (flet ((take-run (source start n)
             ;; as PUT-TRACKED-BOXES leaves them: seen bits set, then ids given
             (if (consp source)
                 (loop for x in source repeat n do (binstore::mark-seen table x))
                 (loop for i from start below (+ start n)
                       do (binstore::mark-seen table (svref source i))))
             (binstore::take-box-run table source start n)))
      (is (= -1 (binstore::identity-table-get-or-add table first)))      ; id 0
      (take-run list 0 10)                                                     ; ids 1-10
      (is (= -1 (binstore::identity-table-get-or-add table middle)))     ; id 11
      (take-run vector 2 4)                                                    ; ids 12-15
      (take-run pair 0 2)                                                      ; ids 16-17, entries
      (is (= -1 (binstore::identity-table-get-or-add table last)))       ; id 18
      (is (= 19 (binstore::it-count table)))
      (is (= 2 (binstore::it-box-run-count table)))
      (is (= 5 (binstore::it-entries table)))
      (let ((expected (append (list first) list (list middle) (coerce (subseq vector 2) 'list)
                              pair (list last))))
        (flet ((mapped ()
                 (let ((objects '()) (ids '()))
                   (binstore::map-objects (lambda (object id) (push object objects) (push id ids))
                                          table)
                   (and (every #'eq expected (reverse objects))
                        (= (length expected) (length objects))
                        (equal (reverse ids) (loop for i below 19 collect i))))))
          (is-true (mapped))
          (gc :full t)                 ; the seen bits are set afresh
          (is (= 4 (binstore::identity-table-get-or-add table (fourth list))))
          (is (binstore::it-hashed table))
          (gc :full t)                 ; and the hash table is rebuilt
          (is (loop for x in expected for id from 0
                    always (= id (binstore::identity-table-get table x))))
          (is (= -1 (binstore::identity-table-get table (svref vector 0))))
          (is-true (mapped))))
      (binstore::release-identity-table table)
      (is (= 0 (binstore::it-box-run-count table)))
      (is (every (lambda (x) (eql x 0)) (binstore::it-box-runs table))))))

(defclass collecting-octet-stream (octet-output-stream) ()
  (:documentation "Collects the octets written to it, after a full collection
at each write: the objects being stored move between two windows."))

(defmethod stream-write-sequence :before ((stream collecting-octet-stream) sequence
                                                  &optional start end)
  (declare (ignore sequence start end))
  (gc :full t))

(test box-runs-through-collections
  "Lists and vectors of new doubles and complexes, written as box runs, then
each met again, stored through a stream that collects at every window:
the bytes equal a store to a vector, and the copy shares what the data
shares."
  (let* ((doubles (loop for i below 20000 collect (+ i 0.25d0)))
         (complexes (coerce (loop for i below 20000 collect (complex (+ i 0.5d0) 1d0))
                            'simple-vector))
         (mixed (loop for i below 3000
                      collect (if (zerop (mod i 7)) (format nil "s~d" i) (+ i 0.75d0))))
         (data (list doubles complexes mixed
                     (nth 0 doubles) (nth 19999 doubles) (nth 12345 doubles)
                     (svref complexes 0) (svref complexes 777) (nth 1 mixed) (nth 7 mixed))))
    (dolist (lists '(nil t))
      (let ((out (make-instance 'collecting-octet-stream))
            (octets (binstore:store nil data :support-shared-list-structures lists)))
        (binstore:store out data :support-shared-list-structures lists)
        (is (equalp octets (stream-octets out)))
        (let ((copy (binstore:restore (stream-octets out))))
          (check-same data copy)
          (destructuring-bind (d c m d0 d1 d2 c0 c1 m1 m7) copy
            (is (eq d0 (nth 0 d)))
            (is (eq d1 (nth 19999 d)))
            (is (eq d2 (nth 12345 d)))
            (is (eq c0 (svref c 0)))
            (is (eq c1 (svref c 777)))
            (is (eq m1 (nth 1 m)))
            (is (eq m7 (nth 7 m)))))))))

#+abcl
(test object-numbers-by-identity-on-abcl
  "ABCL numbers objects for the identity table by the JVM's identity hash
code: equal conses get distinct, lasting numbers, each in a bucket of its
own or nearly (an EQ table, which ABCL hashes by SXHASH, put them all in one
bucket, and storing 40,000 equal lists took 30 s)."
  (let* ((conses (loop repeat 1000 collect (list 7)))
         (numbers (mapcar #'binstore::object-address conses)))
    (is (= 1000 (length (remove-duplicates numbers))))
    (is (equal numbers (mapcar #'binstore::object-address conses)))
    (is (< (loop for entries being the hash-values of binstore::**object-numbers**
                 maximize (length entries))
           10))))
