;;;; The platform's objects on ECL: the names of src/platform/objects.lisp
;;;; (SBCL's) with the same contracts.  ECL keeps no raw structure slots, and
;;;; its bignums are GMP integers (sign and magnitude), so some of these are
;;;; portable Lisp where SBCL's are its internals.

(in-package #:binstore)

;;; Floats.

(declaim (inline float-nan-p))
(defun float-nan-p (x)
  "True when the float X is a NaN."
  (ext:float-nan-p x))

(declaim (inline single-float-from-bits double-float-from-bits float-complex))
;;; Each float is boxed by allocating it, not by ECL_MAKE_DOUBLE_FLOAT or
;;; ECL_MAKE_COMPLEX, which compare the value with zero: on a signalling
;;; NaN, bits any file may hold, the comparison traps (FE_INVALID).
(defun single-float-from-bits (bits)
  "The single float whose IEEE 754 encoding is BITS, a (signed-byte 32)."
  (ffi:c-inline (bits) (:int32-t) :object
                "({ int32_t b_ = #0; cl_object o_ = ecl_alloc_object(t_singlefloat);
                    __builtin_memcpy(&ecl_single_float(o_), &b_, 4); o_; })"
                :one-liner t :side-effects nil))

(defun double-float-from-bits (high low)
  "The double float whose IEEE 754 encoding has HIGH, a (signed-byte 32),
as its upper 32 bits and LOW, an (unsigned-byte 32), as its lower."
  (ffi:c-inline (high low) (:int32-t :uint32-t) :object
                "({ uint64_t b_ = ((uint64_t)(uint32_t)#0 << 32) | (uint64_t)#1;
                    cl_object o_ = ecl_alloc_object(t_doublefloat);
                    __builtin_memcpy(&ecl_double_float(o_), &b_, 8); o_; })"
                :one-liner t :side-effects nil))

(defun float-complex (realpart imagpart)
  "The complex whose parts are the floats REALPART and IMAGPART, both
single floats or both double floats."
  (if (typep realpart 'double-float)
      (ffi:c-inline (realpart imagpart) (:object :object) :object
                    "({ cl_object o_ = ecl_alloc_object(t_cdfloat);
                        double p_[2] = { ecl_double_float(#0), ecl_double_float(#1) };
                        __builtin_memcpy(&ecl_cdfloat(o_), p_, sizeof p_); o_; })"
                    :one-liner t :side-effects nil)
      (ffi:c-inline (realpart imagpart) (:object :object) :object
                    "({ cl_object o_ = ecl_alloc_object(t_csfloat);
                        float p_[2] = { ecl_single_float(#0), ecl_single_float(#1) };
                        __builtin_memcpy(&ecl_csfloat(o_), p_, sizeof p_); o_; })"
                    :one-liner t :side-effects nil)))

;;; Integers.  Digits are 64-bit, two's complement, least significant first,
;;; as on SBCL: taken with LDB, which is exact on any Lisp.

(declaim (inline bignum-digit-count bignum-digit))
(defun bignum-digit-count (bignum)
  "The number of 64-bit digits of the bignum BIGNUM (two's complement, with
its sign bit)."
  (1+ (floor (integer-length bignum) 64)))

(defun bignum-digit (bignum i)
  "The Ith 64-bit digit of the bignum BIGNUM, an (unsigned-byte 64)."
  (ldb (byte 64 (* 64 i)) bignum))

