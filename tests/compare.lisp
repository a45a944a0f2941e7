;;;; SAME-DATA-P: does a restored copy match its original in every way binstore
;;;; promises?  Type, value, array and hash-table attributes, and identity:
;;;; objects shared (or circular) in the original must be shared the same way
;;;; in the copy, and objects distinct in the original must stay distinct.
;;;;
;;;; The walk uses an explicit work stack, never recursion, so data nested
;;;; 100,000 levels deep and lists of a million elements compare within the
;;;; default control stack.

(in-package #:binstore-tests)

(defstruct (comparison (:constructor make-comparison (identity conses entries)))
  "State of one SAME-DATA-P walk."
  (identity t)
  (conses nil)
  (entries t)                           ; NIL: hash-table entries are not compared
  ;; The correspondence between the two data: object of A -> object of B, and back.
  ;; Keyed by IDENTITY-KEY (tests/platform.lisp), as VISITED is.
  (forward (make-identity-table))
  (backward (make-identity-table))
  ;; Objects outside the correspondence: A object -> list of B objects it was
  ;; already compared with, so shared or circular parts are walked once.
  (visited (make-identity-table))
  ;; Pending pairs: A object, B object, path, pushed as three elements.
  (stack (make-array 48 :adjustable t :fill-pointer 0))
  ;; Hash-table entries whose key could not be matched yet (see MATCH-ENTRIES).
  (deferred '()))

(defstruct (entry-job (:constructor make-entry-job (b path key-of-b pending claimed)))
  "Entries of a hash table A still to be paired with entries of hash table B.
PENDING holds A's entries as (key . value), taken by MAPHASH: A's own GETHASH
may not find a key whose contents the data's maker changed after storing it
\(ABCL's EQ and EQL tables hash a cons by its contents)."
  b path key-of-b pending claimed)

;;; Reporting a difference: the walk throws a message to SAME-DATA-P.

(defun brief (object)
  "OBJECT printed for a message: bounded whatever its size or circularity
\(as binstore prints objects in its messages, and cut at 120 characters)."
  (let ((text (binstore::brief object)))
    (if (> (length text) 120)
        (concatenate 'string (subseq text 0 117) "...")
        text)))

(defun describe-path (path)
  "PATH is a list of steps, innermost first.  Render it outermost first, runs
of one step as STEP*COUNT, showing the innermost 12 runs."
  (let ((runs '()))                     ; (step . count), outermost first
    (dolist (step path)                 ; innermost first, so PUSH reverses
      (if (and runs (equal step (car (first runs))))
          (incf (cdr (first runs)))
          (push (cons step 1) runs)))
    (format nil "~:[~;... ~]~{~a~^ ~}"
            (> (length runs) 12)
            (mapcar (lambda (run)
                      (if (= 1 (cdr run))
                          (brief (car run))
                          (format nil "~a*~d" (brief (car run)) (cdr run))))
                    (last runs 12)))))

(defvar *match-depth* 0
  "How many STRUCTURALLY-EQUAL-P calls enclose the current walk.")

(defun differ (path control &rest arguments)
  "Stop the walk: the data differ at PATH.  CONTROL uses ~a for each argument."
  (throw 'differ
    (if (plusp *match-depth*)
        "differ"                        ; nobody reads it: skip the printing
        (format nil "at [~a]: ~?" (describe-path path) control (mapcar #'brief arguments)))))

;;; Scalars

(defun same-number-p (a b)
  "True when numbers A and B are the same type and value; floats bit for bit."
  (typecase a
    (double-float (and (typep b 'double-float)
                       (= (double-float-bits a) (double-float-bits b))))
    (single-float (and (typep b 'single-float)
                       (= (single-float-bits a) (single-float-bits b))))
    (complex (and (complexp b)
                  (same-number-p (realpart a) (realpart b))
                  (same-number-p (imagpart a) (imagpart b))))
    (t (and (rationalp b) (eql a b)))))

(defun same-scalar-p (a b)
  "Compare two elements of a specialized array or raw structure slot."
  (if (numberp a)
      (and (numberp b) (same-number-p a b))
      (eql a b)))

(defun immediatep (object)
  "Objects with no identity of their own: EQ-ness carries no information.
The integers are SBCL's fixnums on every Lisp: binstore writes them by
value everywhere, so that the bytes do not depend on a Lisp's fixnum width
\(an ECL bignum of 62 bits comes back as two objects where it was one)."
  (typep object '(or (signed-byte 63) character single-float)))

;;; Identity

(defun note-pair (cmp a b path &key (reverse t))
  "Record that A corresponds to B.  Return true when the pair was already
known (its contents are being or have been compared).  Signal a difference
when A was paired with another object, or (with REVERSE) B with another A."
  (let ((seen (gethash (identity-key a) (comparison-forward cmp) cmp)))
    (cond ((eq seen b) t)
          ((not (eq seen cmp))
           (differ path "identity broken: ~a already corresponds to another object ~a, not ~a"
                   a seen b))
          (t
           (when reverse
             (let ((back (gethash (identity-key b) (comparison-backward cmp) cmp)))
               (unless (eq back cmp)
                 (differ path "identity broken: ~a corresponds to two objects, ~a and ~a"
                         b back a)))
             (setf (gethash (identity-key b) (comparison-backward cmp)) a))
           (setf (gethash (identity-key a) (comparison-forward cmp)) b)
           nil))))

(defun note-visit (cmp a b)
  "Outside the correspondence: true when A and B were already compared."
  (let ((seen (gethash (identity-key a) (comparison-visited cmp))))
    (if (member b seen :test #'eq)
        t
        (progn (push b (gethash (identity-key a) (comparison-visited cmp)))
               nil))))

(defun already-compared-p (cmp a b path)
  "Register the heap objects A and B; true when their contents need no new walk."
  (if (comparison-identity cmp)
      (note-pair cmp a b path)
      (note-visit cmp a b)))

;;; The work stack

(defun push-pair (cmp a b path)
  (let ((stack (comparison-stack cmp)))
    (vector-push-extend a stack)
    (vector-push-extend b stack)
    (vector-push-extend path stack)))

(defun pop-pair (cmp)
  "Return T and the next pair (A, B and its path), or NIL when the stack is empty."
  (let ((stack (comparison-stack cmp)))
    (if (zerop (fill-pointer stack))
        nil
        (let ((path (vector-pop stack))
              (b (vector-pop stack))
              (a (vector-pop stack)))
          (values t a b path)))))

;;; Comparing one pair

(defun compare-pair (cmp a b path)
  (cond ((consp a)
         (if (consp b)
             (compare-list cmp a b path)
             (differ path "cons ~a restored as ~a" a b)))
        ((symbolp a) (compare-symbol cmp a b path))
        ((immediatep a)
         (unless (if (numberp a) (and (numberp b) (same-number-p a b)) (eql a b))
           (differ path "~a restored as ~a" a b)))
        ((numberp a)
         ;; Bignums, ratios, doubles, complexes: shared ones must stay shared.
         ;; Only one direction is required: equal numbers may be coalesced.
         (when (comparison-identity cmp)
           (note-pair cmp a b path :reverse nil))
         (unless (and (numberp b) (same-number-p a b))
           (differ path "number ~a restored as ~a" a b)))
        ((not (eq (class-of a) (class-of b)))
         (differ path "~a of class ~a restored as ~a of class ~a"
                 a (class-name (class-of a)) b (class-name (class-of b))))
        ((packagep a)
         (unless (eq a b) (differ path "package ~a restored as ~a" a b)))
        ((already-compared-p cmp a b path))
        (t (compare-contents cmp a b path))))

(defun compare-symbol (cmp a b path)
  (cond ((not (symbolp b)) (differ path "symbol ~a restored as ~a" a b))
        ((symbol-package a)
         (unless (eq a b) (differ path "symbol ~a restored as ~a" a b)))
        ((symbol-package b) (differ path "uninterned ~a restored as interned ~a" a b))
        ((string/= (symbol-name a) (symbol-name b))
         (differ path "uninterned ~a restored as ~a" a b))
        ;; Uninterned symbols keep their identity within one store, always.
        (t (note-pair cmp a b path))))

(defun compare-list (cmp a b path)
  "Walk the conses A and B along their cdrs, queueing the cars."
  (loop for index from 0
        do (when (if (comparison-conses cmp)
                     (note-pair cmp a b path)
                     (note-visit cmp a b))
             (return))
           (push-pair cmp (car a) (car b) (list* (list :nth index) path))
           (let ((next-a (cdr a)) (next-b (cdr b)))
             (unless (and (consp next-a) (consp next-b))
               (push-pair cmp next-a next-b (list* (list :nthcdr (1+ index)) path))
               (return))
             (setf a next-a b next-b))))

(defun compare-contents (cmp a b path)
  "A and B are heap objects of the same class, seen for the first time."
  (typecase a
    (array (compare-array cmp a b path))
    (hash-table (compare-hash-table cmp a b path))
    (pathname (compare-pathname a b path))
    (condition (compare-slots cmp a b path))
    (structure-object (compare-structure cmp a b path))
    (standard-object (compare-slots cmp a b path))
    (t (unless (eq a b)
         (differ path "do not know how to compare ~a with ~a" a b)))))

(defun compare-array (cmp a b path)
  (flet ((attribute (name fn)
           (let ((x (funcall fn a)) (y (funcall fn b)))
             (unless (equal x y)
               (differ path "array ~a ~a restored as ~a" name x y)))))
    (attribute "element type" #'array-element-type)
    (attribute "dimensions" #'array-dimensions)
    (attribute "simpleness" (lambda (x) (typep x 'simple-array)))
    ;; as the format calls it (doc/FORMAT.md, Across Lisps): SBCL's
    ;; ADJUSTABLE-ARRAY-P, true of every array that is not simple
    (attribute "adjustability" #'binstore::format-adjustable-p)
    (attribute "fill-pointer presence" #'array-has-fill-pointer-p)
    (when (array-has-fill-pointer-p a)
      (attribute "fill pointer" #'fill-pointer)))
  (multiple-value-bind (target-a offset-a) (array-displacement a)
    (multiple-value-bind (target-b offset-b) (array-displacement b)
      (cond ((and (null target-a) (null target-b)))
            ((or (null target-a) (null target-b) (/= offset-a offset-b))
             (differ path "displacement ~a+~a restored as ~a+~a"
                     target-a offset-a target-b offset-b))
            (t (push-pair cmp target-a target-b (list* '(:displaced-to) path))))))
  ;; Every element, beyond the fill pointer too.
  (if (eq (array-element-type a) t)
      (dotimes (i (array-total-size a))
        (push-pair cmp (row-major-aref a i) (row-major-aref b i) (list* (list :aref i) path)))
      (dotimes (i (array-total-size a))
        (unless (if (member (array-element-type a) '(double-float single-float))
                    (= (float-element-bits a i) (float-element-bits b i))
                    (same-scalar-p (row-major-aref a i) (row-major-aref b i)))
          (differ (list* (list :aref i) path) "element ~a restored as ~a"
                  (row-major-aref a i) (row-major-aref b i))))))

(defun compare-pathname (a b path)
  (unless (and (equal a b)
               (every (lambda (component)
                        (equal (funcall component a) (funcall component b)))
                      '(pathname-host pathname-device pathname-directory
                        pathname-name pathname-type pathname-version)))
    (differ path "pathname ~a restored as ~a" a b)))

(defun compare-structure (cmp a b path)
  (loop for (name . raw-p) in (structure-slots a)
        do (let ((value-a (slot-value a name))
                 (value-b (slot-value b name))
                 (step (list* (list :slot name) path)))
             (if raw-p
                 ;; A raw slot boxes a fresh number on each read: compare values only.
                 (unless (same-scalar-p value-a value-b)
                   (differ step "raw slot ~a restored as ~a" value-a value-b))
                 (push-pair cmp value-a value-b step)))))

(defun compare-slots (cmp a b path)
  "Standard objects and conditions: every instance slot, bound or not.
Class slots are the same storage in A and B, so there is nothing to compare."
  (dolist (name (instance-slot-names a))
    (let ((bound-a (slot-boundp a name))
          (bound-b (slot-boundp b name))
          (step (list* (list :slot name) path)))
      (cond ((not (eq bound-a bound-b))
             (differ step "slot boundness ~a restored as ~a" bound-a bound-b))
            (bound-a
             (push-pair cmp (slot-value a name) (slot-value b name) step))))))

;;; Hash tables.  An entry of A is paired with the entry of B whose key is
;;; A's key's counterpart: known from the correspondence, or found by B's own
;;; test.  Keys reachable only through the table itself (a fresh cons in an
;;; EQ table, say) are matched last, by structure.

(defun compare-hash-table (cmp a b path)
  (flet ((attribute (name fn)
           (let ((x (funcall fn a)) (y (funcall fn b)))
             (unless (equal x y)
               (differ path "hash table ~a ~a restored as ~a" name x y)))))
    (attribute "test" #'hash-table-test)
    (attribute "size" #'hash-table-size)
    (attribute "rehash size" #'hash-table-rehash-size)
    (attribute "rehash threshold" #'hash-table-rehash-threshold)
    (attribute "weakness" #'hash-table-weakness)
    (attribute "synchronization" #'hash-table-synchronized-p)
    (attribute "count" #'hash-table-count))
  (when (comparison-entries cmp)
    (queue-entries cmp a b path)))

(defun queue-entries (cmp a b path)
  (let ((key-of-b (make-hash-table :test (hash-table-test b)))
        (pending '()))
    (maphash (lambda (key value)
               (declare (ignore value))
               (setf (gethash key key-of-b) key))
             b)
    (maphash (lambda (key value)
               (push (cons key value) pending))
             a)
    (push (make-entry-job b path key-of-b pending (make-hash-table :test 'eq))
          (comparison-deferred cmp))))

(defun counterpart-key (cmp job key)
  "The key of B that corresponds to KEY of A, and whether one was found."
  (multiple-value-bind (mapped known) (gethash (identity-key key) (comparison-forward cmp))
    (if known
        (values mapped t)
        (gethash key (entry-job-key-of-b job)))))

(defun pair-entry (cmp job entry-a key-b)
  (let ((path (entry-job-path job))
        (key-a (car entry-a)))
    (multiple-value-bind (value-b present) (gethash key-b (entry-job-b job))
      (unless present
        (differ path "key ~a: its counterpart ~a is not found in the restored table"
                key-a key-b))
      (when (gethash key-b (entry-job-claimed job))
        (differ path "two keys correspond to the restored key ~a" key-b))
      (setf (gethash key-b (entry-job-claimed job)) t)
      (push-pair cmp key-a key-b (list* (list :key key-a) path))
      (push-pair cmp (cdr entry-a) value-b
                 (list* (list :value key-a) path)))))

(defun match-entries (cmp job)
  "Pair every pending key of JOB that has a known counterpart.  Return true
when at least one was paired."
  (let ((progress nil) (still '()))
    (dolist (entry (entry-job-pending job))
      (multiple-value-bind (key-b found) (counterpart-key cmp job (car entry))
        (if found
            (progn (pair-entry cmp job entry key-b) (setf progress t))
            (push entry still))))
    (setf (entry-job-pending job) still)
    progress))

(defun match-one-by-structure (cmp job)
  "Pair the first pending key of JOB with an unclaimed, structurally equal key of B."
  (let* ((entry (pop (entry-job-pending job)))
         (key (car entry))
         (identity (comparison-identity cmp))
         (candidate
           (block search
             (maphash (lambda (key-b value)
                        (when (and (not (gethash key-b (entry-job-claimed job)))
                                   (not (and identity
                                             (nth-value 1 (gethash (identity-key key-b) (comparison-backward cmp)))))
                                   (structurally-equal-p key key-b)
                                   ;; Keys alike (two uninterned symbols of one
                                   ;; name, say): the values tell them apart.
                                   (structurally-equal-p (cdr entry) value))
                          (return-from search key-b)))
                      (entry-job-b job))
             (differ (entry-job-path job) "key ~a has no counterpart in the restored table" key))))
    (pair-entry cmp job entry candidate)))

(defun settle-deferred (cmp)
  "Called when the stack is empty: make progress on pending hash-table entries.
Return NIL when nothing is left to do."
  (setf (comparison-deferred cmp)
        (remove-if (lambda (job) (null (entry-job-pending job))) (comparison-deferred cmp)))
  (let ((jobs (comparison-deferred cmp)))
    (cond ((null jobs) nil)
          ((some #'identity (mapcar (lambda (job) (match-entries cmp job)) jobs)) t)
          (t (match-one-by-structure cmp (first jobs)) t))))

;;; Entry points

(defun walk (cmp a b)
  "Compare A and B with the settings of CMP: NIL, or a message on a difference."
  (catch 'differ
    (push-pair cmp a b '())
    (loop
      (multiple-value-bind (more x y path) (pop-pair cmp)
        (if more
            (compare-pair cmp x y path)
            (unless (settle-deferred cmp)
              (return nil)))))))

(defun structurally-equal-p (a b)
  "A and B are alike by structure: used to tell which key of a restored table
stands for a key of the original.  Keys may contain tables whose own keys
need matching, and so on (even their own table): beyond a few such levels,
hash tables are compared by their attributes only, so this terminates."
  (let ((*match-depth* (1+ *match-depth*)))
    (null (walk (make-comparison nil nil (< *match-depth* 4)) a b))))

(defun same-data-p (a b &key (identity t) (conses nil))
  "True when B is a faithful copy of A.  IDENTITY (default true): objects
shared or circular in A must correspond one to one with objects of B.
CONSES: conses take part in that correspondence too (for data stored with
:support-shared-list-structures t); otherwise lists compare by structure.
With IDENTITY nil, only structure is compared (shared parts of A may be
separate copies in B), except that uninterned symbols always correspond one
to one.  On a difference, return NIL and a message saying where."
  (let ((message (walk (make-comparison identity conses t) a b)))
    (if message (values nil message) t)))

(defun check-same (original copy &rest options)
  "A FiveAM check that COPY is SAME-DATA-P to ORIGINAL (OPTIONS are passed on)."
  (multiple-value-bind (same message) (apply #'same-data-p original copy options)
    (is (eq t same) "restored data differs ~a" message)))

(defun bounded-report (condition)
  "CONDITION's report, bounded: its objects may be huge or circular."
  (let* ((*print-length* 6) (*print-level* 3) (*print-lines* 2) (*print-circle* nil)
         (text (handler-case (princ-to-string condition)
                 (serious-condition () (format nil "a ~s" (type-of condition))))))
    (subseq text 0 (min 200 (length text)))))

(defun round-trip (data &rest store-options)
  "Store DATA to a fresh octet vector with STORE-OPTIONS, and restore it."
  (binstore:restore (apply #'binstore:store nil data store-options)))

(defun filled-table (entries &rest options)
  "A hash table made with OPTIONS (as for MAKE-HASH-TABLE) holding ENTRIES, a plist."
  (let ((table (apply #'make-test-hash-table options)))
    (loop for (key value) on entries by #'cddr
          do (setf (gethash key table) value))
    table))

;;; The comparator is what every round-trip test rests on: check that it
;;; does tell differences apart, and that it copes with huge and deep data.

(def-suite comparator :in all
  :description "SAME-DATA-P itself: it must catch each kind of difference.")
(in-suite comparator)

(defun differ-p (a b &rest options)
  (not (apply #'same-data-p a b options)))

(test comparator-sees-value-differences
  (is (differ-p "abc" "abd"))
  (when (specialized-here-p 'base-char)
    (is (differ-p "abc" (coerce "abc" 'simple-base-string))))
  #-clisp (is (differ-p 0.0 -0.0))       ; one zero on CLISP
  (is (differ-p 1d0 1f0))
  (when *nan-payloads-kept-p*
    (is (differ-p (make-double-float #x7FF80000 0) (make-double-float #x7FF80000 1))))
  (is (differ-p (list 1 2) (list 1 2 3)))
  (is (differ-p (list 1 2) (list* 1 2 3)))
  (is (differ-p (make-symbol "A") (make-symbol "B")))
  (is (differ-p (make-symbol "A") :a))
  (is (differ-p #p"/tmp/a.lisp" #p"/tmp/a.lsp"))
  (is (differ-p (make-gen-raw :d 1d0) (make-gen-raw :d -1d0)))
  (is (differ-p (make-array 3 :fill-pointer 1 :initial-element 0) (make-array 3 :fill-pointer 2 :initial-element 0)))
  ;; Elements past the fill pointer count too.
  (is (differ-p (make-array 3 :fill-pointer 1 :initial-contents '(1 2 3))
                (make-array 3 :fill-pointer 1 :initial-contents '(1 2 4))))
  (is (differ-p (make-array 2 :adjustable t :initial-element 0) (make-array 2 :initial-element 0)))
  (when (specialized-here-p 'fixnum)
    (is (differ-p (make-array 2 :element-type 'fixnum :initial-element 0) (make-array 2 :initial-element 0))))
  (let ((x (make-hash-table)) (y (make-hash-table)))
    (setf (gethash 1 x) 2 (gethash 1 y) 3)
    (is (differ-p x y)))
  (let ((x (make-instance 'gen-node)) (y (make-instance 'gen-node :left 1)))
    (is (differ-p x y))))

(test comparator-sees-identity-differences
  (let* ((s (copy-seq "shared"))
         (shared (list s s))
         (copies (list (copy-seq "shared") (copy-seq "shared"))))
    (is (differ-p shared copies))
    (is (differ-p copies shared))
    (is (same-data-p shared copies :identity nil)))
  (let ((u (make-symbol "U")))
    (is (differ-p (list u u) (list (make-symbol "U") (make-symbol "U")) :identity nil)))
  (let* ((tail (list 3)) (a (list (list* 1 tail) (list* 2 tail))))
    (is (same-data-p a (list (list 1 3) (list 2 3))))
    (is (differ-p a (list (list 1 3) (list 2 3)) :conses t)))
  (let ((v (vector 1 nil)) (w (vector 1 nil)) (w2 (vector 1 nil)))
    (setf (aref v 1) v (aref w 1) w2 (aref w2 1) w)
    (is (differ-p v w))
    (is (same-data-p v w :identity nil))))

(test comparator-matches-hash-keys
  (flet ((table (test &rest plist)
           (let ((h (make-hash-table :test test)))
             (loop for (k v) on plist by #'cddr do (setf (gethash k h) v))
             h)))
    (is (same-data-p (table 'eq (list 1) :a (list 2) :b) (table 'eq (list 2) :b (list 1) :a)))
    (is (differ-p (table 'eq (list 1) :a (list 2) :b) (table 'eq (list 2) :a (list 1) :b)))
    (is (same-data-p (table 'equal "x" 1 "y" 2) (table 'equal "y" 2 "x" 1)))
    (is (differ-p (table 'equal "x" 1 "y" 2) (table 'equal "y" 1 "x" 2)))))

(test comparator-reads-entries-of-a-key-changed-after-insertion
  ;; The generator makes a cons a key of an EQ table and later makes it part
  ;; of a cycle.  On ABCL, whose EQ tables hash a cons by its contents, the
  ;; table can then no longer find that key: the original's entries are read
  ;; by MAPHASH, never by GETHASH.
  (let* ((key (list 1 2))
         (table (make-hash-table :test 'eq)))
    (setf (gethash key table) :value)
    (setf (car key) key)
    (is (same-data-p table (binstore:restore (binstore:store nil table)) :conses t))
    (let ((changed (binstore:restore (binstore:store nil table))))
      (setf (gethash (loop for k being the hash-keys of changed return k) changed) :other)
      (is (differ-p table changed :conses t)))))

(test comparator-walks-big-and-deep-data
  (let ((long (make-list 1000000 :initial-element 7)))
    (is (same-data-p long (copy-list long)))
    (is (differ-p long (append (make-list 999999 :initial-element 7) (list 8)))))
  (flet ((nest (depth leaf make)
           (let ((x leaf))
             (dotimes (i depth x) (setf x (funcall make x))))))
    (is (same-data-p (nest 100000 nil #'list) (nest 100000 nil #'list)))
    (is (differ-p (nest 100000 1 #'list) (nest 100000 2 #'list)))
    (is (same-data-p (nest 100000 nil #'vector) (nest 100000 nil #'vector)))
    (is (differ-p (nest 100000 nil #'vector) (nest 99999 nil #'vector)))))

(test comparator-terminates-on-cycles
  (let ((a (list 1 2)) (b (list 1 2)))
    (setf (cddr a) a (cddr b) b)
    (is (same-data-p a b :conses t)))
  (let ((h (make-hash-table :test 'eq)) (k (make-hash-table :test 'eq)))
    (setf (gethash h h) h (gethash k k) k)
    (is (same-data-p h k))
    (is (same-data-p h k :identity nil))))

(def-fixture headerless ()
  "Restores in the body accept records without binstore's header: for the
tests that spell out the bytes of an object, which are the point, not the
header before them."
  (let ((binstore:*require-header* nil))
    (&body)))

(def-fixture format-2-defaults ()
  "The options' defaults as they were before format version 3: no header
written or required, objects tracked but not conses.  The suites written
for those defaults chose their code paths by them (the one-walk writers of
untracked lists, byte offsets without a header); they keep testing those
paths under this fixture, and SAFE-DEFAULTS tests the defaults of now."
  (let ((binstore:*output-magic-number* nil)
        (binstore:*require-header* nil)
        (binstore:*support-shared-list-structures* nil))
    (&body)))

(defun make-option-thread (function &rest keys)
  "MAKE-TEST-THREAD for a thread that sees the options' values of the
thread making it: a new thread sees the global values of special
variables, not the bindings of a fixture such as FORMAT-2-DEFAULTS."
  (let ((magic binstore:*output-magic-number*)
        (header binstore:*require-header*)
        (lists binstore:*support-shared-list-structures*))
    (apply #'make-test-thread
           (lambda ()
             (let ((binstore:*output-magic-number* magic)
                   (binstore:*require-header* header)
                   (binstore:*support-shared-list-structures* lists))
               (funcall function)))
           keys)))
