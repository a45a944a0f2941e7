;;;; ABCL's octet vectors as the java.nio.ByteBuffers they are: a simple
;;;; (unsigned-byte 8) vector holds its elements in a ByteBuffer, in a field
;;;; that is not public but that reflection may read (ABCL's classes are in
;;;; the unnamed module, which is open to itself).  Through it, bytes move
;;;; in bulk: between vectors (REPLACE-OCTETS, under the portable memory's
;;;; MOVE-MEMORY: ABCL's REPLACE checks each element's type, about a
;;;; hundred times slower) and between a vector and a channel (os.lisp).
;;;; Loaded before the portable memory, so before abcl/memory.lisp's
;;;; DEFINE-GLOBAL: its globals are DEFVARs.

(in-package #:binstore)

(defun declared-field (class name)
  "CLASS's field NAME, made readable."
  (let ((field (java:jcall "getDeclaredField" class name)))
    (java:jcall "setAccessible" field t)
    field))

(defvar **octets-buffer-field**
  (declared-field (java:jclass "org.armedbear.lisp.BasicVector_ByteBuffer") "elements")
  "The field of a simple (unsigned-byte 8) vector holding its ByteBuffer.")

;;; Java's methods, looked up once: called by name on an object whose class
;;; is not public (HeapByteBuffer, FileChannelImpl), ABCL would look them up
;;; there and be refused access.

(defmacro define-java-method (name class method &rest parameter-types)
  "Define NAME as a global holding CLASS's public METHOD of PARAMETER-TYPES
\(Java class names), for JAVA:JCALL."
  `(defvar ,name (java:jmethod ,class ,method ,@parameter-types)))

(define-java-method **field-get** "java.lang.reflect.Field" "get" "java.lang.Object")
(define-java-method **buffer-duplicate** "java.nio.ByteBuffer" "duplicate")
(define-java-method **buffer-limit** "java.nio.ByteBuffer" "limit" "int")
(define-java-method **buffer-position** "java.nio.ByteBuffer" "position" "int")
(define-java-method **buffer-put** "java.nio.ByteBuffer" "put" "java.nio.ByteBuffer")

(defun octets-buffer (octets start end)
  "A ByteBuffer sharing the bytes of the simple octet vector OCTETS from
START below END: its position at START, its limit at END."
  (let ((buffer (java:jcall **buffer-duplicate**
                            (java:jcall **field-get** **octets-buffer-field** octets))))
    (java:jcall **buffer-limit** buffer end)
    (java:jcall **buffer-position** buffer start)
    buffer))

(defun replace-octets (to to-start from from-start count)
  "Copy COUNT bytes of the simple octet vector FROM at FROM-START to TO at
TO-START, as memmove(3) does (the ranges may overlap: a heap ByteBuffer's
bulk put copies with System.arraycopy).  Short copies go byte by byte, which
costs less than the buffers."
  (if (< count 16)
      (replace to from :start1 to-start :end1 (+ to-start count) :start2 from-start)
      (java:jcall **buffer-put**
                  (octets-buffer to to-start (+ to-start count))
                  (octets-buffer from from-start (+ from-start count))))
  to)

;;; An octet vector that is not simple (adjustable, with a fill pointer) and
;;; not displaced keeps its elements in a ByteBuffer too.  A simple vector
;;; made on that buffer shares them: binstore writes into an adjustable
;;; vector through it, as into any simple one, instead of copying the whole
;;; vector out and back at each store (quadratic when a program appends
;;; record after record).

(defvar **complex-octets-class** (java:jclass "org.armedbear.lisp.ComplexVector_ByteBuffer")
  "ABCL's class of the octet vectors that are not simple.")

(define-java-method **class-instance-p** "java.lang.Class" "isInstance" "java.lang.Object")

(defvar **complex-octets-buffer-field** (declared-field **complex-octets-class** "elements")
  "The field holding the ByteBuffer of an octet vector that is not simple
\(null when the vector is displaced).")

(defvar **complex-octets-displaced-field** (declared-field **complex-octets-class** "isDisplaced")
  "The field telling whether an octet vector that is not simple is displaced.")

(defvar **simple-octets-on-buffer**
  (java:jconstructor "org.armedbear.lisp.BasicVector_ByteBuffer" "java.nio.ByteBuffer" "boolean")
  "The constructor of a simple octet vector on a given ByteBuffer.")

(defun shared-simple-octets (vector)
  "A simple octet vector whose elements are those of VECTOR, an octet vector
that is not simple, up to VECTOR's total size: writing one writes the
other.  NIL when ABCL keeps VECTOR's elements otherwise (VECTOR displaced)."
  (when (and (java:jcall **class-instance-p** **complex-octets-class** vector)
             (not (java:jcall **field-get** **complex-octets-displaced-field** vector)))
    (let ((buffer (java:jcall **field-get** **complex-octets-buffer-field** vector)))
      (when buffer
        (let ((simple (java:jnew **simple-octets-on-buffer** buffer java:+false+)))
          (and (= (length simple) (array-total-size vector))
               simple))))))
