;;;; The platform's answers that are the same on every Lisp binstore runs on
;;;; without SBCL's internals (ECL, CLISP, ABCL): no pages are mapped ahead
;;;; (prefaulting and huge pages are SBCL's), a type is tested by TYPEP as
;;;; it is written, every slot of a structure is boxed, and a standard
;;;; instance is made by ALLOCATE-INSTANCE.  Each Lisp's os.lisp and
;;;; objects.lisp have the rest of those contracts.

(in-package #:binstore)

;;; Pages: never mapped ahead (see src/io/prefault.lisp).

(declaim (inline memory-population-supported-p))
(defun memory-population-supported-p ()
  "Whether SYSTEM-POPULATE and SYSTEM-COLLAPSE may work: not here, where
prefaulting does nothing."
  nil)

(defun system-unmapped-pages (start pages)
  "NIL: which pages are mapped is not asked here."
  (declare (ignore start pages))
  nil)

(defun system-populate (start bytes)
  "EINVAL: pages are not populated here."
  (declare (ignore start bytes))
  +einval+)

(defun system-collapse (start bytes)
  "EINVAL: no huge pages are made here."
  (declare (ignore start bytes))
  +einval+)

;;; Objects.

(defun structure-boxed-slot-index (class name)
  "The index at which an instance of the structure class CLASS holds the
slot NAME's value: its STRUCTURE-SLOT-INDEX, every slot being boxed."
  (structure-slot-index class name))

(defun standard-instance-allocator (class)
  "A function of no arguments returning a fresh instance of the standard
class CLASS with every slot unbound."
  (lambda () (allocate-instance class)))

;;; Types: the specifier itself, tested by TYPEP.

(defun parse-type (specifier)
  "SPECIFIER in a vector of one, which PARSED-TYPEP tests with TYPEP: never
a cons, nor NIL, nor a fixnum, which a slot check takes for a fixnum range,
no check and a class's position (as SBCL's parsed types never are; a
compound specifier such as (OR NULL STRING) once was taken for a range)."
  (vector specifier))

(declaim (inline parsed-typep))
(defun parsed-typep (object parsed-type)
  "True when OBJECT is of PARSED-TYPE (from PARSE-TYPE)."
  (typep object (svref parsed-type 0)))

(defun parsed-type-specifier (parsed-type)
  "A type specifier for PARSED-TYPE."
  (svref parsed-type 0))

;;; Arrays: adjustable as the format means it.

(declaim (inline format-adjustable-p))
(defun format-adjustable-p (array)
  "True when the format calls ARRAY adjustable: as SBCL's
ADJUSTABLE-ARRAY-P, when ARRAY is not simple (made adjustable, or with a
fill pointer, or displaced); ECL's, CLISP's and ABCL's are true only of
the first, and ABCL's of every array of rank 0 too, simple or not."
  (or (and (adjustable-array-p array) (not (typep array 'simple-array)))
      (array-has-fill-pointer-p array)
      (and (array-displacement array) t)))
