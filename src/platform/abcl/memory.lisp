;;;; The platform's compiler and control primitives on ABCL, and new arrays:
;;;; the names of src/platform/memory.lisp (SBCL's) that the portable memory
;;;; (src/platform/portable/memory.lisp: pointers, the MEM- accessors) does
;;;; not give.
;;;;
;;;; The byte order is not checked here, unlike SBCL's and ECL's platforms:
;;;; on ABCL every multi-byte access is composed of bytes, little-endian, by
;;;; the portable memory, whatever the host's order.

(in-package #:binstore)

;;; New arrays.  SBCL makes the elements of an array made without initial
;;; contents zero (0, 0.0, #\Nul), and binstore relies on it (fixnum and
;;; double vectors, which are T vectors on ABCL, start 0); ABCL fills T
;;; arrays with NIL, and so it fills the arrays it keeps as T arrays whatever
;;; their element type: bits and characters in two dimensions, octets in
;;; none, and bit vectors asked for with :ADJUSTABLE or :FILL-POINTER and
;;; dimensions given as a list.  Only simple vectors made with an integer
;;; length are left to ABCL.  The package shadows MAKE-ARRAY on ABCL with
;;; this one.

(defun zeroed-by-abcl-p (element-type)
  "True when ABCL fills a new vector of ELEMENT-TYPE with zeros itself: those
it specializes (bits, (unsigned-byte 8, 16, 32), characters), and NIL (no
elements)."
  (not (eq (upgraded-array-element-type element-type) t)))

(defun element-zero (element-type)
  "The zero SBCL fills a new array of ELEMENT-TYPE with."
  (cond ((eq element-type t) 0)
        ((subtypep element-type 'character) (code-char 0))
        ((subtypep element-type 'double-float) 0d0)
        ((subtypep element-type 'single-float) 0f0)
        ((subtypep element-type '(complex double-float)) #c(0d0 0d0))
        ((subtypep element-type '(complex single-float)) #c(0f0 0f0))
        ((subtypep element-type 'number) 0)
        (t nil)))

(defun make-array (dimensions &rest options
                   &key (element-type t) (initial-element nil element-p)
                        (initial-contents nil contents-p) displaced-to
                        (adjustable nil adjustable-p) (fill-pointer nil fill-pointer-p)
                   &allow-other-keys)
  "CL:MAKE-ARRAY, with the elements of an array made without initial
contents zero, as SBCL makes them."
  (declare (ignore initial-element initial-contents adjustable fill-pointer))
  (if (or element-p contents-p displaced-to
          (and (integerp dimensions) (not adjustable-p) (not fill-pointer-p)
               (zeroed-by-abcl-p element-type)))
      (apply #'cl:make-array dimensions options)
      (apply #'cl:make-array dimensions :initial-element (element-zero element-type) options)))

(defun simple-options-p (options)
  "True when the MAKE-ARRAY OPTIONS (a plist) ask for a simple array."
  (loop for (key) on options by #'cddr never (member key '(:adjustable :fill-pointer))))

(define-compiler-macro make-array (&whole form dimensions &rest options)
  "CL:MAKE-ARRAY itself when OPTIONS give the contents, or give a constant
element type whose zero is known here (of a vector, for a type ABCL fills
itself)."
  (let ((type (if (evenp (length options)) (getf options :element-type t) :unknown)))
    (cond ((oddp (length options)) form)
          ((notevery #'keywordp (loop for (key) on options by #'cddr collect key)) form)
          ((or (loop for (key) on options by #'cddr
                     thereis (member key '(:initial-element :initial-contents :displaced-to)))
               (and (consp type) (eq (first type) 'quote) (zeroed-by-abcl-p (second type))
                    (integerp dimensions) (simple-options-p options)))
           `(cl:make-array ,dimensions ,@options))
          ((and (consp type) (eq (first type) 'quote) (zeroed-by-abcl-p (second type))
                (simple-options-p options))
           ;; a vector when the dimensions are an integer (the usual case);
           ;; otherwise the function, called so as not to expand this again
           (let ((d (gensym "DIMENSIONS")))
             `(let ((,d ,dimensions))
                (if (integerp ,d)
                    (cl:make-array ,d ,@options)
                    (funcall 'make-array ,d ,@options)))))
          ((or (eq type t) (and (consp type) (eq (first type) 'quote)))
           `(cl:make-array ,dimensions
                           :initial-element ',(element-zero (if (consp type) (second type) t))
                           ,@options))
          (t form))))

;;; Compiler and control primitives.

(defmacro truly-the (type form)
  "FORM's value, of TYPE (checked or not as ABCL's compiler chooses)."
  `(the ,type ,form))

(defmacro define-global (name value &optional documentation)
  "Define NAME as a global variable, set to VALUE when first defined (ABCL:
a special variable)."
  `(defvar ,name ,value ,@(when documentation (list documentation))))

(defmacro define-load-time-global (name value &optional documentation)
  "Define NAME as a global variable whose value is VALUE from load time on."
  `(defvar ,name ,value ,@(when documentation (list documentation))))

;;; Interrupts.  ABCL runs THREADS:INTERRUPT-THREAD's function in the
;;; interrupted thread when it next polls, and has no way to defer it for
;;; a dynamic extent: these forms run BODY as it is.  What binstore defers
;;; interrupts for (a descriptor taken and recorded in one step) can then be
;;; cut short by an interrupt on ABCL, as by any error.

(defmacro without-interrupts (&body body)
  "Run BODY (ABCL cannot defer THREADS:INTERRUPT-THREAD; see above)."
  `(progn ,@body))

(defmacro with-local-interrupts (&body body)
  "Inside WITHOUT-INTERRUPTS, run BODY."
  `(progn ,@body))

;;; Atomic operations.  ABCL has no compare-and-swap on Lisp places: one
;;; lock makes every COMPARE-AND-SWAP and ATOMIC-INCF atomic with respect
;;; to each other, which is what binstore's uses need (each place they
;;; change is changed by them only; plain reads of it may see either value).

(define-global **atomic-lock** (threads:make-mutex)
  "The lock held across each COMPARE-AND-SWAP and ATOMIC-INCF.")

(defmacro compare-and-swap (place old new)
  "Atomically (with respect to other COMPARE-AND-SWAPs and ATOMIC-INCFs) set
PLACE to NEW if it holds OLD (EQ); return what it held."
  (let ((o (gensym "OLD")) (n (gensym "NEW")) (held (gensym "HELD")))
    `(let ((,o ,old) (,n ,new))
       (threads:with-mutex (**atomic-lock**)
         (let ((,held ,place))
           (when (eq ,held ,o) (setf ,place ,n))
           ,held)))))

(defmacro atomic-incf (place &optional (delta 1))
  "Atomically (see COMPARE-AND-SWAP) add DELTA to PLACE; return its old
value."
  (let ((d (gensym "DELTA")))
    `(let ((,d ,delta))
       (threads:with-mutex (**atomic-lock**)
         (prog1 ,place (incf ,place ,d))))))

(defmacro with-float-traps-masked ((&rest traps) &body body)
  "Run BODY with the floating-point TRAPS (:invalid, :overflow, ...)
masked, so that they give infinities and NaNs instead of errors.  ABCL's
modes are global to the process: they are set for BODY's extent and put
back after."
  (let ((saved (gensym "TRAPS")))
    `(let ((,saved (getf (ext:get-floating-point-modes) :traps)))
       (unwind-protect
            (progn (ext:set-floating-point-modes
                    :traps (set-difference ,saved ',traps))
                   ,@body)
         (ext:set-floating-point-modes :traps ,saved)))))
