;;;; The format's tag bytes: the one place they are defined.
;;;; doc/FORMAT.md describes each encoding byte by byte, in this order.
;;;;
;;;; Every object starts with one tag byte:
;;;;   #x00-#x3F  a type tag (below)
;;;;   #x40-#x5F  a back-reference to object id 0..31
;;;;   #x60-#xFF  a small integer, value = tag - #x70, so -16..143

(in-package #:binstore)

(defmacro deftags (&body pairs)
  "Define each (NAME VALUE) as a constant, and +TAG-NAMES+, a vector mapping
every type tag to its name (for the inspector and error messages)."
  `(progn
     ,@(loop for (name value) in pairs
             collect `(defconstant ,name ,value))
     (defparameter +tag-names+
       (let ((v (make-array 64 :initial-element nil)))
         ,@(loop for (name value) in pairs
                 collect `(setf (svref v ,value) ',name))
         v))))

(deftags
  ;; Constants
  (+tag-nil+ #x00)
  (+tag-t+ #x01)
  ;; Conses
  (+tag-list+ #x02)                 ; n, n objects: a proper list
  (+tag-dotted-list+ #x03)          ; n, n objects, then the final cdr
  (+tag-cons+ #x04)                 ; car, cdr
  ;; Integers beyond the in-tag range
  (+tag-uint8+ #x05)                ; 1 byte: 0..255
  (+tag-negint8+ #x06)              ; 1 byte b: -(b+1), so -256..-1
  (+tag-int16+ #x07)                ; 2 bytes, signed little-endian
  (+tag-int32+ #x08)                ; 4 bytes, signed little-endian
  (+tag-int64+ #x09)                ; 8 bytes, signed little-endian
  (+tag-bignum+ #x0A)               ; varint (2*nbytes + sign), magnitude LE
  ;; Other numbers
  (+tag-ratio+ #x0B)                ; numerator, denominator (objects)
  (+tag-single-float+ #x0C)         ; 4 bytes IEEE 754 LE
  (+tag-double-float+ #x0D)         ; 8 bytes IEEE 754 LE
  (+tag-complex-single+ #x0E)       ; 4 + 4 bytes
  (+tag-complex-double+ #x0F)       ; 8 + 8 bytes
  (+tag-complex-rational+ #x10)     ; real, imagpart (objects)
  ;; Characters and strings
  (+tag-character+ #x11)            ; varint code point
  (+tag-base-string+ #x12)          ; n, n bytes < 128
  (+tag-string+ #x13)               ; n characters, their UTF-8
  ;; Arrays
  (+tag-simple-vector+ #x14)        ; n, n objects
  (+tag-specialized-vector+ #x15)   ; element-type code, n, raw payload
  (+tag-array+ #x16)                ; any other array, see FORMAT.md
  ;; Symbols and packages
  (+tag-symbol+ #x17)               ; package object, name
  (+tag-keyword+ #x18)              ; name
  (+tag-uninterned-symbol+ #x19)    ; name
  (+tag-package+ #x1A)              ; name
  ;; Other containers
  (+tag-hash-table+ #x1B)           ; flags, size, rehash-size, threshold, n, pairs
  (+tag-pathname+ #x1C)             ; kind, components
  (+tag-instance+ #x1D)             ; class descriptor, slot values
  (+tag-class-descriptor+ #x1E)     ; kind, class name, n, slot names
  (+tag-unbound-slot+ #x1F)         ; marks an unbound slot value
  ;; References and structure of the stream
  (+tag-ref+ #x20)                  ; varint id: the object with that id
  (+tag-later+ #x21)                ; a container header whose contents come later
  (+tag-fill+ #x22)                 ; varint id, the contents of that container
  (+tag-tracking+ #x23)             ; 1 byte: which objects get ids (see below)
  (+tag-header+ #x24)               ; "BST", varint format version
  (+tag-end+ #x25)                  ; end marker
  (+tag-cons-ref+ #x26)             ; varint cons id: the cons with that id
  (+tag-int64-list+ #x27)           ; n, n 8-byte integers: a proper list of them
  ;; Since format version 2: the tracking flags a writer uses, in one byte
  (+tag-no-tracking+ #x28)          ; +tag-tracking+ with flags 0
  (+tag-full-tracking+ #x29)        ; +tag-tracking+ with flags 3
  ;; Since format version 2: the commonest specialized vectors, whose
  ;; element type the tag says (see VECTOR-TAG)
  (+tag-octet-vector+ #x2A)         ; n, n octets: an (unsigned-byte 8) vector
  (+tag-double-vector+ #x2B)        ; n, 8n bytes: a double-float vector
  ;; Since format version 3: a record of several top-level objects
  (+tag-objects+ #x2C))             ; varint n: the record holds n objects

;;; Tracking flags, the byte after +tag-tracking+.  Whatever they say,
;;; symbols, packages and class descriptors get ids.  A stream without the
;;; tag tracks objects but not conses.  A writer says flags 0 and 3 with the
;;; one-byte tags +tag-no-tracking+ and +tag-full-tracking+: a byte less
;;; than the general form, which a reader still takes (streams of version 1
;;; have it).  Conses have ids of their own, referenced with
;;; +tag-cons-ref+, so that tracking every cons does not make references to
;;; other objects longer.
(defconstant +track-objects+ 1)     ; every heap object but conses gets an id
(defconstant +track-conses+ 2)      ; every cons gets an id too

(defparameter +container-tags+
  (list +tag-list+ +tag-dotted-list+ +tag-cons+ +tag-int64-list+ +tag-simple-vector+
        +tag-array+ +tag-hash-table+ +tag-instance+)
  "The tags of containers: a header, then contents that may be deferred.")

(defconstant +first-small-ref-tag+ #x40)
(defconstant +small-ref-count+ 32)
(defconstant +first-small-int-tag+ #x60)
(defconstant +small-int-bias+ #x70)
(defconstant +smallest-in-tag-integer+ (- +first-small-int-tag+ +small-int-bias+)) ; -16
(defconstant +largest-in-tag-integer+ (- #xFF +small-int-bias+))                  ; 143

(defconstant +max-physical-depth+ 1000
  "How many containers the writer nests before it defers a container's
contents to a FILL record.  A fixed part of the format (so output does not
depend on the writer's stack), and the bound on the decoder's recursion for
well-formed input.")

;;; Array element types.  The code is one byte in +tag-specialized-vector+ and
;;; +tag-array+.  Each entry: code, type specifier, bits per element in the
;;; payload (NIL for element types whose payload is not raw: t, characters).

(defparameter +element-types+
  #((0 t nil)
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
    (22 character nil)
    (23 base-char nil)
    (24 nil 0))
  "Every array element type the format knows: (code type bits-per-element).")

(defconstant +element-type-t+ 0)
(defconstant +element-type-ub8+ 5)
(defconstant +element-type-ub62+ 10)
(defconstant +element-type-fixnum+ 16)
(defconstant +element-type-double-float+ 19)
(defconstant +element-type-character+ 22)
(defconstant +element-type-base-char+ 23)
(defconstant +element-type-nil+ 24)

(declaim (inline vector-tag))
(defun vector-tag (code)
  "The tag of a specialized vector of the element type CODE that says the
type itself (+TAG-OCTET-VECTOR+, +TAG-DOUBLE-VECTOR+), or NIL: the vector is
then +TAG-SPECIALIZED-VECTOR+ and the code follows the tag."
  (case code
    (#.+element-type-ub8+ +tag-octet-vector+)
    (#.+element-type-double-float+ +tag-double-vector+)
    (t nil)))

;;; Header: +tag-header+, then these three octets, then the version varint.
(defparameter +header-octets+ #(#x42 #x53 #x54)) ; "BST"

;;; Class descriptor kinds.
(defconstant +class-kind-structure+ 0)
(defconstant +class-kind-standard-object+ 1)
(defconstant +class-kind-condition+ 2)

;;; Pathname kinds.
(defconstant +pathname-physical+ 0)
(defconstant +pathname-logical+ 1)
(defconstant +pathname-namestring+ 2)
