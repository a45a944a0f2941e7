;;;; CLISP's runtime, as binstore's io sees it: the names of
;;;; src/platform/runtime.lisp (SBCL's) with the same contracts.  CLISP's
;;;; heap grows as needed and tells no allocation point: those answers are
;;;; "not known" (0), which turns the runway off.

(in-package #:binstore)

(defun heap-size ()
  "The bytes the heap may grow to: CLISP's has no fixed bound, so the
machine's memory (MemTotal in /proc/meminfo), 4 GiB when unknown."
  (or (ignore-errors
       (with-open-file (in "/proc/meminfo")
         (loop for line = (read-line in nil)
               while line
               when (and (> (length line) 9) (string= "MemTotal:" line :end2 9))
                 return (* 1024 (parse-integer line :start 9 :junk-allowed t)))))
      (* 4 1024 1024 1024)))

(defun heap-end ()
  "An address no object lies at or above: CLISP's objects have none
binstore sees, so the first address beyond every segment."
  (ash 1 62))

(defun heap-bytes-in-use ()
  "The bytes of the heap in use now, an integer."
  (values (sys::%room)))

(declaim (inline allocation-point))
(defun allocation-point (conses)
  "0: CLISP does not tell where it allocates next."
  (declare (ignore conses))
  0)

;;; Where an array's data lie ------------------------------------------------

(defun array-data-address (array)
  "The address of the first element of the simple ARRAY (VECTOR-POINTER's
segment: bytes for octets, characters, 16- and 32-bit integers; a T vector
has none to read), valid while ARRAY is pinned."
  (vector-pointer array))

(defconstant +non-simple-octets-copied-p+ t
  "True where WITH-OCTET-VECTOR-ADDRESS reaches the elements of an octet
vector that is not simple by copying them all in and out: on CLISP, which
gives no pointer into one.  Appending to an adjustable vector then writes
the record elsewhere and copies it in.")

(defun call-with-octet-vector-address (vector function)
  "Call FUNCTION with the address of the first element of VECTOR, an octet
vector, simple or not.  CLISP gives no pointer into a vector that is not
simple: its elements (up to its total size) are copied into a simple one,
and back into VECTOR however FUNCTION exits (CALL-WITH-OCTETS-COPY)."
  (if (typep vector '(simple-array (unsigned-byte 8) (*)))
      (with-pinned-objects (vector)
        (funcall function (vector-pointer vector)))
      (call-with-octets-copy vector function)))

(defmacro with-octet-vector-address ((address vector) &body body)
  "Run BODY with ADDRESS bound to the address (an integer) of the first
element of VECTOR, an octet vector, simple or not (adjustable, with a fill
pointer, displaced), valid for BODY's extent."
  `(call-with-octet-vector-address ,vector (lambda (,address) ,@body)))

;;; Streams ------------------------------------------------------------------

(defun stream-file-descriptor (stream)
  "NIL: binstore reads and writes CLISP's streams through the stream (their
buffers are CLISP's own), never through their descriptors."
  (declare (ignore stream))
  nil)

(defun bivalent-stream-p (stream)
  "NIL: binstore treats no CLISP stream as bivalent."
  (declare (ignore stream))
  nil)

;;; Finalization -------------------------------------------------------------

(defun call-when-collected (object function)
  "Arrange for FUNCTION, of no arguments, to be called once OBJECT has been
found garbage by the collector.  Returns OBJECT."
  (ext:finalize object (lambda (o) (declare (ignore o)) (funcall function)))
  object)

;;; Saving the image -----------------------------------------------------------

(defun call-before-image-save (name)
  "As on SBCL: arrange for NAME to be called before the image is saved.
CLISP's EXT:SAVEINITMEM has no hook for it; what binstore forgets there it
also checks when used (foreign pointers of a saved image are invalid:
FFI:VALIDP).  Returns NAME."
  name)

(defun call-when-image-starts (name)
  "Arrange for NAME to be called when an image saved from this one starts
\(CUSTOM:*INIT-HOOKS*).  Returns NAME."
  (pushnew name custom:*init-hooks*)
  name)
