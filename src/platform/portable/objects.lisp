;;;; The platform's answers that CLISP and ABCL give alike, both Lisps
;;; whose memory is the portable layer's (Lisp vectors) and whose every
;;; string is a base string: the words of a string, the element types as
;;; the format names them, which strings are the format's base strings,
;;; and symbols looked up by a prefix of a name.  ECL's answers are in
;;; src/platform/ecl/objects.lisp; when an array is adjustable is in
;;; without-internals.lisp, as ECL answers it alike.

(in-package #:binstore)

(defun lisp-own-slot-p (slotd)
  "True when SLOTD is a slot the Lisp itself keeps in instances of some of
its classes, not part of the object's data (src/platform/objects.lisp):
none on CLISP and ABCL."
  (declare (ignore slotd))
  nil)

(declaim (inline float-complex))
(defun float-complex (realpart imagpart)
  "The complex whose parts are the floats REALPART and IMAGPART, both
single floats or both double floats."
  (complex realpart imagpart))

(defun string-word (string i)
  "The Ith 64-bit word of the simple base STRING's characters, each a byte
\(the format's base strings are ASCII); the bytes past the string's end
read as zero."
  (let ((word 0) (from (* 8 i)))
    (loop for k from (min 7 (- (length string) from 1)) downto 0
          do (setf word (logior (ash word 8) (char-code (schar string (+ from k))))))
    word))

(defun (setf string-word) (word string i)
  "Set the characters of the Ith 64-bit word of the simple base STRING to
WORD's bytes; those past the string's end are not written."
  (let ((from (* 8 i)))
    (loop for k from 0 below (min 8 (- (length string) from))
          do (setf (schar string (+ from k)) (code-char (ldb (byte 8 (* 8 k)) word))))
    word))

(defconstant +large-object-bytes+ (* 4 32768)
  "Objects of this many bytes or more are large (a size SBCL uses;
CLISP's and ABCL's collectors have no such boundary binstore relies on).")

;;; Element types.  CLISP and ABCL name their upgraded element types as the
;;; format does; they specialize only bits, some (unsigned-byte n) and
;;; characters, so a vector of double floats is a T vector.

(defun array-element-type-name (array)
  "ARRAY's element type as the format names it: its ARRAY-ELEMENT-TYPE, or
for a displaced array its target's (which is the same but on ABCL, whose
arrays displaced to an (unsigned-byte 16) vector say their element type is
T: CL requires the two to be the same upgraded type)."
  (let ((target (array-displacement array)))
    (if target
        (array-element-type-name target)
        (array-element-type array))))

(defun array-element-type-supported-p (type)
  "True when arrays of the format's element type TYPE can be made: every
one (those the Lisp does not specialize are T arrays)."
  (declare (ignore type))
  t)

(defmacro elementwise-payload-p (code)
  "True when the raw payload of element type CODE is not the vector's
memory as it is, so that it is converted element by element: every
code but octets', the only vector the portable memory reads byte for byte
as the format lays it out."
  `(/= ,code +element-type-ub8+))

;;; Strings.  Every CLISP and ABCL string is a base string (base-char =
;;; character):
;;; the format's base strings are those whose characters are all ASCII,
;;; the rest are the format's strings (doc/FORMAT.md, Across Lisps).

(defun ascii-string-p (string)
  "True when every character of the simple STRING is below 128."
  (declare (type simple-string string))
  (every (lambda (c) (< (char-code c) 128)) string))

(declaim (inline multiplicative-hash))
(defun multiplicative-hash (x)
  "Bits 32 to 63 of the word X times 2^64/phi (modulo 2^64): a hash of X
that spreads neighbouring values."
  (ash (logand (* x #x9E3779B97F4A7C15) #xFFFFFFFFFFFFFFFF) -32))

(deftype format-base-string ()
  "The strings written as the format's BASE-STRING: simple strings of ASCII
characters."
  '(and simple-string (satisfies ascii-string-p)))

(deftype format-character-string ()
  "The strings written as the format's STRING (those FORMAT-BASE-STRING
does not take first): every simple string."
  'simple-string)

(defmacro format-string (string)
  "STRING as the format writes its characters: STRING itself."
  string)

;;; Symbols and packages.

(declaim (inline find-symbol-prefix))
(defun find-symbol-prefix (name length package)
  "As FIND-SYMBOL on the first LENGTH characters of the string NAME."
  (find-symbol (if (= length (length name)) name (subseq name 0 length)) package))
