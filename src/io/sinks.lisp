;;;; Byte sinks: destinations that take the bytes of a store in blocks.
;;;;
;;;; The encoder writes into an OBUF's window (output.lisp).  For a place in
;;;; memory (an octet vector, raw memory, an output region) the window is
;;;; the place itself, and nothing else is needed.  For any other
;;;; destination the window is a staging vector that CALL-WITH-BYTE-SINK-OBUF
;;;; hands, each time it fills, to a byte sink: an object that SINK-WRITE,
;;;; SINK-FINISH and SINK-ABORT know.  binstore has sinks for a file
;;;; descriptor, a binary Lisp stream and a growing octet vector; a filter
;;;; (compression, a checksum) is a byte sink that transforms each block and
;;;; hands the result to the byte sink it wraps.
;;;;
;;;; The protocol is three generic functions on BYTE-SINK structures (one
;;;; is made per store, on the stack when binstore makes it).  STORE takes
;;;; any byte sink as its place.

(in-package #:binstore)

(defstruct (byte-sink (:constructor nil))
  "A destination of bytes, given them by SINK-WRITE, then SINK-FINISH, or
SINK-ABORT when the store fails.  binstore's are FD-SINK, STREAM-SINK,
OCTETS-SINK and the filters, which include FILTER-SINK.")

(defgeneric sink-write (sink octets start end)
  (:documentation "Take the bytes of OCTETS, a simple octet vector, from
START below END, in order after those taken before.  Return value ignored.
Errors propagate: the store then fails and SINK-ABORT is called."))

(defgeneric sink-finish (sink)
  (:documentation "Every byte of the store has been given to SINK-WRITE:
flush what SINK holds (a filter: its own tail, then SINK-FINISH of the sink
it wraps) and return SINK's result, which only a sink made by binstore for
a place gives meaning to.")
  (:method (sink)
    (declare (ignore sink))
    nil))

(defgeneric sink-abort (sink)
  (:documentation "The store failed or was interrupted: release what SINK
holds (a filter: then SINK-ABORT of the sink it wraps).  Must not signal.")
  (:method (sink)
    (declare (ignore sink))
    nil))

;;; Numeric array payloads.  A sink may want to know where in the bytes
;;; it is given the payloads of specialized numeric arrays lie, and the
;;; width of their elements: a compressor byte-shuffles them (see
;;; src/compression/shuffle.lisp).  The encoder tells such a sink of each
;;; payload before writing it, through the OBUF's PAYLOAD-SINK; it tells no
;;; other, at the cost of one test of that slot an array.

(defgeneric sink-notes-payloads-p (sink)
  (:documentation "True when SINK wants SINK-NOTE-PAYLOAD calls for the
numeric array payloads among the bytes it will be given.  Asked once a
store.")
  (:method (sink)
    (declare (ignore sink))
    nil))

(defgeneric sink-note-payload (sink offset count width)
  (:documentation "The COUNT bytes from OFFSET (counted from the first byte
SINK is given, 0) are the payload of a numeric array, elements of WIDTH
bytes (2, 4 or 8; a complex's parts counted apart), all little-endian.
Called, in increasing OFFSET, before SINK is given those bytes; only for a
SINK whose SINK-NOTES-PAYLOADS-P is true.  Says where the bytes are; what
they are does not change.")
  (:method (sink offset count width)
    (declare (ignore sink offset count width))
    nil))

;;; ------------------------------------------------------------------
;;; Staging any byte sink.

(defun byte-sink-room (ob n)
  (declare (ignore n))
  (flush-byte-sink-obuf ob))

(defun flush-byte-sink-obuf (ob)
  "Give the window's bytes to the sink and empty the window.  The OBUF's
SINK is (sink . staging-vector)."
  (let ((state (obuf-sink ob)))
    (sink-write (car state) (cdr state) 0 (obuf-pos ob))
    (incf (obuf-flushed ob) (obuf-pos ob))
    (setf (obuf-pos ob) 0)))

(defun call-with-byte-sink-obuf (sink limit fn &key (size +stream-buffer-size+))
  "Call FN with an OBUF whose bytes go to the byte sink SINK, through a
staging window of at least SIZE bytes, at most LIMIT bytes in all (NIL: no
limit).  When FN returns: flush the window and return what SINK-FINISH
returns.  When FN (or the sink) exits non-locally: SINK-ABORT, once."
  (let ((buffer (take-staging size))
        (finished nil))
    (unwind-protect
         (with-pinned-objects (buffer)
           (let* ((state (cons sink buffer))
                  (capacity (length buffer))
                  (ob (%make-obuf :base (pointer-address (vector-pointer buffer))
                                  :capacity capacity
                                  :end (first-window-end capacity limit)
                                  :limit limit :room-fn #'byte-sink-room :sink state
                                  :payload-sink (and (sink-notes-payloads-p sink) sink))))
             (declare (dynamic-extent state ob)) ; FN is given OB for its extent only
             (funcall fn ob)
             (flush-byte-sink-obuf ob)
             (prog1 (sink-finish sink)
               (setf finished t))))
      (unless finished
        (sink-abort sink))
      (give-back-staging buffer))))

;;; ------------------------------------------------------------------
;;; A file descriptor, written with write(2).

(declaim (inline make-fd-sink))        ; on the caller's stack
(defstruct (fd-sink (:include byte-sink) (:constructor make-fd-sink (fd)))
  "The bytes go to the file descriptor FD, which the caller opened and
closes."
  (fd 0 :type fixnum))

(defun write-fully (fd address count)
  "write(2) COUNT bytes at ADDRESS to FD, retrying short writes."
  (loop while (> count 0)
        do (multiple-value-bind (written errno)
               (system-write fd (address-pointer address) count)
             (cond ((and written (> written 0))
                    (incf address written) (decf count written))
                   ((eql errno +eintr+))
                   (t (error 'store-error
                             :message (format nil "write failed: ~a"
                                              (errno-text errno))))))))

(defmethod sink-write ((sink fd-sink) octets start end)
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (with-pinned-objects (octets)
    (write-fully (fd-sink-fd sink) (+ (pointer-address (vector-pointer octets)) start)
                 (- end start))))

(defconstant +fd-window-bytes+ (* 1024 1024)
  "The window a store to a file descriptor is staged through: few write
calls.")

(defun call-with-fd-obuf (fd limit fn)
  "Call FN with an OBUF writing to the file descriptor FD; flush at the end.
Return nothing useful."
  (let ((sink (make-fd-sink fd)))
    (declare (dynamic-extent sink))
    (call-with-byte-sink-obuf sink limit fn :size +fd-window-bytes+)))

;;; ------------------------------------------------------------------
;;; A binary Lisp output stream.

(declaim (inline make-stream-sink))    ; on the caller's stack
(defstruct (stream-sink (:include byte-sink) (:constructor make-stream-sink (stream)))
  "The bytes go to STREAM, a binary output stream, by WRITE-SEQUENCE."
  stream)

(defmethod sink-write ((sink stream-sink) octets start end)
  (write-sequence octets (stream-sink-stream sink) :start start :end end))

(defun call-with-stream-obuf (stream limit fn)
  "Call FN with an OBUF writing to STREAM; flush at the end.  Return nothing
useful."
  (let ((sink (make-stream-sink stream)))
    (declare (dynamic-extent sink))
    (call-with-byte-sink-obuf sink limit fn)))

;;; ------------------------------------------------------------------
;;; An octet vector that grows: what a filter's output goes to when the
;;; place is a vector.

(defstruct (octets-sink (:include byte-sink)
                        (:constructor make-octets-sink
                            (&optional (vector (make-array 256 :element-type '(unsigned-byte 8)
                                                                :adjustable t :fill-pointer 0)))))
  "The bytes are appended to VECTOR, an adjustable octet vector with a fill
pointer, which grows by half at least each time it must: SINK-FINISH
returns it."
  vector)

(defmethod sink-write ((sink octets-sink) octets start end)
  (let* ((vector (octets-sink-vector sink))
         (at (fill-pointer vector))
         (new (+ at (- end start))))
    (when (> new (array-total-size vector))
      (setf vector (adjust-array vector (max new (+ (array-total-size vector)
                                                    (ash (array-total-size vector) -1))))
            (octets-sink-vector sink) vector))
    (setf (fill-pointer vector) new)
    (replace vector octets :start1 at :start2 start :end2 end)))

(defmethod sink-finish ((sink octets-sink))
  (octets-sink-vector sink))

(setf (documentation 'make-octets-sink 'function)
      "A new OCTETS-SINK appending to VECTOR, an adjustable octet vector with a
fill pointer (by default a new, empty one)."
      (documentation 'octets-sink-vector 'function)
      "The vector the OCTETS-SINK appends to; it may be a new one after the
sink has grown it (ADJUST-ARRAY).")

;;; ------------------------------------------------------------------
;;; Filters.

(defstruct (filter-sink (:include byte-sink) (:constructor nil))
  "A byte sink that transforms the bytes it takes and gives the result to
the byte sink INNER.  A filter defines SINK-WRITE, and SINK-FINISH when it
holds bytes back (it then calls SINK-FINISH on INNER and returns its
value); the methods here pass the end of a store on to INNER."
  (inner nil))

(setf (documentation 'filter-sink-inner 'function)
      "The byte sink the filter SINK gives its output to.")

(defmethod sink-finish ((sink filter-sink))
  (sink-finish (filter-sink-inner sink)))

(defmethod sink-abort ((sink filter-sink))
  (sink-abort (filter-sink-inner sink)))

;;; ------------------------------------------------------------------
;;; An OBUF: what a compressor's output goes to when STORE compresses, so
;;; that the compressed record reaches any place the way a record does.

(declaim (inline make-obuf-sink))
(defstruct (obuf-sink (:include byte-sink) (:constructor make-obuf-sink (obuf)))
  "The bytes are written to OBUF, as the encoder writes them (its place's
room function, limit and OUT-OF-SPACE apply)."
  (obuf nil :type obuf))

(defmethod sink-write ((sink obuf-sink) octets start end)
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (with-pinned-objects (octets)
    (write-octets-from-address (obuf-sink-obuf sink)
                               (+ (pointer-address (vector-pointer octets)) start)
                               (- end start))))
