;;;; ECL's runtime, as binstore's io sees it: the names of
;;;; src/platform/runtime.lisp (SBCL's) with the same contracts.  ECL's heap
;;;; is Boehm's, which tells neither its extent nor an allocation point:
;;;; those answers are "not known" (0), which turns the runway off.

(in-package #:binstore)

(defun heap-size ()
  "The bytes the heap may grow to (ECL's heap-size limit)."
  (ext:get-limit 'ext:heap-size))

(defun heap-end ()
  "An address no object lies at or above: unknown on ECL, so the largest
user address."
  (ash 1 47))

(defun heap-bytes-in-use ()
  "The bytes of the heap in use now, an integer."
  (ffi:c-inline () () :fixnum "(cl_fixnum)GC_get_heap_size()" :one-liner t))

(declaim (inline allocation-point))
(defun allocation-point (conses)
  "0: ECL does not tell where it allocates next."
  (declare (ignore conses))
  0)

;;; Where an array's data lie ------------------------------------------------

(declaim (inline array-data-address))
(defun array-data-address (array)
  "The address (an integer) of the first element of the simple ARRAY, of
any element type; valid only while ARRAY is kept alive."
  (ffi:c-inline (array) (:object) :fixnum
                "(ecl_t_of(#0) == t_array) ? (cl_fixnum)((#0)->array.self.b8)
                                           : (cl_fixnum)((#0)->vector.self.b8)"
                :one-liner t :side-effects nil))

(defconstant +non-simple-octets-copied-p+ nil
  "True where WITH-OCTET-VECTOR-ADDRESS reaches the elements of an octet
vector that is not simple by copying them all in and out: not on ECL.  Where
it is true, appending to an adjustable vector writes the record elsewhere
and copies it in.")

(defmacro with-octet-vector-address ((address vector) &body body)
  "Run BODY with ADDRESS bound to the address (an integer) of the first
element of VECTOR, an octet vector, simple or not (adjustable, with a fill
pointer, displaced), its data kept alive for BODY's extent.  On ECL every
vector's header points at its data, displaced ones into their target's."
  (let ((v (gensym "VECTOR")))
    `(let* ((,v ,vector)
            (,address (ffi:c-inline (,v) (:object) :fixnum
                                    "(cl_fixnum)((#0)->vector.self.b8)"
                                    :one-liner t :side-effects nil)))
       (with-pinned-objects (,v)
         ,@body))))

;;; Streams ------------------------------------------------------------------

(defun stream-file-descriptor (stream)
  "The descriptor STREAM reads or writes when it is one of ECL's file
streams on a descriptor; NIL for any other stream."
  (and (typep stream 'file-stream)
       (ignore-errors (ext:file-stream-fd stream))))

(defun bivalent-stream-p (stream)
  "NIL: binstore treats no ECL stream as bivalent."
  (declare (ignore stream))
  nil)

;;; Finalization -------------------------------------------------------------

(defun call-when-collected (object function)
  "Arrange for FUNCTION, of no arguments, to be called once OBJECT has been
found garbage by the collector.  Returns OBJECT."
  (ext:set-finalizer object (lambda (o) (declare (ignore o)) (funcall function)))
  object)

;;; Saving the image -----------------------------------------------------------

(defun call-before-image-save (name)
  "As on SBCL: arrange for NAME to be called when the image is saved.  ECL
saves no images (programs are built from compiled files), so there is
nothing to arrange.  Returns NAME."
  name)

(defun call-when-image-starts (name)
  "As on SBCL: arrange for NAME to be called when a saved image starts.
ECL saves no images.  Returns NAME."
  name)
