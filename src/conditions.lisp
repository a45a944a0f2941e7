;;;; Every condition binstore signals, under one root.
;;;;
;;;;   binstore-error
;;;;     store-error
;;;;       unstorable-object        an object of a kind that cannot be stored
;;;;       out-of-space             a fixed-size destination is full
;;;;     limit-exceeded             max-to-read / max-to-write / max-depth / stack
;;;;     restore-error              (carries the byte offset)
;;;;       invalid-input            malformed bytes
;;;;         truncated-input        the bytes end inside an object
;;;;         unsupported-version    a header names a format version we do not read
;;;;       missing-package          restarts: create-package, use-other-package, make-uninterned
;;;;       missing-symbol           restarts: intern-anyway, make-uninterned
;;;;       missing-class            restarts: use-other-class
;;;;       missing-slot             restarts: discard-slot, use-other-slot

(in-package #:binstore)

(defun brief (object)
  "OBJECT printed for a message: short, and safe on circular data."
  (let ((*print-circle* t) (*print-length* 8) (*print-level* 3)
        (*print-readably* nil) (*print-pretty* nil))
    (prin1-to-string object)))

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

(define-condition out-of-space (store-error)
  ((needed :initarg :needed :reader out-of-space-needed))
  (:documentation "A fixed-size destination (a non-adjustable octet vector or a
raw memory region) cannot hold the output.  NEEDED is the total size in bytes
known to be required so far.  For STORE-TO-SAP the restart USE-LARGER-SPACE
takes a new sap and size and carries on.")
  (:report (lambda (c s)
             (format s "binstore: out of space: ~a (need at least ~d bytes)"
                     (binstore-error-message c) (out-of-space-needed c)))))

(define-condition limit-exceeded (binstore-error)
  ((limit :initarg :limit :reader limit-exceeded-limit)
   (value :initarg :value :reader limit-exceeded-value)
   (offset :initarg :offset :initform nil :reader limit-exceeded-offset))
  (:documentation "A configured limit was reached: LIMIT names it (:max-to-read,
:max-to-write, :max-depth or :control-stack) and VALUE is the limit in force.")
  (:report (lambda (c s)
             (format s "binstore: limit ~s (~a) exceeded~@[ at byte ~d~]: ~a"
                     (limit-exceeded-limit c) (limit-exceeded-value c)
                     (limit-exceeded-offset c) (binstore-error-message c)))))

(define-condition restore-error (binstore-error)
  ((offset :initarg :offset :initform nil :reader restore-error-offset))
  (:documentation "A problem found while restoring; OFFSET is the byte offset
in the input where it was found.")
  (:report (lambda (c s)
             (format s "binstore: ~a~@[ (at byte ~d)~]"
                     (binstore-error-message c) (restore-error-offset c)))))

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
        (out-of-space-needed "Bytes known to be needed when the destination filled up.")
        (limit-exceeded-limit "Which limit was reached: :max-to-read, :max-to-write, :max-depth or :control-stack.")
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
        (missing-slot-name "The name of the stored slot the class lacks."))
      do (setf (documentation reader 'function) doc))
