;;;; Shifts, bit tests and sums on ECL, open-coded where the compiler knows
;;;; the operands are fixnums.
;;;;
;;;; ECL 21.2.1 compiles every ASH to a call of its generic CL_ASH (a
;;;; type dispatch, and a bignum when a left shift may overflow), even for a
;;;; fixnum shifted by a constant, and does not fold (- +CONSTANT+) in a
;;;; shift count; LOGTEST is a call too, and so is (+ P 8) (ECL_PLUS)
;;;; whatever P's declared range.  In the identity table's kernels (a few
;;;; shifts per object stored) these calls took three quarters of the time
;;;; of storing a list of a million fixnums.  The package shadows ASH,
;;;; LOGTEST, LOGAND, LDB, +, -, 1+ and 1- on ECL with these (and INCF and
;;;; DECF, whose sums are then these +'s and -'s): functions with
;;;; CL's meaning, and compiler macros that fold constant arithmetic and
;;;; give C's shifts and sums when EXT:COMPILER-TYPECASE finds the operands'
;;;; types, known to the compiler, to be fixnums whose result is a fixnum,
;;;; and CL's function otherwise.  The variable tested is declared :READ-ONLY, as ECL's own
;;;; DOTIMES does: it then has its value's type when the compiler meets the
;;;; COMPILER-TYPECASE, which is decided there and keeps the clause's type
;;;; (a fixnum, which the next operation open-codes in turn).  SBCL
;;;; open-codes all of these itself and keeps CL's symbols.

(in-package #:binstore)

(defun ash (integer count)
  "CL:ASH; compiled as C's shifts where the operands' types allow it (the
compiler macro)."
  (cl:ash integer count))

(defun logtest (integer-1 integer-2)
  "CL:LOGTEST; compiled as a LOGAND tested against zero, which ECL
open-codes for fixnums."
  (cl:logtest integer-1 integer-2))

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun folded-integer (form)
    "FORM's value when it is an integer known at compile time: a constant,
