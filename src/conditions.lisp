;;;; Every condition binstore signals, under one root.
;;;;
;;;;   binstore-error
;;;;     store-error
;;;;       unstorable-object        an object of a kind that cannot be stored
;;;;       circular-list            a circular list, stored without tracking conses
;;;;       out-of-space             a fixed-size destination is full
;;;;       store-limit-exceeded     max-to-write / max-depth while storing
;;;;       transaction-error        a persistent store used wrongly: no
;;;;                                transaction, a nested one, a write in a
;;;;                                read-only one, a closed store
;;;;     restore-error              (carries the byte offset)
;;;;       invalid-input            malformed bytes
;;;;         truncated-input        the bytes end inside an object
;;;;         unsupported-version    a header names a format version we do not read
;;;;         not-binstore-data      the bytes do not begin with binstore's header
;;;;       end-of-data              no record left where one was asked for
;;;;       restore-limit-exceeded   max-to-read / max-depth / nesting while restoring
;;;;       missing-package          restarts: create-package, use-other-package, make-uninterned
;;;;       missing-symbol           restarts: intern-anyway, make-uninterned
;;;;       missing-class            restarts: use-other-class
;;;;       missing-slot             restarts: discard-slot, use-other-slot
;;;;       missing-codec            restarts: skip-codec, use-other-codec
;;;;       dictionary-mismatch      stored with another dictionary, or with one not given
;;;;     limit-exceeded             superclass of the two *-limit-exceeded
;;;;     binstore-file-error        also a FILE-ERROR: a file could not be used
;;;;     invalid-utf8               bytes that are not UTF-8 (UTF8-DECODE, READ-LINES);
;;;;                                restart: use-replacement-character
;;;;     store-corrupted            also a FILE-ERROR: a persistent store's file
;;;;                                is damaged, not a store, or of a newer
;;;;                                version (carries the byte offset)
;;;;     compression-unavailable    compressed data, or :compression, without
;;;;                                binstore/compression loaded

