;;;; The platform's objects: how SBCL lays out numbers, arrays, structures,
;;;; instances and symbols, for the codecs that write and rebuild them
;;;; faster than the standard operators can.
;;;;
;;;; Each function here has the contract its docstring states and nothing
;;;; SBCL-specific in its interface; the codecs call these and name no SB-
;;;; symbol.  Small ones are inline, so the code compiled is SBCL's own.

(in-package #:binstore)

;;; Floats.

(declaim (inline float-nan-p))
(defun float-nan-p (x)
  "True when the float X is a NaN."
  (sb-ext:float-nan-p x))

(declaim (inline single-float-from-bits double-float-from-bits float-complex))
(defun single-float-from-bits (bits)
  "The single float whose IEEE 754 encoding is BITS, a (signed-byte 32)."
  (sb-kernel:make-single-float bits))

(defun double-float-from-bits (high low)
  "The double float whose IEEE 754 encoding has HIGH, a (signed-byte 32),
as its upper 32 bits and LOW, an (unsigned-byte 32), as its lower."
  (sb-kernel:make-double-float high low))

(defun float-complex (realpart imagpart)
  "The complex whose parts are the floats REALPART and IMAGPART, both
single floats or both double floats."
  (complex realpart imagpart))

;;; Integers.  A bignum is a vector of 64-bit digits, least significant
;;; first, in two's complement; binstore writes and reads magnitudes a digit
;;; at a time instead of shifting the integer (quadratic for large ones).

(declaim (inline bignum-digit-count bignum-digit))
(defun bignum-digit-count (bignum)
  "The number of 64-bit digits of the bignum BIGNUM."
  (sb-bignum:%bignum-length bignum))

(defun bignum-digit (bignum i)
  "The Ith 64-bit digit of the bignum BIGNUM, an (unsigned-byte 64);
I below BIGNUM-DIGIT-COUNT."
  (sb-bignum:%bignum-ref bignum i))

(declaim (inline make-digits (setf digit)))
(defun make-digits (count)
  "A fresh bignum of COUNT digits, to be filled with (SETF DIGIT) and then
given to DIGITS-INTEGER."
  (sb-bignum:%allocate-bignum count))

(defun (setf digit) (value digits i)
  "Set the Ith digit of DIGITS (from MAKE-DIGITS) to VALUE, an
(unsigned-byte 64)."
  (setf (sb-bignum:%bignum-ref digits i) value))

(defun digits-integer (digits count)
  "The integer whose two's complement digits are the COUNT digits of DIGITS
(from MAKE-DIGITS): a fixnum when it fits.  DIGITS is not used after."
  (sb-bignum::%normalize-bignum digits count))

(defconstant +fixnum-tag-bits+ sb-vm:n-fixnum-tag-bits
  "How far a fixnum's value is shifted left in its machine word: a vector
of fixnums holds each as (ASH value +FIXNUM-TAG-BITS+).")

;;; Identity.  The collector moves objects, so an address identifies an
;;; object only until the next collection; SBCL counts collections by making
;;; a new epoch object, so comparing the epoch (EQ) before and after tells
;;; whether addresses taken in between still hold.

(deftype gc-epoch ()
  "What CURRENT-GC-EPOCH returns."
  'cons)

(defmacro current-gc-epoch ()
  "The current collection epoch: EQ to an earlier value exactly when no
collection has run since it was taken."
  'sb-kernel::*gc-epoch*)

(defmacro without-collections (&body body)
  "Run BODY with the collector held off: a collection another thread asks
for meanwhile waits until BODY returns, and one this thread would need runs
then.  Interrupts wait too.  BODY must be brief and allocate little."
  `(sb-sys:without-gcing ,@body))

(declaim (inline object-address))
(defun object-address (object)
  "OBJECT's current address (with its lowtag), an unsigned word: valid as
an identity only while CURRENT-GC-EPOCH stays the same."
  (sb-kernel:get-lisp-obj-address object))

;;; Arrays and strings.

(declaim (inline array-widetag))
(defun array-widetag (vector)
  "A small integer below 256 that is the same for exactly the simple
vectors with VECTOR's element representation."
  (sb-kernel:widetag-of vector))

(declaim (inline array-storage))
(defun array-storage (array)
  "The simple vector holding the elements of the non-displaced ARRAY in
row-major order (ARRAY itself when it is a simple vector)."
  (sb-ext:array-storage-vector array))

(defmacro with-array-data (((data-var array) (start-var start) (end-var end)) &body body)
  "Run BODY with DATA-VAR bound to the simple vector holding the elements
of the vector ARRAY (displaced or not) and START-VAR and END-VAR to the
bounds START and END (END NIL: the length) translated into it."
  `(sb-kernel:with-array-data ((,data-var ,array) (,start-var ,start) (,end-var ,end))
     ,@body))

(defmacro string-word (string i)
  "The Ith 64-bit word of the simple base STRING's characters (a place):
base characters are octets, so the word holds eight; a string's storage is
whole words, those after its last character zero."
  `(sb-kernel:%vector-raw-bits ,string ,i))

(defconstant +large-object-bytes+ sb-vm:large-object-size
  "Objects of this many bytes or more are allocated on pages of their own,
outside the thread's allocation region.")

;;; Symbols and packages.

(declaim (inline find-symbol-prefix))
(defun find-symbol-prefix (name length package)
  "As FIND-SYMBOL on the first LENGTH characters of the string NAME, without
making that prefix: the symbol and its status, or NIL and NIL."
  (sb-impl::%find-symbol name length package))

(declaim (inline package-locked-p))
(defun package-locked-p (package)
  "True when PACKAGE is locked against interning (SBCL's package locks)."
  (sb-ext:package-locked-p package))

;;; Hash tables.

(defun hash-table-weakness (table)
  "TABLE's weakness: NIL, :KEY, :VALUE, :KEY-AND-VALUE or :KEY-OR-VALUE."
  (sb-ext:hash-table-weakness table))

(defun hash-table-synchronized-p (table)
  "True when TABLE was made synchronized (safe to share between threads)."
  (sb-ext:hash-table-synchronized-p table))

(deftype system-object ()
  "Objects of the runtime that have no meaning outside this process: weak
pointers, threads and their locks, foreign values."
  '(or sb-ext:weak-pointer sb-thread:thread sb-thread:mutex sb-thread:waitqueue
    sb-alien-internals:alien-value))

;;; Classes and slots, through the metaobject protocol.

(declaim (inline class-slots slot-definition-name slot-definition-type
                 slot-definition-allocation slot-definition-initfunction
                 slot-definition-location))
(defun class-slots (class)
  "The effective slot definitions of the finalized CLASS."
  (sb-mop:class-slots class))

(defun slot-definition-name (slotd)
  "The name of the slot definition SLOTD."
  (sb-mop:slot-definition-name slotd))

(defun slot-definition-type (slotd)
  "The declared type of the slot definition SLOTD (T when none)."
  (sb-mop:slot-definition-type slotd))

(defun slot-definition-allocation (slotd)
  "Where SLOTD's value lives: :INSTANCE, :CLASS or another allocation."
  (sb-mop:slot-definition-allocation slotd))

(defun slot-definition-initfunction (slotd)
  "The function of no arguments computing SLOTD's initform, or NIL."
  (sb-mop:slot-definition-initfunction slotd))

(declaim (inline lisp-own-slot-p))
(defun lisp-own-slot-p (slotd)
  "True when SLOTD is a slot the Lisp itself keeps in instances of some of
its classes, set from its initform and not part of the object's data: never
stored, set from its initform when an instance is restored.  SBCL has none."
  (declare (ignore slotd))
  nil)

(defun slot-definition-location (slotd)
  "The index of SLOTD's value in an instance's slot vector when it is an
instance slot of a standard class, otherwise something else."
  (sb-mop:slot-definition-location slotd))

(defun method-specializers (method)
  "The specializers of METHOD's required parameters: classes, or EQL
specializers."
  (sb-mop:method-specializers method))

(defun applicable-methods-using-classes (function classes)
  "The methods of the generic FUNCTION that apply to arguments of CLASSES,
and whether that is known from the classes alone."
  (sb-mop:compute-applicable-methods-using-classes function classes))

(defun ensure-class-finalized (class)
  "Finalize CLASS's inheritance unless done; return CLASS."
  (unless (sb-mop:class-finalized-p class)
    (sb-mop:finalize-inheritance class))
  class)

(deftype condition-class ()
  "The class of condition classes."
  'sb-pcl::condition-class)

;;; Instances.  A structure holds its slots in the instance, some of them
;;; raw (an unboxed double-float, word, ...); a standard object holds them
;;; in a slot vector, unbound ones as a marker.

(declaim (inline instance-layout))
(defun instance-layout (instance)
  "The layout of INSTANCE (a structure, standard object or condition): EQ
for two instances exactly when they have the same class in the same
definition."
  (sb-kernel:wrapper-of instance))

(defmacro structure-slot-at (instance index)
  "The boxed slot at INDEX of the structure INSTANCE (a place)."
  `(sb-kernel:%instance-ref ,instance ,index))

(defmacro standard-slot-at (instance index)
  "The value at INDEX of the standard object INSTANCE's slot vector (a
place); the unbound marker for an unbound slot (UNBOUND-MARKER-P)."
  `(sb-mop:standard-instance-access ,instance ,index))

(declaim (inline unbound-marker-p))
(defun unbound-marker-p (value)
  "True when VALUE, read with STANDARD-SLOT-AT, marks an unbound slot."
  (eq value sb-pcl:+slot-unbound+))

(defun structure-slot-description (class name)
  "The description of the slot NAME of the structure class CLASS."
  (find name (sb-kernel:dd-slots (sb-kernel:find-defstruct-description (class-name class)))
        :key #'sb-kernel:dsd-name))

(defun structure-slot-reader (class name)
  "A function (instance) returning the value of the slot NAME of an
instance of the structure class CLASS, read directly, raw slots included."
  (let* ((dsd (structure-slot-description class name))
         (i (sb-kernel:dsd-index dsd)))
    (ecase (sb-kernel:dsd-raw-type dsd)
      ((t) (lambda (o) (sb-kernel:%instance-ref o i)))
      (double-float (lambda (o) (sb-kernel:%raw-instance-ref/double o i)))
      (single-float (lambda (o) (sb-kernel:%raw-instance-ref/single o i)))
      (sb-ext:word (lambda (o) (sb-kernel:%raw-instance-ref/word o i)))
      (sb-vm:signed-word (lambda (o) (sb-kernel:%raw-instance-ref/signed-word o i)))
      (sb-kernel:complex-double-float
       (lambda (o) (sb-kernel:%raw-instance-ref/complex-double o i)))
      (sb-kernel:complex-single-float
       (lambda (o) (sb-kernel:%raw-instance-ref/complex-single o i))))))

(defun structure-slot-setter (class name)
  "A function (instance value) setting the slot NAME of an instance of the
structure class CLASS directly, raw slots included.  VALUE must be of the
slot's type: nothing is checked."
  (let* ((dsd (structure-slot-description class name))
         (i (sb-kernel:dsd-index dsd)))
    (ecase (sb-kernel:dsd-raw-type dsd)
      ((t) (lambda (o v) (setf (sb-kernel:%instance-ref o i) v)))
      (double-float (lambda (o v) (setf (sb-kernel:%raw-instance-ref/double o i) v)))
      (single-float (lambda (o v) (setf (sb-kernel:%raw-instance-ref/single o i) v)))
      (sb-ext:word (lambda (o v) (setf (sb-kernel:%raw-instance-ref/word o i) v)))
      (sb-vm:signed-word (lambda (o v) (setf (sb-kernel:%raw-instance-ref/signed-word o i) v)))
      (sb-kernel:complex-double-float
       (lambda (o v) (setf (sb-kernel:%raw-instance-ref/complex-double o i) v)))
      (sb-kernel:complex-single-float
       (lambda (o v) (setf (sb-kernel:%raw-instance-ref/complex-single o i) v))))))

(defun structure-slot-raw-kind (class name)
  "How an instance of the structure class CLASS holds the slot NAME: NIL
when boxed (a Lisp object, for STRUCTURE-SLOT-AT), otherwise the raw
representation's keyword for SET-STRUCTURE-RAW-SLOT: :DOUBLE-FLOAT,
:SINGLE-FLOAT, :WORD, :SIGNED-WORD, :COMPLEX-DOUBLE-FLOAT or
:COMPLEX-SINGLE-FLOAT."
  (let ((raw-type (sb-kernel:dsd-raw-type (structure-slot-description class name))))
    (case raw-type
      ((t) nil)
      (double-float :double-float)
      (single-float :single-float)
      (sb-ext:word :word)
      (sb-vm:signed-word :signed-word)
      (sb-kernel:complex-double-float :complex-double-float)
      (sb-kernel:complex-single-float :complex-single-float)
      (t (error "unknown raw slot type ~s" raw-type)))))

(defun structure-slot-index (class name)
  "The index of the slot NAME in an instance of the structure class CLASS:
for STRUCTURE-SLOT-AT when the slot is boxed, for SET-STRUCTURE-RAW-SLOT
otherwise (see STRUCTURE-SLOT-RAW-KIND)."
  (sb-kernel:dsd-index (structure-slot-description class name)))

(declaim (inline set-structure-raw-slot))
(defun set-structure-raw-slot (instance index kind value)
  "Store VALUE, of the slot's type (unchecked), in the raw slot at INDEX of
the structure INSTANCE, whose STRUCTURE-SLOT-RAW-KIND is KIND."
  (ecase kind
    (:double-float (setf (sb-kernel:%raw-instance-ref/double instance index) value))
    (:single-float (setf (sb-kernel:%raw-instance-ref/single instance index) value))
    (:word (setf (sb-kernel:%raw-instance-ref/word instance index) value))
    (:signed-word (setf (sb-kernel:%raw-instance-ref/signed-word instance index) value))
    (:complex-double-float
     (setf (sb-kernel:%raw-instance-ref/complex-double instance index) value))
    (:complex-single-float
     (setf (sb-kernel:%raw-instance-ref/complex-single instance index) value))))

(defun structure-boxed-slot-index (class name)
  "The index at which an instance of the structure class CLASS holds the
slot NAME's value as it is (for STRUCTURE-SLOT-AT), or NIL when the slot is
raw."
  (let ((dsd (structure-slot-description class name)))
    (and (eq (sb-kernel:dsd-raw-type dsd) t)
         (sb-kernel:dsd-index dsd))))

(defun standard-instance-allocator (class)
  "A function of no arguments returning a fresh instance of the standard
class CLASS with every slot unbound, as the standard ALLOCATE-INSTANCE
method makes it but without the generic function's dispatch.  Only for a
class on which that method is the only one applicable."
  (let ((wrapper (sb-pcl::class-wrapper class)))
    (lambda () (sb-pcl::allocate-standard-instance wrapper))))

;;; Types, parsed once and tested many times.

(defun parse-type (specifier)
  "SPECIFIER parsed into a form PARSED-TYPEP tests quickly."
  (sb-kernel:specifier-type specifier))

(declaim (inline parsed-typep))
(defun parsed-typep (object parsed-type)
  "True when OBJECT is of PARSED-TYPE (from PARSE-TYPE).  A NaN is tested
with the invalid-operation trap masked: SBCL compares it with = against
the floats of a MEMBER type (NULL is one: (OR NULL PACKAGE)), which traps,
and restored data may hold NaNs anywhere."
  (if (and (floatp object) (sb-ext:float-nan-p object))
      (sb-int:with-float-traps-masked (:invalid)
        (sb-kernel:ctypep object parsed-type))
      (sb-kernel:ctypep object parsed-type)))

(defun parsed-type-specifier (parsed-type)
  "A type specifier for PARSED-TYPE (from PARSE-TYPE), for messages."
  (sb-kernel:type-specifier parsed-type))
