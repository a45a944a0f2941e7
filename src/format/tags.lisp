;;;; The format's constants, as the fast code uses them: the tag bytes, the
;;;; element type codes, the kinds and flags, all derived from the grammar
;;;; (src/format/grammar.lisp), which describes every tag's bytes and is
;;;; checked against doc/FORMAT.md by tests/grammar.lisp.
;;;;
;;;; Every object starts with one tag byte:
;;;;   #x00-#x3F  a type tag (below); #x30-#x37 and #x38-#x3F carry the high
;;;;              bits of a two-byte reference (short-ref, short-cons-ref);
;;;;              #x2F, next-ref, names the id after the one named last
;;;;   #x40-#x5F  a back-reference to object id 0..31
;;;;   #x60-#xFF  a small integer, value = tag - #x70, so -16..143

(in-package #:binstore)

;;; Every tag, its code and its role are defined once, in the grammar
;;; (src/format/grammar.lisp).  DEFINE-TAGS-FROM-GRAMMAR turns it into the
;;; constants the fast code dispatches on: (macroexpand-1
;;; '(define-tags-from-grammar)) shows them all.

(defmacro define-tags-from-grammar ()
  "Define, from +GRAMMAR+: the constant +TAG-<NAME>+ of every tag, with its
code; +TAG-NAMES+, a vector mapping every type tag to its constant's name (for
the inspector and error messages); +CONTAINER-TAGS+, the tags of containers."
  (let ((specs (grammar-tags)))
    `(progn
       ,@(loop for spec in specs
               collect `(defconstant ,(tag-spec-constant spec) ,(tag-spec-code spec)))
       (defparameter +tag-names+
         (let ((v (make-array 64 :initial-element nil)))
           ,@(loop for spec in specs
                   nconc (loop for code from (tag-spec-code spec)
                                 below (+ (tag-spec-code spec) (tag-spec-codes spec))
                               collect `(setf (svref v ,code) ',(tag-spec-constant spec))))
           v)
         "The name of the constant of each type tag, indexed by the tag; NIL for
the reserved tags.")
       (defparameter +container-tags+
         (list ,@(loop for spec in specs
                       when (eq (tag-spec-kind spec) :container)
                         collect (tag-spec-constant spec)))
         "The tags of containers: a header, then contents that may be deferred."))))

(define-tags-from-grammar)

;;; Tracking flags, the byte after +tag-tracking+.  Whatever they say,
;;; symbols, packages and class descriptors get ids.  A stream without the
;;; tag tracks objects but not conses.  A writer says flags 0 and 3 with the
;;; one-byte tags +tag-no-tracking+ and +tag-full-tracking+: a byte less
;;; than the general form, which a reader still takes (streams of version 1
;;; have it).  Conses have ids of their own, referenced with
;;; +tag-cons-ref+, so that tracking every cons does not make references to
;;; other objects longer.  The bits are +TRACKING-FLAG-BITS+'s.
(defconstant +track-objects+          ; every heap object but conses gets an id
  (ash 1 (first (find :objects +tracking-flag-bits+ :key #'second))))
(defconstant +track-conses+           ; every cons gets an id too
  (ash 1 (first (find :conses +tracking-flag-bits+ :key #'second))))

(defconstant +first-small-ref-tag+ #x40)
(defconstant +small-ref-count+ 32)

;;; Two-byte references: the tag's offset from +TAG-SHORT-REF+ (or
;;; +TAG-SHORT-CONS-REF+) is the id's high bits, the next byte its low 8.
;;; Object ids start after the small references' 32; cons ids at 0.
(defconstant +short-ref-tags+ (tag-spec-codes (tag-spec-named :short-ref)))
(defconstant +first-short-ref-id+ +small-ref-count+)
(defconstant +short-ref-limit+ (+ +first-short-ref-id+ (* 256 +short-ref-tags+))
  "Object ids below this (and at least +FIRST-SHORT-REF-ID+) take a short-ref.")
(defconstant +short-cons-ref-tags+ (tag-spec-codes (tag-spec-named :short-cons-ref)))
(defconstant +short-cons-ref-limit+ (* 256 +short-cons-ref-tags+)
  "Cons ids below this take a short-cons-ref.")

(declaim (inline short-ref-tag-p short-cons-ref-tag-p short-ref-id short-cons-ref-id))
(defun short-ref-tag-p (tag)
  (declare (type (unsigned-byte 8) tag))
  (< (ldb (byte 8 0) (- tag +tag-short-ref+)) +short-ref-tags+))
(defun short-cons-ref-tag-p (tag)
  (declare (type (unsigned-byte 8) tag))
  (< (ldb (byte 8 0) (- tag +tag-short-cons-ref+)) +short-cons-ref-tags+))

(defun short-ref-id (tag low)
  "The object id a SHORT-REF of TAG and second byte LOW names."
  (declare (type (unsigned-byte 8) tag low))
  (+ +first-short-ref-id+ (ash (- tag +tag-short-ref+) 8) low))

(defun short-cons-ref-id (tag low)
  "The cons id a SHORT-CONS-REF of TAG and second byte LOW names."
  (declare (type (unsigned-byte 8) tag low))
  (+ (ash (- tag +tag-short-cons-ref+) 8) low))
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
;;; The codes are +ELEMENT-TYPE-GRAMMAR+'s.

(defparameter +element-types+
  (map 'vector (lambda (entry)
                 (destructuring-bind (code type payload) entry
                   (list code type (and (integerp payload) payload))))
       +element-type-grammar+)
  "Every array element type the format knows: (code type bits-per-element),
from +ELEMENT-TYPE-GRAMMAR+.")

(defconstant +element-type-t+ (element-type-code-named 't))
(defconstant +element-type-ub8+ (element-type-code-named '(unsigned-byte 8)))
(defconstant +element-type-ub62+ (element-type-code-named '(unsigned-byte 62)))
(defconstant +element-type-fixnum+ (element-type-code-named 'fixnum))
(defconstant +element-type-double-float+ (element-type-code-named 'double-float))
(defconstant +element-type-character+ (element-type-code-named 'character))
(defconstant +element-type-base-char+ (element-type-code-named 'base-char))
(defconstant +element-type-nil+ (element-type-code-named 'nil))

(declaim (inline vector-tag))
(defun vector-tag (code)
  "The tag of a specialized vector of the element type CODE that says the
type itself (+TAG-OCTET-VECTOR+, +TAG-DOUBLE-VECTOR+), or NIL: the vector is
then +TAG-SPECIALIZED-VECTOR+ and the code follows the tag."
  (case code
    (#.+element-type-ub8+ +tag-octet-vector+)
    (#.+element-type-double-float+ +tag-double-vector+)
    (t nil)))

;;; Compressed records (see src/api.lisp, Compression): a zstd or LZ4 frame
;;; where a record begins, told by its magic, read as a little-endian word.
;;; Neither begins a sequence of records: #x28 (no tracking) would be
;;; followed by the integer 69 and a record beginning with #x2F, a NEXT-REF
;;; with no reference before it in its record, which is invalid; #x04 (a
;;; cons) by #x22, FILL, which begins no object.

(defconstant +zstd-frame-magic+ #xFD2FB528
  "The zstd frame magic, 28 B5 2F FD, read as a little-endian 32-bit word.")

(defconstant +lz4-frame-magic+ #x184D2204
  "The LZ4 frame magic, 04 22 4D 18, read as a little-endian 32-bit word.")

(defun frame-magic-method (word)
  "The compression (:ZSTD or :LZ4) whose frame magic the little-endian
32-bit WORD is, or NIL."
  (case word
    (#.+zstd-frame-magic+ :zstd)
    (#.+lz4-frame-magic+ :lz4)))

;;; Header: +tag-header+, then these three octets, then the version varint.
(defparameter +header-octets+           ; "BST", the header's :MAGIC part
  (coerce (second (find :magic (tag-spec-parts (tag-spec-named :header)) :key #'first))
          'vector))

;;; Class descriptor kinds, from +CLASS-KINDS+.
(defconstant +class-kind-structure+ (position :structure +class-kinds+))
(defconstant +class-kind-standard-object+ (position :standard-object +class-kinds+))
(defconstant +class-kind-condition+ (position :condition +class-kinds+))
(defconstant +class-kind-codec+ (position :codec +class-kinds+))

;;; Pathname kinds, from +PATHNAME-KINDS+.
(defconstant +pathname-physical+ (position :physical +pathname-kinds+))
(defconstant +pathname-logical+ (position :logical +pathname-kinds+))
(defconstant +pathname-namestring+ (position :namestring +pathname-kinds+))
