;;;; What the compressing sinks and decompressing sources of zstd and LZ4
;;;; share: a C context owned by a Lisp object, given back exactly once,
;;;; the buffer they work through, and the loop that decompresses a byte
;;;; source block by block.
;;;;
;;;; A C context is taken when the filter is first used, not when it is
;;;; made, so a filter that is never used holds nothing.  It is given back
;;;; as soon as its work is over: by SINK-FINISH and SINK-ABORT (which STORE
;;;; always calls, one or the other), by a source at the end of its data or
;;;; at the first error it signals, and by RELEASE-COMPRESSION-CONTEXT
;;;; (which RESTORE calls however it exits).  A filter abandoned without any
;;;; of these (a program that calls SINK-WRITE itself and then drops the
;;;; sink) gives its context back when the collector finds the filter
;;;; garbage.  Contexts are taken and given back with interrupts deferred,
;;;; so that an interrupt that leaves by a non-local exit never loses one
;;;; nor gives one back twice.
;;;;
;;;; Why contexts and buffers are kept: making them costs a small store or
;;;; restore far more than its compression.  A 128 KiB buffer made afresh
;;;; costs about 37 µs (allocation, zeroing, page faults), a zstd context
;;;; 10 µs and then the allocation and clearing of its tables on first use;
;;;; compressing a 60-byte message took 92 µs with zstd, 73 µs with LZ4.  So
;;;; one context of each kind given back is kept, and one buffer; a kept
;;;; context is made ready for a new frame (reset) when it is taken again.
;;;; A zstd context that ran workers is freed, never kept: resetting one
;;;; whose threads still work on an abandoned frame is how zstd's own users
;;;; have corrupted memory, and freeing it waits for them.
;;;; Both are let go when the image is saved: a context's memory is the C
;;;; library's, which the next process does not have.

(in-package #:binstore)

(define-global **contexts-held** (list 0)
  "In its CAR, the number of C contexts the filters hold now (taken and not
yet given back), in every thread: for tests, which check that none is left
behind.")

(defun compression-contexts-held ()
  "The number of C contexts the compression filters hold now."
  (car **contexts-held**))

(defstruct (context-kind (:constructor make-context-kind (name create reset free)))
  "How C contexts of one kind are made (CREATE, of no arguments, returns
the pointer or signals, holding nothing), made ready for a new frame
\(RESET, of the pointer, true when it worked) and freed (FREE, of the
pointer).  SPARE, in its CAR, holds a context given back and kept, or NIL."
  (name "" :type string :read-only t)
  (create nil :type function :read-only t)
  (reset nil :type function :read-only t)
  (free nil :type function :read-only t)
  (spare (list nil) :type cons :read-only t))

(define-global **context-kinds** '()
  "Every CONTEXT-KIND made by DEFINE-CONTEXT-KIND, for FREE-SPARE-CONTEXTS.")

