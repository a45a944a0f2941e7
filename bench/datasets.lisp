;;;; The standard benchmark data sets (the names, shapes and sizes the Lisp
;;;; serializers are compared on): one generator per data set, each drawing
;;;; from its own random state seeded with the same fixed seed, so a data set
;;;; is identical whichever other sets are run and in whatever order.  Also
;;;; the cheap round-trip check used by the benchmark.

(defpackage #:binstore-bench
  (:use #:common-lisp)
  (:export #:main #:fresh-memory-report #:dataset-names #:generate-dataset #:mode-names))

(in-package #:binstore-bench)

(defconstant +seed+ 20261122
  "Seed of every data set's random state.")

(defun fresh-random-state ()
  (sb-ext:seed-random-state +seed+))

;;; Types used by the data sets, as bench-datasets.md gives them: the names
;;; and slots are part of what is stored, so they match the published
;;; benchmark's (output sizes are then comparable).

(defstruct address
  "A postal address; shared by several persons in the people data set."
  (street "Ave Greene" :type simple-string)
  (state "QC" :type simple-string)
  (zip "H3Z1Z9" :type simple-base-string))

(defstruct person
  "One record of the people data set."
  (first "Andrew" :type simple-string)
  (second "Berkley" :type simple-string)
  (age 49 :type (unsigned-byte 8))
  (addresses nil :type list)
  (telephone "" :type simple-base-string)
  (email "" :type simple-string))

(defstruct bench-blarg
  "Element of the structures data set: two untyped slots."
  a b)

(defclass c-blarg ()
  ((a :initarg :a)
   (b :initarg :b))
  (:documentation "Element of the standard-objects data set."))

(defstruct typed-item
  "Element of the typed-structures data set: one slot of each kind of type a
structure can hold, the raw ones (double-float, single-float, fixnum, word,
complex double-float) stored unboxed in the instance."
  (d 0d0 :type double-float)
  (s 0f0 :type single-float)
  (f 0 :type fixnum)
  (w 0 :type sb-ext:word)
  (c #c(0d0 0d0) :type (complex double-float))
  (str "" :type simple-string)
  (u8 0 :type (unsigned-byte 8))
  (l nil :type list)
  any)

;;; Helpers.

(defun base-string-of (string)
  (coerce string 'simple-base-string))

(defun printed (integer)
  "INTEGER printed in decimal, as a (simple-array character (*)) (this SBCL's
printer returns base strings, hence the explicit coercion)."
  (let ((*print-base* 10) (*print-radix* nil))
    (coerce (princ-to-string integer) '(simple-array character (*)))))

(defun random-list (n fn)
  (loop repeat n collect (funcall fn)))

;;; Generators, one per data set.  Each takes a random state.

(defun gen-tiny-integers (rs)
  (random-list 1000000 (lambda () (- (random 33 rs) 16))))

(defun gen-tiny-integers-vector (rs)
  (coerce (gen-tiny-integers rs) 'simple-vector))

(defun gen-same-small-integer (rs)
  (make-list 1000000 :initial-element (random 256 rs)))

(defun gen-random-fixnums (rs)
  (random-list 1000000 (lambda () (random (- (expt 2 61) (expt 2 60)) rs))))

(defun gen-random-double-floats (rs)
  (random-list 1000000 (lambda () (random 1d0 rs))))

(defun gen-random-single-floats (rs)
  (random-list 1000000 (lambda () (random 1f0 rs))))

(defun gen-random-complex-doubles (rs)
  (random-list 1000000 (lambda () (complex (random 1d0 rs) (random 1d0 rs)))))

(defun gen-ub8-vectors (rs)
  (declare (ignore rs))
  (random-list 1000 (lambda ()
                      (make-array 10000 :element-type '(unsigned-byte 8)
                                        :initial-element 123))))

(defun gen-bit-vectors (rs)
  (random-list 1000 (lambda ()
                      (let ((v (make-array 10000 :element-type 'bit)))
                        (dotimes (i 10000 v)
                          (setf (sbit v i) (random 2 rs)))))))

(defun gen-double-vectors (rs)
  (random-list 1000 (lambda ()
                      (let ((v (make-array 1000 :element-type 'double-float)))
                        (dotimes (i 1000 v)
                          (setf (aref v i) (random 1d0 rs)))))))

(defun gen-double-matrices (rs)
  (random-list 100 (lambda ()
                     (let ((m (make-array '(100 100) :element-type 'double-float)))
                       (dotimes (i 10000 m)
                         (setf (row-major-aref m i) (random 1d0 rs)))))))

(defun gen-complex-list (rs)
  ;; Like the published set, the double, the string, the complex and the
  ;; empty vector are each one object referenced many times; only the conses
  ;; are fresh.
  (let ((pi-ish 3.1415d0) (hi "hi") (c (complex 1d0 1d0)) (empty #()))
    (random-list 1000000
                 (lambda ()
                   (cond ((zerop (random 2 rs)) pi-ish)
                         ((zerop (random 2 rs)) hi)
                         ((zerop (random 2 rs)) (cons (random 30 rs) 2))
                         ((zerop (random 2 rs)) c)
                         (t empty))))))

(defun gen-same-string (rs)
  (declare (ignore rs))
  (make-list 1000000 :initial-element (base-string-of "asdf")))

(defun gen-keywords (rs)
  (random-list 100000 (lambda () (intern (printed (random 100000 rs)) :keyword))))

(defun gen-symbols (rs)
  (random-list 100000 (lambda () (intern (printed (random 100000 rs)) :cl-user))))

(defun gen-uninterned-symbols (rs)
  (declare (ignore rs))
  (let ((pool (random-list 20000 #'gensym)))
    (append pool pool pool pool pool)))

(defun gen-structures (rs)
  (let ((v (make-array 100000)))
    (dotimes (i 100000 v)
      (setf (svref v i)
            (make-bench-blarg :a (random 1d0 rs)
                              :b (base-string-of (printed (random 100 rs))))))))

(defun gen-standard-objects (rs)
  (let ((v (make-array 100000)) (hello "hello"))
    (dotimes (i 100000 v)
      (setf (svref v i)
            (make-instance 'c-blarg :a (random 256 rs) :b hello)))))

(defun gen-typed-structures (rs)
  ;; Not one of the published sets: every kind of slot type, raw slots
  ;; among them.  The word slot takes the whole 64-bit range (so about
  ;; three in four are bignums once read out of the slot), the fixnum slot
  ;; both signs, the list slot 0 to 3 small integers, the untyped slot a
  ;; fixnum or a double.
  (let ((v (make-array 100000)))
    (dotimes (i 100000 v)
      (setf (svref v i)
            (make-typed-item
             :d (random 1d0 rs)
             :s (random 1f0 rs)
             :f (- (random (expt 2 62) rs) (expt 2 61))
             :w (random (expt 2 64) rs)
             :c (complex (random 1d0 rs) (random 1d0 rs))
             :str (printed (random 1000000 rs))
             :u8 (random 256 rs)
             :l (loop repeat (random 4 rs) collect (random 1000 rs))
             :any (if (zerop (random 2 rs)) (random 1000000 rs) (random 1d0 rs)))))))

(defun gen-base-strings (rs)
  (random-list 100000 (lambda () (base-string-of (printed (random 1000000 rs))))))

(defun gen-unicode-strings (rs)
  (random-list 100000 (lambda ()
                        (concatenate '(simple-array character (*))
                                     (printed (random 1000000 rs))
                                     (string (code-char #x3B1))))))

(defun gen-tangled-conses (rs)
  (let ((v (make-array 1000)))
    (dotimes (i 1000)
      (setf (svref v i) (cons nil nil)))
    (dotimes (i 10000 v)
      (setf (car (svref v (random 1000 rs))) (svref v (random 1000 rs)))
      (setf (cdr (svref v (random 1000 rs))) (svref v (random 1000 rs))))))

(defparameter *specialized-fills*
  `((bit 1) ((unsigned-byte 2) 2) ((unsigned-byte 4) 15) ((unsigned-byte 8) 255)
    ((unsigned-byte 16) 65535) ((unsigned-byte 32) ,(1- (expt 2 32)))
    (fixnum ,(expt 2 50)) ((unsigned-byte 64) ,(1- (expt 2 64)))
    ((signed-byte 8) -1) ((signed-byte 16) -128) ((signed-byte 32) -32768)
    ((signed-byte 64) -100000) (single-float 1f0) (double-float -1d0))
  "Element type and fill value of each vector of the specialized-arrays set.")

(defun gen-specialized-arrays (rs)
  (declare (ignore rs))
  (loop for (type fill) in *specialized-fills*
        collect (make-array 10000 :element-type type :initial-element fill)))

(defun gen-people (rs)
  ;; Field contents are printed random integers, as in the published set, so
  ;; that output sizes are comparable; "strings" are character strings.
  (let ((addresses (make-array 10000))
        (people (make-array 10000)))
    (dotimes (i 10000)
      (setf (svref addresses i)
            (make-address :street (printed (random 1000000 rs))
                          :state (printed (random 100 rs))
                          :zip (base-string-of (printed (random 100000 rs))))))
    (dotimes (i 10000 people)
      (setf (svref people i)
            (make-person :first (printed (random 10000000 rs))
                         :second (printed (random 10000000 rs))
                         :age (random 100 rs)
                         :addresses (list (svref addresses (random 10000 rs)))
                         :telephone (base-string-of (printed (random 1000000 rs)))
                         :email (printed (random 100000000 rs)))))))

;;; Registry.

(defparameter *datasets*
  '(("tiny-integers" gen-tiny-integers)
    ("tiny-integers-vector" gen-tiny-integers-vector)
    ("same-small-integer" gen-same-small-integer)
    ("random-fixnums" gen-random-fixnums)
    ("random-double-floats" gen-random-double-floats)
    ("random-single-floats" gen-random-single-floats)
    ("random-complex-doubles" gen-random-complex-doubles)
    ("ub8-vectors" gen-ub8-vectors :specialized t)
    ("bit-vectors" gen-bit-vectors :specialized t)
    ("double-vectors" gen-double-vectors :specialized t)
    ("double-matrices" gen-double-matrices :specialized t)
    ("complex-list" gen-complex-list)
    ("same-string" gen-same-string)
    ("keywords" gen-keywords)
    ("symbols" gen-symbols)
    ("uninterned-symbols" gen-uninterned-symbols)
    ("structures" gen-structures :objects t)
    ("standard-objects" gen-standard-objects :objects t)
    ("base-strings" gen-base-strings)
    ("unicode-strings" gen-unicode-strings)
    ("tangled-conses" gen-tangled-conses :modes ("lists"))
    ("specialized-arrays" gen-specialized-arrays :specialized t)
    ("people" gen-people :objects t)
    ("typed-structures" gen-typed-structures :objects t))
  "Each entry: name, generator, then options: :specialized t for the sets of
specialized arrays (payload bandwidth is reported against memcpy), :modes for a
set that only makes sense in some modes, :objects t for the sets of
structure or standard objects (peers need per-type code for them).")

(defparameter *modes*
  '(("none" :track-references nil :support-shared-list-structures nil
     :output-magic-number nil)
    ("refs" :track-references t :support-shared-list-structures nil
     :output-magic-number nil)
    ("lists" :track-references t :support-shared-list-structures t
     :output-magic-number nil))
  "Mode name and the keyword arguments it passes to BINSTORE:STORE.  No
header: the peers write none, and the bytes compared are the data's (the
header is 5 bytes more; restores are run with *REQUIRE-HEADER* NIL).
\"lists\" is what STORE does by default.")

(defun dataset-names ()
  "Names of the standard data sets, in benchmark order."
  (mapcar #'first *datasets*))

(defun mode-names ()
  "Names of the benchmark modes: none, refs, lists."
  (mapcar #'first *modes*))

(defun dataset-entry (name)
  (or (assoc name *datasets* :test #'string=)
      (error "Unknown data set ~S; known: ~{~A~^ ~}" name (dataset-names))))

(defun dataset-option (name option &optional default)
  (getf (cddr (dataset-entry name)) option default))

(defun dataset-applies-to-mode-p (name mode)
  (let ((modes (dataset-option name :modes :all)))
    (or (eq modes :all) (member mode modes :test #'string=))))

(defun mode-store-args (mode)
  (rest (or (assoc mode *modes* :test #'string=)
            (error "Unknown mode ~S; known: ~{~A~^ ~}" mode (mode-names)))))

(defun generate-dataset (name)
  "Build the standard data set NAME (a string) from the fixed seed."
  (funcall (second (dataset-entry name)) (fresh-random-state)))

(defun object-count (data)
  "Objects counted for the objects/s and bytes-per-object figures: the
number of top-level elements (list length or vector length)."
  (length data))

;;; Cheap round-trip check.  Top-level elements are all compared; specialized
;;; arrays are compared at a sample of indices.  When TRACK is true the
;;; mapping original -> restored is checked to be consistent for every
;;; non-immediate object that is shared (eq in the original must be eq in the
;;; restored data, and distinct non-numbers must stay distinct); conses take
;;; part only when TRACK-CONSES.  Symbols are always unique per binstore
;;; store, so they are checked that way unless TRACK-SYMBOLS is false (the
;;; peers in mode none, where bench-datasets.md has shared objects stored as
;;; trees).

(defstruct (checker (:constructor make-checker (track track-conses track-symbols)))
  track track-conses track-symbols
  (forward (make-hash-table :test 'eq))
  (backward (make-hash-table :test 'eq))
  (problem nil))

(defun fail (checker format &rest args)
  (unless (checker-problem checker)
    ;; One line: the problem goes into a table cell.
    (setf (checker-problem checker)
          (let ((*print-pretty* nil)) (apply #'format nil format args))))
  nil)

(defun immediate-p (x)
  (typep x '(or fixnum character single-float)))

(defun note-identity (checker a b)
  "Record that A restored as B.  Returns :seen when A was met before (so its
contents need not be compared again), NIL after a mismatch, T otherwise."
  (let ((tracked (cond ((symbolp a) (checker-track-symbols checker))
                       ((consp a) (checker-track-conses checker))
                       (t (checker-track checker)))))
    (if (or (not tracked) (immediate-p a))
        t
        (multiple-value-bind (old seen) (gethash a (checker-forward checker))
          (cond (seen
                 (if (eq old b)
                     :seen
                     (fail checker "shared ~A not restored as one object" (type-of a))))
                ((and (not (numberp a))
                      (nth-value 1 (gethash b (checker-backward checker))))
                 (fail checker "distinct ~A restored as one object" (type-of a)))
                (t
                 (setf (gethash a (checker-forward checker)) b
                       (gethash b (checker-backward checker)) a)
                 t))))))

(defun sample-indices (n)
  (if (<= n 64)
      (loop for i below n collect i)
      (remove-duplicates
       (append (list 0 1 (1- n)) (loop for k below 32 collect (floor (* k n) 32))))))

(defun same-p (checker a b)
  (let ((id (note-identity checker a b)))
    (cond ((null id) nil)
          ((eq id :seen) t)
          (t (same-contents-p checker a b)))))

(defun same-contents-p (checker a b)
  (typecase a
    (number (or (eql a b) (fail checker "number ~S restored as ~S" a b)))
    (symbol (cond ((symbol-package a)
                   (or (eq a b) (fail checker "symbol ~S restored as ~S" a b)))
                  ((and (symbolp b) (null (symbol-package b))
                        (string= (symbol-name a) (symbol-name b))))
                  (t (fail checker "uninterned ~S restored as ~S" a b))))
    (cons (same-list-p checker a b))
    (string (or (and (stringp b) (string= a b)
                     (equal (array-element-type a) (array-element-type b)))
                (fail checker "string ~S (~(~A~)) restored as ~S (~(~A~))"
                      a (type-of a) b (type-of b))))
    (array (same-array-p checker a b))
    ((or structure-object standard-object) (same-instance-p checker a b))
    (t (or (eql a b) (fail checker "~S restored as ~S" a b)))))

(defun same-list-p (checker a b)
  ;; Walks the cdr chain iteratively, so million-element lists do not recurse.
  (loop
    (unless (consp b)
      (return (fail checker "cons restored as ~S" (type-of b))))
    (unless (same-p checker (car a) (car b))
      (return nil))
    (let ((next-a (cdr a)) (next-b (cdr b)))
      (cond ((not (consp next-a))
             (return (same-p checker next-a next-b)))
            (t
             (let ((id (note-identity checker next-a next-b)))
               (cond ((null id) (return nil))
                     ((eq id :seen) (return t))))
             (setf a next-a b next-b))))))

(defun same-array-p (checker a b)
  (cond ((not (and (arrayp b)
                   (equal (array-dimensions a) (array-dimensions b))
                   (equal (array-element-type a) (array-element-type b))))
         (fail checker "array ~A ~A restored as ~A" (array-element-type a)
               (array-dimensions a) (type-of b)))
        ((eq (array-element-type a) t)
         (loop for i below (array-total-size a)
               always (same-p checker (row-major-aref a i) (row-major-aref b i))))
        (t
         (loop for i in (sample-indices (array-total-size a))
               always (or (eql (row-major-aref a i) (row-major-aref b i))
                          (fail checker "array element ~D: ~S restored as ~S" i
                                (row-major-aref a i) (row-major-aref b i)))))))

(defun same-instance-p (checker a b)
  (if (not (eq (class-of a) (class-of b)))
      (fail checker "~A restored as ~A" (type-of a) (type-of b))
      (loop for slot in (sb-mop:class-slots (class-of a))
            for name = (sb-mop:slot-definition-name slot)
            always (if (slot-boundp a name)
                       (and (or (slot-boundp b name)
                                (fail checker "slot ~A became unbound" name))
                            (same-p checker (slot-value a name) (slot-value b name)))
                       (or (not (slot-boundp b name))
                           (fail checker "slot ~A became bound" name))))))

(defun check-roundtrip (original restored &key track track-conses (track-symbols t))
  "NIL when RESTORED matches ORIGINAL (see above), else a description.
With TRACK-SYMBOLS false, an uninterned symbol referenced several times may
come back as several symbols of its name (stored as a tree)."
  (let ((checker (make-checker track track-conses track-symbols)))
    (if (same-p checker original restored)
        nil
        (or (checker-problem checker) "mismatch"))))
