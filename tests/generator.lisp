;;;; A seeded generator of random nested data covering every kind of object
;;;; binstore stores, with optional sharing and cycles.
;;;;
;;;;   (random-datum (seeded-random-state 42) :sharing t :cycles t)
;;;;
;;;; The same seed always gives the same datum (up to the identity of fresh
;;;; uninterned symbols), so a failing case is reproduced from its seed.

(in-package #:binstore-tests)

;;; Test types: a plain structure, an included one, one with raw (typed)
;;; slots, standard objects with unbound and class slots, and a condition.

(defstruct gen-point x y)

(defstruct (gen-point3 (:include gen-point)) z)

(defstruct gen-raw
  (d 0d0 :type double-float)
  (f 0f0 :type single-float)
  (w 0 :type (unsigned-byte 64))
  (s 0 :type (signed-byte 64))
  (c #c(0d0 0d0) :type (complex double-float))
  (tag nil))

(defclass gen-node ()
  ((left :initarg :left :accessor gen-node-left)
   (right :initarg :right :accessor gen-node-right)
   (label :initarg :label :accessor gen-node-label))
  (:documentation "A binary node; any slot may be left unbound."))

(defclass gen-sparse ()
  ((present :initarg :present :accessor gen-sparse-present)
   (absent :initarg :absent :accessor gen-sparse-absent)
   (shared :allocation :class :initform :class-value :accessor gen-sparse-shared))
  (:documentation "An object whose ABSENT slot is usually unbound, with a class slot."))

(define-condition gen-condition (error)
  ((detail :initarg :detail :reader gen-condition-detail)
   (extra :initarg :extra :reader gen-condition-extra))
  (:documentation "A condition with two slots, EXTRA often unbound."))

;;; Generator state

(defstruct (generator (:constructor make-generator (state budget sharing cycles conses)))
  state
  budget                                ; objects still to generate
  sharing cycles conses
  ;; Finished objects that may be reused (sharing).
  (pool (make-array 16 :adjustable t :fill-pointer 0))
  ;; Containers still being filled (ancestors of the current object): reusing
  ;; one makes a cycle.
  (open '()))

(defun rnd (g limit)
  (random limit (generator-state g)))

(defun chance (g probability)
  (< (random 1.0 (generator-state g)) probability))

(defun pick (g sequence)
  (elt sequence (rnd g (length sequence))))

(defun remember (g object)
  "Make OBJECT available for sharing later; return it."
  (vector-push-extend object (generator-pool g))
  object)

(defun call-open (g container fill)
  "Call FILL with CONTAINER listed as open (a cycle target), then remember it."
  (push container (generator-open g))
  (funcall fill)
  (pop (generator-open g))
  (remember g container))

;;; Numbers

(defun random-signed (g bits)
  (- (rnd g (expt 2 bits)) (expt 2 (1- bits))))

(defun random-integer (g)
  (case (rnd g 8)
    (0 (- (rnd g 160) 16))                           ; in-tag range
    (1 (- (rnd g 600) 300))
    (2 (random-signed g 16))
    (3 (random-signed g 32))
    (4 (random-signed g 64))
    (5 (pick g (list most-positive-fixnum most-negative-fixnum
                     (1+ most-positive-fixnum) (1- most-negative-fixnum)
                     (expt 2 63) (1- (expt 2 64)) (- (expt 2 64)) (- (expt 2 63)))))
    (t (* (if (chance g 0.5) -1 1) (rnd g (expt 2 (+ 64 (rnd g 300))))))))

(defun random-ratio (g)
  (/ (random-integer g) (1+ (rnd g (expt 2 (pick g '(4 40 100)))))))

(defun random-double (g)
  (quieted (random-double-or-signalling-nan g)))

(defun random-single (g)
  (quieted (random-single-or-signalling-nan g)))

(defun random-double-or-signalling-nan (g)
  (case (rnd g 4)
    (0 (pick g (floats-here 0d0 -0d0 1d0 -1.5d0
                     +double-positive-infinity+
                     +double-negative-infinity+
                     most-positive-double-float least-positive-double-float
                     (make-double-float #x7FF80000 0)          ; quiet NaN
                     (make-double-float -524288 0)             ; negative NaN
                     (make-double-float #x7FF00000 1)          ; signalling NaN
                     (make-double-float #x7FF80000 #x12345678) ; NaN payload
                     (make-double-float 0 1))))                ; denormal
    ;; random bits; on CLISP, 1.0 for those of a NaN, an infinity or a denormal
    (1 (first (floats-here (make-double-float (random-signed g 32) (rnd g (expt 2 32))) 1d0)))
    (t (- (random 2d6 (generator-state g)) 1d6))))

(defun random-single-or-signalling-nan (g)
  (case (rnd g 4)
    (0 (pick g (floats-here 0f0 -0f0 1f0 -2.5f0
                     +single-positive-infinity+
                     +single-negative-infinity+
                     most-positive-single-float least-positive-single-float
                     (make-single-float #x7FC00000)            ; quiet NaN
                     (make-single-float (- #xFFC00000 (expt 2 32)))
                     (make-single-float #x7F800001)            ; signalling NaN
                     (make-single-float #x7FC12345))))         ; NaN payload
    (1 (first (floats-here (make-single-float (random-signed g 32)) 1f0)))
    (t (- (random 2f4 (generator-state g)) 1f4))))

(defun random-complex (g)
  (case (rnd g 3)
    (0 (complex (random-ratio g) (1+ (rnd g 1000))))
    (1 (complex (random-single g) (random-single g)))
    (t (complex (random-double g) (random-double g)))))

(defun random-number (g)
  (case (rnd g 5)
    (0 (random-integer g))
    (1 (random-ratio g))
    (2 (random-double g))
    (3 (random-single g))
    (t (random-complex g))))

;;; Characters and strings

(defun random-char (g)
  (code-char (case (rnd g 6)
               (0 (rnd g 128))
               (1 (+ 128 (rnd g 128)))
               (2 (rnd g #x10000))
               (3 (+ #xD800 (rnd g #x800)))          ; surrogates
               (4 (+ #x10000 (rnd g #x100000)))      ; beyond the BMP
               (t (pick g '(0 10 13 127 #xFFFD #xFFFF #x10FFFF))))))

(defun random-base-char (g)
  (code-char (rnd g 128)))                  ; every base-char

(defun random-string (g)
  (let ((length (rnd g 12)))
    (case (rnd g 5)
      (0 (let ((s (make-string length :element-type 'base-char)))
           (dotimes (i length s) (setf (char s i) (random-base-char g)))))
      (1 (let ((s (make-string length :element-type 'character)))
           (dotimes (i length s) (setf (char s i) (random-char g)))))
      (2 (let ((s (make-string length :element-type 'character)))   ; ASCII in a wide string
           (dotimes (i length s) (setf (char s i) (random-base-char g)))))
      (t (let* ((base (chance g 0.5))
                (s (make-array length :element-type (if base 'base-char 'character)
                                      :fill-pointer (rnd g (1+ length))
                                      :adjustable (chance g 0.5))))
           (dotimes (i length s)
             (setf (aref s i) (if base (random-base-char g) (random-char g)))))))))

;;; Symbols, packages, pathnames

(defparameter *symbol-names* '("ALPHA" "BETA" "GAMMA" "with space" "lower" "" "ÆØÅ" "|")
  "Names for generated interned symbols.")

(defun random-symbol (g)
  (case (rnd g 6)
    (0 (intern (pick g *symbol-names*) :keyword))
    (1 (intern (concatenate 'string "GEN-" (pick g *symbol-names*)) :cl-user))
    (2 (intern (concatenate 'string "GEN-" (pick g *symbol-names*)) :binstore-tests))
    (3 (pick g '(nil t car list quote lambda &rest most-positive-fixnum)))
    (t (make-symbol (pick g *symbol-names*)))))

(defun random-package (g)
  (find-package (pick g '(:common-lisp :keyword :cl-user :binstore-tests #+sbcl :sb-ext #+ecl :ext))))

(defun random-pathname (g)
  (if (chance g 0.2)
      (pathname (pick g '("/tmp/*.lisp" "foo.tar.gz" "../x/y.z" "/a/b/" "" "~/notes.txt")))
      (make-pathname
       :directory (pick g '(nil (:absolute) (:absolute "tmp") (:absolute "usr" "share" "doc")
                            (:relative "a" "b") (:relative :up "x") (:absolute "tmp" :wild)
                            (:absolute "tmp" :wild-inferiors)))
       :name (pick g '(nil "foo" "with space" "résumé" :wild "a.b"))
       :type (pick g '(nil "lisp" "txt" :wild))
       :version (pick g '(nil :newest :wild)))))

;;; Arrays

(defparameter *element-types*
  '(t bit (unsigned-byte 2) (unsigned-byte 4) (unsigned-byte 7) (unsigned-byte 8)
    (unsigned-byte 15) (unsigned-byte 16) (unsigned-byte 31) (unsigned-byte 32)
    (unsigned-byte 62) (unsigned-byte 63) (unsigned-byte 64)
    (signed-byte 8) (signed-byte 16) (signed-byte 32) (signed-byte 64) fixnum
    single-float double-float (complex single-float) (complex double-float)
    character base-char)
  "Every array element type binstore specializes on.")

(defun random-element (g type)
  "A random value of array element TYPE (T: any datum)."
  (cond ((eq type t) (generate g))
        ((eq type 'bit) (rnd g 2))
        ((eq type 'fixnum) (+ most-negative-fixnum (rnd g (expt 2 62))))
        ((eq type 'single-float) (random-single g))
        ((eq type 'double-float) (random-double g))
        ((eq type 'character) (random-char g))
        ((eq type 'base-char) (random-base-char g))
        ((equal type '(complex single-float)) (complex (random-single g) (random-single g)))
        ((equal type '(complex double-float)) (complex (random-double g) (random-double g)))
        ((eq (first type) 'unsigned-byte) (rnd g (expt 2 (second type))))
        (t (random-signed g (second type)))))

(defun random-dimensions (g)
  (case (rnd g 5)
    (0 '())
    (1 (list (rnd g 3) 0))
    ((2 3) (list (rnd g 10)))
    (t (loop repeat (+ 2 (rnd g 2)) collect (1+ (rnd g 3))))))

(defun displacement-target (g type size)
  "A finished array of element TYPE with at least SIZE elements: reused from
the pool when sharing allows, else a new simple vector."
  (or (and (generator-sharing g)
           (find-if (lambda (x)
                      (and (arrayp x)
                           (equal (array-element-type x) (upgraded-array-element-type type))
                           (>= (array-total-size x) size)
                           (not (member x (generator-open g)))))
                    (generator-pool g)))
      (let ((target (make-array (+ size (rnd g 3)) :element-type type)))
        (dotimes (i (length target))
          (setf (aref target i) (random-element g type)))
        (remember g target))))

(defun random-array (g)
  (let* ((type (pick g *element-types*))
         (dimensions (random-dimensions g))
         (size (reduce #'* dimensions))
         (vectorp (= (length dimensions) 1))
         (fill-pointer (and vectorp (chance g 0.3) (rnd g (1+ size))))
         (adjustable (chance g 0.3)))
    (if (chance g 0.2)
        (let* ((target (displacement-target g type size))
               (offset (rnd g (1+ (- (array-total-size target) size)))))
          (remember g (make-array dimensions :element-type type :displaced-to target
                                             :displaced-index-offset offset
                                             :fill-pointer fill-pointer
                                             :adjustable adjustable)))
        (let ((array (make-array dimensions :element-type type
                                            :fill-pointer fill-pointer
                                            :adjustable adjustable)))
          (call-open g array
                     (lambda ()
                       (dotimes (i size)
                         (setf (row-major-aref array i) (random-element g type)))))))))

(defun random-simple-vector (g)
  (let ((vector (make-array (rnd g 9))))
    (call-open g vector
               (lambda ()
                 (dotimes (i (length vector))
                   (setf (svref vector i) (generate g)))))))

;;; Lists

(defun random-list (g)
  "A proper or dotted list.  With CONSES, a list may end in a cycle or in a
tail shared with an earlier list."
  (let* ((length (1+ (rnd g 8)))
         (list (make-list length))
         (last (last list)))
    (flet ((fill-cars ()
             (loop for cell on list do (setf (car cell) (generate g)))))
      (if (generator-conses g)
          (call-open g list #'fill-cars)
          (fill-cars)))
    (case (rnd g 4)
      (0 (setf (cdr last) (random-leaf g)))                      ; dotted
      (1 (when (and (generator-conses g) (generator-cycles g))  ; cdr-circular
           (setf (cdr last) (nthcdr (rnd g length) list))))
      (2 (when (and (generator-conses g) (generator-sharing g)) ; shared tail
           (let ((tails (remove-if-not #'consp (generator-pool g))))
             (when (plusp (length tails))
               (setf (cdr last) (pick g tails)))))))
    list))

;;; Hash tables

(defun random-key (g test)
  "A key for a table of TEST.  EQ and EQL keys may be any datum; EQUAL and
EQUALP keys are acyclic and free of floats, which EQUALP compares with =."
  (if (member test '(eq eql))
      (generate g)
      (case (rnd g 5)
        (0 (random-integer g))
        (1 (random-string g))
        (2 (random-symbol g))
        (3 (random-char g))
        (t (list (random-integer g) (random-string g) (random-symbol g))))))

(defun random-hash-table (g)
  (let* ((test (pick g '(eq eql equal equalp)))
         (weakness (and (chance g 0.15) (pick g '(:key :value :key-and-value :key-or-value))))
         (table (make-test-hash-table :test test
                                 :size (pick g '(7 1 20 100))
                                 :rehash-size (pick g '(1.5 2.0 1.2 10))
                                 :rehash-threshold (pick g '(1.0 0.5 0.75))
                                 :weakness weakness
                                 ;; (ECL 21.2's synchronized tables fail as
                                 ;; they grow: "Thread already owns this lock")
                                 :synchronized (and (chance g 0.2) #+ecl nil))))
    (call-open g table
               (lambda ()
                 (dotimes (i (rnd g 9))
                   (if weakness
                       ;; Only immortal keys and values: nothing may vanish in a GC.
                       (if *immortal-integer-bound*
                           (setf (gethash (rnd g *immortal-integer-bound*) table)
                                 (rnd g *immortal-integer-bound*))
                           (setf (gethash (random-signed g 16) table) (rnd g 1000)))
                       (let ((key (random-key g test)))
                         (setf (gethash key table) (generate g)))))))))

;;; Structures, standard objects, conditions

(defun random-structure (g)
  (case (rnd g 3)
    (0 (let ((p (make-gen-point)))
         (call-open g p (lambda ()
                          (setf (gen-point-x p) (generate g)
                                (gen-point-y p) (generate g))))))
    (1 (let ((p (make-gen-point3)))
         (call-open g p (lambda ()
                          (setf (gen-point-x p) (generate g)
                                (gen-point-y p) (generate g)
                                (gen-point3-z p) (generate g))))))
    (t (let ((r (make-gen-raw :d (random-double g) :f (random-single g)
                              :w (rnd g (expt 2 64)) :s (random-signed g 64)
                              :c (complex (random-double g) (random-double g)))))
         (call-open g r (lambda () (setf (gen-raw-tag r) (generate g))))))))

(defun random-object (g)
  (if (chance g 0.5)
      (let ((node (make-instance 'gen-node)))
        (call-open g node
                   (lambda ()
                     (dolist (slot '(left right label))
                       (when (chance g 0.8)
                         (setf (slot-value node slot) (generate g)))))))
      (let ((sparse (make-instance 'gen-sparse)))
        (call-open g sparse
                   (lambda ()
                     (setf (gen-sparse-present sparse) (generate g))
                     (when (chance g 0.3)
                       (setf (gen-sparse-absent sparse) (generate g))))))))

(defun random-condition (g)
  (let ((condition (make-condition 'gen-condition)))
    (call-open g condition
               (lambda ()
                 (setf (slot-value condition 'detail) (generate g))
                 (when (chance g 0.5)
                   (setf (slot-value condition 'extra) (generate g)))))))

;;; Choosing what to make

(defun random-leaf (g)
  "A datum that contains no other generated data."
  (case (rnd g 7)
    (0 (random-integer g))
    (1 (random-number g))
    (2 (random-char g))
    (3 (remember g (random-string g)))
    (4 (let ((s (random-symbol g)))
         (if (symbol-package s) s (remember g s))))
    (5 (remember g (random-pathname g)))
    (t (if (chance g 0.2) (random-package g) (random-number g)))))

(defun reusable (g)
  "An object generated earlier, to share, or NIL."
  (let ((pool (generator-pool g)))
    (when (and (generator-sharing g) (plusp (length pool)) (chance g 0.15))
      (aref pool (rnd g (length pool))))))

(defun cycle-target (g)
  "A container still being filled, to close a cycle, or NIL."
  (let ((open (generator-open g)))
    (when (and (generator-cycles g) open (chance g 0.1))
      (pick g open))))

(defun random-container (g)
  "A random object that holds other data, drawing on G's budget."
  (decf (generator-budget g))
  (case (rnd g 8)
    (0 (random-list g))
    (1 (random-simple-vector g))
    ((2 3) (random-array g))
    (4 (random-hash-table g))
    (5 (random-structure g))
    (6 (random-object g))
    (t (random-condition g))))

(defun generate (g)
  "One random datum: a leaf, or a container while G's budget lasts."
  (or (cycle-target g)
      (reusable g)
      (cond ((or (<= (generator-budget g) 0) (chance g 0.35)) (random-leaf g))
            ((chance g 0.1) (remember g (random-number g)))
            (t (random-container g)))))

(defun deep-chain-link (g)
  "A fresh container for one level of a deep chain, and a function that
stores the next level into it."
  (case (rnd g (if (generator-conses g) 5 4))
    (0 (let ((v (vector nil (random-leaf g))))
         (values v (lambda (child) (setf (svref v 0) child)))))
    (1 (let ((p (make-gen-point :y (random-leaf g))))
         (values p (lambda (child) (setf (gen-point-x p) child)))))
    (2 (let ((node (make-instance 'gen-node)))
         (values node (lambda (child) (setf (gen-node-right node) child)))))
    (3 (let ((table (make-hash-table :test (pick g '(eq equal)))))
         (values table (lambda (child) (setf (gethash :down table) child)))))
    (t (let ((cell (list nil (random-leaf g))))
         (values cell (lambda (child) (setf (car cell) child)))))))

(defun random-deep-chain (g)
  "Containers nested 1,000 to 2,500 levels deep, beyond the depth at which the
writer defers contents.  The datum at the bottom may refer back up the chain
(cycles) or to earlier objects (sharing) across the deferral boundary."
  (let ((depth (+ 1000 (rnd g 1500)))
        (levels '()))                   ; (container . setter), deepest first
    (dotimes (i depth)
      (multiple-value-bind (container setter) (deep-chain-link g)
        (push (cons container setter) levels)
        (push container (generator-open g))))
    (let ((child (generate g)))
      (dolist (level levels child)
        (funcall (cdr level) child)
        (pop (generator-open g))
        (setf child (car level))))))

(defun random-datum (state &key sharing cycles conses (size 30))
  "A random nested datum built from random STATE (see SB-EXT:SEED-RANDOM-STATE)
with about SIZE objects (about one datum in 30 is instead a chain of
containers over a thousand levels deep).  SHARING: reuse earlier objects in several places.
CYCLES: put containers inside themselves.  CONSES: conses too may be shared
and circular (compare with :conses t and store with
:support-shared-list-structures t); without it, lists are never shared."
  (let ((g (make-generator state size sharing cycles conses)))
    ;; Mostly a collection at the top, so that each datum holds several
    ;; objects; now and then a very deep one.
    (cond ((chance g 0.03) (random-deep-chain g))
          ((chance g 0.6) (if (chance g 0.5) (random-simple-vector g) (random-list g)))
          (t (random-container g)))))

(defparameter *integers-of-every-width*
  (list 0 1 -1 -16 -17 95 96 127 128 255 256 -256 -257 32767 32768 -32768 -32769
        (1- (expt 2 31)) (expt 2 31) (- (expt 2 31)) (- -1 (expt 2 31))
        most-positive-fixnum most-negative-fixnum (1+ most-positive-fixnum)
        (1- most-negative-fixnum) (expt 2 64))
  "Integers on both sides of every width the format writes them in.")