(defmacro define-context-kind (variable name &key create reset free)
  "Define VARIABLE, a global, as the CONTEXT-KIND called NAME (a string)
with the functions CREATE, RESET and FREE (forms, evaluated once when the
file is loaded)."
  `(progn
     (define-load-time-global ,variable (make-context-kind ,name ,create ,reset ,free)
       ,(format nil "The kind of C context: ~a." name))
     (setf **context-kinds**
           (cons ,variable (remove ,name **context-kinds** :key #'context-kind-name
                                                          :test #'string=)))
     ',variable))

(defun take-context (kind)
  "A context of KIND, the caller's alone: the kept one made ready for a new
frame, or a new one.  Signals (holding nothing) when none can be made."
  (let* ((cell (context-kind-spare kind))
         (spare (car cell)))
    (cond ((not (and spare (eq spare (compare-and-swap (car cell) spare nil))))
           (funcall (context-kind-create kind)))
          ((funcall (context-kind-reset kind) spare)
           spare)
          (t
           (funcall (context-kind-free kind) spare)
           (funcall (context-kind-create kind))))))

(defun give-back-context (kind pointer keep)
  "The context POINTER of KIND is no longer used: keep it when KEEP is true
and no other of its kind is kept, else free it.  Never signals."
  (unless (and keep
               (null (compare-and-swap (car (context-kind-spare kind)) nil pointer)))
    (funcall (context-kind-free kind) pointer)))

(defun free-spare-contexts ()
  "Free the kept context of every kind."
  (dolist (kind **context-kinds**)
    (let* ((cell (context-kind-spare kind))
           (spare (car cell)))
      (when (and spare (eq spare (compare-and-swap (car cell) spare nil)))
        (funcall (context-kind-free kind) spare)))))

(defstruct (context-cell (:constructor make-context-cell ()))
  "Holds a filter's C context, POINTER (or NIL when there is none), its
KIND, and whether it may be KEPT for another filter once given back (not a
zstd context that ran workers: zstd's threads may still hold the jobs of a
frame it abandoned, and only freeing the context waits for them).  The
filter's finalizer refers to the cell, never to the filter."
  (pointer nil)
  (kind nil)
  (keep t))

(defun release-cell (cell)
  "Give back the context CELL holds, if it does, once.  Never signals."
  (without-interrupts
    (let ((pointer (context-cell-pointer cell)))
      (when pointer
        (setf (context-cell-pointer cell) nil)
        (give-back-context (context-cell-kind cell) pointer (context-cell-keep cell))
        (atomic-incf (car **contexts-held**) -1))))
  nil)

(defun fill-cell (owner cell kind)
  "Take a context of KIND (TAKE-CONTEXT) and keep it in CELL; arrange for it
to be given back when OWNER, the filter, becomes garbage.  Return the
pointer."
  (without-interrupts
    (let ((pointer (take-context kind)))
      (setf (context-cell-kind cell) kind
            (context-cell-pointer cell) pointer)
      (atomic-incf (car **contexts-held**))))
  (call-when-collected owner (lambda () (release-cell cell)))
  (context-cell-pointer cell))

(defconstant +filter-buffer-bytes+ (* 128 1024)
  "The size of the buffer a compressing sink writes its output to, and of
the one a decompressing source reads its input into (when its inner source
is not a restore's own, which it reads in place).")

(define-global **spare-filter-buffer** (list nil)
  "In its CAR, a filter buffer given back and kept, or NIL.")

(defun take-filter-buffer ()
  "An octet vector of +FILTER-BUFFER-BYTES+, the caller's alone: the kept
one, or a new one.  What it held is never read: it is written first."
  (let* ((cell **spare-filter-buffer**)
         (spare (car cell)))
    (if (and spare (eq spare (compare-and-swap (car cell) spare nil)))
        spare
        (make-array +filter-buffer-bytes+ :element-type '(unsigned-byte 8)))))

(defun give-back-filter-buffer (buffer)
  "BUFFER (from TAKE-FILTER-BUFFER, or NIL) is no longer used: keep it when
no other is kept."
  (when buffer
    (compare-and-swap (car **spare-filter-buffer**) nil buffer))
  nil)

(defun let-spares-go ()
  "Let the kept filter buffer and contexts go (the image is being saved)."
  (setf (car **spare-filter-buffer**) nil)
  (free-spare-contexts))

(call-before-image-save 'let-spares-go)

;;; ------------------------------------------------------------------
;;; Compressing sinks

(defstruct (compressing-sink (:include filter-sink) (:constructor nil))
  "A filter sink that compresses what it is given into one frame, written to
INNER through OUTPUT, a buffer of +FILTER-BUFFER-BYTES+.  STATE is :NEW
\(no context yet), :OPEN, or :CLOSED once finished or aborted.  With
SHUFFLE, the frame's content is a shuffle container (shuffle.lisp): OFFSET
counts the bytes given so far, RANGES holds the payloads the encoder noted,
\(start end width) from RANGE-HEAD on, and SCRATCH the bytes of a chunk
shuffled.  A shuffle run is open when RUN-WIDTH is not 0: the record's
bytes from the start of a payload on, through the payloads of that width
that follow it closely, gather in RUN (RUN-FILL of them) to be shuffled as
one chunk; RUN-UNTIL is the offset where the last payload taken in ends."
  (cell (make-context-cell) :type context-cell)
  (output nil)
  (state :new)
  (shuffle nil)
  (offset 0 :type index)
  (ranges nil)
  (range-head 0 :type index)
  (scratch (make-array 0 :element-type '(unsigned-byte 8))
   :type (simple-array (unsigned-byte 8) (*)))
  (run (make-array 0 :element-type '(unsigned-byte 8))
   :type (simple-array (unsigned-byte 8) (*)))
  (run-fill 0 :type index)
  (run-width 0 :type (member 0 2 4 8))
  (run-until 0 :type index))

(defgeneric compress-octets (sink octets start end)
  (:documentation "Compress the bytes of OCTETS from START below END, the
next of SINK's frame's content, giving the output to the sink SINK
wraps (SINK-WRITE does, directly or through the shuffle container)."))

(defgeneric open-compressor (sink)
  (:documentation "Make SINK's C context (FILL-CELL) and begin its frame;
return the context."))

(defun compressor-context (sink)
  "SINK's C context, made when it is first needed; STORE-ERROR once SINK
was finished or aborted."
  (case (compressing-sink-state sink)
    (:open (context-cell-pointer (compressing-sink-cell sink)))
    (:new
     (setf (compressing-sink-output sink) (take-filter-buffer))
     (prog1 (open-compressor sink)
       (setf (compressing-sink-state sink) :open)))
    (t (error 'store-error
              :message (format nil "~a was finished or aborted: a compressing sink takes ~
                                    one store" (brief sink))))))

(defun give-output (sink count)
  "Give the first COUNT bytes of SINK's output buffer to the sink it wraps."
  (when (plusp count)
    (sink-write (filter-sink-inner sink) (compressing-sink-output sink) 0 count)))

(defun close-compressor (sink)
  (setf (compressing-sink-state sink) :closed)
  (release-cell (compressing-sink-cell sink))
  (give-back-filter-buffer (shiftf (compressing-sink-output sink) nil)))

(defmethod sink-abort ((sink compressing-sink))
  (close-compressor sink)
  (call-next-method))

;;; ------------------------------------------------------------------
;;; Decompressing sources

(defstruct (decompressing-source (:include filter-source) (:constructor nil))
  "A filter source that decompresses the frames its INNER source holds.
With SINGLE-FRAME, one frame only, of which it consumes exactly the bytes
(INNER is then a restore's IBUF-SOURCE, read in place); otherwise frame
after frame until INNER ends, reading INNER in blocks into BUFFER, from
IN-POS below IN-END.  STATE is :FRAME-START (between frames), :IN-FRAME,
:DONE (the end of the data), or :FAILED (FAILURE, the condition signalled,
is signalled again).  HINT is the number of input bytes the library last
said it needed (never past the end of a well-formed frame); STARVED is true
when the last step made no progress without more input.  CONSUMED counts
the compressed bytes used, from BASE-OFFSET in the place, for messages."
  (cell (make-context-cell) :type context-cell)
  (buffer nil)
  (in-pos 0 :type index)
  (in-end 0 :type index)
  (hint 1 :type index)
  (state :frame-start)
  (starved nil)
  (single-frame nil)
  (consumed 0 :type index)
  (base-offset 0 :type index)
  (failure nil))

(defgeneric open-decompressor (source)
  (:documentation "Make SOURCE's C context (FILL-CELL); return it."))

(defgeneric decompressor-step (source context in-address in-count out-pointer out-count)
  (:documentation "Decompress from the IN-COUNT bytes at the address
IN-ADDRESS (an integer) into the OUT-COUNT bytes at OUT-POINTER with
CONTEXT: return the bytes of input used, the bytes of output made, and the
library's result: 0 at the end of a frame, else a hint of the input it
needs next, or an error code (DECOMPRESSOR-ERROR says); with an error, a
fourth value may say where in the step's input the damage was found (the
step's start when it does not)."))

(defgeneric decompressor-error (source code)
  (:documentation "The library's name for the error CODE, a result of
DECOMPRESSOR-STEP, or NIL when CODE is not an error."))

(defgeneric frame-header-bytes (source)
  (:documentation "The fewest bytes a frame's header has: how many to read
at the start of a frame from a source that is not greedy."))

(defgeneric method-name (filter)
  (:documentation "\"zstd\" or \"LZ4\", for messages."))

(defmethod source-greedy-p ((source decompressing-source))
  ;; reading ahead inside one frame never reads past it
  (or (decompressing-source-single-frame source)
      (source-greedy-p (filter-source-inner source))))

(defun decompressor-context (source)
  (or (context-cell-pointer (decompressing-source-cell source))
      (progn
        (setf (decompressing-source-hint source) (frame-header-bytes source))
        (unless (or (ibuf-source-p (filter-source-inner source))
                    (decompressing-source-buffer source))
          (setf (decompressing-source-buffer source) (take-filter-buffer)))
        (open-decompressor source))))

(defun end-decompression (source state &optional failure)
  "SOURCE's data ended (STATE :DONE) or failed (STATE :FAILED, with the
condition FAILURE): free its context and buffer."
  (setf (decompressing-source-state source) state
        (decompressing-source-failure source) failure)
  (give-back-filter-buffer (shiftf (decompressing-source-buffer source) nil))
  (release-cell (decompressing-source-cell source)))

(defun decompression-failure (source type message expected &optional (further 0))
  "Signal a condition of TYPE (INVALID-INPUT or TRUNCATED-INPUT) at the
offset of the compressed bytes SOURCE was reading (FURTHER bytes on),
after ending it."
  (let ((condition (make-condition type
                                   :offset (+ (decompressing-source-base-offset source)
                                              (decompressing-source-consumed source)
                                              further)
                                   :message message :expected expected)))
    (end-decompression source :failed condition)
    (error condition)))

(defun step-decompressor (source context want out-pointer out-count)
  "One step of SOURCE's decompression into the OUT-COUNT bytes at
OUT-POINTER, from the input at hand; when there is none and WANT is
positive, more is read first (WANT bytes at most from a source that is not
greedy).  Return the bytes of input used, of output made, the library's
result, and the bytes of input the step was given; or NIL when WANT was
positive and the input has ended."
  (let ((inner (filter-source-inner source)))
    (flet ((run (address count)
             (multiple-value-bind (used made result error-at)
                 (decompressor-step source context address count out-pointer out-count)
               (when (decompressor-error source result)
                 (let ((further (or error-at 0)))
                   (when (ibuf-source-p inner)
                     ;; a restore's offsets are its place's: the damage's
                     (ibuf-source-consume inner further))
                   (decompression-failure
                    source 'invalid-input
                    (format nil "the ~a frame is corrupt or is not one: ~a"
                            (method-name source) (decompressor-error source result))
                    (format nil "a valid ~a frame" (method-name source))
                    further)))
               (unless (<= used count)
                 (error "~a decompressor used ~d bytes of ~d" (method-name source) used count))
               (incf (decompressing-source-consumed source) used)
               (values used made result count))))
      (if (ibuf-source-p inner)
          (multiple-value-bind (address count) (ibuf-source-window inner want)
            (if (and (zerop count) (plusp want))
                nil
                (multiple-value-bind (used made result) (run address count)
                  (ibuf-source-consume inner used)
                  (values used made result count))))
          (let ((buffer (decompressing-source-buffer source)))
            (declare (type (simple-array (unsigned-byte 8) (*)) buffer))
            (when (and (= (decompressing-source-in-pos source) (decompressing-source-in-end source))
                       (plusp want))
              (setf (decompressing-source-in-pos source) 0
                    (decompressing-source-in-end source)
                    (source-read inner buffer 0 (if (source-greedy-p inner)
                                                    (length buffer)
                                                    (min want (length buffer))))))
            (let ((pos (decompressing-source-in-pos source))
                  (end (decompressing-source-in-end source)))
              (if (and (= pos end) (plusp want))
                  nil
                  (cffi:with-pointer-to-vector-data (pointer buffer)
                    (multiple-value-bind (used made result)
                        (run (+ (cffi:pointer-address pointer) pos) (- end pos))
                      (incf (decompressing-source-in-pos source) used)
                      (values used made result (- end pos)))))))))))

(defun decompress-to (source out start end)
  "Decompress SOURCE's next bytes to OUT (a foreign pointer) from START on,
until END or the end of the data; return the offset after the last byte."
  (declare (type index start end))
  (let ((pos start))
    (declare (type index pos))
    (loop while (< pos end)
          do (case (decompressing-source-state source)
               (:done (return))
               (:failed (error (decompressing-source-failure source))))
             (let* ((context (decompressor-context source))
                    (frame-start (eq (decompressing-source-state source) :frame-start))
                    (want (if (or frame-start (decompressing-source-starved source))
                              (max 1 (decompressing-source-hint source))
                              0)))
               (multiple-value-bind (used made result given)
                   (step-decompressor source context want (cffi:inc-pointer out pos) (- end pos))
                 (cond ((null used)
                        ;; the input ended: between frames, the end of the data
                        (if frame-start
                            (end-decompression source :done)
                            (decompression-failure
                             source 'truncated-input
                             (format nil "the input ends inside a ~a frame" (method-name source))
                             "the rest of the frame")))
                       (t
                        (incf pos made)
                        (cond ((zerop result)
                               ;; the end of a frame
                               (setf (decompressing-source-starved source) nil
                                     (decompressing-source-hint source) (frame-header-bytes source))
                               (if (decompressing-source-single-frame source)
                                   (end-decompression source :done)
                                   (setf (decompressing-source-state source) :frame-start)))
                              (t
                               (setf (decompressing-source-state source) :in-frame
                                     (decompressing-source-hint source) (min result most-positive-fixnum)
                                     (decompressing-source-starved source)
                                     (and (zerop used) (zerop made)))
                               (when (and (decompressing-source-starved source) (plusp given))
                                 ;; input and room, and nothing done: never loop on it
                                 (decompression-failure
                                  source 'invalid-input
                                  (format nil "the ~a decompressor makes no progress"
                                          (method-name source))
                                  (format nil "a valid ~a frame" (method-name source)))))))))))
    pos))

(defmethod source-read ((source decompressing-source) octets start end)
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (cffi:with-pointer-to-vector-data (out octets)
    (decompress-to source out start end)))

(defmethod source-read-to-address ((source decompressing-source) address count)
  (decompress-to source (cffi:make-pointer address) 0 count))

;;; ------------------------------------------------------------------
;;; Releasing

(defgeneric release-compression-context (filter)
  (:documentation "Give back at once the C context of FILTER, a ZSTD-SINK,
LZ4-SINK, ZSTD-SOURCE or LZ4-SOURCE, if it still holds one (one context of
each kind given back is kept for the next filter, the others are freed);
return NIL.  A sink can then no longer be written (STORE-ERROR), a source
no longer read (it gives no more bytes).  Not needed after STORE or
RESTORE, nor after a sink's SINK-FINISH or SINK-ABORT or a source's end of
data or error, which give it back; a filter dropped without any of these
gives it back when it is collected.  Never signals.")
  (:method ((sink compressing-sink))
    (close-compressor sink)
    nil)
  (:method ((source decompressing-source))
    (unless (eq (decompressing-source-state source) :failed)
      (end-decompression source :done))
    nil))
