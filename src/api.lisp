;;;; The public entry points: STORE, RESTORE, STORE-TO-SAP, RESTORE-FROM-SAP.
;;;; Each picks the sink or source for its place and runs the encoder or the
;;;; decoder over it.

(in-package #:binstore)

;;; Encoding to any output buffer -------------------------------------------

(defun encode (ob data &key (track-references *track-references*)
                            (support-shared-list-structures *support-shared-list-structures*)
                            as-separate-objects
                            (output-magic-number *output-magic-number*)
                            (output-end-marker *output-end-marker*)
                            (max-depth *max-depth*)
                            (store-class-slots *store-class-slots*)
                            max-to-write)
  "Write DATA (or, with AS-SEPARATE-OBJECTS, each element of the list DATA)
to OB.  Takes every keyword argument of STORE, to be applied to them as
they are; MAX-TO-WRITE is OB's business."
  (declare (ignore max-to-write))
  (let ((ss (make-store-state ob :track track-references
                                 :lists support-shared-list-structures
                                 :max-depth max-depth
                                 :store-class-slots store-class-slots
                                 :root data)))
    (declare (dynamic-extent ss))       ; see store-state.lisp
    (when output-magic-number
      (write-u8 ob +tag-header+)
      (loop for octet across +header-octets+ do (write-u8 ob octet))
      (write-varint ob +format-version+))
    ;; Without a tracking tag a stream tracks objects but not conses: the
    ;; default costs no byte, the others one.
    (cond ((not track-references) (write-u8 ob +tag-no-tracking+))
          (support-shared-list-structures (write-u8 ob +tag-full-tracking+)))
    (if as-separate-objects
        (dolist (object data)
          (write-top-level-object ss object))
        (write-top-level-object ss data))
    (when output-end-marker
      (write-u8 ob +tag-end+))
    (finish-store-state ss)
    ob))

;;; Places ------------------------------------------------------------------

(defun octet-vector-with-fill-pointer-p (x)
  (and (typep x '(vector (unsigned-byte 8)))
       (array-has-fill-pointer-p x)))

(declaim (inline make-vector-sink))    ; kept on the stack by STORE-INTO-VECTOR
(defstruct (vector-sink (:constructor make-vector-sink (vector)))
  vector
  (direct nil))   ; bytes written in place before spilling to a region, once spilled

(defun vector-room (ob n)
  "The user's vector is full.  Not adjustable: OUT-OF-SPACE.  Adjustable:
carry on in an output region; STORE-INTO-VECTOR grows the vector once at
the end."
  (let ((sink (obuf-sink ob)))
    (if (not (adjustable-array-p (vector-sink-vector sink)))
        (let ((needed (+ (obuf-total ob) n)))
          (error 'out-of-space :needed needed
                               :message "the octet vector is not adjustable and is full"))
        ;; the region carries the held bytes: the vector keeps the rest
        (setf (vector-sink-direct sink)
              (switch-to-region ob (take-region (* 2 (+ n (held-bytes ob)))))))))

(defun store-into-vector (vector limit encode-fn)
  "Append to VECTOR, an octet vector with a fill pointer, writing in place."
  (let* ((start (fill-pointer vector))
         (capacity (- (array-total-size vector) start))
         (sink (make-vector-sink vector))
         ;; its window's base is set once the vector is pinned
         (ob (%make-obuf :capacity capacity :end (first-window-end capacity limit)
                         :limit limit :room-fn #'vector-room :sink sink :holdable t)))
    (declare (dynamic-extent sink ob))  ; see store-state.lisp
    (unwind-protect
         (progn
           (sb-kernel:with-array-data ((data vector) (data-start 0) (data-end))
             (declare (ignore data-end))
             (sb-sys:with-pinned-objects (data)
               (setf (obuf-base ob) (+ (sb-sys:sap-int (sb-sys:vector-sap data)) data-start start))
               (funcall encode-fn ob)))
           (let ((total (obuf-total ob))
                 (direct (vector-sink-direct sink)))
             (when direct
               ;; spilled: grow once, then copy the region after the direct part
               (setf vector (adjust-array vector (+ start total)))
               (sb-kernel:with-array-data ((data vector) (data-start 0) (data-end))
                 (declare (ignore data-end))
                 (sb-sys:with-pinned-objects (data)
                   (copy-memory (obuf-sap ob)
                                (sb-sys:sap+ (sb-sys:vector-sap data) (+ data-start start direct))
                                (obuf-pos ob)))))
             (setf (fill-pointer vector) (+ start total))
             vector))
      (when (region-p (obuf-sink ob))
        (give-back-region (obuf-sink ob))))))

(defun store-into-file (place limit encode-fn)
  "Write the file PLACE through CALL-WITH-FILE-OUTPUT."
  (call-with-file-output place (lambda (fd) (call-with-fd-obuf fd limit encode-fn))))

;;; Store ---------------------------------------------------------------------

(defun store (place data &rest options
                         &key (track-references *track-references*)
                              (support-shared-list-structures *support-shared-list-structures*)
                              as-separate-objects
                              (output-magic-number *output-magic-number*)
                              (output-end-marker *output-end-marker*)
                              (max-to-write *max-to-write*)
                              (max-depth *max-depth*)
                              (store-class-slots *store-class-slots*))
  "Store DATA in PLACE and return the place (for NIL, the new vector).

PLACE is NIL (a fresh (simple-array (unsigned-byte 8) (*)) is returned), an
octet vector with a fill pointer (bytes are appended in place; the vector
grows when they do not fit, and OUT-OF-SPACE is signalled only where it
cannot), a string or pathname
naming a file (replaced atomically: a temporary file in the same directory is
written, synced and renamed), or a binary output stream.

With AS-SEPARATE-OBJECTS, DATA is a list whose elements are stored one after
the other; RESTORE returns them as multiple values.  The other keywords
override the special variables of the same names (see their documentation):
TRACK-REFERENCES, SUPPORT-SHARED-LIST-STRUCTURES, OUTPUT-MAGIC-NUMBER,
OUTPUT-END-MARKER, MAX-TO-WRITE, MAX-DEPTH, STORE-CLASS-SLOTS."
  (declare (ignore track-references support-shared-list-structures as-separate-objects
                   output-magic-number output-end-marker max-depth store-class-slots))
  (declare (dynamic-extent options))
  ;; The closures are only called, never kept: on the stack, they cost the
  ;; heap nothing (see store-state.lisp).
  (flet ((encode-to (ob)
           (apply #'encode ob data options)))
    (declare (dynamic-extent #'encode-to))
    (cond ((null place)
           (flet ((encode-to-vector (ob)
                    (encode-to ob)
                    (region-to-vector ob)))
             (declare (dynamic-extent #'encode-to-vector))
             (call-with-region-obuf max-to-write #'encode-to-vector)))
          ((octet-vector-with-fill-pointer-p place)
           (store-into-vector place max-to-write #'encode-to))
          ((or (stringp place) (pathnamep place))
           (store-into-file place max-to-write #'encode-to))
          ((and (streamp place) (output-stream-p place))
           (call-with-stream-obuf place max-to-write #'encode-to)
           place)
          (t (error 'store-error
                    :message (format nil "cannot store to ~s: expected NIL, an octet vector ~
                                          with a fill pointer, a file name or an output stream"
                                     place))))))

(defun store-to-sap (sap size data &rest options
                                   &key (track-references *track-references*)
                                        (support-shared-list-structures
                                         *support-shared-list-structures*)
                                        as-separate-objects
                                        (output-magic-number *output-magic-number*)
                                        (output-end-marker *output-end-marker*)
                                        (max-to-write *max-to-write*)
                                        (max-depth *max-depth*)
                                        (store-class-slots *store-class-slots*))
  "Store DATA in the SIZE bytes of raw memory at SAP; return the number of
bytes written.  When they do not suffice, OUT-OF-SPACE is signalled with the
restart USE-LARGER-SPACE (new-sap new-size), which copies what was written
to the new region and carries on there.  Keywords as for STORE."
  (declare (ignore track-references support-shared-list-structures as-separate-objects
                   output-magic-number output-end-marker max-depth store-class-slots))
  (declare (dynamic-extent options))
  (let ((ob (make-fixed-obuf (sb-sys:sap-int sap) size max-to-write :kind :sap)))
    (declare (dynamic-extent ob))       ; see store-state.lisp
    (apply #'encode ob data options)
    (obuf-total ob)))

;;; Restore -------------------------------------------------------------------

(defun decode (ib max-to-read max-depth intern-symbols)
  (let ((rs (make-restore-state ib :max-depth max-depth
                                   :intern-symbols intern-symbols
                                   :max-alloc max-to-read)))
    (declare (dynamic-extent rs))       ; see restore-state.lisp
    (multiple-value-bind (first others) (read-top-level rs)
      (finish-restore-state rs)
      (if others
          (values-list (cons first others))
          first))))

(defun restore-from-memory (address size max-to-read max-depth intern-symbols)
  "DECODE the SIZE bytes at ADDRESS (pinned by the caller)."
  (let ((ib (make-fixed-ibuf address size max-to-read)))
    (declare (dynamic-extent ib))       ; see restore-state.lisp
    (decode ib max-to-read max-depth intern-symbols)))

(defun restore-from-stream (stream max-to-read max-depth intern-symbols)
  (call-with-stream-ibuf
   stream max-to-read
   (lambda (ib)
     (multiple-value-prog1 (decode ib max-to-read max-depth intern-symbols)
       ;; a file stream was read ahead: put back what the data did not use
       (when (and (typep stream 'file-stream) (plusp (available ib)))
         (file-position stream (- (file-position stream) (available ib))))))))

(defconstant +file-window-bytes+ (* 1024 1024)
  "The largest window a file is read through: fewer reads than a stream's
window of 64 KiB (8 MB of doubles from a file: 1.95 -> 1.4 ms).")

(defun restore-from-file (place max-to-read max-depth intern-symbols)
  "Read the file PLACE's descriptor directly (see CALL-WITH-STREAM-IBUF),
through a window as large as the file, up to +FILE-WINDOW-BYTES+."
  (call-with-file-input
   place
   (lambda (fd size)
     (call-with-stream-ibuf nil max-to-read
                            (lambda (ib) (decode ib max-to-read max-depth intern-symbols))
                            fd
                            (max 4096 (min +file-window-bytes+ size))))))

(defun restore (place &key (max-to-read *max-to-read*) (max-depth *max-depth*)
                           (intern-symbols *intern-symbols*))
  "Restore the object(s) stored in PLACE: an octet vector (up to its fill
pointer), a string or pathname naming a file, or a binary input stream.
Returns the stored object, or one value per object when several were stored
\(AS-SEPARATE-OBJECTS).  Reading stops at the end of the input or at an end
marker.  The keywords override *MAX-TO-READ*, *MAX-DEPTH* and
*INTERN-SYMBOLS*.  Malformed input signals INVALID-INPUT; limits signal
LIMIT-EXCEEDED."
  (cond ((typep place '(simple-array (unsigned-byte 8) (*)))
         (sb-sys:with-pinned-objects (place)
           (restore-from-memory (sb-sys:sap-int (sb-sys:vector-sap place)) (length place)
                                max-to-read max-depth intern-symbols)))
        ((typep place '(vector (unsigned-byte 8)))
         (sb-kernel:with-array-data ((data place) (start 0) (end (length place)))
           (sb-sys:with-pinned-objects (data)
             (restore-from-memory (+ (sb-sys:sap-int (sb-sys:vector-sap data)) start)
                                  (- end start) max-to-read max-depth intern-symbols))))
        ((or (stringp place) (pathnamep place))
         (restore-from-file place max-to-read max-depth intern-symbols))
        ((and (streamp place) (input-stream-p place))
         (restore-from-stream place max-to-read max-depth intern-symbols))
        (t (error 'restore-error
                  :message (format nil "cannot restore from ~s: expected an octet vector, ~
                                        a file name or an input stream" place)))))

(defun restore-from-sap (sap size &key (max-to-read *max-to-read*) (max-depth *max-depth*)
                                       (intern-symbols *intern-symbols*))
  "Restore the object(s) stored in the SIZE bytes of raw memory at SAP (for
example an mmap'ed file).  Keywords and values as for RESTORE."
  (restore-from-memory (sb-sys:sap-int sap) size max-to-read max-depth intern-symbols))
