;;;; The platform's raw memory on ECL: the names of src/platform/memory.lisp
;;;; (SBCL's), with the same contracts, over ECL's C.
;;;;
;;;; ECL's collector (Boehm's) does not move objects, so the address model of
;;;; the SBCL platform carries over as it is: a pointer is an integer address
;;;; (a fixnum: user addresses are below 2^47), pinning keeps objects alive
;;;; and nothing more, and the bytes at an address are read and written by
;;;; C casts inlined into the compiled code (FFI:C-INLINE).  These forms only
;;;; work in compiled code, which is how ASDF loads binstore.

(in-package #:binstore)

(eval-when (:compile-toplevel :load-toplevel :execute)
  (unless (member :little-endian *features*)
    (error "binstore needs a little-endian host: its fixed-width fields are ~
            read and written in the host's byte order, and the format is ~
            little-endian.")))

(ffi:clines "#include <string.h>" "#include <stdint.h>")

(deftype pointer ()
  "An address in memory: on ECL an integer (a fixnum), as ECL's collector
does not move objects."
  'fixnum)

(deftype word ()
  "An unsigned machine word."
  '(unsigned-byte 64))

(deftype signed-word ()
  "A signed machine word."
  '(signed-byte 64))

(defconstant +word-bytes+ 8
  "Bytes in a machine word.")

(defconstant +machine-addresses-p+ t
  "True where binstore's pointers are the machine's addresses, which C
may be given (binstore/compression gives them to libzstd and liblz4).")

;;; New arrays.  SBCL makes the elements of an array made without initial
;;; contents zero (0, 0.0, #\Nul), and binstore relies on it; ECL leaves
;;; specialized arrays' memory as it found it and fills T arrays with NIL.
;;; The package shadows MAKE-ARRAY on ECL with this one, which zeroes them.

(defun zero-array (array)
  "Set every element of the fresh, not displaced ARRAY to zero (ECL's
MAKE-ARRAY leaves them undefined); return ARRAY."
  (if (eq (cl:array-element-type array) t)
      (fill (ffi:c-inline (array) (:object) :object
                          "{ cl_object a_ = #0; cl_object v_ = a_;
                             if (ecl_t_of(a_) == t_array) {
                               v_ = ecl_alloc_object(t_vector);
                               v_->vector.elttype = ecl_aet_object; v_->vector.flags = 0;
                               v_->vector.displaced = ECL_NIL; v_->vector.dim = a_->array.dim;
                               v_->vector.fillp = a_->array.dim; v_->vector.offset = 0;
                               v_->vector.self = a_->array.self; }
                             else if (ECL_ARRAY_HAS_FILL_POINTER_P(a_) || ECL_ADJUSTABLE_ARRAY_P(a_)) {
                               v_ = ecl_alloc_object(t_vector);
                               v_->vector.elttype = ecl_aet_object; v_->vector.flags = 0;
                               v_->vector.displaced = ECL_NIL; v_->vector.dim = a_->vector.dim;
                               v_->vector.fillp = a_->vector.dim; v_->vector.offset = 0;
                               v_->vector.self = a_->vector.self; }
                             @(return) = v_; }" :one-liner nil)
            0)
      (ffi:c-inline (array) (:object) :void
                    "{ cl_object a_ = #0; cl_index n_; size_t size_; void *p_;
                       if (ecl_t_of(a_) == t_array) { n_ = a_->array.dim; p_ = a_->array.self.b8; }
                       else { n_ = a_->vector.dim; p_ = a_->vector.self.b8; }
                       switch ((cl_elttype)a_->array.elttype) {
                       case ecl_aet_bit: size_ = 0; n_ = (n_ + 7) / 8 + 1; break;
                       case ecl_aet_b8: case ecl_aet_i8: case ecl_aet_bc: size_ = 1; break;
                       case ecl_aet_b16: case ecl_aet_i16: size_ = 2; break;
                       case ecl_aet_b32: case ecl_aet_i32: case ecl_aet_sf: case ecl_aet_ch: size_ = 4; break;
                       case ecl_aet_lf: case ecl_aet_cdf: size_ = 16; break;
                       case ecl_aet_clf: size_ = 32; break;
                       default: size_ = 8; }
                       if (size_ == 0) size_ = 1, n_ = n_ - 1;
                       if (p_ && n_) __builtin_memset(p_, 0, n_ * size_); }"
                    :one-liner nil))
  array)

(defun make-array (dimensions &rest options
                   &key (initial-element nil element-p) (initial-contents nil contents-p)
                        displaced-to &allow-other-keys)
  "CL:MAKE-ARRAY, with the elements of an array made without initial
contents zero, as SBCL makes them."
  (declare (ignore initial-element initial-contents) (dynamic-extent options))
  (let ((array (apply #'cl:make-array dimensions options)))
    (if (or element-p contents-p displaced-to)
        array
        (zero-array array))))

(define-compiler-macro make-array (&whole form dimensions &rest options)
  "CL:MAKE-ARRAY itself when OPTIONS give the contents; ZERO-ARRAY of it
when they visibly do not."
  (cond ((oddp (length options)) form)
        ((loop for (key) on options by #'cddr
               thereis (member key '(:initial-element :initial-contents :displaced-to)))
         `(cl:make-array ,dimensions ,@options))
        ((loop for (key) on options by #'cddr always (keywordp key))
         `(zero-array (cl:make-array ,dimensions ,@options)))
        (t form)))

;;; Pointers.

(defmacro pointer+ (pointer offset)
  "The pointer OFFSET bytes after POINTER: C's addition of two fixnums (an
address plus an offset within memory the caller holds is an address, a
fixnum; ECL's + would call its generic ECL_PLUS)."
  (c-fixnum-arithmetic "+" pointer offset))

(defmacro pointer- (pointer base)
  "The signed distance in bytes from BASE to POINTER: C's subtraction of two
addresses, fixnums."
  (c-fixnum-arithmetic "-" pointer base))

(defmacro pointer= (a b)
  "True when the pointers A and B are the same address."
  `(= (the fixnum ,a) (the fixnum ,b)))

(defmacro pointer-address (pointer)
  "POINTER's address, an unsigned integer (a fixnum)."
  `(the fixnum ,pointer))

(defmacro address-pointer (address)
  "The pointer to the unsigned integer ADDRESS."
  `(the fixnum ,address))

(declaim (inline %vector-pointer))
(defun %vector-pointer (vector)
  (ffi:c-inline (vector) (:object) :fixnum
                "(cl_fixnum)((#0)->vector.self.b8)" :one-liner t :side-effects nil))

(defmacro vector-pointer (vector)
  "A pointer to the first element of the specialized simple VECTOR, valid
only while VECTOR is kept alive (WITH-PINNED-OBJECTS)."
  `(%vector-pointer ,vector))

(defmacro keep-alive (object)
  "Make OBJECT's value live up to here, so that the conservative collector
finds it on the stack or in a register while raw pointers into it are in
use."
  `(ffi:c-inline (,object) (:object) :void
                 "__asm__ __volatile__(\"\" : : \"g\"(#0) : \"memory\")" :one-liner t))

(defmacro with-pinned-objects ((&rest objects) &body body)
  "Run BODY with OBJECTS kept alive (ECL's collector never moves objects),
so pointers into them stay valid."
  (let ((vars (loop for nil in objects collect (gensym "PINNED"))))
    `(let ,(mapcar #'list vars objects)
       (multiple-value-prog1 (progn ,@body)
         ,@(loop for v in vars collect `(keep-alive ,v))))))

;;; The bytes at a pointer.  Each is a macro expanding to one C expression,
;;; and a place (DEFSETF).  memcpy of a constant size compiles to one load
;;; or store, without assuming alignment or breaking C's aliasing rules.
;;; The C here says __builtin_memcpy (and __builtin_memmove, memset): it is
;;; expanded into files of every layer, whose C includes no <string.h>.

(defmacro define-memory-accessor (name c-type lisp-type &key float-object)
  "Define NAME, the place of the C-TYPE at an offset from a pointer (a
value of the FFI type LISP-TYPE).  Its SETF is the short form of DEFSETF,
to a macro: ECL's SETF then expands to the macro's call with the place's
own forms, where the long form binds them to temporaries of no declared
type, each converted to C through a call (ECL_TO_FIXNUM, ECL_TO_UINT8_T).
FLOAT-OBJECT, for a float type, names ECL's object type and accessor
\(\"t_doublefloat\" \"ecl_double_float\"): the value read is boxed by
allocating that object, not by ECL_MAKE_DOUBLE_FLOAT, which compares it
with zero -- a comparison that traps on a signalling NaN, bits a file
may hold."
  (let ((read (if float-object
                  (format nil "({~a v_; cl_object o_ = ecl_alloc_object(~a);
                                __builtin_memcpy(&v_, (void*)(#0+#1), sizeof v_); ~a(o_) = v_; o_;})"
                          c-type (first float-object) (second float-object))
                  (format nil "({~a v_; __builtin_memcpy(&v_, (void*)(#0+#1), sizeof v_); v_;})" c-type)))
        (write (format nil "({~a v_ = #2; __builtin_memcpy((void*)(#0+#1), &v_, sizeof v_); v_;})" c-type))
        (writer (intern (format nil "SET-~a" name))))
    `(progn
       (defmacro ,name (pointer offset)
         (list 'ffi:c-inline (list pointer offset) '(:fixnum :fixnum)
               ,(if float-object :object lisp-type)
               ,read :one-liner t :side-effects nil))
       (defmacro ,writer (pointer offset value)
         (list 'ffi:c-inline (list pointer offset value) '(:fixnum :fixnum ,lisp-type) ,lisp-type
               ,write :one-liner t :side-effects t))
       (defsetf ,name ,writer))))

(define-memory-accessor mem-u8 "uint8_t" :uint8-t)
(define-memory-accessor mem-u16 "uint16_t" :uint16-t)
(define-memory-accessor mem-u32 "uint32_t" :uint32-t)
(define-memory-accessor mem-u64 "uint64_t" :uint64-t)
(define-memory-accessor mem-s16 "int16_t" :int16-t)
(define-memory-accessor mem-s32 "int32_t" :int32-t)
(define-memory-accessor mem-s64 "int64_t" :int64-t)
(define-memory-accessor mem-single "float" :float
  :float-object ("t_singlefloat" "ecl_single_float"))
(define-memory-accessor mem-double "double" :double
  :float-object ("t_doublefloat" "ecl_double_float"))

(defmacro move-memory (to from count)
  "Copy COUNT bytes from the pointer FROM to the pointer TO (memmove: the
ranges may overlap); the caller has checked both ranges."
  `(ffi:c-inline (,to ,from ,count) (:fixnum :fixnum :fixnum) :void
                 "__builtin_memmove((void*)#0, (void*)#1, (size_t)#2)" :one-liner t))

;;; Compiler and control primitives.

(defmacro truly-the (type form)
  "FORM's value, which the compiler takes to be of TYPE without a check.
A sum or difference of two fixnums said to be a fixnum is C's addition or
subtraction: ECL's + calls its generic ECL_PLUS unless a constant shows
the result stays a fixnum (src/platform/ecl/arithmetic.lisp)."
  (if (and (consp form)
           (member (first form) '(+ - cl:+ cl:-))
           (= (length form) 3)
           (subtypep type 'fixnum))
      `(ext:truly-the ,type
                      ,(c-fixnum-arithmetic (if (member (first form) '(+ cl:+)) "+" "-")
                                            (second form) (third form)))
      `(ext:truly-the ,type ,form)))

;;; ECL compiles no local function inline, whatever its declarations: a
;;; variable that one closes over lives boxed in a heap vector, read and
;;; written through it by the function that binds it too.

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun inline-local-macro (definition)
    "The MACROLET binding that INLINE-FLET makes of the local function
DEFINITION, (name lambda-list . forms)."
    (destructuring-bind (name lambda-list &rest forms) definition
      (when (intersection lambda-list lambda-list-keywords)
        (error "INLINE-FLET takes required parameters only: ~s" definition))
      `(,name (&rest arguments)
         (unless (= (length arguments) ,(length lambda-list))
           (error "~s takes ~d arguments: ~s" ',name ,(length lambda-list) arguments))
         (list 'block ',name (list* 'let (mapcar #'list ',lambda-list arguments) ',forms))))))

(defmacro inline-flet (definitions &body body)
  "FLET of DEFINITIONS around BODY, each function inline.  On ECL each
becomes a local macro whose call is the function's body in a BLOCK of its
name, its parameters bound by LET to the arguments (evaluated once, in
order, as a call's), so that the variables it shares with BODY stay C
locals.  The functions take required parameters only, are only called by
name, and their free variables are ones no call site rebinds (gensyms)."
  `(macrolet ,(mapcar #'inline-local-macro definitions)
     ,@body))

(defmacro define-global (name value &optional documentation)
  "Define NAME as a global variable, set to VALUE when first defined (ECL:
a special variable)."
  `(defvar ,name ,value ,@(when documentation (list documentation))))

(defmacro define-load-time-global (name value &optional documentation)
  "Define NAME as a global variable whose value is VALUE from load time on."
  `(defvar ,name ,value ,@(when documentation (list documentation))))

(defmacro without-interrupts (&body body)
  "Run BODY with asynchronous interrupts deferred until it returns."
  `(mp:without-interrupts ,@body))

(defmacro with-local-interrupts (&body body)
  "Inside WITHOUT-INTERRUPTS, run BODY with interrupts allowed again."
  `(mp:with-local-interrupts ,@body))

(defmacro compare-and-swap (place old new)
  "Atomically set PLACE to NEW if it holds OLD (EQ); return what it held."
  `(mp:compare-and-swap ,place ,old ,new))

(defmacro atomic-incf (place &optional (delta 1))
  "Atomically add DELTA to the word-sized PLACE; return its old value.
\(ECL's MP:ATOMIC-INCF returns the new value.)"
  (let ((d (gensym "DELTA")))
    `(let ((,d ,delta))
       (- (mp:atomic-incf ,place ,d) ,d))))

(defmacro with-float-traps-masked ((&rest traps) &body body)
  "Run BODY with the floating-point traps masked (ECL: all of them, TRAPS
being those binstore masks), so that they give infinities and NaNs."
  (declare (ignore traps))
  (let ((saved (gensym "TRAPS")))
    `(let ((,saved (ext:trap-fpe 'last t)))
       (unwind-protect
            (progn (ext:trap-fpe t nil) ,@body)
         (ext:trap-fpe ,saved t)))))
