;;;; Structure slot readers compiled inline on ECL.
;;;;
;;;; ECL 21.2.1 compiles a call of a structure's reader, even in the file
;;;; that defines the structure, as a call through ECL_FUNCTION_DISPATCH of
;;;; the reader, which looks up the thread's environment, checks the
;;;; argument's type (SI_OF_CLASS_P) and calls ECL_STRUCTURE_REF: a few dozen
;;;; nanoseconds where SBCL reads a word; a slot's SETF calls
;;;; ECL_STRUCTURE_SET, which checks the type too.  binstore's kernels read
;;;; and update the state of a store or restore this way at every call.  The
;;;; package shadows DEFSTRUCT on ECL with this one: CL:DEFSTRUCT, then for
;;;; each slot a compiler macro of its reader and a SETF expansion that
;;;; read and store the slot in place when the object is an instance of
;;;; exactly that structure (its name, one comparison), and take the
;;;; reader, or ECL_STRUCTURE_SET, otherwise (an included structure's
;;;; instance, or anything else, which they refuse as before).  The value
;;;; read is declared of the slot's type, which ECL then open-codes as it
;;;; does a declared variable.
;;;;
;;;; ECL tests an object's type against a structure's, in TYPEP and in the
;;;; check of every declaration of an argument of that type, with
;;;; SI:OF-CLASS-P: a call that takes the object's class and walks its
;;;; superclasses, a few percent of storing a list of mixed objects.  Here
;;;; each structure also gets a type predicate (ECL's TYPE-PREDICATE
;;;; property of the type's name, which its TYPEP compiles to a call of),
;;;; inline: the same comparison of the instance's structure name first.
;;;; Loaded with the package, before the first DEFSTRUCT (src/extensions.lisp).

(in-package #:binstore)

(defparameter *exact-instance-test*
  "(ECL_INSTANCEP(#0) && ECL_STRUCT_NAME(#0) == (#1))"
  "C's test that the object #0 is an instance of exactly the structure
named #1: the fast path of the slot readers, writers and type tests here.")

(defun slot-accessor-forms (name)
  "Forms that give each slot reader of the structure NAME a compiler macro
reading the slot in place, and each writable slot a SETF expansion storing
it in place (see this file's header).  NAME's slot descriptions are ECL's,
recorded when it compiles or loads the DEFSTRUCT."
  (loop for (nil nil type read-only offset reader)
          in (si:get-sysprop name 'si::structure-slot-descriptions)
        when (and reader (integerp offset))
          collect `(eval-when (:compile-toplevel :load-toplevel :execute)
                     (setf (compiler-macro-function ',reader)
                           (structure-reader-expander ',name ',reader ,offset ',type)))
          and unless read-only
                collect `(defsetf ,reader (object) (value)
                           (structure-writer-form ',name ,offset object value))))

(defun structure-reader-expander (name reader offset type)
  "The compiler macro of READER, which reads the slot at OFFSET, of TYPE,
of the structure NAME."
  (let ((c-expression
          (format nil "(~a ? (#0)->instance.slots[~d] ~
                        : ecl_function_dispatch(cl_env_copy,#2)(1,#0))"
                  *exact-instance-test* offset)))
    (lambda (form environment)
      (declare (ignore environment))
      (if (and (consp form) (eq (first form) reader) (= (length form) 2))
          (let ((object (gensym "OBJECT")))
            `(let ((,object ,(second form)))
               (ext:truly-the ,type
                 (ffi:c-inline (,object ',name ',reader) (:object :object :object) :object
                               ,c-expression :one-liner t :side-effects nil))))
          form))))

(defun structure-writer-form (name offset object value)
  "A form storing VALUE in the slot at OFFSET of OBJECT, an instance of the
structure NAME; through ECL_STRUCTURE_SET (which checks OBJECT's type) when
OBJECT is not an instance of exactly NAME."
  `(ffi:c-inline (,object ',name ,value) (:object :object :object) :object
                 ,(format nil "(~a ? ((#0)->instance.slots[~d] = (#2)) ~
                               : ecl_structure_set(#0,#1,~d,#2))"
                          *exact-instance-test* offset offset)
                 :one-liner t :side-effects t))

(defun structure-type-forms (name)
  "Forms that define an inline type predicate of the structure NAME,
testing an instance's name before SI:OF-CLASS-P, and make it the one ECL's
TYPEP and declarations of NAME compile to (see this file's header).  The
predicate is proclaimed inline in an EVAL-WHEN: a DECLAIM in this macro's
PROGN would not make ECL inline it in other files."
  (let ((predicate (intern (format nil "%~a-TYPEP" (symbol-name name)) (symbol-package name))))
    `((eval-when (:compile-toplevel :load-toplevel :execute)
        (proclaim '(inline ,predicate)))
      (defun ,predicate (object)
        ,(format nil "True when OBJECT is of the structure type ~a." name)
        (or (ffi:c-inline (object ',name) (:object :object) :bool
                          ,*exact-instance-test*
                          :one-liner t :side-effects nil)
            (si::of-class-p object ',name)))
      (eval-when (:compile-toplevel :load-toplevel :execute)
        (si:put-sysprop ',name 'si::type-predicate ',predicate)))))

(defmacro defstruct (name-and-options &rest slot-descriptions)
  "CL:DEFSTRUCT, then its slot readers and writers compiled inline where
they are used (SLOT-ACCESSOR-FORMS), and its type tested inline
(STRUCTURE-TYPE-FORMS), from the rest of its file on."
  (let ((name (if (consp name-and-options) (first name-and-options) name-and-options)))
    ;; the MACROLET is expanded after CL:DEFSTRUCT has been processed, when
    ;; ECL knows the slots' offsets
    `(progn
       (cl:defstruct ,name-and-options ,@slot-descriptions)
       (macrolet ((inline-slot-accessors () `(progn ,@(slot-accessor-forms ',name))))
         (inline-slot-accessors))
       ;; (a structure of :TYPE LIST or VECTOR is no class: ECL's own test)
       ,@(unless (and (consp name-and-options)
                      (find :type (rest name-and-options)
                            :key (lambda (option) (if (consp option) (first option) option))))
           (structure-type-forms name))
       ',name)))
