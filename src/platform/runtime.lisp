;;;; SBCL's runtime, as binstore's io sees it: the heap (its extent, what is
;;;; in use, the points at which this thread allocates), where an array's
;;;; data lie in memory, and the descriptors behind SBCL's file streams.
;;;;
;;;; Everything outside src/platform/ asks these questions through the names
;;;; here and names no SB- symbol.  The small ones are inline, so the code
;;;; compiled is what it was when the callers asked SBCL directly.

(in-package #:binstore)

;;; The heap -----------------------------------------------------------------

(defun heap-size ()
  "The bytes the heap (SBCL's dynamic space) may grow to, fixed at startup."
  (sb-ext:dynamic-space-size))

(defun heap-end ()
  "The address (an integer) just past SBCL's dynamic space, the heap: no
object lies at or above it."
  (+ sb-vm:dynamic-space-start (heap-size)))

(defun heap-bytes-in-use ()
  "The bytes of the heap in use now, live objects and garbage not yet
collected, an integer."
  (sb-kernel:dynamic-usage))

;;; The allocation points live in the thread structure, in slots SBCL's
;;; own allocation sequence reads; without them (another SBCL) there is no
;;; point to tell.
(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun allocation-points-known-p ()
    "Whether this SBCL has the thread slots ALLOCATION-POINT reads: a
feature expression, true or false, for #+."
    (if (and (find-symbol "THREAD-CONS-TLAB-SLOT" "SB-VM")
             (find-symbol "THREAD-MIXED-TLAB-SLOT" "SB-VM")
             (find-symbol "CURRENT-THREAD-OFFSET-SAP" "SB-VM"))
        '(:and)
        '(:or))))

(declaim (inline allocation-point))
(defun allocation-point (conses)
  "The address (a fixnum) at which this thread allocates its next cons
\(CONSES true) or its next other small object, between the heap's start
and HEAP-END; 0 when that is not known: the region is closed (just after a
collection) or this SBCL does not tell.  Inline: two loads."
  #+#.(binstore::allocation-points-known-p)
  (let ((point (ldb (byte 62 0)           ; a fixnum: user addresses are shorter
                    (pointer-address
                     (if conses
                         (sb-vm::current-thread-offset-sap sb-vm::thread-cons-tlab-slot)
                         (sb-vm::current-thread-offset-sap sb-vm::thread-mixed-tlab-slot))))))
    ;; a closed region points below the heap
    (if (< point sb-vm:dynamic-space-start) 0 point))
  #-#.(binstore::allocation-points-known-p)
  (progn conses 0))

;;; Where an array's data lie ------------------------------------------------

(declaim (inline array-data-address))
(defun array-data-address (array)
  "The address (an integer) of the first element of the simple ARRAY, of
any element type (a SIMPLE-VECTOR too, where VECTOR-POINTER takes only
specialized vectors); valid only while ARRAY is pinned
\(WITH-PINNED-OBJECTS).  Inline: a few instructions."
  (declare (type simple-array array))
  (+ (logandc2 (sb-kernel:get-lisp-obj-address array) sb-vm:lowtag-mask)
     (* sb-vm:vector-data-offset +word-bytes+)))

(defconstant +non-simple-octets-copied-p+ nil
  "True where WITH-OCTET-VECTOR-ADDRESS reaches the elements of an octet
vector that is not simple by copying them all in and out: not on SBCL.  Where
it is true, appending to an adjustable vector writes the record elsewhere
and copies it in.")

(defmacro with-octet-vector-address ((address vector) &body body)
  "Run BODY with ADDRESS bound to the address (an integer) of the first
element of VECTOR, an octet vector, simple or not (adjustable, with a fill
pointer, displaced), the simple vector holding its data pinned for BODY's
extent."
  (let ((data (gensym "DATA")) (start (gensym "START")) (end (gensym "END")))
    `(sb-kernel:with-array-data ((,data ,vector) (,start 0) (,end))
       (declare (ignore ,end))
       (with-pinned-objects (,data)
         (let ((,address (+ (pointer-address (vector-pointer ,data)) ,start)))
           ,@body)))))

;;; Streams ------------------------------------------------------------------

(defun stream-file-descriptor (stream)
  "The descriptor (an integer) STREAM reads or writes when it is one of
SBCL's file-descriptor streams (files, pipes, sockets, RUN-PROGRAM's
streams); NIL for any other stream."
  (and (typep stream 'sb-sys:fd-stream)
       (sb-sys:fd-stream-fd stream)))

(defun bivalent-stream-p (stream)
  "True when STREAM is one of SBCL's file-descriptor streams opened
bivalent (element type :DEFAULT), which take octets as well as characters,
whatever its STREAM-ELEMENT-TYPE says."
  (and (typep stream 'sb-sys:fd-stream)
       (sb-impl::fd-stream-bivalent-p stream)
       t))

;;; Finalization -------------------------------------------------------------

(defun call-when-collected (object function)
  "Arrange for FUNCTION, of no arguments, to be called once OBJECT has been
found garbage by the collector, in whatever thread runs finalizers, some
time after.  FUNCTION must not refer to OBJECT (it would keep it alive) and
must not signal; it is not called in an image saved and restarted.  For
releasing memory outside the heap that an object abandoned without its
owner's release still holds.  Returns OBJECT."
  (sb-ext:finalize object function :dont-save t))

;;; Saving the image -----------------------------------------------------------

(defun call-before-image-save (name)
  "Arrange for the function NAME (a symbol), of no arguments, to be called
when this image is saved (SAVE-LISP-AND-DIE), before it is written; once,
however often this is called.  For what must not outlive the process: the
addresses of memory mapped or allocated outside the heap, which the image's
next process does not have, and facts about this machine and kernel, which
the next process may not run on.  Returns NAME."
  (pushnew name sb-ext:*save-hooks*)
  name)

(defun call-when-image-starts (name)
  "Arrange for the function NAME (a symbol), of no arguments, to be called
when a process starts from an image saved from this one, before its
toplevel runs; once, however often this is called.  For defaults computed
from the process's own resources (the heap's size).  Returns NAME."
  (pushnew name sb-ext:*init-hooks*)
  name)
