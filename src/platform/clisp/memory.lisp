;;;; The platform's compiler and control primitives on CLISP, and new arrays:
;;;; the names of src/platform/memory.lisp (SBCL's) that the portable
;;;; memory (src/platform/portable/memory.lisp: pointers, the MEM-
;;;; accessors) does not give.  CLISP has no threads: atomic operations are
;;;; plain ones, and nothing interrupts binstore but the user's C-c, which
;;;; CLISP delivers between forms like any other error.

(in-package #:binstore)

(eval-when (:compile-toplevel :load-toplevel :execute)
  ;; CLISP has no feature naming the byte order: the FFI reads it
  (unless (= 1 (ffi:with-foreign-object (word 'ffi:uint32 1)
                 (ffi:memory-as (ffi:foreign-address word) 'ffi:uint8 0)))
    (error "binstore needs a little-endian host: its file names and system ~
            calls assume one.")))

;;; New arrays.  SBCL makes the elements of an array made without initial
;;; contents zero (0, 0.0, #\Nul), and binstore relies on it (fixnum
;;; vectors, which are T vectors on CLISP, start 0); CLISP fills T arrays
;;; with NIL.  The package shadows MAKE-ARRAY on CLISP with this one.
;;;
;;; Sizes.  This CLISP (2.49.93, Debian's x86-64 build) keeps an array's
;;; total size in 24 bits, though ARRAY-TOTAL-SIZE-LIMIT says 2^32: asked
;;; for 2^24 elements or more it makes a wrong array, whatever the element
;;; type and rank, adjustable or not: a specialized vector's length is the
;;; size modulo 2^24 (2^24 gives an empty vector, 2^24 + 1 one element, 20
;;; MiB 4 MiB), and a T or double-float vector, a 2-d array of 4096 x 4096
;;; octets, an adjustable octet vector make it crash (SIGSEGV) when used.
;;; Strings stop sooner: CLISP signals "string too long" from 2^22
;;; characters.  So MAKE-ARRAY, MAKE-STRING and ADJUST-ARRAY, shadowed in
;;; the package on CLISP, check the size first and signal ARRAY-TOO-LARGE,
;;; never making a wrong array: a store whose output is 2^24 bytes or more
;;; cannot be an octet vector (a file or stream takes it), and a restore of
;;; an array or string this large (from SBCL's bytes) is refused.

(defconstant +array-size-bound+ (ash 1 24)
  "The array total sizes this CLISP makes correctly are below this.")

(defconstant +string-length-bound+ (ash 1 22)
  "The string lengths this CLISP makes are below this.")

(define-condition array-too-large (store-error restore-error)
  ((size :initarg :size :reader array-too-large-size))
  (:documentation "CLISP cannot make an array of SIZE elements (see
+ARRAY-SIZE-BOUND+): a STORE-ERROR when storing (an output this large into
an octet vector), a RESTORE-ERROR when restoring (an array or string this
large).")
  (:report (lambda (c s)
             (format s "binstore: CLISP cannot make an array of ~d elements: its ~
                        arrays hold fewer than ~d (2^24) elements, its strings fewer ~
                        than ~d (2^22) characters~@[ (~a)~]"
                     (array-too-large-size c) +array-size-bound+ +string-length-bound+
                     (binstore-error-message c)))))

(defun size-bound (element-type)
  "The bound of the total size of an array of ELEMENT-TYPE on CLISP."
  (if (and (subtypep element-type 'character) (not (subtypep element-type nil)))
      +string-length-bound+
      +array-size-bound+))

(defun checked-dimensions (dimensions bound)
  "DIMENSIONS, after checking that the array's total size is below BOUND."
  (let ((total (if (listp dimensions) (reduce #'* dimensions) dimensions)))
    (when (>= total bound)
      (error 'array-too-large :size total))
    dimensions))

(defun element-zero (element-type)
  "The zero SBCL fills a new array of ELEMENT-TYPE with."
  (cond ((subtypep element-type 'character) (code-char 0))
        ((subtypep element-type 'double-float) 0d0)
        ((subtypep element-type 'single-float) 0f0)
        ((subtypep element-type 'number) 0)
        ((eq element-type t) 0)
        (t nil)))

(defun make-array (dimensions &rest options
                   &key (element-type t) (initial-element nil element-p)
                        (initial-contents nil contents-p) displaced-to &allow-other-keys)
  "CL:MAKE-ARRAY, with the elements of an array made without initial
contents zero, as SBCL makes them, and ARRAY-TOO-LARGE for a size this
CLISP cannot make."
  (declare (ignore initial-element initial-contents))
  (checked-dimensions dimensions (size-bound element-type))
  (if (or element-p contents-p displaced-to)
      (apply #'cl:make-array dimensions options)
      (apply #'cl:make-array dimensions :initial-element (element-zero element-type) options)))

(define-compiler-macro make-array (&whole form dimensions &rest options)
  "CL:MAKE-ARRAY itself, after the size's check, when OPTIONS give a
constant element type (whose zero and bound are known here)."
  (let ((type (if (evenp (length options)) (getf options :element-type t) :unknown)))
    (cond ((oddp (length options)) form)
          ((notevery #'keywordp (loop for (key) on options by #'cddr collect key)) form)
          ((not (or (eq type t) (and (consp type) (eq (first type) 'quote)))) form)
          (t
           (let ((type (if (consp type) (second type) t)))
             `(cl:make-array (checked-dimensions ,dimensions ,(size-bound type))
                             ,@(unless (loop for (key) on options by #'cddr
                                             thereis (member key '(:initial-element
                                                                   :initial-contents
                                                                   :displaced-to)))
                                 `(:initial-element ',(element-zero type)))
                             ,@options))))))

(defun make-string (size &rest options &key (element-type 'character) &allow-other-keys)
  "CL:MAKE-STRING, with ARRAY-TOO-LARGE for a length this CLISP cannot make."
  (checked-dimensions size (size-bound element-type))
  (apply #'cl:make-string size options))

(defun adjust-array (array dimensions &rest options
                     &key (element-type (array-element-type array)) &allow-other-keys)
  "CL:ADJUST-ARRAY, with ARRAY-TOO-LARGE for a size this CLISP cannot make."
  (checked-dimensions dimensions (size-bound element-type))
  (apply #'cl:adjust-array array dimensions options))

;;; Compiler and control primitives.

(defmacro truly-the (type form)
  "FORM's value, of TYPE (CLISP's compiler does not use the declaration)."
  `(the ,type ,form))

(defmacro define-global (name value &optional documentation)
  "Define NAME as a global variable, set to VALUE when first defined (CLISP:
a special variable)."
  `(defvar ,name ,value ,@(when documentation (list documentation))))

(defmacro define-load-time-global (name value &optional documentation)
  "Define NAME as a global variable whose value is VALUE from load time on."
  `(defvar ,name ,value ,@(when documentation (list documentation))))

(defmacro without-interrupts (&body body)
  "Run BODY: CLISP has no asynchronous interrupts binstore could defer (no
threads; C-c is a condition, signalled between forms)."
  `(progn ,@body))

(defmacro with-local-interrupts (&body body)
  "Inside WITHOUT-INTERRUPTS, run BODY."
  `(progn ,@body))

(defmacro compare-and-swap (place old new)
  "Set PLACE to NEW if it holds OLD (EQ); return what it held.  Atomic as
CLISP has one thread."
  (let ((o (gensym "OLD")) (held (gensym "HELD")))
    `(let ((,o ,old) (,held ,place))
       (when (eq ,held ,o) (setf ,place ,new))
       ,held)))

(defmacro atomic-incf (place &optional (delta 1))
  "Add DELTA to PLACE; return its old value.  Atomic as CLISP has one thread."
  `(prog1 ,place (incf ,place ,delta)))

(defmacro with-float-traps-masked ((&rest traps) &body body)
  "Run BODY.  CLISP has no infinities or NaNs to give instead of a
floating-point error, so nothing is masked: such an error is signalled,
and binstore's callers (hash-table keys) take it as the error it is."
  (declare (ignore traps))
  `(progn ,@body))