(declaim (inline make-digits (setf digit)))
(defun make-digits (count)
  "A fresh vector of COUNT digits, to be filled with (SETF DIGIT) and then
given to DIGITS-INTEGER."
  (make-array count :element-type '(unsigned-byte 64) :initial-element 0))

(defun (setf digit) (value digits i)
  "Set the Ith digit of DIGITS (from MAKE-DIGITS) to VALUE."
  (setf (aref (the (simple-array (unsigned-byte 64) (*)) digits) i) value))

(defun digits-integer (digits count)
  "The integer whose two's complement digits are the COUNT digits of DIGITS
\(from MAKE-DIGITS), assembled by halves (not digit by digit, which is
quadratic)."
  (declare (type (simple-array (unsigned-byte 64) (*)) digits))
  (labels ((unsigned (start end)
             (if (= (- end start) 1)
                 (aref digits start)
                 (let ((mid (floor (+ start end) 2)))
                   (logior (ash (unsigned mid end) (* 64 (- mid start)))
                           (unsigned start mid))))))
    (if (zerop count)
        0
        (let ((u (unsigned 0 count)))
          (if (logbitp 63 (aref digits (1- count)))
              (- u (ash 1 (* 64 count)))
              u)))))

(defconstant +fixnum-tag-bits+ 0
  "How far a fixnum's value is shifted left in a vector of fixnums: ECL's
fixnum vectors hold plain 64-bit integers.")

;;; Identity.  ECL's collector does not move objects: an address identifies
;;; an object for as long as it is alive, and the epoch never changes.

(deftype gc-epoch ()
  "What CURRENT-GC-EPOCH returns."
  'cons)

(defvar *gc-epoch* (list :never-moved)
  "The one collection epoch of a non-moving collector.")

(defmacro current-gc-epoch ()
  "The current collection epoch: on ECL always the same, so a constant of
the compiled code rather than a special variable's lookup."
  '(load-time-value *gc-epoch* t))

(defmacro without-collections (&body body)
  "Run BODY: ECL's collector moves nothing, so there is nothing to hold
off."
  `(progn ,@body))

(declaim (inline object-address))
(defun object-address (object)
  "OBJECT's address (with its tag bits), a non-negative fixnum."
  (ffi:c-inline (object) (:object) :fixnum
                "((cl_fixnum)(#0) & (cl_fixnum)0x0FFFFFFFFFFFFFFF)"
                :one-liner t :side-effects nil))

;;; The identity table's seen bits (src/core/identity-table.lisp): words of
;;; 32 bits, so that they stay fixnums (ECL's 64-bit integers beyond its
;;; 62-bit fixnums are bignums).

(defconstant +seen-word-bits+ 32
  "Bits in a word of the identity table's seen bits.")

(deftype seen-word ()
  "A word of the identity table's seen bits: a fixnum on ECL."
  '(unsigned-byte 32))

(deftype heap-address ()
  "What OBJECT-ADDRESS returns: on ECL a non-negative fixnum (declared
where the compiler cannot see it, it lets ECL open-code shifts of it)."
  '(integer 0 #x0FFFFFFFFFFFFFFF))

;;; Arrays and strings.

(declaim (inline array-widetag))
(defun array-widetag (vector)
  "A small integer below 256 that is the same for exactly the simple
vectors with VECTOR's element representation: ECL's element type code."
  (ffi:c-inline (vector) (:object) :fixnum "(cl_fixnum)((#0)->vector.elttype)"
                :one-liner t :side-effects nil))

(defun %array-storage-alias (array)
  "A simple vector sharing the non-displaced, non-simple ARRAY's data."
  (ffi:c-inline (array) (:object) :object "{
    cl_object a = #0;
    cl_elttype et = (cl_elttype)a->array.elttype;
    cl_index n = a->array.dim;
    cl_type t = (et == ecl_aet_bc) ? t_base_string
              : (et == ecl_aet_ch) ? t_string
              : (et == ecl_aet_bit) ? t_bitvector : t_vector;
    cl_object v = ecl_alloc_object(t);
    v->vector.elttype = et;
    v->vector.flags = 0;
    v->vector.displaced = ECL_NIL;
    v->vector.dim = n;
    v->vector.fillp = n;
    v->vector.offset = 0;
    if (ecl_t_of(a) == t_array) v->vector.self = a->array.self;
    else v->vector.self = a->vector.self;
    @(return) = v;
  }" :one-liner nil))

(defun array-storage (array)
  "The simple vector holding the elements of the non-displaced ARRAY in
row-major order (ARRAY itself when it is a simple vector); on ECL a vector
sharing ARRAY's data."
  (if (typep array '(simple-array * (*)))
      array
      (%array-storage-alias array)))

(defun %array-data (array start end)
  (let ((offset 0) (a array))
    (declare (type fixnum offset))
    (loop (multiple-value-bind (to off) (array-displacement a)
            (if to
                (setf offset (+ offset off) a to)
                (return))))
    (values (array-storage a)
            (+ start offset)
            (+ (or end (length array)) offset))))

(defmacro with-array-data (((data-var array) (start-var start) (end-var end)) &body body)
  "Run BODY with DATA-VAR bound to the simple vector holding the elements
of the vector ARRAY (displaced or not) and START-VAR and END-VAR to the
bounds START and END (END NIL: the length) translated into it."
  `(multiple-value-bind (,data-var ,start-var ,end-var) (%array-data ,array ,start ,end)
     (declare (type fixnum ,start-var ,end-var))
     ,@body))

(declaim (inline %set-string-word))
(defun %set-string-word (string i word)
  (declare (type simple-base-string string) (type fixnum i)
           (type (unsigned-byte 64) word))
  (ffi:c-inline (string i word) (:object :fixnum :uint64-t) :void
                "{ cl_object s_ = #0; cl_index at_ = 8 * (cl_index)#1;
                   cl_index n_ = s_->base_string.dim - at_;
                   uint64_t w_ = #2;
                   __builtin_memcpy(s_->base_string.self + at_, &w_, n_ < 8 ? n_ : 8); }"
                :one-liner nil :side-effects t)
  word)

(declaim (inline %string-word))
(defun %string-word (string i)
  (declare (type simple-base-string string) (type fixnum i))
  (ffi:c-inline (string i) (:object :fixnum) :uint64-t
                "({ cl_object s_ = #0; cl_index at_ = 8 * (cl_index)#1;
                    cl_index n_ = s_->base_string.dim - at_; uint64_t w_ = 0;
                    __builtin_memcpy(&w_, s_->base_string.self + at_, n_ < 8 ? n_ : 8); w_; })"
                :one-liner t :side-effects nil))

(defmacro string-word (string i)
  "The Ith 64-bit word of the simple base STRING's characters (a place):
base characters are octets, so the word holds eight; the bytes past the
string's end read as zero and are not written."
  `(%string-word ,string ,i))

(defsetf string-word (string i) (word)
  `(%set-string-word ,string ,i ,word))

(defconstant +large-object-bytes+ (* 4 32768)
  "Objects of this many bytes or more are large (a size SBCL uses; ECL's
collector has no such boundary binstore relies on).")

;;; Element types.  ECL names its upgraded element types for their
;;; representation (EXT:BYTE8, EXT:INTEGER64 ...); binstore's format names
;;; them as SBCL does.

(defun array-element-type-name (array)
  "ARRAY's element type as the format names it: (UNSIGNED-BYTE 8) for
ECL's EXT:BYTE8 and so on; fixnum vectors are (SIGNED-BYTE 64) on ECL."
  (let ((type (array-element-type array)))
    (case type
      (ext:byte8 '(unsigned-byte 8))
      (ext:integer8 '(signed-byte 8))
      (ext:byte16 '(unsigned-byte 16))
      (ext:integer16 '(signed-byte 16))
      (ext:byte32 '(unsigned-byte 32))
      (ext:integer32 '(signed-byte 32))
      (ext:byte64 '(unsigned-byte 64))
      (ext:integer64 '(signed-byte 64))
      (si:complex-single-float '(complex single-float))
      (si:complex-double-float '(complex double-float))
      (t type))))

(defun array-element-type-supported-p (type)
  "True when arrays of the format's element type TYPE can be made here."
  (not (null type)))

(defmacro elementwise-payload-p (code)
  "True when the raw payload of element type CODE is not laid out in ECL's
memory as in the format: bits (ECL packs them most significant first) and
(unsigned-byte 2) and 4 (ECL gives them a byte each)."
  `(member ,code '(1 2 3)))

;;; Strings.  The format's base strings are ASCII (doc/FORMAT.md); ECL's
;;; base characters are 8-bit, so a base string with a character from 128
;;; to 255 is written as a character string.

(defun ascii-base-string-p (string)
  "True when every character of the simple base STRING is below 128."
  (declare (type simple-base-string string) (optimize speed))
  (ffi:c-inline (string) (:object) :bool
                "({ cl_object s_ = #0; cl_index i_, n_ = s_->base_string.dim; int ok_ = 1;
                    for (i_ = 0; i_ < n_; i_++) if (s_->base_string.self[i_] >= 128) { ok_ = 0; break; }
                    ok_; })"
                :one-liner t :side-effects nil))

(declaim (inline simple-base-string-p))
(defun simple-base-string-p (object)
  "True when OBJECT is a SIMPLE-BASE-STRING: a base string neither
adjustable, nor with a fill pointer, nor displaced.  Inline C, where ECL's
TYPEP of SIMPLE-BASE-STRING is a call of its general TYPEP (a tenth of
storing a list of mixed objects)."
  (ffi:c-inline (object) (:object) :bool
                "({ cl_object o_ = #0;
                    ECL_BASE_STRING_P(o_)
                    && !(o_->base_string.flags & (ECL_FLAG_ADJUSTABLE | ECL_FLAG_HAS_FILL_POINTER))
                    && (Null(o_->base_string.displaced)
                        || Null(ECL_CONS_CAR(o_->base_string.displaced))); })"
                :one-liner t :side-effects nil))

(deftype format-base-string ()
  "The strings written as the format's BASE-STRING: simple base strings of
ASCII characters."
  '(and (satisfies simple-base-string-p) (satisfies ascii-base-string-p)))

(deftype format-character-string ()
  "The strings written as the format's STRING (those FORMAT-BASE-STRING
does not take first): character strings, and base strings with characters
beyond ASCII."
  '(or (simple-array character (*)) simple-base-string))

(declaim (inline format-string))
(defun format-string (string)
  "STRING as the format writes its characters: a base string with a
character beyond ASCII copied into a character string."
  (if (and (typep string 'simple-base-string) (not (ascii-base-string-p string)))
      (coerce string '(simple-array character (*)))
      string))

;;; Symbols and packages.

(declaim (inline find-symbol-prefix))
(defun find-symbol-prefix (name length package)
  "As FIND-SYMBOL on the first LENGTH characters of the string NAME."
  (find-symbol (if (= length (length name)) name (subseq name 0 length)) package))

(declaim (inline package-locked-p))
(defun package-locked-p (package)
  "True when PACKAGE is locked against interning."
  (ext:package-locked-p package))

;;; Hash tables.

(defun hash-table-weakness (table)
  "TABLE's weakness: NIL, :KEY, :VALUE, :KEY-AND-VALUE or :KEY-OR-VALUE."
  (ext:hash-table-weakness table))

(defun hash-table-synchronized-p (table)
  "True when TABLE was made synchronized.  ECL's tables are all
synchronized; binstore reports only those made so by their maker, which
ECL does not tell apart, as not."
  (declare (ignore table))
  nil)

(deftype system-object ()
  "Objects of the runtime that have no meaning outside this process."
  '(or ext:weak-pointer mp:process mp:lock mp:condition-variable si:foreign-data))

;;; Classes and slots, through the metaobject protocol.

(declaim (inline class-slots slot-definition-name slot-definition-type
                 slot-definition-allocation slot-definition-initfunction
                 slot-definition-location))
(defun class-slots (class) (clos:class-slots class))
(defun slot-definition-name (slotd) (clos:slot-definition-name slotd))
(defun slot-definition-type (slotd) (clos:slot-definition-type slotd))
(defun slot-definition-allocation (slotd) (clos:slot-definition-allocation slotd))
(defun slot-definition-initfunction (slotd) (clos:slot-definition-initfunction slotd))

(defun lisp-own-slot-p (slotd)
  "True when SLOTD is a slot the Lisp itself keeps in instances of some of
its classes, set from its initform and not part of the object's data: never
stored, set from its initform when an instance is restored.  On ECL, a
condition's SI:REPORT-FUNCTION (its class's report, a function)."
  (eq (clos:slot-definition-name slotd) 'si::report-function))

(defun slot-definition-location (slotd) (clos:slot-definition-location slotd))

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
  (and (typep class 'class) (subtypep class 'condition)))

(deftype condition-class ()
  "The class of condition classes (ECL: standard classes under CONDITION)."
  '(and standard-class (satisfies condition-class-p)))

;;; Instances.

(declaim (inline instance-layout))
(defun instance-layout (instance)
  "What tells instances of one class apart from others: a standard object's
slot definitions, which a redefinition replaces (EQ for two instances of
the same class in the same definition); a structure's class, as ECL leaves
every structure's slot definitions unbound (the same for all of them)."
  (ffi:c-inline (instance) (:object) :object
                "({ cl_object s_ = (#0)->instance.slotds;
                    s_ == ECL_UNBOUND ? (#0)->instance.clas : s_; })"
                :one-liner t :side-effects nil))

(defmacro structure-slot-at (instance index)
  "The slot at INDEX of the structure INSTANCE (a place)."
  `(si:instance-ref ,instance ,index))

(defmacro standard-slot-at (instance index)
  "The value at INDEX of the standard object INSTANCE's slots (a place);
the unbound marker for an unbound slot (UNBOUND-MARKER-P)."
  `(si:instance-ref ,instance ,index))

(declaim (inline unbound-marker-p))
(defun unbound-marker-p (value)
  "True when VALUE, read with STANDARD-SLOT-AT, marks an unbound slot."
  (eq value (si:unbound)))

(defun structure-slot-description (class name)
  "The effective slot definition of the slot NAME of the structure CLASS."
  (find name (clos:class-slots class) :key #'clos:slot-definition-name))

(defun structure-slot-index (class name)
  "The index of the slot NAME in an instance of the structure class CLASS."
  (clos:slot-definition-location (structure-slot-description class name)))

(defun structure-slot-reader (class name)
  "A function (instance) returning the value of the slot NAME."
  (let ((i (structure-slot-index class name)))
    (lambda (o) (si:instance-ref o i))))

(defun structure-slot-setter (class name)
  "A function (instance value) setting the slot NAME directly."
  (let ((i (structure-slot-index class name)))
    (lambda (o v) (si:instance-set o i v))))

(defun structure-slot-raw-kind (class name)
  "NIL: ECL holds every structure slot boxed."
  (declare (ignore class name))
  nil)

(declaim (inline set-structure-raw-slot))
(defun set-structure-raw-slot (instance index kind value)
  "Never called on ECL (no raw slots); sets the slot."
  (declare (ignore kind))
  (si:instance-set instance index value))

;;; Names the portable platform (CLISP) needs, which are ECL's own
;;; operators or nothing here.

(defmacro character-string-pointer (string)
  "A pointer to the characters of the character STRING as 32-bit code
points: on ECL its VECTOR-POINTER."
  `(vector-pointer ,string))

(defmacro store-array-storage (array storage)
  "Put back into ARRAY what was written into STORAGE, its ARRAY-STORAGE:
nothing on ECL, where STORAGE shares ARRAY's data."
  (declare (ignore array storage))
  nil)

(defmacro make-hash-table-as-stored (&rest arguments)
  "MAKE-HASH-TABLE with the options the format stores, :WEAKNESS and
:SYNCHRONIZED among them: on ECL MAKE-HASH-TABLE itself, which takes them."
  `(make-hash-table ,@arguments))

(declaim (inline format-rehash-size format-rehash-threshold))
(defun format-rehash-size (table)
  "TABLE's rehash size as the format stores it: on ECL its
HASH-TABLE-REHASH-SIZE."
  (hash-table-rehash-size table))

(defun format-rehash-threshold (table)
  "TABLE's rehash threshold as the format stores it: on ECL its
HASH-TABLE-REHASH-THRESHOLD."
  (hash-table-rehash-threshold table))

(declaim (inline format-hash-table-test))
(defun format-hash-table-test (table)
  "TABLE's test as the format names it (EQ, EQL, EQUAL, EQUALP or the name
of a test of the user's): on ECL its HASH-TABLE-TEST."
  (hash-table-test table))

(declaim (inline identity-hashed-table-p))
(defun identity-hashed-table-p (table)
  "True when TABLE hashes its keys by identity, so that a key may be put
in before its contents are read: an EQ or EQL table."
  (member (format-hash-table-test table) '(eq eql)))