or arithmetic of them (ECL does not fold (- +SHIFT+)); else NIL."
    (cond ((constantp form)
           (let ((value (ignore-errors (eval form))))
             (and (integerp value) value)))
          ((and (consp form)
                (member (first form) '(- + 1- 1+ * cl:- cl:+ cl:1- cl:1+
                                       cl:ash ash cl:logand logand logior)))
           (let ((arguments (mapcar #'folded-integer (rest form))))
             (when (every #'integerp arguments)
               (apply (case (first form)
                        (ash #'cl:ash) (logand #'cl:logand)
                        (+ #'cl:+) (- #'cl:-) (1+ #'cl:1+) (1- #'cl:1-)
                        (t (first form)))
                      arguments))))
          (t nil)))

  (defun fixnum-shift (variable c-expression)
    "A C expression of the fixnum VARIABLE (#0) as a form of fixnum value."
    `(ffi:c-inline ((the fixnum ,variable)) (:fixnum) :fixnum ,c-expression
                   :one-liner t :side-effects nil)))

(define-compiler-macro ash (&whole form integer count)
  (let ((shift (folded-integer count))
        (value (folded-integer integer))
        (i (gensym "INTEGER")) (n (gensym "COUNT")))
    (cond ((and value shift)
           (cl:ash value shift))
          ((eql shift 0) integer)
          ((and shift (minusp shift))
           ;; right: a fixnum stays a fixnum
           `(let ((,i ,integer))
              (declare (:read-only ,i))
              (ext:compiler-typecase ,i
                (fixnum ,(fixnum-shift i (format nil "((#0) >> ~d)" (min 63 (- shift)))))
                (t (cl:ash ,i ,shift)))))
          (shift
           ;; left: a fixnum small enough that no bit reaches the sign
           `(let ((,i ,integer))
              (declare (:read-only ,i))
              (ext:compiler-typecase ,i
                ((integer ,(cl:ash most-negative-fixnum (- shift))
                          ,(cl:ash most-positive-fixnum (- shift)))
                 ,(fixnum-shift i (format nil "((cl_fixnum)((cl_index)(#0) << ~d))" shift)))
                (t (cl:ash ,i ,shift)))))
          ((and value (plusp value)
                (consp count) (member (first count) '(logand cl:logand))
                (let ((mask (some #'folded-integer (rest count))))
                  (and mask (<= 0 mask)
                       (< (+ mask (integer-length value))
                          (integer-length most-positive-fixnum)))))
           ;; (ASH 1 (LOGAND x mask)): the count lies in [0, mask], whatever
           ;; X is, and the result is a fixnum
           `(let ((,n ,count))
              ,(fixnum-shift n (format nil "((cl_fixnum)~d << (#0))" value))))
          ((and value (plusp value))
           ;; a constant shifted left by a count known to be small enough,
           ;; as (ASH 1 bit)
           `(let ((,n ,count))
              (declare (:read-only ,n))
              (ext:compiler-typecase ,n
                ((integer 0 ,(- (integer-length most-positive-fixnum) (integer-length value)))
                 ,(fixnum-shift n (format nil "((cl_fixnum)~d << (#0))" value)))
                (t (cl:ash ,value ,n)))))
          (t form))))

(defun + (&rest numbers)
  "CL:+; a fixnum plus a constant compiled as C's addition where the
fixnum's type shows the sum stays a fixnum (the compiler macro)."
  (apply #'cl:+ numbers))

(defun - (number &rest more-numbers)
  "CL:-; a fixnum less a constant compiled as C's subtraction where the
fixnum's type shows the difference stays a fixnum (the compiler macro)."
  (apply #'cl:- number more-numbers))

(defun 1+ (number) "CL:1+, as + of 1." (cl:1+ number))
(defun 1- (number) "CL:1-, as - of 1." (cl:1- number))

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun fixnum-plus-constant (form constant whole)
    "FORM plus the integer CONSTANT: C's addition when FORM's type, known to
the compiler, keeps the sum a fixnum; for any fixnum, C's addition (two
fixnums cannot overflow C's 64 bits) made an integer, a bignum only past
the fixnums; else WHOLE, CL's."
    (let ((x (gensym "X")))
      `(let ((,x ,form))
         (declare (:read-only ,x))
         (ext:compiler-typecase ,x
           ((integer ,(cl:- most-negative-fixnum (min constant 0))
                     ,(cl:- most-positive-fixnum (max constant 0)))
            (ffi:c-inline ((the fixnum ,x)) (:fixnum) :fixnum
                          ,(format nil "((#0) + (~d))" constant)
                          :one-liner t :side-effects nil))
           (fixnum
            (ext:truly-the integer
                           (ffi:c-inline ((the fixnum ,x)) (:fixnum) :object
                                         ,(format nil "({ cl_fixnum s_ = (#0) + (~d);
                                                         (s_ >= MOST_NEGATIVE_FIXNUM && s_ <= MOST_POSITIVE_FIXNUM)
                                                         ? ecl_make_fixnum(s_) : ecl_make_integer(s_); })"
                                                  constant)
                                         :one-liner t :side-effects nil)))
           (t ,(subst x form whole :test #'eq)))))))

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun c-fixnum-arithmetic (c-operator a b)
    "A form of C's C-OPERATOR (\"+\" or \"-\") on the fixnums A and B, of
fixnum value: for a caller that knows the result to be a fixnum (here, the
platform's TRULY-THE, POINTER+ and POINTER-)."
    `(ffi:c-inline (,a ,b) (:fixnum :fixnum) :fixnum
                   ,(format nil "((#0) ~a (#1))" c-operator)
                   :one-liner t :side-effects nil))

  (defun fixnum-sum (a b operator c-operator)
    "A and B (evaluated in that order) combined by OPERATOR, CL:+ or CL:-:
C's C-OPERATOR when the types of both, known to the compiler, keep the
result a fixnum (both within half a fixnum's range; for a difference, both
non-negative fixnums too); else OPERATOR."
    (let* ((x (gensym "X")) (y (gensym "Y"))
           (half `(integer ,(cl:ash most-negative-fixnum -1) ,(cl:ash most-positive-fixnum -1)))
           (natural `(integer 0 ,most-positive-fixnum))
           (c (c-fixnum-arithmetic c-operator `(the fixnum ,x) `(the fixnum ,y)))
           (lisp `(,operator ,x ,y)))
      (let ((halves `(ext:compiler-typecase ,x
                       (,half (ext:compiler-typecase ,y (,half ,c) (t ,lisp)))
                       (t ,lisp))))
        `(let ((,x ,a) (,y ,b))
           (declare (:read-only ,x ,y))
           ,(if (eq operator 'cl:-)
                `(ext:compiler-typecase ,x
                   (,natural (ext:compiler-typecase ,y (,natural ,c) (t ,halves)))
                   (t ,halves))
                halves))))))

(define-compiler-macro + (&whole whole &rest numbers)
  (let ((constants (mapcar #'folded-integer numbers)))
    (cond ((every #'integerp constants) (apply #'cl:+ constants))
          ((and (= (length numbers) 2) (integerp (second constants))
                (typep (second constants) 'fixnum))
           (fixnum-plus-constant (first numbers) (second constants)
                                 `(cl:+ ,(first numbers) ,(second constants))))
          ((and (= (length numbers) 2) (integerp (first constants))
                (typep (first constants) 'fixnum))
           (fixnum-plus-constant (second numbers) (first constants)
                                 `(cl:+ ,(first constants) ,(second numbers))))
          ((= (length numbers) 2)
           (fixnum-sum (first numbers) (second numbers) 'cl:+ "+"))
          (t `(cl:+ ,@numbers)))))

(define-compiler-macro - (&whole whole number &rest more-numbers)
  (let ((constants (mapcar #'folded-integer (cons number more-numbers))))
    (cond ((every #'integerp constants) (apply #'cl:- constants))
          ((and (= (length more-numbers) 1) (integerp (second constants))
                (typep (cl:- (second constants)) 'fixnum))
           (fixnum-plus-constant number (cl:- (second constants))
                                 `(cl:- ,number ,(second constants))))
          ((= (length more-numbers) 1)
           (fixnum-sum number (first more-numbers) 'cl:- "-"))
          (t `(cl:- ,number ,@more-numbers)))))

(define-compiler-macro 1+ (number)
  `(+ ,number 1))

(define-compiler-macro 1- (number)
  `(- ,number 1))

;;; ECL's INCF and DECF expand to CL:+ and CL:-, which the compiler macros
;;; above never see: the package shadows them too, with these.

(define-modify-macro incf (&optional (delta 1)) +
  "CL:INCF, its sum the package's + (open-coded where the types allow).")

(define-modify-macro decf (&optional (delta 1)) -
  "CL:DECF, its difference the package's - (open-coded where the types
allow).")

(defmacro multiplicative-hash (x)
  "Bits 32 to 63 of X, a non-negative fixnum, times 2^64/phi (modulo 2^64):
a hash of X that spreads neighbouring values.  In C's unsigned arithmetic,
where ECL's would make a bignum of the product; of a declared 32-bit type,
so that what is made of it is open-coded in turn."
  `(ext:truly-the (unsigned-byte 32)
                  (ffi:c-inline (,x) (:fixnum) :fixnum
                                "((cl_fixnum)(((uint64_t)(#0) * 0x9E3779B97F4A7C15ULL) >> 32))"
                                :one-liner t :side-effects nil)))

(define-compiler-macro logtest (integer-1 integer-2)
  `(not (zerop (logand ,integer-1 ,integer-2))))

(defun logand (&rest integers)
  "CL:LOGAND; its arguments folded where they are constant arithmetic (the
compiler macro), which ECL leaves to run time and then cannot open-code."
  (apply #'cl:logand integers))

(define-compiler-macro logand (&rest integers)
  `(cl:logand ,@(mapcar (lambda (form) (or (folded-integer form) form)) integers)))

(defun ldb (bytespec integer)
  "CL:LDB; a constant byte compiled as a shift and a mask (the compiler
macro), which ECL open-codes for fixnums where its own LDB calls CL:ASH."
  (cl:ldb bytespec integer))

(define-setf-expander ldb (bytespec place &environment environment)
  (get-setf-expansion `(cl:ldb ,bytespec ,place) environment))

(define-compiler-macro ldb (&whole form bytespec integer)
  (let ((size (and (consp bytespec) (eq (first bytespec) 'byte)
                   (folded-integer (second bytespec))))
        (position (and (consp bytespec) (eq (first bytespec) 'byte)
                       (folded-integer (third bytespec)))))
    (if (and size position)
        `(logand (ash ,integer ,(- position)) ,(1- (cl:ash 1 size)))
        form)))
