;;;; The platform's objects on CLISP: the names of src/platform/objects.lisp
;;;; (SBCL's) with the same contracts.  Floats' bits and bignum digits are
;;;; portable (src/platform/portable/); structures are CLISP records, read
;;;; and written at the MOP's slot locations (CLISP keeps no raw slots).

(in-package #:binstore)

(defconstant +fixnum-tag-bits+ 0
  "How far a fixnum's value is shifted left in a vector of fixnums: CLISP
has no fixnum vectors (they are T vectors), and binstore never reads one's
memory there.")

;;; Identity.  CLISP's collector moves every object at any collection, so an
;;; address is no identity, even for an object the stack holds.  An object's
;;; "address" is a number given the first time it is asked for and kept in
;;; a weak table (which lets the object go): distinct, 16 apart as heap
;;; objects' granules are on SBCL, and the same for as long as the object
;;; lives, so the epoch never changes.

(deftype gc-epoch ()
  "What CURRENT-GC-EPOCH returns."
  'cons)

(defvar *gc-epoch* (list :numbers-never-move)
  "The one epoch: objects' numbers never change.")

(defmacro current-gc-epoch ()
  "The current epoch: on CLISP always the same."
  '*gc-epoch*)

(defmacro without-collections (&body body)
  "Run BODY: objects' numbers never change on CLISP, so there is nothing to
hold off."
  `(progn ,@body))

(defvar *object-numbers* (make-hash-table :test 'eq :weak :key)
  "Each object asked about with OBJECT-ADDRESS, and its number.")

(defvar *next-object-number* 1
  "The number OBJECT-ADDRESS gives next (times 16).")

(defun object-address (object)
  "A non-negative integer that identifies OBJECT for as long as it lives
(see above), a multiple of 16."
  (or (gethash object *object-numbers*)
      (setf (gethash object *object-numbers*)
            (ash (prog1 *next-object-number* (incf *next-object-number*)) 4))))

;;; The identity table's seen bits (src/core/identity-table.lisp): words of
;;; 32 bits, a vector CLISP specializes, and fixnums.

(defconstant +seen-word-bits+ 32
  "Bits in a word of the identity table's seen bits.")

(deftype seen-word ()
  "A word of the identity table's seen bits."
  '(unsigned-byte 32))

(deftype heap-address ()
  "What OBJECT-ADDRESS returns: a number from a table, never negative."
  'unsigned-byte)

;;; Arrays and strings.

(defparameter *element-representations*
  #(bit (unsigned-byte 2) (unsigned-byte 4) (unsigned-byte 8) (unsigned-byte 16)
    (unsigned-byte 32) character t nil)
  "The element types CLISP's arrays have (what UPGRADED-ARRAY-ELEMENT-TYPE
gives), in the order ARRAY-WIDETAG numbers them.")

(defun array-widetag (vector)
  "A small integer below 256 that is the same for exactly the simple
vectors with VECTOR's element representation: the position of its element
type among CLISP's."
  (position (array-element-type vector) *element-representations* :test #'equal))

(defun array-storage (array)
  "The simple vector holding the elements of the non-displaced ARRAY in
row-major order: ARRAY itself when it is a simple vector.  CLISP does not
give another array's data vector, so it is a copy, and whoever writes into
it gives it back with STORE-ARRAY-STORAGE."
  (if (typep array '(simple-array * (*)))
      array
      (let* ((n (array-total-size array))
             (copy (cl:make-array n :element-type (array-element-type array))))
        (dotimes (i n copy)
          (setf (aref copy i) (row-major-aref array i))))))

(defun store-array-storage (array storage)
  "Put into ARRAY the elements of STORAGE, which ARRAY-STORAGE gave for it
and which were written since (nothing when STORAGE is ARRAY itself)."
  (unless (eq array storage)
    (dotimes (i (array-total-size array))
      (setf (row-major-aref array i) (aref storage i))))
  array)

(defun %array-data (array start end)
  "A simple vector holding the elements of the vector ARRAY from START below
END (NIL: its length), and the bounds in it: ARRAY itself, or a copy."
  (let ((end (or end (length array))))
    (if (typep array '(simple-array * (*)))
        (values array start end)
        (values (store-array-range-copy array start end) 0 (- end start)))))

(defun store-array-range-copy (array start end)
  (let ((copy (cl:make-array (- end start) :element-type (array-element-type array))))
    (loop for i from start below end
          for j from 0
          do (setf (aref copy j) (aref array i)))
    copy))

(defmacro with-array-data (((data-var array) (start-var start) (end-var end)) &body body)
  "Run BODY with DATA-VAR bound to a simple vector holding the elements of
the vector ARRAY (displaced or not) and START-VAR and END-VAR to the bounds
START and END (END NIL: the length) in it.  On CLISP a vector that is not
simple is copied, and what BODY writes into the copy is put back into
ARRAY when BODY returns."
  (let ((a (gensym "ARRAY")) (s (gensym "START"))
        (declarations (loop while (and (consp (first body)) (eq (first (first body)) 'declare))
                            collect (pop body))))
    `(let* ((,a ,array) (,s ,start))
       (multiple-value-bind (,data-var ,start-var ,end-var) (%array-data ,a ,s ,end)
         ,@declarations
         (multiple-value-prog1 (progn ,@body)
           (unless (eq ,data-var ,a)
             (loop for i from ,start-var below ,end-var
                   for j from ,s
                   do (setf (aref ,a j) (aref ,data-var i)))))))))

;;; Strings, element types and symbols as CLISP and ABCL alike answer
;;; them: src/platform/portable/objects.lisp.

;;; Packages.

(defun package-locked-p (package)
  "True when PACKAGE is locked against interning."
  (ext:package-lock package))

;;; Hash tables.

(defun hash-table-weakness (table)
  "TABLE's weakness: NIL, :KEY, :VALUE, :KEY-AND-VALUE or :KEY-OR-VALUE."
  (ext:hash-table-weak-p table))

(defun make-hash-table-as-stored (&rest arguments &key weakness synchronized &allow-other-keys)
  "MAKE-HASH-TABLE with the options the format stores: WEAKNESS is CLISP's
:WEAK; SYNCHRONIZED is dropped (CLISP has no threads)."
  (declare (ignore synchronized))
  (let ((options (loop for (key value) on arguments by #'cddr
                       unless (member key '(:weakness :synchronized))
                         append (list key value))))
    (apply #'make-hash-table :weak weakness options)))

(defun single-float-if-short (x)
  "X, a short float (CLISP's own type, which the format has not) made a
single float (exactly); any other number as it is."
  (if (typep x 'short-float) (coerce x 'single-float) x))

(defun format-rehash-size (table)
  "TABLE's rehash size as the format stores it: CLISP's are short floats
\(1.5s0), stored as single floats."
  (single-float-if-short (hash-table-rehash-size table)))

(defun format-rehash-threshold (table)
  "TABLE's rehash threshold as the format stores it (CLISP's 0.75s0 as a
single float)."
  (single-float-if-short (hash-table-rehash-threshold table)))

(defun format-hash-table-test (table)
  "TABLE's test as the format names it: CLISP's FASTHASH-EQ, STABLEHASH-EQ
... are EQ, EQL and EQUAL (the hashing is CLISP's, the test the same)."
  (let ((test (hash-table-test table)))
    (case test
      ((ext:fasthash-eq ext:stablehash-eq) 'eq)
      ((ext:fasthash-eql ext:stablehash-eql) 'eql)
      ((ext:fasthash-equal ext:stablehash-equal) 'equal)
      (t test))))

(defun identity-hashed-table-p (table)
  "True when TABLE hashes its keys by identity, so that a key may be put
in before its contents are read: an EQ or EQL table."
  (member (format-hash-table-test table) '(eq eql)))

(defun hash-table-synchronized-p (table)
  "NIL: CLISP has no threads, nor synchronized tables."
  (declare (ignore table))
  nil)

(deftype system-object ()
  "Objects of the runtime that have no meaning outside this process."
  '(or (satisfies ext:weak-pointer-p) ffi:foreign-address ffi:foreign-pointer
    ffi:foreign-variable ffi:foreign-function))

;;; Classes and slots, through the metaobject protocol.

(declaim (inline class-slots slot-definition-name
                 slot-definition-allocation slot-definition-initfunction
                 slot-definition-location))
(defun class-slots (class) "The effective slots of CLASS." (clos:class-slots class))
(defun slot-definition-name (slotd) "SLOTD's name." (clos:slot-definition-name slotd))
(defun slot-definition-type (slotd)
  "SLOTD's type: T for none.  CLISP writes a slot's type (AND T ...), the
conjunction of the types its direct slots declare; the Ts are dropped."
  (let ((type (clos:slot-definition-type slotd)))
    (if (and (consp type) (eq (first type) 'and))
        (let ((parts (remove t (rest type))))
          (cond ((null parts) t)
                ((null (rest parts)) (first parts))
                (t (cons 'and parts))))
        type)))
(defun slot-definition-allocation (slotd)
  "SLOTD's allocation." (clos:slot-definition-allocation slotd))
(defun slot-definition-initfunction (slotd)
  "SLOTD's initfunction." (clos:slot-definition-initfunction slotd))
(defun slot-definition-location (slotd)
  "SLOTD's location." (clos:slot-definition-location slotd))

(defun method-specializers (method)
  "The specializers of METHOD's required parameters."
  (clos:method-specializers method))

(defun applicable-methods-using-classes (function classes)
  "The methods of the generic FUNCTION that apply to arguments of CLASSES,
and whether that is known from the classes alone."
  (clos:compute-applicable-methods-using-classes function classes))

(defun ensure-class-finalized (class)
  "Finalize CLASS's inheritance unless done; return CLASS."
  (unless (clos:class-finalized-p class)
    (clos:finalize-inheritance class))
  class)

(defun condition-class-p (class)
  "True when CLASS is a class of conditions."
  (and (typep class 'class) (subtypep class 'condition)))

(deftype condition-class ()
  "The class of condition classes (CLISP: standard classes under CONDITION)."
  '(and standard-class (satisfies condition-class-p)))

;;; Instances.  Structures, standard objects and conditions are records;
;;; element 0 is what identifies their class's definition (a structure's
;;; list of type names, a standard object's class version), which a
;;; redefinition replaces.

(declaim (inline instance-layout))
(defun instance-layout (instance)
  "What tells instances of one class apart from others: EQ for two
instances of the same class in the same definition."
  (sys::%record-ref instance 0))

(defmacro structure-slot-at (instance index)
  "The slot at INDEX of the structure INSTANCE (a place)."
  `(sys::%record-ref ,instance ,index))

(defmacro standard-slot-at (instance index)
  "The value at INDEX of the standard object INSTANCE's slots (a place);
the unbound marker for an unbound slot (UNBOUND-MARKER-P)."
  `(clos:standard-instance-access ,instance ,index))

(declaim (inline unbound-marker-p))
(defun unbound-marker-p (value)
  "True when VALUE, read with STANDARD-SLOT-AT, marks an unbound slot."
  (eq value (sys::%unbound)))

(defun structure-slot-description (class name)
  "The effective slot definition of the slot NAME of the structure CLASS."
  (find name (clos:class-slots class) :key #'clos:slot-definition-name))

(defun structure-slot-index (class name)
  "The index of the slot NAME in an instance of the structure class CLASS."
  (clos:slot-definition-location (structure-slot-description class name)))

(defun structure-slot-reader (class name)
  "A function (instance) returning the value of the slot NAME."
  (let ((i (structure-slot-index class name)))
    (lambda (o) (sys::%record-ref o i))))

(defun structure-slot-setter (class name)
  "A function (instance value) setting the slot NAME directly."
  (let ((i (structure-slot-index class name)))
    (lambda (o v) (sys::%record-store o i v))))

(defun structure-slot-raw-kind (class name)
  "NIL: CLISP holds every structure slot boxed."
  (declare (ignore class name))
  nil)

(defun set-structure-raw-slot (instance index kind value)
  "Set the slot at INDEX (never called on CLISP, which has no raw slots)."
  (declare (ignore kind))
  (sys::%record-store instance index value))
