;;;; The byte format as data: one entry per tag, saying what follows the tag
;;;; byte, which objects get ids and when, and how the record around the
;;;; objects is built.  doc/FORMAT.md is the prose; this file is the same
;;;; description for programs.  src/format/tags.lisp derives the tag constants,
;;;; +TAG-NAMES+, +CONTAINER-TAGS+ and the element types from it;
;;;; src/format/reference.lisp (a slow reference decoder) and
;;;; src/explain.lisp (BINSTORE:EXPLAIN) interpret it; tests/grammar.lisp
;;;; checks doc/FORMAT.md's tables against it.
;;;;
;;;; An entry is (NAME CODE &key CODES ROLE KIND IDS PARTS CONTENTS SUMMARY):
;;;;
;;;;   NAME      a keyword, the tag's name in FORMAT.md (:dotted-list); the
;;;;             constant is +TAG-<NAME>+
;;;;   CODE      the tag byte (the first, with CODES)
;;;;   CODES     how many tag bytes from CODE on the entry covers (1): the
;;;;             tag byte itself then carries part of a field (:TAG)
;;;;   ROLE      :object   the tag may start an object (anywhere one is read)
;;;;             :slot     only as an instance's slot value (unbound-slot)
;;;;             :record   only where the record rules below put it
;;;;   KIND      for objects: :leaf, :container (a header, then contents a
;;;;             LATER may defer), :reference (names an earlier object) or
;;;;             :deferred (LATER)
;;;;   REFERS    for a :reference, what its ID field names: :objects (the
;;;;             default) or :conses (a cons id); or :next, for a reference
;;;;             without an ID field: the object whose id is one above the
;;;;             one the record's last reference to an object named
;;;;   IDS       which objects get ids, and when:
;;;;             :never      none
;;;;             :always     the object, once its parts are read
;;;;             :tracked    the object, once its parts are read, when the
;;;;                         record tracks objects
;;;;             :container  the container, once its header is read (before
;;;;                         its contents), when the record tracks objects
;;;;             :conses     each cons of the run, in order, once the header
;;;;                         is read, in the separate sequence of cons ids,
;;;;                         when the record tracks conses
;;;;   PARTS     what follows the tag byte (for a container, its header)
;;;;   CONTENTS  a container's contents, after its header
;;;;   SUMMARY   FORMAT.md's "what follows" column, word for word
;;;;
;;;; PARTS and CONTENTS are lists of parts, read in order.  A part names a
;;;; field; later parts' expressions can use it.
;;;;
;;;;   (:tag f)             F is the tag byte itself; nothing is read (first part only)
;;;;   (:u8 f [names])      one byte; NAMES, a list, says what each value means
;;;;   (:int f n)           n bytes, little-endian two's complement
;;;;   (:uint f n)          n bytes, little-endian unsigned
;;;;   (:float f bits)      IEEE 754 binary32 or binary64, little-endian
;;;;   (:varint f)          LEB128, at most 64 bits, no redundant zero group
;;;;   (:varints f count)   COUNT varints, a list
;;;;   (:count f &key each min what)
;;;;                        a varint count; the input must still hold EACH
;;;;                        (1) bytes per item (else it is truncated), and
;;;;                        the count must be at least MIN
;;;;   (:flags f (g bit width [names])...)
;;;;                        one byte, F; each G is its WIDTH bits from BIT
;;;;   (:element-type f)    an element-type code (1 byte), below
;;;;   (:magic octets)      these bytes, else the input is not binstore data
;;;;   (:let f expr)        F is EXPR's value; nothing is read
;;;;   (:room expr)         the input must still hold EXPR bytes
;;;;   (:check expr expected [condition])
;;;;                        the input is invalid unless EXPR holds (signals
;;;;                        CONDITION, INVALID-INPUT by default)
;;;;   (:charge expr)       not part of the bytes: EXPR bytes of memory a
;;;;                        decoder allocates here, which binstore counts
;;;;                        against max-to-read before it reads on
;;;;   (:object f &key type label)
;;;;                        one object; TYPE is the Lisp type it must have
;;;;   (:objects f count &key type unbound labels)
;;;;                        COUNT objects; UNBOUND: the unbound-slot tag may
;;;;                        stand for one; LABELS names them for EXPLAIN (a
;;;;                        list used in turn, or an expression)
;;;;   (:tail f)            the final cdr of a run of conses: one object, but
;;;;                        a list tag here continues the list (a new run, at
;;;;                        the same depth: readers follow tails in a loop)
;;;;   (:ints f count n)    COUNT integers of n bytes, two's complement
;;;;   (:magnitude f n)     n bytes of an unsigned integer, least significant first
;;;;   (:ascii f count)     COUNT bytes, each below 128: characters
;;;;   (:utf8 f count)      COUNT characters in UTF-8 (shortest form, up to
;;;;                        #x10FFFF, surrogates included)
;;;;   (:name f)            a symbol's name: a string payload (varint count,
;;;;                        then UTF-8)
;;;;   (:payload f code count)
;;;;                        the raw payload of COUNT elements of the element
;;;;                        type CODE (see +ELEMENT-TYPE-GRAMMAR+)
;;;;   (:if expr (then-part...) (else-part...))
;;;;   (:case expr (value part...)...)   no clause for the value: invalid
;;;;   (:later f)           a container tag byte, then that container's header
;;;;   (:fill f)            the contents of the container the LATER numbered
;;;;                        by the field F announced
;;;;
;;;; Expressions are integers, field names, a few constants
;;;; (CHAR-CODE-LIMIT, ARRAY-RANK-LIMIT, ARRAY-DIMENSION-LIMIT,
;;;; ARRAY-TOTAL-SIZE-LIMIT: SBCL's limits, which bound what a decoder can
;;;; make) and calls of the operators in +GRAMMAR-OPERATORS+.  GRAMMAR-EVAL
;;;; evaluates them; nothing here is ever given to EVAL.

