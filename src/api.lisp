;;;; The public entry points: STORE, RESTORE, STORE-TO-SAP, RESTORE-FROM-SAP,
;;;; MAP-STORED-OBJECTS and DO-STORED-OBJECTS.  Each picks the sink or source
;;;; for its place and runs the encoder or the decoder over it.

(in-package #:binstore)

;;; Encoding to any output buffer -------------------------------------------

(defun check-separate-objects (data)
  "DATA, stored with AS-SEPARATE-OBJECTS, must be a proper list; return its
length."
  (let ((n (and (listp data)
                (handler-case (list-length data) (type-error () nil)))))
    (or n
        (error 'store-error
               :message (format nil "with :as-separate-objects t the data must be a proper ~
                                     list of the objects to store, not ~a" (brief data))))))

(defun encode (ob data &key (track-references *track-references*)
                            (support-shared-list-structures *support-shared-list-structures*)
                            as-separate-objects
                            (output-magic-number *output-magic-number*)
                            (output-end-marker *output-end-marker*)
                            (max-depth *max-depth*)
                            (store-class-slots *store-class-slots*)
                            (dictionary *dictionary*)
                            (progress *progress*)
                            max-to-write compression)
  "Write one record to OB: DATA (or, with AS-SEPARATE-OBJECTS, each element
of the list DATA), reporting to PROGRESS.  Takes every keyword argument of
STORE, to be applied to them as they are; MAX-TO-WRITE and COMPRESSION are
the business of OB's maker."
  (declare (ignore max-to-write compression))
  (if progress
      (call-with-progress progress "stored" nil
                          (lambda (watch)
                            (call-watching watch ob
                                           (lambda ()
                                             (encode-record ob data track-references
                                                            support-shared-list-structures
                                                            as-separate-objects output-magic-number
                                                            output-end-marker max-depth
                                                            store-class-slots dictionary)))))
      (encode-record ob data track-references support-shared-list-structures
                     as-separate-objects output-magic-number output-end-marker max-depth
                     store-class-slots dictionary)))

(defun encode-record (ob data track-references support-shared-list-structures as-separate-objects
                      output-magic-number output-end-marker max-depth store-class-slots dictionary)
  "ENCODE's work: write the record."
  (let ((count (if as-separate-objects (check-separate-objects data) 1))
        (ss (make-store-state ob :track track-references
                                 :lists support-shared-list-structures
                                 :max-depth max-depth
                                 :store-class-slots store-class-slots
                                 :root data)))
    (declare (dynamic-extent ss))       ; see store-state.lisp
    (when output-magic-number
      (write-u8 ob +tag-header+)
      (loop for octet across +header-octets+ do (write-u8 ob octet))
      (write-varint ob +format-version+))
    ;; Without a tracking tag a record tracks objects but not conses.
    (cond ((not track-references) (write-u8 ob +tag-no-tracking+))
          (support-shared-list-structures (write-u8 ob +tag-full-tracking+)))
    (when dictionary
      (check-type dictionary dictionary)
      (write-dictionary-tag ss dictionary))
    (handler-bind ((circular-list
                     (lambda (c)
                       (unless (circular-list-path c)
                         (setf (circular-list-path c) (path-to ss (circular-list-list c)))))))
      (cond ((not as-separate-objects) (write-top-level-object ss data))
            (t
             (unless (= count 1)
               (write-u8 ob +tag-objects+)
               (write-varint ob count))
             (dolist (object data)
               (write-top-level-object ss object)))))
    (when output-end-marker
      (write-u8 ob +tag-end+))
    (finish-store-state ss)
    ob))

(defun keeps-every-identity-p (options)
  "True when the store OPTIONS (a STORE keyword list) keep the identity of
every object, conses included, so the output cannot outgrow the data."
  (and (getf options :track-references *track-references*)
       (getf options :support-shared-list-structures *support-shared-list-structures*)))

(defun runaway-bound ()
  "The most a store without MAX-TO-WRITE may write when it does not keep
every identity: twice the heap in use, and 64 MiB.  Data without sharing
never writes that much (every object is written once, in at most about as
many bytes as it takes in memory), so reaching it means shared structure
written again and again."
  (+ (* 2 (heap-bytes-in-use)) (* 64 1024 1024)))

(defun size-limit (limit)
  "LIMIT, a MAX-TO-READ or MAX-TO-WRITE (NIL or a non-negative integer), as
the readers and writers keep it, an INDEX: a larger one is the largest,
which no store or restore reaches (MOST-POSITIVE-FIXNUM, or a bignum, for
no limit to speak of)."
  (if (and (integerp limit) (> limit +largest-index+)) +largest-index+ limit))

(defun call-with-write-limit (max-to-write options fn)
  "Call FN with the limit a store with OPTIONS writes under: MAX-TO-WRITE,
or, when that is NIL and the options do not keep every identity, the
RUNAWAY-BOUND, whose excess is reported as such."
  (if (or max-to-write (keeps-every-identity-p options))
      (funcall fn (size-limit max-to-write))
      (let ((bound (runaway-bound)))
        (handler-bind ((store-limit-exceeded
                         (lambda (c)
                           (when (eql (limit-exceeded-value c) bound)
                             (error 'store-limit-exceeded
                                    :limit :max-to-write :value bound
                                    :message (format nil "the output passed twice the memory ~
                                                          in use, which only shared structure ~
                                                          written again and again does: store ~
                                                          with :track-references t and ~
                                                          :support-shared-list-structures t ~
                                                          (the defaults)"))))))
          (funcall fn bound)))))

;;; Places ------------------------------------------------------------------

(defun octet-vector-p (x)
  (typep x '(vector (unsigned-byte 8))))

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

(defun grown-size (vector needed)
  "The size to adjust VECTOR to when it must hold NEEDED bytes: at least
half as large again as it is, so that appending record after record costs
time in proportion to the bytes, not to their square."
  (max needed (+ (array-total-size vector) (ash (array-total-size vector) -1)) 64))

(defun store-into-vector (vector limit encode-fn)
  "Append to VECTOR, an octet vector with a fill pointer, writing in place;
return VECTOR."
  (if (and +non-simple-octets-copied-p+ (adjustable-array-p vector))
      (store-appending-copy vector limit encode-fn)
      (store-into-vector-in-place vector limit encode-fn)))

(defun store-appending-copy (vector limit encode-fn)
  "STORE-INTO-VECTOR where the platform reaches a vector that is not simple
only by copying all its elements (+NON-SIMPLE-OCTETS-COPIED-P+): the record
is written into an output region, then copied after VECTOR's fill pointer,
so that appending record after record costs time in proportion to the
bytes, not to the vector's size at each append."
  (flet ((encode-to-vector (ob)
           (funcall encode-fn ob)
           (region-to-vector ob)))
    (declare (dynamic-extent #'encode-to-vector))
    (let* ((record (call-with-region-obuf limit #'encode-to-vector))
           (start (fill-pointer vector))
           (end (+ start (length record))))
      (when (> end (array-total-size vector))
        (setf vector (adjust-array vector (grown-size vector end))))
      (setf (fill-pointer vector) end)
      (replace vector record :start1 start)
      vector)))

(defun store-into-vector-in-place (vector limit encode-fn)
  "STORE-INTO-VECTOR writing into VECTOR's own elements."
  (let* ((start (fill-pointer vector))
         (capacity (- (array-total-size vector) start))
         (sink (make-vector-sink vector))
         ;; its window's base is set once the vector is pinned
         (ob (%make-obuf :capacity capacity :end (first-window-end capacity limit)
                         :limit limit :room-fn #'vector-room :sink sink :holdable t)))
    (declare (dynamic-extent sink ob))  ; see store-state.lisp
    (unwind-protect
         (progn
           (with-octet-vector-address (address vector)
             (setf (obuf-base ob) (+ address start))
             (funcall encode-fn ob))
           (let ((total (obuf-total ob))
                 (direct (vector-sink-direct sink)))
             (when direct
               ;; spilled: grow once, then copy the region after the direct part
               (setf vector (adjust-array vector (grown-size vector (+ start total))))
               (with-octet-vector-address (address vector)
                 (copy-memory (obuf-sap ob) (address-pointer (+ address start direct))
                              (obuf-pos ob))))
             (setf (fill-pointer vector) (+ start total))
             vector))
      (when (region-p (obuf-sink ob))
        (give-back-region (obuf-sink ob))))))

(defun store-into-fixed-vector (vector limit encode-fn)
  "Write into VECTOR, an octet vector without a fill pointer, from its
first element; return the number of bytes written.  OUT-OF-SPACE when it
is too small."
  (with-octet-vector-address (address vector)
    (let ((ob (make-fixed-obuf address (length vector) limit :kind :vector)))
      (declare (dynamic-extent ob))     ; see store-state.lisp
      (funcall encode-fn ob)
      (obuf-total ob))))

(defun store-into-file (place limit encode-fn)
  "Write the file PLACE through CALL-WITH-FILE-OUTPUT; return its pathname."
  (call-with-file-output place (lambda (fd) (call-with-fd-obuf fd limit encode-fn))))

(defun character-stream-p (stream)
  "True for a stream of characters only, which binary data cannot go
through (SBCL's bivalent streams take octets too)."
  (let ((type (stream-element-type stream)))
    (and (not (equal type '(unsigned-byte 8)))  ; the usual case, without SUBTYPEP
         (subtypep type 'character)
         (not (bivalent-stream-p stream)))))

(defun check-binary-stream (stream direction)
  (when (character-stream-p stream)
    (error (if (eq direction :output) 'store-error 'restore-error)
           :message (format nil "~a is a character stream; binstore ~:[reads from~;writes to~] ~
                                 streams of (unsigned-byte 8)"
                            (brief stream) (eq direction :output)))))

;;; Compression -------------------------------------------------------------
;;;
;;; The compressors live in the system binstore/compression (src/compression/),
;;; which binds libzstd and liblz4 and, when loaded, sets *COMPRESSION-HOOK*;
;;; binstore itself needs no C library.  It only recognises a compressed
;;; record by its first four bytes, the frame magic of zstd (28 B5 2F FD) or
;;; of LZ4 (04 22 4D 18), neither of which begins a sequence of binstore
;;; records (src/format/tags.lisp).  A compressed record is one frame (STORE
;;; writes one per record), so records compressed or not follow each other
;;; in any order in one place, and each is recognised where it begins.

(defvar *compression-hook* nil
  "NIL while the system binstore/compression is not loaded (binding it to NIL
makes binstore behave as without it); then the function, set by that
system, through which binstore compresses and decompresses:
- (funcall hook :sink METHOD ARGUMENTS INNER) returns a byte sink that
  compresses the bytes it is given into one METHOD (:zstd or :lz4) frame
  and gives the result to the byte sink INNER.  ARGUMENTS is the property
  list after the method in a :COMPRESSION list (NIL for a bare keyword);
  STORE-ERROR when it is not one the compressor accepts.
- (funcall hook :source METHOD INNER) returns a byte source giving the
  decompressed bytes of the one METHOD frame at the start of INNER, an
  IBUF-SOURCE, of which it consumes exactly the frame's bytes (so what
  follows the frame stays in place).  Malformed, truncated or corrupt
  frames signal INVALID-INPUT with the offset in INNER's place.
- (funcall hook :release OBJECT) frees at once what a sink or source it made
  holds outside the heap, if it still does.  Never signals.")

(defun compression-hook (method direction)
  "The *COMPRESSION-HOOK*, or COMPRESSION-UNAVAILABLE for METHOD when there
is none, its message saying why it was needed: DIRECTION :STORE or
:RESTORE."
  (or *compression-hook*
      (error 'compression-unavailable
             :method method
             :message (format nil "~:[storing with :compression ~(~s~)~*~;the record is ~
                                   ~(~a~)-compressed (it begins with the frame magic ~a), and ~
                                   reading it~] needs the system binstore/compression, which is ~
                                   not loaded~:[, and runs on SBCL and ECL only~;: ~
                                   (asdf:load-system \"binstore/compression\")~]"
                              (eq direction :restore) method
                              (if (eq method :zstd) "28 B5 2F FD" "04 22 4D 18")
                              +machine-addresses-p+))))

(defun compression-method (compression)
  "The method (:ZSTD or :LZ4) and the property list of arguments of
COMPRESSION, a non-NIL value of STORE's :COMPRESSION; STORE-ERROR when it
is neither a method nor a list of a method and an even number of
elements."
  (multiple-value-bind (method arguments)
      (if (consp compression)
          (values (car compression) (cdr compression))
          (values compression nil))
    (let ((length (handler-case (list-length arguments) (type-error () nil))))
      (unless (and (member method '(:zstd :lz4)) length (evenp length))
        (error 'store-error
               :message (format nil ":compression must be NIL, :zstd, :lz4, or a list such as ~
                                     (:zstd :level 9 :workers 2) or (:lz4 :level 9), not ~a"
                                (brief compression)))))
    (values method arguments)))

(defun call-with-compressing-obuf (ob compression limit fn)
  "Call FN with an OBUF whose bytes, at most LIMIT of them (NIL: no limit),
are compressed as COMPRESSION (a non-NIL value of STORE's :COMPRESSION)
says, into one frame written to OB, ended when FN returns.  The
compressor's C context is freed however FN exits."
  (multiple-value-bind (method arguments) (compression-method compression)
    (let ((sink (funcall (compression-hook method :store) :sink method arguments
                        (make-obuf-sink ob))))
      (call-with-byte-sink-obuf sink limit fn))))

(defun frame-magic-at (ib)
  "The compression whose frame magic the four bytes at IB's position are,
or NIL; fewer than four bytes left is NIL.  Reads more bytes as the
decoder would, never signalling."
  (when (and (< (available ib) 4) (ibuf-refill-fn ib))
    (funcall (ibuf-refill-fn ib) ib 4))
  (and (>= (available ib) 4)
       (frame-magic-method (mem-u32 (ibuf-sap ib) (ibuf-pos ib)))))

(declaim (inline compression-at))
(defun compression-at (ib)
  "The compression (:ZSTD or :LZ4) of the frame beginning at IB's position,
where SKIP-TO-RECORD has just found a record (so its first byte is in the
window), or NIL for a record that is not compressed.  A record with
binstore's header costs one comparison of that byte."
  (let ((first (mem-u8 (ibuf-sap ib) (ibuf-pos ib))))
    (and (or (= first (ldb (byte 8 0) +zstd-frame-magic+))
             (= first (ldb (byte 8 0) +lz4-frame-magic+)))
         (frame-magic-at ib))))

(defun note-frame-offset (condition ib method frame-offset)
  "CONDITION, a RESTORE-ERROR signalled while the METHOD frame at
FRAME-OFFSET of IB's place was being read, takes the offset in the place
where the frame is being read (IB's), so that every offset counts bytes of
the place; one about the decompressed bytes (its offset is not that one)
says in its message where in them it was found.  Done in place, so that
the restarts of the condition stay with it."
  (let ((inner (restore-error-offset condition))
        (here (ibuf-offset ib)))
    (unless (or (null inner) (eql inner here))
      (setf (slot-value condition 'offset) here)
      (when (binstore-error-message condition)
        (setf (slot-value condition 'message)
              (format nil "~a (at byte ~d of what the ~(~a~) frame at byte ~d decompresses to)"
                      (binstore-error-message condition) inner method frame-offset))))))

(defun call-with-decompressing-ibuf (ib method limit fn)
  "Call FN with an IBUF over the decompressed bytes of the METHOD frame at
IB's position, at most LIMIT of them (NIL: no limit: the allowance of
MAX-TO-READ counts decompressed bytes); return FN's values.  IB is left
just after the compressed bytes the decompressor used, all of the frame's
once FN has read to the end of the IBUF it was given.  A RESTORE-ERROR
signalled meanwhile carries the offset in IB's place where the frame was
being read (NOTE-FRAME-OFFSET).  The decompressor's C context is freed
however FN exits."
  (let ((hook (compression-hook method :restore))
        (frame-offset (ibuf-offset ib))
        (noted '())
        (source nil))
    (unwind-protect
         (handler-bind ((restore-error
                          (lambda (condition)
                            (unless (member condition noted)
                              (push condition noted)
                              (note-frame-offset condition ib method frame-offset)))))
           (setf source (funcall hook :source method (make-ibuf-source ib)))
           (call-with-byte-source-ibuf source limit fn))
      (when source
        (funcall hook :release source)))))

;;; Store ---------------------------------------------------------------------

(defun store (place data &rest options
                         &key (track-references *track-references*)
                              (support-shared-list-structures *support-shared-list-structures*)
                              as-separate-objects
                              (output-magic-number *output-magic-number*)
                              (output-end-marker *output-end-marker*)
                              (max-to-write *max-to-write*)
                              (max-depth *max-depth*)
                              (store-class-slots *store-class-slots*)
                              (dictionary *dictionary*)
                              (progress *progress*)
                              (compression *compression*))
  "Store DATA in PLACE as one record, which one RESTORE reads back.

PLACE is
- NIL: a fresh (simple-array (unsigned-byte 8) (*)) is returned;
- an octet vector with a fill pointer: the record is appended at the fill
  pointer and the vector is returned.  When it does not fit, the vector
  grows (geometrically); OUT-OF-SPACE where it cannot;
- an octet vector without a fill pointer: the record is written from its
  first element and the number of bytes written is returned; OUT-OF-SPACE
  when it is too small;
- a string or pathname naming a file: replaced atomically (a temporary file
  in the same directory is written, synced and renamed over it); a symbolic
  link is followed, a FIFO or character device is written through.  Returns
  the pathname.  BINSTORE-FILE-ERROR when the file cannot be written;
- a binary output stream: the record is written at its position and the
  stream is returned;
- a byte sink (BYTE-SINK: a filter such as a compressor, or an
  OCTETS-SINK): the record is given to it block by block (SINK-WRITE), then
  SINK-FINISH's value is returned.

With AS-SEPARATE-OBJECTS, DATA is a proper list whose elements are stored
one after the other in the record (sharing identity); RESTORE returns them
as multiple values, MAP-STORED-OBJECTS one by one.  The other keywords
override the special variables of the same names, whose documentation
says what each does: TRACK-REFERENCES, SUPPORT-SHARED-LIST-STRUCTURES,
OUTPUT-MAGIC-NUMBER, OUTPUT-END-MARKER, MAX-TO-WRITE, MAX-DEPTH,
STORE-CLASS-SLOTS, DICTIONARY, PROGRESS, COMPRESSION.

With COMPRESSION (see *COMPRESSION*), the record is compressed into one
zstd or LZ4 frame, which goes to PLACE as the record would, and STORE
returns what it would; MAX-TO-WRITE then bounds the compressed bytes.

Signals UNSTORABLE-OBJECT (with the path to the object), CIRCULAR-LIST,
STORE-LIMIT-EXCEEDED, OUT-OF-SPACE, BINSTORE-FILE-ERROR, STORE-ERROR, or
COMPRESSION-UNAVAILABLE."
  (declare (ignore track-references support-shared-list-structures as-separate-objects
                   output-magic-number output-end-marker max-depth store-class-slots
                   dictionary progress))
  (declare (dynamic-extent options))
  ;; The closures are only called, never kept: on the stack, they cost the
  ;; heap nothing (see store-state.lisp).
  (flet ((encode-plain (ob)
           (apply #'encode ob data options)))
    (declare (dynamic-extent #'encode-plain))
    (flet ((encode-to (ob)
             (if compression
                 ;; the runaway bound, when it is the limit, bounds the
                 ;; record before compression too
                 (call-with-compressing-obuf ob compression
                                             (and (null max-to-write) (obuf-limit ob))
                                             #'encode-plain)
                 (encode-plain ob))))
      (declare (dynamic-extent #'encode-to))
      (flet ((store-under (limit)
               (cond ((null place)
                      (flet ((encode-to-vector (ob)
                               (encode-to ob)
                               (region-to-vector ob)))
                        (declare (dynamic-extent #'encode-to-vector))
                        (call-with-region-obuf limit #'encode-to-vector)))
                     ((and (octet-vector-p place) (array-has-fill-pointer-p place))
                      (store-into-vector place limit #'encode-to))
                     ((octet-vector-p place)
                      (store-into-fixed-vector place limit #'encode-to))
                     ((or (stringp place) (pathnamep place))
                      (store-into-file place limit #'encode-to))
                     ((and (streamp place) (output-stream-p place))
                      (check-binary-stream place :output)
                      (call-with-stream-obuf place limit #'encode-to)
                      place)
                     ((typep place 'byte-sink)
                      (call-with-byte-sink-obuf place limit #'encode-to))
                     (t (error 'store-error
                               :message (format nil "cannot store to ~a: expected NIL, an octet ~
                                                     vector, a file name, a binary output stream ~
                                                     or a byte sink"
                                                (brief place)))))))
        (declare (dynamic-extent #'store-under))
        (call-with-write-limit max-to-write options #'store-under)))))

(defun store-to-sap (sap size data &rest options
                                   &key (track-references *track-references*)
                                        (support-shared-list-structures
                                         *support-shared-list-structures*)
                                        as-separate-objects
                                        (output-magic-number *output-magic-number*)
                                        (output-end-marker *output-end-marker*)
                                        (max-to-write *max-to-write*)
                                        (max-depth *max-depth*)
                                        (store-class-slots *store-class-slots*)
                                        (dictionary *dictionary*)
                                        (progress *progress*)
                                        (compression *compression*))
  "Store DATA as one record in the SIZE bytes of raw memory at SAP; return
the number of bytes written.  When they do not suffice, OUT-OF-SPACE is
signalled with the restart USE-LARGER-SPACE (new-sap new-size), which
copies what was written to the new region and carries on there.  Keywords
and other conditions as for STORE."
  (declare (ignore track-references support-shared-list-structures as-separate-objects
                   output-magic-number output-end-marker max-depth store-class-slots
                   dictionary progress))
  (declare (dynamic-extent options))
  (flet ((encode-plain (ob)
           (apply #'encode ob data options)))
    (declare (dynamic-extent #'encode-plain))
    (flet ((store-under (limit)
             (let ((ob (make-fixed-obuf (pointer-address sap) size limit :kind :sap)))
               (declare (dynamic-extent ob)) ; see store-state.lisp
               (if compression
                   (call-with-compressing-obuf ob compression (and (null max-to-write) limit)
                                               #'encode-plain)
                   (encode-plain ob))
               (obuf-total ob))))
      (declare (dynamic-extent #'store-under))
      (call-with-write-limit max-to-write options #'store-under))))

;;; Restore -------------------------------------------------------------------

(defconstant +max-values+ (min (1- multiple-values-limit) 1024)
  "The most objects RESTORE returns as values: a record holding more is read
with MAP-STORED-OBJECTS.  Values live on the control stack.  1024, or one
less than the Lisp's MULTIPLE-VALUES-LIMIT, an exclusive bound (ECL's is
64, so 63 there).")

(defun decode-record (ib fn max-to-read max-depth intern-symbols require-header max-count)
  "Read the record at IB's position (one follows), calling FN with each of
its top-level objects; return their number."
  (let ((rs (make-restore-state ib :max-depth max-depth
                                   :intern-symbols intern-symbols
                                   :max-alloc max-to-read)))
    (declare (dynamic-extent rs))       ; see restore-state.lisp
    (with-stack-overflow-refused (ib)   ; on SBCL its body itself
      (prog1 (read-record rs fn :require-header require-header :max-count max-count)
        (finish-restore-state rs)))))

(declaim (inline restore-values))      ; RESTORE's path is as it was without compression
(defun restore-values (ib max-to-read max-depth intern-symbols require-header)
  "The values of the record at IB's position (SKIP-TO-RECORD found one)."
  (let ((first nil) (others '()) (count 0))
    (declare (type index count))
    (flet ((collect (object)
             (if (zerop count)
                 (setf first object)
                 (push object others))
             (incf count)))
      (declare (dynamic-extent #'collect))
      (decode-record ib #'collect max-to-read max-depth intern-symbols require-header
                     +max-values+))
    (case count
      (1 first)
      (0 (values))
      (t (values-list (cons first (nreverse others)))))))

(defun restore-compressed-values (ib method max-to-read max-depth intern-symbols require-header)
  "The values of the record compressed in the METHOD frame at IB's
position, which is read to its end (its checksum checked, IB left after
it).  A frame that holds no record, or more than one, is INVALID-INPUT:
STORE writes one record per frame."
  (flet ((restore-frame (inner)
           (unless (skip-to-record inner)
             (error 'invalid-input :offset (ibuf-offset inner)
                                   :message (format nil "the ~(~a~) frame holds no record" method)
                                   :expected "a record"))
           (multiple-value-prog1
               (restore-values inner max-to-read max-depth intern-symbols require-header)
             (when (skip-to-record inner)
               (error 'invalid-input
                      :offset (ibuf-offset inner)
                      :message (format nil "the ~(~a~) frame holds more than one record ~
                                            (read them with MAP-STORED-OBJECTS)"
                                       method)
                      :expected "the end of the frame")))))
    (declare (dynamic-extent #'restore-frame))
    (call-with-decompressing-ibuf ib method max-to-read #'restore-frame)))

(defun restore-record (ib max-to-read max-depth intern-symbols require-header
                       eof-error-p eof-value)
  "RESTORE's work on any source: the values of the record at IB's position,
decompressed when it is a zstd or LZ4 frame, or EOF-VALUE (or END-OF-DATA)
when there is none."
  (if (not (skip-to-record ib))
      (if eof-error-p
          (error 'end-of-data :offset (ibuf-offset ib)
                              :message "no data left to restore")
          eof-value)
      (let ((method (compression-at ib)))
        (if method
            (restore-compressed-values ib method max-to-read max-depth intern-symbols
                                       require-header)
            (restore-values ib max-to-read max-depth intern-symbols require-header)))))

(defun call-with-memory-ibuf (address size limit fn)
  "Call FN with an IBUF over the SIZE bytes at ADDRESS (pinned by the caller)."
  (let ((ib (make-fixed-ibuf address size limit)))
    (declare (dynamic-extent ib))       ; see restore-state.lisp
    (funcall fn ib)))

;;; A file is read with read(2) straight into the window: one copy of every
;;; byte, where a Lisp stream makes two, into its own buffer and then into
;;; the window (8 MB: 0.35 ms against 1.0); and through a window of up to
;;; 1 MiB, fewer reads than a stream's 64 KiB (8 MB of doubles: 1.4 ms
;;; against 1.95).  A large array's payload, past an empty window, is
;;; read(2) straight into the array (READ-OCTETS-TO-ADDRESS's direct read:
;;; 8 MB of doubles 1.7-2.2 ms against 3.3).

(defconstant +file-window-bytes+ (* 1024 1024)
  "The largest window a file is read through.")

(defun call-with-file-ibuf (place limit fn)
  "Call FN with an IBUF reading the file PLACE's descriptor, through a
window as large as the file, up to +FILE-WINDOW-BYTES+; return FN's
values."
  (call-with-file-input
   place
   (lambda (fd size)
     (let ((source (make-fd-source fd t)))
       (declare (dynamic-extent source))
       (call-with-byte-source-ibuf source limit fn
                                   :size (max 4096 (min +file-window-bytes+ size)))))))

(defun call-with-input-stream-ibuf (stream limit fn)
  "Call FN with an IBUF reading STREAM.  What was read ahead of the data
FN used is put back where the stream can seek."
  (check-binary-stream stream :input)
  (flet ((call-and-put-back (ib)
           (multiple-value-prog1 (funcall fn ib)
             (when (plusp (available ib))
               (file-position stream (- (file-position stream) (available ib)))))))
    (declare (dynamic-extent #'call-and-put-back))
    (let ((source (make-stream-source stream)))
      (declare (dynamic-extent source))
      (call-with-byte-source-ibuf source limit #'call-and-put-back))))

(defun call-with-place-ibuf (place limit fn)
  "Call FN with an IBUF reading PLACE, any place RESTORE takes."
  (cond ((typep place 'simple-octet-vector) ; on SBCL (SIMPLE-ARRAY (UNSIGNED-BYTE 8) (*))
         (with-pinned-objects (place)
           (call-with-memory-ibuf (pointer-address (vector-pointer place)) (length place)
                                  limit fn)))
        ((octet-vector-p place)
         (with-octet-vector-address (address place)
           (call-with-memory-ibuf address (length place) limit fn)))
        ((or (stringp place) (pathnamep place))
         (call-with-file-ibuf place limit fn))
        ((and (streamp place) (input-stream-p place))
         (call-with-input-stream-ibuf place limit fn))
        ((typep place 'byte-source)
         (call-with-byte-source-ibuf place limit fn))
        (t (error 'restore-error
                  :message (format nil "cannot restore from ~a: expected an octet vector, ~
                                        a file name, a binary input stream or a byte source"
                                   (brief place))))))

(defun restore (place &key (max-to-read *max-to-read*) (max-depth *max-depth*)
                           (intern-symbols *intern-symbols*)
                           (require-header *require-header*)
                           ((:dictionary *dictionary*) *dictionary*)
                           (progress *progress*)
                           (eof-error-p t) eof-value)
  "Restore the record at the start of PLACE: an octet vector (up to its fill
pointer), a string or pathname naming a file, a binary input stream
\(from its position, which is left just after the record, so that each
RESTORE reads what one STORE wrote), or a byte source (BYTE-SOURCE: a
filter such as a decompressor; a greedy one may have been read past the
record).  Returns the stored object, or one
value per object of a record stored with AS-SEPARATE-OBJECTS (at most
+MAX-VALUES+; more signal RESTORE-LIMIT-EXCEEDED: read them with
MAP-STORED-OBJECTS).  Bytes after the record are not read.

Where no record is left (an empty vector or file, a stream at its end),
signals END-OF-DATA, or returns EOF-VALUE when EOF-ERROR-P is NIL.  The
other keywords override *MAX-TO-READ*, *MAX-DEPTH*, *INTERN-SYMBOLS*,
*REQUIRE-HEADER*, *DICTIONARY* and *PROGRESS* (the bytes in all are known
for a vector or a file).

A record compressed by STORE (a zstd or LZ4 frame: see *COMPRESSION*) is
recognised by its first four bytes and decompressed as it is read, in
blocks, never whole; the frame is read to its end (its checksum checked)
and must hold one record.  MAX-TO-READ then bounds the decompressed bytes
\(and, separately, the compressed ones).

Signals NOT-BINSTORE-DATA for input that is not binstore data,
INVALID-INPUT (TRUNCATED-INPUT, UNSUPPORTED-VERSION) for malformed input,
RESTORE-LIMIT-EXCEEDED, MISSING-PACKAGE, MISSING-SYMBOL, MISSING-CLASS or
MISSING-SLOT, MISSING-CODEC (with restarts), DICTIONARY-MISMATCH,
BINSTORE-FILE-ERROR, or
COMPRESSION-UNAVAILABLE for compressed input without binstore/compression
loaded.  Offsets count bytes from where the restore began: the start of a
vector or file, the stream's position; inside a compressed record, the
offset of the compressed bytes being read when the problem was found (a
problem with the record the frame holds also says, in its message, where
in the decompressed bytes)."
  (let ((max-to-read (size-limit max-to-read)))
    (if progress
        (call-with-progress progress "restored" (place-size place)
                            (lambda (watch)
                              (call-with-place-ibuf
                               place max-to-read
                               (lambda (ib)
                                 (call-watching watch ib
                                                (lambda ()
                                                  (restore-record ib max-to-read max-depth
                                                                  intern-symbols require-header
                                                                  eof-error-p eof-value)))))))
        (flet ((restore-from (ib)
                 (restore-record ib max-to-read max-depth intern-symbols require-header
                                 eof-error-p eof-value)))
          (declare (dynamic-extent #'restore-from))
          (call-with-place-ibuf place max-to-read #'restore-from)))))

(defun place-size (place)
  "The bytes of PLACE, an octet vector or a file name, or NIL (a stream, a
byte source, a file that cannot be read)."
  (cond ((octet-vector-p place) (length place))
        ((or (stringp place) (pathnamep place))
         (ignore-errors
          (with-open-file (in place :element-type '(unsigned-byte 8))
            (file-length in))))))

(defun restore-from-sap (sap size &key (max-to-read *max-to-read*) (max-depth *max-depth*)
                                       (intern-symbols *intern-symbols*)
                                       (require-header *require-header*)
                                       ((:dictionary *dictionary*) *dictionary*)
                                       (progress *progress*)
                                       (eof-error-p t) eof-value)
  "Restore the record at the start of the SIZE bytes of raw memory at SAP
\(for example an mmap'ed file).  Bytes after the record are not read.
Keywords, values and conditions as for RESTORE."
  (let ((max-to-read (size-limit max-to-read)))
    (flet ((restore-from (ib)
             (restore-record ib max-to-read max-depth intern-symbols require-header
                             eof-error-p eof-value)))
      (declare (dynamic-extent #'restore-from))
      (if progress
          (call-with-progress progress "restored" size
                              (lambda (watch)
                                (call-with-memory-ibuf (pointer-address sap) size max-to-read
                                                       (lambda (ib)
                                                         (call-watching watch ib
                                                                        (lambda ()
                                                                          (restore-from ib)))))))
          (call-with-memory-ibuf (pointer-address sap) size max-to-read #'restore-from)))))

;;; Every record ------------------------------------------------------------------

(defun start-record-allowance (ib max-to-read)
  "Let the record at IB's position read MAX-TO-READ bytes more, whatever
the records before it read."
  (setf (ibuf-limit ib) (and max-to-read (+ (ibuf-offset ib) max-to-read))
        (ibuf-cut-by-limit ib) nil)
  (unless (ibuf-refill-fn ib)
    ;; a region in memory: its window ends at the limit or at its end
    (let ((size (ibuf-size ib)))
      (setf (ibuf-end ib) (if (and max-to-read (> size (+ (ibuf-pos ib) max-to-read)))
                              (progn (setf (ibuf-cut-by-limit ib) t)
                                     (+ (ibuf-pos ib) max-to-read))
                              size)))))

(defun map-stored-objects (function place &key (max-to-read *max-to-read*)
                                               (max-depth *max-depth*)
                                               (intern-symbols *intern-symbols*)
                                               (require-header *require-header*)
                                               ((:dictionary *dictionary*) *dictionary*)
                                               (progress *progress*))
  "Call FUNCTION with each top-level object stored in PLACE, record after
record, in order, until the end of the input; return NIL.  PLACE is any
place RESTORE takes.  Each record is read as RESTORE reads it: MAX-TO-READ
bounds each record, not the whole input, and a record stored with
AS-SEPARATE-OBJECTS gives each of its objects, however many.  Compressed
records (see RESTORE) may come between the others: each frame's records
are read in turn, MAX-TO-READ bounding each record's decompressed bytes
and each frame's compressed ones.  Conditions as for RESTORE (never
END-OF-DATA)."
  (let ((max-to-read (size-limit max-to-read)))
    (labels ((map-records (ib)
               (loop while (skip-to-record ib)
                     do (start-record-allowance ib max-to-read)
                        (let ((method (compression-at ib)))
                          (if method
                              (call-with-decompressing-ibuf ib method max-to-read #'map-frame)
                              (decode-record ib function max-to-read max-depth intern-symbols
                                             require-header nil)))))
             (map-frame (inner)
               ;; the records of one frame: never a frame within it
               (loop while (skip-to-record inner)
                     do (start-record-allowance inner max-to-read)
                        (decode-record inner function max-to-read max-depth intern-symbols
                                       require-header nil))))
      (declare (dynamic-extent #'map-records #'map-frame))
      (if progress
          (call-with-progress progress "read" (place-size place)
                              (lambda (watch)
                                (call-with-place-ibuf place max-to-read
                                                      (lambda (ib)
                                                        (call-watching watch ib
                                                                       (lambda ()
                                                                         (map-records ib)))))))
          (call-with-place-ibuf place max-to-read #'map-records))
      nil)))

(defmacro do-stored-objects ((var place &rest options) &body body)
  "Evaluate BODY with VAR bound to each top-level object stored in PLACE,
record after record (see MAP-STORED-OBJECTS, which takes OPTIONS); return
NIL.  BODY may RETURN from an implicit block NIL."
  `(block nil
     (map-stored-objects (lambda (,var) ,@body) ,place ,@options)))
