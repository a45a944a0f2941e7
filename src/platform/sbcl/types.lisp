;;;; The format's strings and array element types, on SBCL: what the other
;;;; platforms (src/platform/ecl/objects.lisp) must translate, SBCL has as it
;;;; is.  Each is a type, an inline function or a macro that gives what the
;;;; codecs named themselves before there was another platform, so that the
;;;; code compiled on SBCL is what it was.

(in-package #:binstore)

(declaim (inline array-element-type-name))
(defun array-element-type-name (array)
  "ARRAY's element type as the format names it: on SBCL its
ARRAY-ELEMENT-TYPE."
  (array-element-type array))

(declaim (inline array-element-type-supported-p))
(defun array-element-type-supported-p (type)
  "True when arrays of the format's element type TYPE can be made here:
every one on SBCL."
  (declare (ignore type))
  t)

(defmacro elementwise-payload-p (code)
  "True when the raw payload of element type CODE is not laid out in memory
as in the format, so that it is converted element by element: never on
SBCL, whose layout the format's is."
  (declare (ignore code))
  nil)

;;; Strings.  The format's base strings are ASCII (doc/FORMAT.md), as SBCL's
;;; base characters are.

(deftype format-base-string ()
  "The strings written as the format's BASE-STRING: on SBCL every
SIMPLE-BASE-STRING."
  'simple-base-string)

(deftype format-character-string ()
  "The strings written as the format's STRING: on SBCL every
(SIMPLE-ARRAY CHARACTER (*))."
  '(simple-array character (*)))

(defmacro format-string (string)
  "STRING as the format writes its characters: on SBCL STRING itself."
  string)

;;; The identity table's seen bits (src/core/identity-table.lisp).

(defconstant +seen-word-bits+ 64
  "Bits in a word of the identity table's seen bits: SBCL's machine word,
an unboxed integer in its compiled code.")

(deftype seen-word ()
  "A word of the identity table's seen bits: on SBCL a machine word."
  'word)

(defmacro multiplicative-hash (x)
  "Bits 32 to 63 of the word X times 2^64/phi (modulo 2^64): a hash of X
that spreads neighbouring values.  On SBCL the word arithmetic itself."
  `(ash (logand (* ,x #x9E3779B97F4A7C15) #xFFFFFFFFFFFFFFFF) -32))

(deftype heap-address ()
  "What OBJECT-ADDRESS returns, for declarations that other Lisps' compilers
need: on SBCL T, as SBCL derives the word OBJECT-ADDRESS returns itself (a
declaration would only add a check where a function takes an address)."
  't)

;;; Arrays.

(declaim (inline format-adjustable-p))
(defun format-adjustable-p (array)
  "True when the format calls ARRAY adjustable: on SBCL ADJUSTABLE-ARRAY-P,
which is true of every array that is not simple (made adjustable, or with a
fill pointer, or displaced)."
  (adjustable-array-p array))

;;; Names the portable platform (CLISP) needs, which are SBCL's own
;;; operators or nothing here.

(defmacro character-string-pointer (string)
  "A pointer to the characters of the character STRING as 32-bit code
points: on SBCL its VECTOR-POINTER."
  `(vector-pointer ,string))

(defmacro store-array-storage (array storage)
  "Put back into ARRAY what was written into STORAGE, its ARRAY-STORAGE:
nothing on SBCL, where STORAGE is ARRAY's own data."
  (declare (ignore array storage))
  nil)

(defmacro make-hash-table-as-stored (&rest arguments)
  "MAKE-HASH-TABLE with the options the format stores, :WEAKNESS and
:SYNCHRONIZED among them: on SBCL MAKE-HASH-TABLE itself, which takes them."
  `(make-hash-table ,@arguments))

(defmacro format-rehash-size (table)
  "TABLE's rehash size as the format stores it: on SBCL its
HASH-TABLE-REHASH-SIZE.  A macro, so that the code SBCL compiles is what
it compiled before other Lisps needed the name."
  `(hash-table-rehash-size ,table))

(defmacro format-rehash-threshold (table)
  "TABLE's rehash threshold as the format stores it: on SBCL its
HASH-TABLE-REHASH-THRESHOLD."
  `(hash-table-rehash-threshold ,table))

(defmacro format-hash-table-test (table)
  "TABLE's test as the format names it (EQ, EQL, EQUAL, EQUALP or the name
of a test of the user's): on SBCL its HASH-TABLE-TEST."
  `(hash-table-test ,table))

(defmacro identity-hashed-table-p (table)
  "True when TABLE hashes its keys by identity, so that a key may be put
in before its contents are read: on SBCL, an EQ or EQL table."
  `(member (format-hash-table-test ,table) '(eq eql)))
