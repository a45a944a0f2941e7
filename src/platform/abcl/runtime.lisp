;;;; ABCL's runtime, as binstore's io sees it: the names of
;;;; src/platform/runtime.lisp (SBCL's) with the same contracts.  The heap
;;;; is the JVM's, which tells its bound and use (java.lang.Runtime) but no
;;;; allocation point: that answer is "not known" (0), which turns the
;;;; runway off.

(in-package #:binstore)

(defun java-runtime ()
  "This JVM's java.lang.Runtime."
  (java:jstatic "getRuntime" "java.lang.Runtime"))

(defun heap-size ()
  "The bytes the heap may grow to: the JVM's maximum (-Xmx), but at most
MOST-POSITIVE-FIXNUM (2 GiB less a byte): binstore computes sizes as
fixnums, which are 32-bit on ABCL (as are its arrays' indices)."
  (min (java:jcall "maxMemory" (java-runtime)) most-positive-fixnum))

(defun heap-end ()
  "An address no object lies at or above: the JVM's objects have none
binstore sees, so the first address beyond every segment."
  (ash 1 62))

(defun heap-bytes-in-use ()
  "The bytes of the heap in use now (total less free), an integer."
  (let ((runtime (java-runtime)))
    (- (java:jcall "totalMemory" runtime) (java:jcall "freeMemory" runtime))))

(declaim (inline allocation-point))
(defun allocation-point (conses)
  "0: the JVM does not tell where it allocates next."
  (declare (ignore conses))
  0)

;;; Where an array's data lie ------------------------------------------------

(defun array-data-address (array)
  "The address of the first element of the simple ARRAY (VECTOR-POINTER's
segment: bytes for octets, characters, 16- and 32-bit integers; a T vector
has none to read), valid while ARRAY is pinned."
  (vector-pointer array))

(defconstant +non-simple-octets-copied-p+ nil
  "True where WITH-OCTET-VECTOR-ADDRESS reaches the elements of an octet
vector that is not simple by copying them all in and out: on ABCL only a
displaced one (an adjustable one shares its buffer).  Where it is true,
appending to an adjustable vector writes the record elsewhere and copies it
in.")

(defun call-with-octet-vector-address (vector function)
  "Call FUNCTION with the address of the first element of VECTOR, an octet
vector, simple or not.  A vector that is not simple is reached through a
simple one sharing its elements (SHARED-SIMPLE-OCTETS); when ABCL gives
none (VECTOR displaced), VECTOR's elements (up to its total size) are
copied into a simple vector, and back into VECTOR however FUNCTION exits."
  (let ((simple (if (typep vector 'simple-octet-vector)
                    vector
                    (shared-simple-octets vector))))
    (if simple
        (with-pinned-objects (simple)
          (funcall function (vector-pointer simple)))
        (call-with-octets-copy vector function))))

(defmacro with-octet-vector-address ((address vector) &body body)
  "Run BODY with ADDRESS bound to the address (an integer) of the first
element of VECTOR, an octet vector, simple or not (adjustable, with a fill
pointer, displaced), valid for BODY's extent."
  `(call-with-octet-vector-address ,vector (lambda (,address) ,@body)))

;;; Streams ------------------------------------------------------------------

(defun stream-file-descriptor (stream)
  "NIL: ABCL's streams are Java streams, which binstore reads and writes
through the stream, never through a descriptor."
  (declare (ignore stream))
  nil)

(defun bivalent-stream-p (stream)
  "NIL: binstore treats no ABCL stream as bivalent."
  (declare (ignore stream))
  nil)

;;; Finalization -------------------------------------------------------------

(defun call-when-collected (object function)
  "Arrange for FUNCTION, of no arguments, to be called once OBJECT has been
found garbage by the collector (EXT:FINALIZE).  Returns OBJECT."
  (ext:finalize object (lambda () (funcall function)))
  object)

;;; Saving the image -----------------------------------------------------------

(defun call-before-image-save (name)
  "As on SBCL: arrange for NAME to be called before the image is saved.
ABCL saves no images (it loads its fasls at each start), so there is
nothing to arrange.  Returns NAME."
  name)

(defun call-when-image-starts (name)
  "As on SBCL: arrange for NAME to be called when a saved image starts.
ABCL saves no images.  Returns NAME."
  name)