(in-package #:binstore)

(defvar *bounded-printer* nil
  "NIL, or a function of an object and a stream that prints the object as
PRIN1 would, within *PRINT-LEVEL* and *PRINT-LENGTH*: set by the platform
of a Lisp whose printer ignores *PRINT-LEVEL* somewhere (ABCL's, for
structures: a deeply nested one overflowed the JVM's stack and ended the
process).")

(defun brief (object)
  "OBJECT printed for a message: short, and safe on circular data."
  (let ((*print-circle* t) (*print-length* 8) (*print-level* 3)
        (*print-readably* nil) (*print-pretty* nil))
    (if *bounded-printer*
        (with-output-to-string (stream) (funcall *bounded-printer* object stream))
        (prin1-to-string object))))

(define-condition binstore-error (error)
  ((message :initarg :message :initform nil :reader binstore-error-message))
  (:documentation "Root of every condition binstore signals.")
  (:report (lambda (c s)
             (format s "binstore: ~a" (binstore-error-message c)))))

(define-condition store-error (binstore-error) ()
  (:documentation "A problem found while storing data."))

(define-condition unstorable-object (store-error)
  ((object :initarg :object :reader unstorable-object-object)
   (path :initarg :path :initform nil :reader unstorable-object-path))
  (:documentation "OBJECT cannot be stored (a function, a stream, a foreign
pointer ...).  PATH is a list of steps from the stored root to the object, each
step one of (:car) (:cdr) (:elt i) (:aref i) (:slot name) (:key k) (:value k).")
  (:report (lambda (c s)
             (format s "binstore: cannot store ~a of type ~s~@[, found at ~{~a~^ ~}~]"
                     (brief (unstorable-object-object c))
                     (type-of (unstorable-object-object c))
                     (mapcar #'brief (unstorable-object-path c))))))

(define-condition circular-list (store-error)
  ((list :initarg :list :reader circular-list-list)
   (path :initarg :path :initform nil :accessor circular-list-path))
  (:documentation "A circular list was met by a store that does not keep
the identity of conses (:SUPPORT-SHARED-LIST-STRUCTURES NIL), which cannot
write it.  LIST is the list, PATH the steps from the stored root to it (as
for UNSTORABLE-OBJECT).  Storing with :SUPPORT-SHARED-LIST-STRUCTURES T, the
default, writes it.")
  (:report (lambda (c s)
             (format s "binstore: a circular list ~a~@[, found at ~{~a~^ ~}~], cannot be ~
                        stored with :support-shared-list-structures nil; store it with ~
                        :support-shared-list-structures t (the default)"
                     (brief (circular-list-list c))
                     (mapcar #'brief (circular-list-path c))))))

(define-condition out-of-space (store-error)
  ((needed :initarg :needed :reader out-of-space-needed))
  (:documentation "A fixed-size destination (a non-adjustable octet vector or a
raw memory region) cannot hold the output.  NEEDED is the total size in bytes
known to be required so far.  For STORE-TO-SAP the restart USE-LARGER-SPACE
takes a new sap and size and carries on.")
  (:report (lambda (c s)
             (format s "binstore: out of space: ~a (need at least ~d bytes)"
                     (binstore-error-message c) (out-of-space-needed c)))))

(define-condition restore-error (binstore-error)
  ((offset :initarg :offset :initform nil :reader restore-error-offset))
  (:documentation "A problem found while restoring; OFFSET is the byte offset
in the input where it was found.")
  (:report (lambda (c s)
             (format s "binstore: ~a~@[ (at byte ~d)~]"
                     (binstore-error-message c) (restore-error-offset c)))))

(defun limit-variable (limit)
  "The special variable that sets LIMIT (a keyword), or NIL."
  (case limit
    (:max-to-read '*max-to-read*)
    (:max-to-write '*max-to-write*)
    (:max-depth '*max-depth*)))

(define-condition limit-exceeded (binstore-error)
  ((limit :initarg :limit :reader limit-exceeded-limit)
   (value :initarg :value :reader limit-exceeded-value)
   (offset :initarg :offset :initform nil :reader limit-exceeded-offset))
  (:documentation "A limit was reached.  LIMIT names it (:max-to-read,
:max-to-write, :max-depth, or :nesting for input nested deeper than any
writer nests it) and VALUE is the limit in force.  Signalled as
STORE-LIMIT-EXCEEDED or RESTORE-LIMIT-EXCEEDED; the message names the
keyword and the special variable that lift the limit.")
  (:report (lambda (c s)
             (let ((limit (limit-exceeded-limit c)))
               (format s "binstore: ~a~@[ (at byte ~d)~]. ~:[Limit ~(~s~) is ~a~;~
                          Limit ~(~s~) is ~a: pass a larger ~(~s~) (or NIL for none), ~
                          or bind ~(~s~)~]"
                       (binstore-error-message c) (limit-exceeded-offset c)
                       (limit-variable limit)
                       limit (limit-exceeded-value c)
                       limit (limit-variable limit))))))

(define-condition store-limit-exceeded (limit-exceeded store-error) ()
  (:documentation "A limit reached while storing (:max-to-write, :max-depth)."))

(define-condition restore-limit-exceeded (limit-exceeded restore-error) ()
  (:documentation "A limit reached while restoring (:max-to-read, :max-depth,
:nesting).  Its offset is the byte offset in the input."))

(define-condition invalid-input (restore-error)
  ((expected :initarg :expected :initform nil :reader invalid-input-expected))
  (:documentation "The input is not valid binstore data.  EXPECTED says what
the decoder expected to find at OFFSET.")
  (:report (lambda (c s)
             (format s "binstore: invalid input at byte ~d: ~a~@[; expected ~a~]"
                     (restore-error-offset c) (binstore-error-message c)
                     (invalid-input-expected c)))))

(define-condition truncated-input (invalid-input) ()
  (:documentation "The input ended in the middle of an object."))

(define-condition unsupported-version (invalid-input)
  ((version :initarg :version :reader unsupported-version-version))
  (:documentation "The input's header names a format version this binstore
does not read."))

(define-condition not-binstore-data (invalid-input) ()
  (:documentation "The input does not begin with binstore's header: it is
not binstore data (a text file, another program's file, a truncated
header), or it was stored with :OUTPUT-MAGIC-NUMBER NIL and must be
restored with :REQUIRE-HEADER NIL."))

(define-condition end-of-data (restore-error) ()
  (:documentation "RESTORE was asked for a record where the input has none
left: it is empty, or every record in it was read.  Distinct from
TRUNCATED-INPUT, which means a record began and did not end.  RESTORE
returns its :EOF-VALUE instead when :EOF-ERROR-P is NIL.")
  (:report (lambda (c s)
             (format s "binstore: no data left to restore~@[ (at byte ~d)~]"
                     (restore-error-offset c)))))

(define-condition binstore-file-error (binstore-error file-error) ()
  (:documentation "A file named as a place could not be used: it does not
exist, it is a directory, its directory does not exist, the system refused
to open, write, sync or rename it.  FILE-ERROR-PATHNAME names the file;
the message says what failed and why.")
  (:report (lambda (c s)
             (format s "binstore: ~a: ~a"
                     (brief (file-error-pathname c)) (binstore-error-message c)))))

(define-condition missing-package (restore-error)
  ((name :initarg :name :reader missing-package-name))
  (:documentation "A symbol's package does not exist.  Restarts:
CREATE-PACKAGE, USE-OTHER-PACKAGE (package designator), MAKE-UNINTERNED.")
  (:report (lambda (c s)
             (format s "binstore: package ~s does not exist~@[ (at byte ~d)~]"
                     (missing-package-name c) (restore-error-offset c)))))

(define-condition missing-symbol (restore-error)
  ((name :initarg :name :reader missing-symbol-name)
   (package :initarg :package :reader missing-symbol-package))
  (:documentation "With *INTERN-SYMBOLS* nil, a symbol is not already present
in its package.  Restarts: INTERN-ANYWAY, MAKE-UNINTERNED.")
  (:report (lambda (c s)
             (format s "binstore: symbol ~s is not present in package ~a~@[ (at byte ~d)~]"
                     (missing-symbol-name c)
                     (package-name (missing-symbol-package c))
                     (restore-error-offset c)))))

(define-condition missing-class (restore-error)
  ((name :initarg :name :reader missing-class-name))
  (:documentation "A stored structure, standard object or condition names a
class that does not exist.  Restart: USE-OTHER-CLASS (class or class name).")
  (:report (lambda (c s)
             (format s "binstore: class ~s does not exist~@[ (at byte ~d)~]"
                     (missing-class-name c) (restore-error-offset c)))))

(define-condition missing-slot (restore-error)
  ((class :initarg :class :reader missing-slot-class)
   (name :initarg :name :reader missing-slot-name))
  (:documentation "A stored slot does not exist in the current class.
Restarts: DISCARD-SLOT (drop its values), USE-OTHER-SLOT (slot name).")
  (:report (lambda (c s)
             (format s "binstore: class ~s has no slot ~s~@[ (at byte ~d)~]"
                     (missing-slot-class c) (missing-slot-name c)
                     (restore-error-offset c)))))

(define-condition missing-codec (restore-error)
  ((name :initarg :name :reader missing-codec-name))
  (:documentation "A stored object was written by a user codec (see
REGISTER-CODEC) that is not registered here, or that cannot make the object
the way the file needs (ALLOCATE and FILL for an object that may be part of
a cycle).  Restarts: SKIP-CODEC (restore every object of that codec as NIL,
its stored value read and dropped), USE-OTHER-CODEC (a codec name).")
  (:report (lambda (c s)
             (format s "binstore: codec ~s ~a~@[ (at byte ~d)~]"
                     (missing-codec-name c) (binstore-error-message c)
                     (restore-error-offset c)))))

(define-condition dictionary-mismatch (restore-error)
  ((fingerprint :initarg :fingerprint :reader dictionary-mismatch-fingerprint))
  (:documentation "The record was stored with a dictionary (see
MAKE-DICTIONARY) other than the one RESTORE was given, or RESTORE was given
none.  FINGERPRINT is the record's.")
  (:report (lambda (c s)
             (format s "binstore: ~a~@[ (at byte ~d)~]"
                     (binstore-error-message c) (restore-error-offset c)))))

(define-condition invalid-utf8 (binstore-error)
  ((offset :initarg :offset :reader invalid-utf8-offset)
   (octets :initarg :octets :initform '() :reader invalid-utf8-octets))
  (:documentation "Bytes that are not UTF-8, found by UTF8-DECODE,
UTF8-DECODE-INTO, READ-LINES or MAP-LINES: an overlong form, a sequence cut
short (by the end of the input or by a byte that is not a continuation
byte), a byte that cannot start a sequence, or a code point above #x10FFFF.
\(Surrogate code points in their 3-byte forms are accepted: see
doc/UTF8.md.)  OFFSET is the index, in the octet vector given (for
READ-LINES and MAP-LINES: in the file), of the first byte of the ill-formed
sequence; OCTETS lists the bytes of that sequence that were read, its
maximal ill-formed part as Unicode defines it (one byte when the first
cannot start a sequence).  Restart: USE-REPLACEMENT-CHARACTER, which puts
one U+FFFD for those OCTETS and carries on after them.")
  (:report (lambda (c s)
             (format s "binstore: invalid UTF-8 at byte ~d: ~a~@[ (~{#x~2,'0x~^ ~})~]"
                     (invalid-utf8-offset c) (binstore-error-message c)
                     (invalid-utf8-octets c)))))

;;; The persistent store (src/store/).  A store's misuse is a STORE-ERROR,
;;; as Ruby's PStore::Error is, so one handler catches it; a damaged file is
;;; not: it is about the file, not about storing, so it is a FILE-ERROR.

(define-condition transaction-error (store-error)
  ((place :initarg :place :initform nil :reader transaction-error-place))
  (:documentation "A persistent store was used against the rules of its
transactions: a root touched outside a transaction, a transaction begun
inside another on the same file, a root written in a read-only
transaction, a closed store used.  PLACE is the store's file as given to
OPEN-STORE.  Nothing was written.")
  (:report (lambda (c s)
             (format s "binstore: store ~a: ~a"
                     (brief (transaction-error-place c)) (binstore-error-message c)))))

(define-condition store-corrupted (binstore-error file-error)
  ((offset :initarg :offset :initform nil :reader store-corrupted-offset)
   (expected :initarg :expected :initform nil :reader store-corrupted-expected))
  (:documentation "The file of a persistent store cannot be read as one:
it is not a store file, it is a store of a newer format version, or it is
damaged (cut short, a byte changed: its length or a checksum does not
match).  FILE-ERROR-PATHNAME is the file as given to OPEN-STORE, OFFSET the
byte where the problem is, EXPECTED what should have been there.  No roots
are returned from such a file, and nothing is written over it.")
  (:report (lambda (c s)
             (format s "binstore: ~a is not a usable store file: ~a~@[ (at byte ~d)~]~@[; expected ~a~]"
                     (brief (file-error-pathname c)) (binstore-error-message c)
                     (store-corrupted-offset c) (store-corrupted-expected c)))))

;;; Compression lives in another system, binstore/compression, so that
;;; binstore itself needs no C library; binstore only recognises what it
;;; cannot do without it.

(define-condition compression-unavailable (binstore-error)
  ((method :initarg :method :reader compression-unavailable-method))
  (:documentation "STORE was asked to compress (:COMPRESSION, *COMPRESSION*),
or RESTORE, MAP-STORED-OBJECTS or RESTORE-FROM-SAP met a compressed record
\(one beginning with the zstd or LZ4 frame magic), while the system
binstore/compression, which holds the compressors, is not loaded.  METHOD
is :ZSTD or :LZ4.  Load it, (asdf:load-system \"binstore/compression\"),
and try again.  Not a RESTORE-ERROR: the data may well be valid.")
  (:report (lambda (c s)
             (format s "binstore: ~a" (binstore-error-message c)))))

;;; Restart names are exported symbols; these functions invoke them the way
;;; CL's own CONTINUE / USE-VALUE functions do, so handlers can be one-liners.

(defun create-package (&optional condition)
  "Invoke the CREATE-PACKAGE restart of a MISSING-PACKAGE condition."
  (invoke-restart (find-restart 'create-package condition)))

(defun use-other-package (package &optional condition)
  "Invoke the USE-OTHER-PACKAGE restart with PACKAGE (a package designator)."
  (invoke-restart (find-restart 'use-other-package condition) package))

(defun make-uninterned (&optional condition)
  "Invoke the MAKE-UNINTERNED restart: restore the symbol as an uninterned one."
  (invoke-restart (find-restart 'make-uninterned condition)))

(defun intern-anyway (&optional condition)
  "Invoke the INTERN-ANYWAY restart of a MISSING-SYMBOL condition."
  (invoke-restart (find-restart 'intern-anyway condition)))

(defun use-other-class (class &optional condition)
  "Invoke the USE-OTHER-CLASS restart with CLASS (a class or a class name)."
  (invoke-restart (find-restart 'use-other-class condition) class))

(defun discard-slot (&optional condition)
  "Invoke the DISCARD-SLOT restart of a MISSING-SLOT condition."
  (invoke-restart (find-restart 'discard-slot condition)))

(defun use-other-slot (slot-name &optional condition)
  "Invoke the USE-OTHER-SLOT restart with SLOT-NAME."
  (invoke-restart (find-restart 'use-other-slot condition) slot-name))

(defun skip-codec (&optional condition)
  "Invoke the SKIP-CODEC restart of a MISSING-CODEC condition: every object
of that codec restores as NIL."
  (invoke-restart (find-restart 'skip-codec condition)))

(defun use-other-codec (codec-name &optional condition)
  "Invoke the USE-OTHER-CODEC restart of a MISSING-CODEC condition with
CODEC-NAME, the name of a registered codec."
  (invoke-restart (find-restart 'use-other-codec condition) codec-name))

(defun use-replacement-character (&optional condition)
  "Invoke the USE-REPLACEMENT-CHARACTER restart of an INVALID-UTF8
condition: the ill-formed bytes it names become one U+FFFD (REPLACEMENT
CHARACTER) and decoding carries on after them."
  (invoke-restart (find-restart 'use-replacement-character condition)))

(defun use-larger-space (sap size &optional condition)
  "Invoke the USE-LARGER-SPACE restart of an OUT-OF-SPACE condition signalled
by STORE-TO-SAP: the bytes written so far are copied to SAP, which has SIZE
bytes, and storing carries on there."
  (invoke-restart (find-restart 'use-larger-space condition) sap size))

;;; The readers of the conditions' slots.
(loop for (reader doc) in
      '((binstore-error-message "The text explaining a BINSTORE-ERROR.")
        (unstorable-object-object "The object that could not be stored.")
        (unstorable-object-path "Steps from the stored root to the unstorable object.")
        (circular-list-list "The circular list that could not be stored.")
        (circular-list-path "Steps from the stored root to the circular list.")
        (out-of-space-needed "Bytes known to be needed when the destination filled up.")
        (limit-exceeded-limit "Which limit was reached: :max-to-read, :max-to-write, :max-depth or :nesting.")
        (limit-exceeded-value "The value of the limit that was reached.")
        (limit-exceeded-offset "Byte offset in the input, for limits reached while restoring.")
        (restore-error-offset "Byte offset in the input where the problem was found.")
        (invalid-input-expected "What the decoder expected to find at the offset.")
        (unsupported-version-version "The format version the input's header names.")
        (missing-package-name "The name of the package that does not exist.")
        (missing-symbol-name "The name of the symbol that is not present.")
        (missing-symbol-package "The package the symbol is not present in.")
        (missing-class-name "The name of the class that does not exist.")
        (missing-slot-class "The name of the class that lacks the slot.")
        (missing-slot-name "The name of the stored slot the class lacks.")
        (invalid-utf8-offset "Index of the first byte of the ill-formed UTF-8 sequence.")
        (invalid-utf8-octets "The bytes of the ill-formed UTF-8 sequence, a list.")
        (compression-unavailable-method "The compression, :zstd or :lz4, that could not be used.")
        (missing-codec-name "The name of the user codec that is missing.")
        (dictionary-mismatch-fingerprint "The fingerprint of the dictionary the record was stored with.")
        (transaction-error-place "The file of the store that was misused, as given to OPEN-STORE.")
        (store-corrupted-offset "The byte offset in the store file where the problem is.")
        (store-corrupted-expected "What the store file should have held at the offset."))
      do (setf (documentation reader 'function) doc))