(in-package #:binstore)

;;; Element types -------------------------------------------------------------

(defparameter +element-type-grammar+
  '((0 t :objects)
    (1 bit 1)
    (2 (unsigned-byte 2) 2)
    (3 (unsigned-byte 4) 4)
    (4 (unsigned-byte 7) 8)
    (5 (unsigned-byte 8) 8)
    (6 (unsigned-byte 15) 16)
    (7 (unsigned-byte 16) 16)
    (8 (unsigned-byte 31) 32)
    (9 (unsigned-byte 32) 32)
    (10 (unsigned-byte 62) 64)
    (11 (unsigned-byte 63) 64)
    (12 (unsigned-byte 64) 64)
    (13 (signed-byte 8) 8)
    (14 (signed-byte 16) 16)
    (15 (signed-byte 32) 32)
    (16 fixnum 64)
    (17 (signed-byte 64) 64)
    (18 single-float 32)
    (19 double-float 64)
    (20 (complex single-float) 64)
    (21 (complex double-float) 128)
    (22 character :utf8)
    (23 base-char :ascii)
    (24 nil 0))
  "Every array element type code: (code type payload), PAYLOAD being the bits
of one element in a raw payload, or how the elements are written when they
are not raw: :OBJECTS (one object each), :UTF8 (characters in UTF-8),
:ASCII (one byte each, below 128).  Element type NIL has no elements to
write: 0 bits.")

(defun element-type-entry (code)
  "The entry of +ELEMENT-TYPE-GRAMMAR+ for CODE, or NIL."
  (and (integerp code) (assoc code +element-type-grammar+)))

(defun element-type-code-named (type)
  "The code of the element type TYPE (a type specifier, compared with EQUAL)."
  (or (first (find type +element-type-grammar+ :key #'second :test #'equal))
      (error "No element type ~s in +ELEMENT-TYPE-GRAMMAR+." type)))

(defun element-form (code)
  "How the elements of element type CODE are written: :OBJECTS, :UTF8,
:ASCII, :NONE (element type NIL) or :RAW (a raw payload)."
  (let ((payload (third (element-type-entry code))))
    (cond ((symbolp payload) payload)
          ((zerop payload) :none)
          (t :raw))))

(defun payload-bits (code)
  "Bits of one element of the element type CODE in a raw payload (0 for NIL),
or NIL for the types whose elements are not raw."
  (let ((payload (third (element-type-entry code))))
    (and (integerp payload) payload)))

(defun raw-bytes (code count)
  "Bytes of the raw payload of COUNT elements of element type CODE:
ceiling(COUNT x bits / 8)."
  (ceiling (* count (or (payload-bits code) 0)) 8))

(defun memory-bytes (code count)
  "Bytes of memory binstore charges for the elements of an array of COUNT
elements of element type CODE: a word per object or character, a byte per
base character, the payload otherwise."
  (case (element-form code)
    ((:objects :utf8) (* 8 count))
    (:ascii count)
    (:none 0)
    (t (raw-bytes code count))))

;;; Enumerations: what the values of kind and flag fields mean ---------------

(defparameter +class-kinds+ '(:structure :standard-object :condition :codec)
  "A class descriptor's kind byte: the position in this list.  A :CODEC
descriptor names a user codec (REGISTER-CODEC) instead of a class.")

(defparameter +pathname-kinds+ '(:physical :logical :namestring)
  "A pathname's kind byte: the position in this list.")

(defparameter +hash-table-test-names+ '(:eq :eql :equal :equalp :named)
  "Bits 0-2 of a hash table's flags: the position in this list (:NAMED: the
name of the test follows as an object).")

(defparameter +hash-table-weakness-names+
  '(:none :key :value :key-and-value :key-or-value)
  "Bits 3-5 of a hash table's flags: the position in this list.")

(defparameter +tracking-flag-bits+ '((0 :objects) (1 :conses))
  "The bits of the tracking flags: bit 0, objects get ids; bit 1, conses do.")

;;; The tags -------------------------------------------------------------------

(defparameter +grammar-source+
  '(;; Constants
    (:nil #x00 :role :object :kind :leaf :ids :never
     :summary "nothing")
    (:t #x01 :role :object :kind :leaf :ids :never
     :summary "nothing")
    ;; Runs of conses
    (:list #x02 :role :object :kind :container :ids :conses
     :parts ((:count n :min 1 :what "a list")
             (:charge (* 16 n)))
     :contents ((:objects cars n))
     :summary "varint n ≥ 1, then n objects: a proper list of n elements")
    (:dotted-list #x03 :role :object :kind :container :ids :conses
     :parts ((:count n :min 1 :what "a list")
             (:charge (* 16 n)))
     :contents ((:objects cars n)
                (:tail cdr))
     :summary "varint n ≥ 1, n objects (the cars), then one object: the final cdr")
    (:cons #x04 :role :object :kind :container :ids :conses
     :parts ((:let n 1)
             (:charge 16))
     :contents ((:objects cars 1)
                (:tail cdr))
     :summary "two objects: car, then cdr (a dotted list of one cons)")
    ;; Integers beyond the in-tag range
    (:uint8 #x05 :role :object :kind :leaf :ids :never
     :parts ((:uint b 1))
     :summary "1 byte b: the integer b")
    (:negint8 #x06 :role :object :kind :leaf :ids :never
     :parts ((:uint b 1))
     :summary "1 byte b: the integer −(b+1)")
    (:int16 #x07 :role :object :kind :leaf :ids :never
     :parts ((:int value 2))
     :summary "2 bytes, two's complement")
    (:int32 #x08 :role :object :kind :leaf :ids :never
     :parts ((:int value 4))
     :summary "4 bytes, two's complement")
    (:int64 #x09 :role :object :kind :leaf :ids :never
     :parts ((:int value 8))
     :summary "8 bytes, two's complement")
    (:bignum #x0A :role :object :kind :leaf :ids :tracked
     :parts ((:varint v)
             (:let nbytes (ash v -1))
             (:room nbytes)
             (:charge (+ 16 nbytes))
             (:magnitude magnitude nbytes))
     :summary "varint v; n = v >> 1 bytes of magnitude follow, least significant first; the integer is negative when v & 1")
    ;; Other numbers
    (:ratio #x0B :role :object :kind :leaf :ids :tracked
     :parts ((:object numerator :type integer)
             (:object denominator :type integer)
             (:check (> denominator 1) "a denominator above 1"))
     :summary "two objects: numerator, denominator (integers; denominator > 1)")
    (:single-float #x0C :role :object :kind :leaf :ids :never
     :parts ((:float value 32))
     :summary "4 bytes IEEE 754 binary32")
    (:double-float #x0D :role :object :kind :leaf :ids :tracked
     :parts ((:float value 64))
     :summary "8 bytes IEEE 754 binary64")
    (:complex-single #x0E :role :object :kind :leaf :ids :tracked
     :parts ((:float real 32)
             (:float imag 32))
     :summary "4 + 4 bytes: real part, imaginary part")
    (:complex-double #x0F :role :object :kind :leaf :ids :tracked
     :parts ((:float real 64)
             (:float imag 64))
     :summary "8 + 8 bytes: real part, imaginary part")
    (:complex-rational #x10 :role :object :kind :leaf :ids :tracked
     :parts ((:object real :type rational)
             (:object imag :type rational)
             (:check (/= imag 0) "a non-zero imaginary part"))
     :summary "two objects: real part, imaginary part (rationals; imaginary ≠ 0)")
    ;; Characters and strings
    (:character #x11 :role :object :kind :leaf :ids :never
     :parts ((:varint code)
             (:check (< code char-code-limit) "a code point below char-code-limit"))
     :summary "varint code point")
    (:base-string #x12 :role :object :kind :leaf :ids :tracked
     :parts ((:count n :what "a base string")
             (:charge n)
             (:ascii chars n))
     :summary "varint n, then n bytes each below 128: a `simple-base-string`")
    (:string #x13 :role :object :kind :leaf :ids :tracked
     :parts ((:count n :what "a string")
             (:charge (* 4 n))
             (:utf8 chars n))
     :summary "string payload: a `(simple-array character (*))`")
    ;; Arrays
    (:simple-vector #x14 :role :object :kind :container :ids :container
     :parts ((:count n :what "a vector")
             (:charge (* 8 (+ n 2))))
     :contents ((:objects elements n))
     :summary "varint n, then n objects")
    (:specialized-vector #x15 :role :object :kind :leaf :ids :tracked
     :parts ((:element-type code)
             (:varint n)
             (:check (member (element-form code) :raw :none) "a raw element type code")
             (:if (= code 24)
                  ((:charge n)
                   ;; no bytes bound the length of a vector of element type NIL
                   (:check (< n array-dimension-limit) "a length below array-dimension-limit"))
                  ((:room (raw-bytes code n))))
             (:charge (+ 16 (raw-bytes code n)))
             (:payload elements code n))
     :summary "element-type code (1 byte), varint n, raw payload (below)")
    (:array #x16 :role :object :kind :container :ids :container
     :parts ((:flags flags (fill-pointer-p 0 1) (adjustable-p 1 1) (displaced-p 2 1))
             (:element-type code)
             (:check (< flags 8) "flags below 8")
             (:varint rank)
             (:check (< rank array-rank-limit) "a rank below array-rank-limit")
             (:varints dims rank)
             (:check (dimensions-fit-p dims) "dimensions within the array limits")
             (:let total (dimensions-product dims))
             (:if (= fill-pointer-p 1)
                  ((:varint fill-pointer)
                   (:check (and (= rank 1) (<= fill-pointer total))
                           "a fill pointer within a vector"))
                  ())
             (:if (= displaced-p 1)
                  ((:object target :label "displaced to")
                   (:varint offset))
                  ((:if (member (element-form code) :raw :none)
                        ((:if (= code 24)
                              ((:charge total))
                              ((:room (raw-bytes code total)))))
                        ((:room total)))
                   (:charge (+ 64 (memory-bytes code total))))))
     :contents ((:if (= displaced-p 1)
                     ()
                     ((:case (element-form code)
                        (:objects (:objects elements total))
                        (:utf8 (:utf8 elements total))
                        (:ascii (:ascii elements total))
                        (:none)
                        (:raw (:payload elements code total))))))
     :summary "any other array (below)")
    ;; Symbols and packages
    (:symbol #x17 :role :object :kind :leaf :ids :always
     :parts ((:object package :type (or package null) :label "package")
             (:name name))
     :summary "one object (the home package, normally a reference), then the name as a string payload")
    (:keyword #x18 :role :object :kind :leaf :ids :always
     :parts ((:name name))
     :summary "name as a string payload")
    (:uninterned-symbol #x19 :role :object :kind :leaf :ids :always
     :parts ((:count n :what "a string")
             (:charge (* 4 n))
             (:utf8 name n))
     :summary "name as a string payload")
    (:package #x1A :role :object :kind :leaf :ids :always
     :parts ((:count n :what "a string")
             (:charge (* 4 n))
             (:utf8 name n))
     :summary "name as a string payload")
    ;; Other containers
    (:hash-table #x1B :role :object :kind :container :ids :container
     :parts ((:flags flags (test 0 3 (:eq :eql :equal :equalp :named))
                     (weakness 3 3 (:none :key :value :key-and-value :key-or-value))
                     (synchronized 6 1))
             (:check (and (<= test 4) (<= weakness 4) (< flags 128))
                     "a test code 0-4 and weakness code 0-4")
             (:if (= test 4)
                  ((:object test-name :type (and symbol (not null)) :label "test"))
                  ())
             (:varint size)
             (:object rehash-size :label "rehash size")
             (:object rehash-threshold :label "rehash threshold")
             (:count n :each 2 :what "a hash table")
             (:check (rehash-size-p rehash-size)
                     "an integer in [1, 2^30] or a float in (1.0, 1000.0]")
             (:check (rehash-threshold-p rehash-threshold) "a real in (0, 1]")
             (:charge (* 48 (+ 8 (max size n)))))
     :contents ((:objects pairs (* 2 n) :labels ("key" "value")))
     :summary "see below")
    (:pathname #x1C :role :object :kind :leaf :ids :tracked
     :parts ((:u8 kind (:physical :logical :namestring))
             (:case kind
               (0 (:objects components 5 :type pathname-component
                            :labels ("device" "directory" "name" "type" "version")))
               (1 (:objects components 6 :type pathname-component
                            :labels ("host" "device" "directory" "name" "type" "version")))
               (2 (:object namestring :type string :label "namestring"))))
     :summary "see below")
    (:instance #x1D :role :object :kind :container :ids :container
     :parts ((:object descriptor :type format-descriptor :label "class")
             (:charge (* 8 (+ 2 (descriptor-slot-count descriptor)))))
     :contents ((:objects values (descriptor-slot-count descriptor) :unbound t
                          :labels (descriptor-slot-labels descriptor)))
     :summary "one object (a class descriptor, normally a reference), then one object per slot")
    (:class-descriptor #x1E :role :object :kind :leaf :ids :always
     :parts ((:u8 kind (:structure :standard-object :condition :codec))
             (:object class-name :label "class name")
             (:count n :what "a slot list")
             (:objects slot-names n :labels ("slot"))
             (:check (<= kind 3) "0, 1, 2 or 3")
             (:check (or (/= kind 3) (and (= n 1) (symbolp-of class-name)))
                     "a codec's name (a symbol) and one slot")
             (:check (every-symbol-p slot-names) "symbols"))
     :summary "kind (1 byte), class name (object), varint n, n slot names (objects)")
    (:unbound-slot #x1F :role :slot :ids :never
     :summary "nothing; only as a slot value of an instance")
    ;; References and the structure of a record
    (:ref #x20 :role :object :kind :reference :ids :never
     :parts ((:varint id))
     :summary "varint id: the object with that id")
    (:later #x21 :role :object :kind :deferred :ids :never
     :parts ((:later container))
     :summary "a container's tag and header, without its contents (see *Deferred contents*)")
    (:fill #x22 :role :record :ids :never
     :parts ((:varint n)
             (:fill n))
     :summary "varint n, then the contents of the n-th container announced by `later` (counting from 0)")
    (:tracking #x23 :role :record :ids :never
     :parts ((:flags flags (objects 0 1) (conses 1 1))
             (:check (< flags 4) "flags below 4"))
     :summary "1 byte of flags: which objects get ids (see *References*)")
    (:header #x24 :role :record :ids :never
     :parts ((:magic (#x42 #x53 #x54))
             (:varint version)
             (:check (<= 1 version +format-version+) "a version from 1 to the reader's"
                     unsupported-version))
     :summary "the bytes `#x42 #x53 #x54` (\"BST\"), then the format version as a varint")
    (:end #x25 :role :record :ids :never
     :summary "end marker: nothing after it is read")
    (:cons-ref #x26 :role :object :kind :reference :refers :conses :ids :never
     :parts ((:varint id))
     :summary "varint cons id: the cons with that id (see *References*)")
    (:int64-list #x27 :role :object :kind :container :ids :conses
     :parts ((:count n :each 8 :min 1 :what "a list")
             (:charge (* 16 n)))
     :contents ((:ints cars n 8))
     :summary "varint n ≥ 1, then n integers of 8 bytes each (two's complement): a proper list of them")
    (:no-tracking #x28 :role :record :ids :never
     :parts ((:let flags 0))
     :summary "nothing: `tracking` with flags 0, in one byte (since version 2)")
    (:full-tracking #x29 :role :record :ids :never
     :parts ((:let flags 3))
     :summary "nothing: `tracking` with flags 3, in one byte (since version 2)")
    (:octet-vector #x2A :role :object :kind :leaf :ids :tracked
     :parts ((:let code 5)
             (:varint n)
             (:room n)
             (:charge (+ 16 n))
             (:payload elements 5 n))
     :summary "varint n, then n bytes: `specialized-vector` of code 5, `(unsigned-byte 8)`, without the code (since version 2)")
    (:double-vector #x2B :role :object :kind :leaf :ids :tracked
     :parts ((:let code 19)
             (:varint n)
             (:room (* 8 n))
             (:charge (+ 16 (* 8 n)))
             (:payload elements 19 n))
     :summary "varint n, then 8n bytes: `specialized-vector` of code 19, `double-float`, without the code (since version 2)")
    (:objects #x2C :role :record :ids :never
     :parts ((:count n :what "a record of objects"))
     :summary "varint n: the record holds n top-level objects (since version 3; see *Records*)")
    (:codec-object #x2D :role :object :kind :leaf :ids :tracked
     :parts ((:object descriptor :type format-descriptor :label "codec")
             (:check (= (descriptor-kind descriptor) 3) "a codec descriptor")
             (:object value :label "value"))
     :summary "one object (a codec descriptor, normally a reference), then the object the codec wrote (since version 3)")
    (:dictionary #x2E :role :record :ids :never
     :parts ((:uint fingerprint 4)
             (:varint n))
     :summary "4 bytes, the fingerprint of the dictionary the record was stored with, then varint n: its n entries take ids 0 to n−1 (since version 3; see *Dictionaries*)")
    ;; References in two bytes: the tag's low 3 bits and the next byte
    (:short-ref #x30 :codes 8 :role :object :kind :reference :ids :never
     :parts ((:tag tag)
             (:u8 low)
             (:let id (+ 32 (* 256 (- tag #x30)) low)))
     :summary "1 byte b: the object with id 32 + 256 × (tag − `#x30`) + b, ids 32–2079 (since version 4)")
    (:short-cons-ref #x38 :codes 8 :role :object :kind :reference :refers :conses :ids :never
     :parts ((:tag tag)
             (:u8 low)
             (:let id (+ (* 256 (- tag #x38)) low)))
     :summary "1 byte b: the cons with id 256 × (tag − `#x38`) + b, cons ids 0–2047 (since version 4)")
    ;; A reference to the object after the last one referred to: runs of
    ;; references in id order (the same objects again, in the same order)
    (:next-ref #x2F :role :object :kind :reference :refers :next :ids :never
     :summary "nothing: the object whose id is one above the id the record's last reference to an object named (since version 5; see *References*)"))
  "The tags, as written: see the top of this file.  +GRAMMAR+ is the same,
checked and indexed.")

(defparameter +reserved-tags+ '()
  "The type tags no version uses yet, (first . last), or NIL when every one
of the 64 is used: a decoder rejects them.")

;;; Parsed entries ---------------------------------------------------------------

(defstruct (tag-spec (:constructor %make-tag-spec))
  "One tag of the format: see the top of this file."
  (name nil :type keyword)
  (code 0 :type (integer 0 63))
  (codes 1 :type (integer 1 64))        ; tag bytes from CODE on
  (refers :objects :type (member :objects :conses :next)) ; what a :reference names
  (constant nil :type symbol)           ; +TAG-<NAME>+
  (role :object :type (member :object :slot :record))
  (kind nil :type (member nil :leaf :container :reference :deferred))
  (ids :never :type (member :never :always :tracked :container :conses))
  (parts '() :type list)
  (contents '() :type list)
  (summary "" :type string))

(defparameter +part-kinds+
  '(:tag :u8 :int :uint :float :varint :varints :count :flags :element-type :magic :let
    :room :check :charge :object :objects :tail :ints :magnitude :ascii :utf8 :name
    :payload :if :case :later :fill)
  "Every kind of part the grammar uses (see the top of this file).")

(defun check-parts (parts where)
  "Signal unless every part of PARTS (and of the parts nested in :IF and
:CASE) is of a known kind; WHERE names the tag, for the message."
  (dolist (part parts)
    (unless (and (consp part) (member (first part) +part-kinds+))
      (error "Tag ~s: unknown part ~s." where part))
    (case (first part)
      (:if (check-parts (third part) where)
       (check-parts (fourth part) where))
      (:case (dolist (clause (cddr part))
               (check-parts (rest clause) where))))))

(defun tag-constant-name (name)
  "The symbol of the constant for the tag NAME: +TAG-<NAME>+ in binstore."
  (intern (format nil "+TAG-~a+" (symbol-name name)) '#:binstore))

(defun parse-grammar (source)
  "Check SOURCE (entries as in +GRAMMAR-SOURCE+) and return a vector of 64
slots, the TAG-SPEC of each type tag at its code, NIL for the others."
  (let ((table (make-array 64 :initial-element nil)))
    (dolist (entry source table)
      (destructuring-bind (name code &key (codes 1) (role :object) kind (refers :objects)
                                          (ids :never) parts contents (summary ""))
          entry
        (loop for c from code below (+ code codes)
              when (aref table c)
                do (error "Tags ~s and ~s share the code ~s." (tag-spec-name (aref table c)) name c))
        (when (find :tag (rest parts) :key #'first)
          (error "Tag ~s: a :TAG part comes first." name))
        (when (and (eq role :object) (null kind))
          (error "Tag ~s: an object tag needs a kind." name))
        (when (and contents (not (eq kind :container)))
          (error "Tag ~s: only containers have contents." name))
        (check-parts parts name)
        (check-parts contents name)
        (let ((spec (%make-tag-spec :name name :code code :codes codes
                                    :constant (tag-constant-name name)
                                    :refers refers
                                    :role role :kind kind :ids ids :parts parts
                                    :contents contents :summary summary)))
          (loop for c from code below (+ code codes)
                do (setf (aref table c) spec)))))))

(defparameter +grammar+ (parse-grammar +grammar-source+)
  "The TAG-SPEC of each type tag, indexed by its code (NIL where none).")

(defun tag-spec (code)
  "The TAG-SPEC of the type tag CODE, or NIL (a reserved tag, or a byte
outside the type tags)."
  (and (integerp code) (< -1 code 64) (aref +grammar+ code)))

(defun tag-spec-named (name)
  "The TAG-SPEC named NAME (a keyword)."
  (or (find name +grammar+ :key (lambda (spec) (and spec (tag-spec-name spec))))
      (error "No tag named ~s." name)))

(defun grammar-tags ()
  "Every TAG-SPEC, in code order, once (an entry of several CODES too)."
  (remove-duplicates (remove nil (coerce +grammar+ 'list)) :from-end t))

(defun container-tag-p (code)
  "True for the tag of a container (a header, then contents LATER may defer)."
  (let ((spec (tag-spec code)))
    (and spec (eq (tag-spec-kind spec) :container))))

(defun cons-run-tag-p (code)
  "True for a tag that begins a run of conses (its conses take cons ids)."
  (let ((spec (tag-spec code)))
    (and spec (eq (tag-spec-ids spec) :conses))))

;;; Expressions ----------------------------------------------------------------------

(defstruct format-descriptor
  "What a decoder knows of a class descriptor, whatever else it keeps: its
kind, class name and slot names.  The operators DESCRIPTOR-SLOT-COUNT and
DESCRIPTOR-SLOT-LABELS read it."
  (kind 0)
  (class-name nil)
  (slot-names '() :type list))

(defun pathname-component-p (x)
  "True for what a pathname component may be in the format: NIL, a string,
a keyword, an integer, or a proper list of strings and keywords."
  (or (null x) (stringp x) (keywordp x) (integerp x)
      (and (consp x)
           (handler-case (list-length x) (type-error () nil)) ; NIL when circular
           (every (lambda (e) (or (stringp e) (keywordp e))) x))))

(deftype pathname-component ()
  "A value PATHNAME-COMPONENT-P takes: the :TYPE of a pathname's components."
  '(satisfies pathname-component-p))

(defun dimensions-product (list)
  "The product of the integers of LIST."
  (reduce #'* list))

(defun dimensions-fit-p (dims)
  "True when each of DIMS is below ARRAY-DIMENSION-LIMIT and the product of
the first k, for every k, is below ARRAY-TOTAL-SIZE-LIMIT: the limits binstore
checks as it reads the dimensions one by one."
  (let ((total 1))
    (dolist (d dims t)
      (unless (< d array-dimension-limit)
        (return nil))
      (setf total (* total d))
      (unless (< total array-total-size-limit)
        (return nil)))))

(defun rehash-size-p (x)
  "True for a hash table rehash size binstore makes a table with: an integer
in [1, 2^30], or a float in (1.0, 1000.0], not a NaN."
  (and (typep x '(or integer float))
       (not (and (floatp x) (float-nan-p x)))
       (typep x '(or (integer 1 #.(expt 2 30)) (float (1.0) 1000.0)))))

(defun rehash-threshold-p (x)
  "True for a rehash threshold: a real in (0, 1], not a NaN."
  (and (realp x)
       (not (and (floatp x) (float-nan-p x)))
       (< 0 x) (<= x 1)))

(defun every-symbol-p (list)
  "True when every element of LIST is a symbol."
  (every #'symbolp list))

(defun symbolp-of (x)
  "True when X is a symbol."
  (symbolp x))

(defun descriptor-kind (descriptor)
  "A class descriptor's kind (the position in +CLASS-KINDS+)."
  (format-descriptor-kind descriptor))

(defun descriptor-slot-count (descriptor)
  "The number of slots a class descriptor names."
  (length (format-descriptor-slot-names descriptor)))

(defun descriptor-slot-labels (descriptor)
  "The slot names a class descriptor names, as strings (labels for EXPLAIN)."
  (mapcar (lambda (name) (if (symbolp name) (symbol-name name) (princ-to-string name)))
          (format-descriptor-slot-names descriptor)))

(defparameter +grammar-operators+
  `((+ . +) (- . -) (* . *) (= . =) (/= . /=) (< . <) (<= . <=) (> . >) (>= . >=)
    (eq . eq) (max . max) (min . min) (ash . ash) (logand . logand)
    (not . not) (member . ,(lambda (x &rest options) (and (member x options) t)))
    (element-form . element-form) (raw-bytes . raw-bytes) (memory-bytes . memory-bytes)
    (dimensions-product . dimensions-product) (dimensions-fit-p . dimensions-fit-p)
    (rehash-size-p . rehash-size-p) (rehash-threshold-p . rehash-threshold-p)
    (every-symbol-p . every-symbol-p) (symbolp-of . symbolp-of)
    (descriptor-kind . descriptor-kind)
    (descriptor-slot-count . descriptor-slot-count)
    (descriptor-slot-labels . descriptor-slot-labels))
  "The operators an expression may call (besides AND and OR, which stop at
the first false or true argument), each with the function it calls.")

(defparameter +grammar-constants+
  `((char-code-limit . ,char-code-limit)
    (array-rank-limit . ,array-rank-limit)
    (array-dimension-limit . ,array-dimension-limit)
    (array-total-size-limit . ,array-total-size-limit)
    (+format-version+ . ,+format-version+))
  "The constants an expression may name: SBCL's implementation limits (what
a decoder can make) and the newest format version.")

(define-condition grammar-expression-error (error)
  ((expression :initarg :expression :reader grammar-expression-error-expression))
  (:documentation "An expression of the grammar names a field not read, or
an operator it does not know, or calls one on values it does not take (as
when EXPLAIN, which does not make objects, evaluates a check on one).")
  (:report (lambda (c s)
             (format s "cannot evaluate the grammar expression ~s"
                     (grammar-expression-error-expression c)))))

(defun grammar-eval (expression fields)
  "The value of EXPRESSION (see the top of this file) where FIELDS, an alist
\(name . value), holds the fields read so far: the first entry of a name
counts.  Keywords stand for themselves.  Signals GRAMMAR-EXPRESSION-ERROR for
a field not read, an unknown operator, or an operator's error."
  (flet ((fail () (error 'grammar-expression-error :expression expression)))
    (cond ((or (integerp expression) (keywordp expression) (stringp expression)) expression)
          ((symbolp expression)
           (let ((field (assoc expression fields))
                 (constant (assoc expression +grammar-constants+)))
             (cond (field (cdr field))
                   (constant (cdr constant))
                   (t (fail)))))
          ((not (consp expression)) (fail))
          ((eq (first expression) 'and)
           (every (lambda (e) (grammar-eval e fields)) (rest expression)))
          ((eq (first expression) 'or)
           (some (lambda (e) (grammar-eval e fields)) (rest expression)))
          (t
           (let ((operator (cdr (assoc (first expression) +grammar-operators+))))
             (unless operator (fail))
             (let ((arguments (mapcar (lambda (e) (grammar-eval e fields)) (rest expression))))
               (handler-case (apply operator arguments)
                 (error () (fail)))))))))

;;; FORMAT.md's tables, generated -----------------------------------------------

(defun tag-table-markdown ()
  "FORMAT.md's table of type tags and the line after it on the reserved tags,
as FORMAT.md has them: generated from the grammar (tests/grammar.lisp checks
that the document says the same)."
  (with-output-to-string (out)
    (format out "| tag | name | what follows |~%|---|---|---|~%")
    (dolist (spec (grammar-tags))
      (let* ((code (tag-spec-code spec))
             (last (+ code (tag-spec-codes spec) -1))
             (cell (if (= code last)
                       (format nil "`#x~2,'0X`" code)
                       (format nil "`#x~2,'0X`–`#x~2,'0X`" code last))))
        (format out "| ~a | ~(~a~) | ~a |~%" cell (tag-spec-name spec) (tag-spec-summary spec))))
    (cond ((null +reserved-tags+)
           (format out "~%Every type tag is used; there are no reserved tags.~%"))
          ((= (car +reserved-tags+) (cdr +reserved-tags+))
           (format out "~%Tag `#x~2,'0X` is reserved; a decoder must reject it.~%"
                   (car +reserved-tags+)))
          (t
           (format out "~%Tags `#x~2,'0X`–`#x~2,'0X` are reserved; a decoder must reject them.~%"
                   (car +reserved-tags+) (cdr +reserved-tags+))))))

(defun element-type-bits-text (code)
  "The \"bits\" column of FORMAT.md's table of element types for CODE."
  (let ((payload (third (element-type-entry code))))
    (case payload
      (:objects "objects")
      (:utf8 "UTF-8")
      (:ascii "bytes < 128")
      (0 "none")
      (t (princ-to-string payload)))))

(defun element-type-table-markdown ()
  "FORMAT.md's table of element types, two codes a row (0-12 beside 13-24),
generated from +ELEMENT-TYPE-GRAMMAR+."
  (let* ((entries +element-type-grammar+)
         (half (ceiling (length entries) 2)))
    (with-output-to-string (out)
      (format out "| code | element type | bits | code | element type | bits |~%")
      (format out "|---|---|---|---|---|---|~%")
      (dotimes (i half)
        (let ((left (nth i entries))
              (right (nth (+ i half) entries)))
          (format out "| ~d | ~(~a~) | ~a | " (first left) (second left)
                  (element-type-bits-text (first left)))
          (if right
              (format out "~d | ~(~a~) | ~a |~%" (first right) (second right)
                      (element-type-bits-text (first right)))
              (format out "| | |~%")))))))
