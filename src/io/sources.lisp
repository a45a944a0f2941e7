;;;; Byte sources: origins that give the bytes of a restore in blocks.
;;;;
;;;; The decoder reads an IBUF's window (input.lisp).  For a place in memory
;;;; the window is the place itself.  For any other origin the window is a
;;;; staging vector that CALL-WITH-BYTE-SOURCE-IBUF fills, each time the
;;;; decoder needs more, from a byte source: an object SOURCE-READ and
;;;; SOURCE-GREEDY-P know.  binstore has sources for a file descriptor, a
;;;; binary Lisp stream and an octet vector; a filter (decompression) is a
;;;; byte source that reads the source it wraps and gives what it makes of
;;;; those bytes.
;;;;
;;;; A greedy source is read a whole window at a time.  Any other is read
;;;; only as far as the decoder needs, so restoring one record from a pipe
;;;; or a socket never waits for bytes that belong to the next one.

(in-package #:binstore)

(defstruct (byte-source (:constructor nil))
  "An origin of bytes, read by SOURCE-READ, greedily or not
(SOURCE-GREEDY-P).  binstore's are FD-SOURCE, STREAM-SOURCE, OCTETS-SOURCE
and the filters, which include FILTER-SOURCE.  RESTORE takes any byte
source as its place.")

(defgeneric source-read (source octets start end)
  (:documentation "Put the next bytes of SOURCE into OCTETS, a simple octet
vector, from START on, until END or the end of SOURCE's data; return the
index after the last byte put, which is below END only at the end of the
data.  Errors propagate to the caller of RESTORE."))

(defgeneric source-read-to-address (source address count)
  (:documentation "Put the next bytes of SOURCE, up to COUNT, at ADDRESS (an
integer: memory the caller owns and keeps in place); return how many were
put, below COUNT only at the end of the data.  NIL, having read nothing,
when SOURCE cannot put bytes in raw memory (the default): its reader then
goes through a vector, SOURCE-READ.  A file's descriptor (FD-SOURCE) and
binstore's decompressors can, and a restore reads the payloads of large
arrays from them so, without a pass through its window.")
  (:method (source address count)
    (declare (ignore source address count))
    nil))

(defgeneric source-greedy-p (source)
  (:documentation "True when SOURCE may be read ahead, a whole window at a
time, without waiting for bytes that may never come (a regular file, bytes
in memory): then the bytes read past a record are simply not used.")
  (:method (source)
    (declare (ignore source))
    nil))

;;; ------------------------------------------------------------------
;;; Staging any byte source.

(defun byte-source-refill (ib n)
  "The IBUF's REFILL-FN for a byte source: keep the unread bytes, moved to
the window's start, and read after them as many as the decoder needs (N in
all), or a whole window from a greedy source."
  (let* ((state (ibuf-source ib))
         (source (car state))
         (buffer (cdr state))
         (keep (available ib)))
    (declare (type (simple-array (unsigned-byte 8) (*)) buffer))
    (replace buffer buffer :start2 (ibuf-pos ib) :end2 (ibuf-end ib))
    (incf (ibuf-consumed ib) (ibuf-pos ib))
    (setf (ibuf-pos ib) 0 (ibuf-end ib) keep)
    (let* ((limit (ibuf-limit ib))
           (allowed (if limit (- limit (ibuf-consumed ib)) most-positive-fixnum))
           (want (if (source-greedy-p source) (length buffer) n))
           (end (min want (length buffer) (max keep allowed))))
      (when (< keep end)
        (setf (ibuf-end ib) (source-read source buffer keep end)))
      (when (and (< (ibuf-end ib) n) (<= allowed (ibuf-end ib)))
        ;; stopped by the limit, not by the data
        (setf (ibuf-cut-by-limit ib) t)))))

(defun byte-source-direct-read (ib address count)
  "The IBUF's DIRECT-FN for a byte source, its window empty: up to COUNT
bytes read straight to ADDRESS (PREFAULTed first) when the source can and
the limit allows them all (else NIL: the window's way signals at the
limit).  A source that cannot is not asked again."
  (let ((source (car (ibuf-source ib)))
        (limit (ibuf-limit ib)))
    (when (or (null limit) (<= (+ (ibuf-offset ib) count) limit))
      (prefault address count)
      (let ((n (source-read-to-address source address count)))
        (cond (n
               ;; the bytes came after the window's, which are all used
               (incf (ibuf-consumed ib) n)
               n)
              (t
               ;; a Lisp stream, say: the rest of the restore goes through
               ;; the window without asking, nor prefaulting all again
               (setf (ibuf-direct-fn ib) nil)
               nil))))))

(defun call-with-byte-source-ibuf (source limit fn &key (size +stream-buffer-size+))
  "Call FN with an IBUF reading the byte source SOURCE through a window of
at least SIZE bytes, at most LIMIT bytes in all (NIL: no limit); return
FN's values.  Bytes read ahead and not used are lost to SOURCE's reader
unless its caller puts them back (AVAILABLE says how many)."
  (let ((buffer (take-staging size)))
    (unwind-protect
         (with-pinned-objects (buffer)
           (let* ((state (cons source buffer))
                  (ib (%make-ibuf :base (pointer-address (vector-pointer buffer))
                                  :limit limit :refill-fn #'byte-source-refill
                                  :direct-fn #'byte-source-direct-read
                                  :source state)))
             (declare (dynamic-extent state ib)) ; FN is given IB for its extent only
             (funcall fn ib)))
      (give-back-staging buffer))))

;;; ------------------------------------------------------------------
;;; A file descriptor, read with read(2).

(declaim (inline make-fd-source))      ; on the caller's stack
(defstruct (fd-source (:include byte-source)
                         (:constructor make-fd-source (fd &optional greedy offset)))
  "Bytes read from the file descriptor FD, which the caller opened and
closes; GREEDY when FD reads a regular file.  OFFSET counts the bytes read,
for the message of a failed read."
  (fd 0 :type fixnum)
  (greedy nil)
  (offset 0 :type index))

(defmethod source-greedy-p ((source fd-source))
  (fd-source-greedy source))

(defun read-fd-to-address (fd address count fail)
  "read(2) from the descriptor FD to the COUNT bytes at ADDRESS (an
integer: memory the caller keeps in place) until they are full or the file
ends, reading again when a signal interrupts; return the bytes read.  A
failing read calls FAIL with the errno and the bytes read so far (FAIL
does not return)."
  (declare (type word address) (type index count) (type function fail))
  (let ((pos 0))
    (declare (type index pos))
    (loop while (< pos count)
          do (multiple-value-bind (n errno)
                 (system-read fd (address-pointer (+ address pos)) (- count pos))
               (cond ((and n (zerop n)) (return))
                     (n (incf pos n))
                     ((eql errno +eintr+))
                     (t (funcall fail errno pos)))))
    pos))

(defun read-fd-into (fd octets start end fail)
  "read(2) from the descriptor FD into OCTETS from START until END or the
end of the file (READ-FD-TO-ADDRESS); return the index after the last byte
read.  FAIL is called with the errno and the index reached."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end)
           (type function fail))
  (flet ((fail-at (errno count) (funcall fail errno (+ start count))))
    (declare (dynamic-extent #'fail-at))
    (with-pinned-objects (octets)
      (+ start (read-fd-to-address fd (pointer-address (pointer+ (vector-pointer octets) start))
                                   (- end start) #'fail-at)))))

(defun fd-source-failure (source errno count)
  "Signal RESTORE-ERROR: SOURCE's read failed with ERRNO after COUNT more
bytes."
  (error 'restore-error
         :offset (+ (fd-source-offset source) count)
         :message (format nil "read failed: ~a" (errno-text errno))))

(defmethod source-read ((source fd-source) octets start end)
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (flet ((fail (errno pos) (fd-source-failure source errno (- pos start))))
    (declare (dynamic-extent #'fail))
    (let ((pos (read-fd-into (fd-source-fd source) octets start end #'fail)))
      (incf (fd-source-offset source) (- pos start))
      pos)))

(defmethod source-read-to-address ((source fd-source) address count)
  ;; a large payload of a file, read(2) straight into its array: one copy
  ;; of its bytes, not two
  (flet ((fail (errno n) (fd-source-failure source errno n)))
    (declare (dynamic-extent #'fail))
    (let ((n (read-fd-to-address (fd-source-fd source) address count #'fail)))
      (incf (fd-source-offset source) n)
      n)))

;;; ------------------------------------------------------------------
;;; A binary Lisp input stream.

(defun regular-file-stream-p (stream)
  "True when STREAM reads a regular file, which can be read ahead and
seeked back: a pipe or a socket would block reading ahead."
  (let ((fd (stream-file-descriptor stream)))
    (and fd
         (let ((mode (system-file-status fd)))
           (and mode (eq (file-mode-kind mode) :regular))))))

(declaim (inline make-stream-source))  ; on the caller's stack
(defstruct (stream-source (:include byte-source)
                         (:constructor make-stream-source
                              (stream &optional (greedy (regular-file-stream-p stream)))))
  "Bytes read from STREAM, a binary input stream, by READ-SEQUENCE; GREEDY
when it reads a regular file."
  stream
  greedy)

(defmethod source-greedy-p ((source stream-source))
  (stream-source-greedy source))

(defmethod source-read ((source stream-source) octets start end)
  (read-sequence octets (stream-source-stream source) :start start :end end))

;;; ------------------------------------------------------------------
;;; An octet vector: what a filter reads when the place is a vector.

(defstruct (octets-source (:include byte-source)
                         (:constructor make-octets-source
                              (vector &optional (start 0) (end (length vector)))))
  "The bytes of the octet VECTOR from START below END."
  vector
  (start 0 :type index)
  (end 0 :type index))

(setf (documentation 'make-octets-source 'function)
      "A new OCTETS-SOURCE giving the bytes of the octet VECTOR from START
\(default 0) below END (default its length).")

(defmethod source-greedy-p ((source octets-source))
  t)

(defmethod source-read ((source octets-source) octets start end)
  (let* ((from (octets-source-start source))
         (n (min (- end start) (- (octets-source-end source) from))))
    (replace octets (octets-source-vector source) :start1 start :start2 from :end2 (+ from n))
    (setf (octets-source-start source) (+ from n))
    (+ start n)))

;;; ------------------------------------------------------------------
;;; Filters.

(defstruct (filter-source (:include byte-source) (:constructor nil))
  "A byte source that reads the byte source INNER and gives what it makes
of those bytes.  A filter defines SOURCE-READ (and SOURCE-GREEDY-P when it
must not read INNER ahead: by default a filter is as greedy as INNER)."
  (inner nil))

(setf (documentation 'filter-source-inner 'function)
      "The byte source the filter SOURCE reads.")

(defmethod source-greedy-p ((source filter-source))
  (source-greedy-p (filter-source-inner source)))

;;; ------------------------------------------------------------------
;;; The rest of an IBUF: what a decompressor reads when a restore finds a
;;; compressed record in its place.

(declaim (inline make-ibuf-source))
(defstruct (ibuf-source (:include byte-source) (:constructor make-ibuf-source (ibuf)))
  "The bytes of IBUF from its position on, consumed as they are read: what
RESTORE gives a decompressor when its place holds compressed data.  Not
greedy.  A reader that must consume exactly the bytes it used (a
decompressor, which must leave what follows its frame) reads the window
itself: IBUF-SOURCE-WINDOW, then IBUF-SOURCE-CONSUME."
  (ibuf nil :type ibuf))

(defun ibuf-source-window (source want)
  "The address (an integer) of the next unread bytes of SOURCE's IBUF and
how many lie there, without consuming them.  When none does, more are
read first: WANT at most from a source that is not greedy, a window from
one that is.  0 bytes: the end of the data.  The address is valid until
the next call.  Signals RESTORE-LIMIT-EXCEEDED when the IBUF's limit (its
MAX-TO-READ) stopped the reading."
  (declare (type index want))
  (let ((ib (ibuf-source-ibuf source)))
    (when (and (zerop (available ib)) (ibuf-refill-fn ib))
      (funcall (ibuf-refill-fn ib) ib (max 1 want)))
    (when (and (zerop (available ib)) (ibuf-cut-by-limit ib))
      (error 'restore-limit-exceeded :limit :max-to-read :value (ibuf-limit ib)
                                     :offset (ibuf-offset ib)
                                     :message "the input is longer than max-to-read allows"))
    (values (+ (ibuf-base ib) (ibuf-pos ib)) (available ib))))

(defun ibuf-source-consume (source count)
  "Consume COUNT bytes of the window IBUF-SOURCE-WINDOW returned (at most
as many as it said)."
  (declare (type index count))
  (let ((ib (ibuf-source-ibuf source)))
    (assert (<= count (available ib)))
    (incf (ibuf-pos ib) count)))

(defun ibuf-source-offset (source)
  "The offset in the place of SOURCE's next byte."
  (ibuf-offset (ibuf-source-ibuf source)))

(defmethod source-read ((source ibuf-source) octets start end)
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (let ((pos start))
    (declare (type index pos))
    (loop while (< pos end)
          do (multiple-value-bind (address count) (ibuf-source-window source (- end pos))
               (when (zerop count) (return))
               (let ((n (min count (- end pos))))
                 (with-pinned-objects (octets)
                   (copy-memory (address-pointer address) (pointer+ (vector-pointer octets) pos) n))
                 (ibuf-source-consume source n)
                 (incf pos n))))
    pos))
