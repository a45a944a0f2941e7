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
contents zero, as SBCL makes them."
  (declare (ignore initial-element initial-contents))
  (if (or element-p contents-p displaced-to)
      (apply #'cl:make-array dimensions options)
      (apply #'cl:make-array dimensions :initial-element (element-zero element-type) options)))

(define-compiler-macro make-array (&whole form dimensions &rest options)
  "CL:MAKE-ARRAY itself when OPTIONS give the contents, or give a constant
element type whose zero is known here."
  (let ((type (if (evenp (length options)) (getf options :element-type t) :unknown)))
    (cond ((oddp (length options)) form)
          ((notevery #'keywordp (loop for (key) on options by #'cddr collect key)) form)
          ((loop for (key) on options by #'cddr
                 thereis (member key '(:initial-element :initial-contents :displaced-to)))
           `(cl:make-array ,dimensions ,@options))
          ((or (eq type t) (and (consp type) (eq (first type) 'quote)))
           `(cl:make-array ,dimensions
                           :initial-element ',(element-zero (if (consp type) (second type) t))
                           ,@options))
          (t form))))

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
