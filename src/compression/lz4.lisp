;;;; LZ4: a compressing sink and a decompressing source over liblz4's frame
;;;; API (LZ4F_compressBegin/Update/End, LZ4F_decompress).
;;;;
;;;; binstore's frames have 64 KiB linked blocks and a checksum of their
;;;; content (XXH32, as the `lz4' tool writes by default), checked at the
;;;; frame's end: RESTORE gives back nothing of a frame whose checksum fails.
;;;; binstore computes that checksum itself, with libxxhash, on both sides,
;;;; and tells liblz4 to skip it: liblz4's own XXH32 ran at 1.8 GB/s here,
;;;; libxxhash's at 12 GB/s, and it was most of the time of decompressing
;;;; an incompressible record (doc/COMPRESSION.md).  So the compressor is
;;;; asked for a frame without checksum, and its 7-byte header is then
;;;; given the content checksum's flag (and the header checksum that goes
;;;; with it); the checksum is written after the frame's end mark.  Frames
;;;; from elsewhere are read as they come: with a checksum of each block
;;;; (as binstore wrote them until 2026-11-27, or `lz4 -BX'), liblz4 checks
;;;; those, and the content's too when there is one.

(in-package #:binstore)

(defun check-lz4-level (level)
  "STORE-ERROR unless LEVEL is an integer from +LZ4-MIN-LEVEL+ to
+LZ4-MAX-LEVEL+."
  (unless (typep level `(integer ,+lz4-min-level+ ,+lz4-max-level+))
    (error 'store-error
           :message (format nil "the LZ4 level must be an integer from ~d to ~d, not ~a"
                            +lz4-min-level+ +lz4-max-level+ (brief level)))))

(defun lz4-check (code what)
  "CODE, unless it is an LZ4F error code: then STORE-ERROR saying WHAT
failed."
  (when (lz4f-error-p code)
    (error 'store-error :message (format nil "LZ4: ~a failed: ~a" what (%lz4f-error-name code))))
  code)

;;; ------------------------------------------------------------------
;;; Compressing

(defstruct (lz4-sink (:include compressing-sink)
                     (:constructor %make-lz4-sink (inner level)))
  "A byte sink that compresses the bytes it is given into one LZ4 frame at
LEVEL (0 to 2: the fast compressor; 3 to 12: LZ4 HC; negative: faster
still), with a checksum of its content, and gives the frame to the byte
sink INNER, in blocks of at most 128 KiB as they come.  CHUNK is the most
it gives LZ4F_compressUpdate at once, so that the output always fits the
buffer.  SINK-FINISH ends the frame and returns INNER's SINK-FINISH value;
SINK-ABORT drops it.  One store each."
  (level 0 :type fixnum)
  (chunk 0 :type index))

(defun make-lz4-sink (inner &key (level 0) shuffle)
  "A new LZ4-SINK compressing into the byte sink INNER at LEVEL (an integer
from -65536 to 12, default 0).  With SHUFFLE, the payloads of numeric
arrays STORE gives it are byte-shuffled in the frame (a shuffle container,
doc/COMPRESSION.md), which RESTORE reads but which `lz4 -d' does not turn
back into the record.  STORE-ERROR for any other level."
  (check-lz4-level level)
  (let ((sink (%make-lz4-sink inner level)))
    (setf (compressing-sink-shuffle sink) (and shuffle t))
    sink))

;;; An LZ4 context is a cons: the library's context, and an XXH32 state for
;;; the checksum of the frame's content.

(defun make-xxh32-state (free-other other condition-type)
  "A new XXH32 state; when none can be made, call FREE-OTHER on OTHER (the
context it was to go with) and signal CONDITION-TYPE (STORE-ERROR or
RESTORE-ERROR)."
  (let ((state (%xxh32-create-state)))
    (when (cffi:null-pointer-p state)
      (funcall free-other other)
      (error condition-type :message "xxHash: cannot make a checksum state"))
    state))

(defun free-lz4-context (free context)
  "Free CONTEXT, a cons of a library context (freed by FREE) and an XXH32
state."
  (funcall free (car context))
  (%xxh32-free-state (cdr context)))

(define-context-kind **lz4-compression-contexts** "LZ4 compression"
  :create (lambda ()
            (cffi:with-foreign-object (pointer :pointer)
              (lz4-check (%lz4f-create-compression-context pointer +lz4f-version+)
                         "making a compression context")
              (let ((cctx (cffi:mem-ref pointer :pointer)))
                (cons cctx (make-xxh32-state #'%lz4f-free-compression-context cctx
                                             'store-error)))))
  ;; LZ4F_compressBegin starts every frame afresh, whatever came before,
  ;; and OPEN-COMPRESSOR resets the checksum
  :reset (constantly t)
  :free (lambda (context) (free-lz4-context #'%lz4f-free-compression-context context)))

(defconstant +lz4-flg-content-checksum+ #x04
  "The bit of an LZ4 frame's FLG byte that says the content's checksum
follows the end mark.")

(defconstant +lz4-flg-plain+ #x40
  "The FLG byte of the frames WITH-LZ4-PREFERENCES asks for: version 01,
linked blocks, no checksum, no content size, no dictionary.")

(defun add-content-checksum-flag (output)
  "OUTPUT begins with the 7-byte header of a frame LZ4F_compressBegin wrote
with WITH-LZ4-PREFERENCES: set its content checksum flag, and the header
checksum (the second byte of the XXH32 of FLG and BD) that goes with it."
  (declare (type (simple-array (unsigned-byte 8) (*)) output))
  (unless (= (aref output 4) +lz4-flg-plain+)
    (error 'store-error
           :message (format nil "LZ4: the frame header has FLG #x~2,'0x, not #x~2,'0x"
                            (aref output 4) +lz4-flg-plain+)))
  (setf (aref output 4) (logior +lz4-flg-plain+ +lz4-flg-content-checksum+))
  (setf (aref output 6)
        (cffi:with-pointer-to-vector-data (pointer output)
          (ldb (byte 8 8) (%xxh32 (cffi:inc-pointer pointer 4) 2 0)))))

(defmethod open-compressor ((sink lz4-sink))
  (let ((context (fill-cell sink (compressing-sink-cell sink) **lz4-compression-contexts**))
        (output (compressing-sink-output sink)))
    (declare (type (simple-array (unsigned-byte 8) (*)) output))
    (with-lz4-preferences (preferences (lz4-sink-level sink))
      ;; the largest input whose worst-case output (with what LZ4 may hold
      ;; back from before) fits the buffer
      (let ((chunk (length output)))
        (loop while (> (lz4-check (%lz4f-compress-bound chunk preferences) "bounding")
                       (length output))
              do (setf chunk (floor chunk 2)))
        (assert (plusp chunk))
        (setf (lz4-sink-chunk sink) chunk))
      (let ((written (cffi:with-pointer-to-vector-data (destination output)
                       (lz4-check (%lz4f-compress-begin (car context) destination (length output)
                                                        preferences)
                                  "beginning the frame"))))
        (unless (= written 7)
          (error 'store-error
                 :message (format nil "LZ4: the frame header has ~d bytes, not 7" written)))
        (add-content-checksum-flag output)
        (%xxh32-reset (cdr context) 0)
        (give-output sink written)))
    context))

(defmethod compress-octets ((sink lz4-sink) octets start end)
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (assert (<= start end (length octets)))
  (let* ((context (compressor-context sink))
         (output (compressing-sink-output sink))
         (chunk (lz4-sink-chunk sink)))
    (declare (type (simple-array (unsigned-byte 8) (*)) output))
    (loop while (< start end)
          do (let* ((n (min chunk (- end start)))
                    (written (cffi:with-pointer-to-vector-data (source octets)
                               (let ((from (cffi:inc-pointer source start)))
                                 (%xxh32-update (cdr context) from n)
                                 (cffi:with-pointer-to-vector-data (destination output)
                                   (lz4-check (%lz4f-compress-update (car context)
                                                                     destination (length output)
                                                                     from n (cffi:null-pointer))
                                              "compressing"))))))
               (give-output sink written)
               (incf start n)))))

(defmethod sink-finish ((sink lz4-sink))
  (let* ((context (compressor-context sink))
         (output (compressing-sink-output sink))
         (written (cffi:with-pointer-to-vector-data (destination output)
                    (lz4-check (%lz4f-compress-end (car context) destination (length output)
                                                   (cffi:null-pointer))
                               "ending the frame"))))
    (declare (type (simple-array (unsigned-byte 8) (*)) output))
    ;; the end mark is the last of WRITTEN: the checksum follows it
    (assert (<= (+ written 4) (length output)))
    (let ((checksum (%xxh32-digest (cdr context))))
      (dotimes (i 4)
        (setf (aref output (+ written i)) (ldb (byte 8 (* 8 i)) checksum))))
    (give-output sink (+ written 4)))
  (close-compressor sink)
  (call-next-method))

(defmethod method-name ((sink lz4-sink)) "LZ4")

;;; ------------------------------------------------------------------
;;; Decompressing

(defstruct (lz4-source (:include decompressing-source)
                       (:constructor %make-lz4-source (inner &optional single-frame base-offset)))
  "A byte source that decompresses the LZ4 frames of the byte source INNER,
one after the other (as `lz4 -d' does), reading INNER in blocks of 128 KiB
\(as far as the frame needs from a source that is not greedy).  Every byte
after a frame must begin another.  Corrupt, truncated or foreign input
signals INVALID-INPUT (TRUNCATED-INPUT when the data end inside a frame)
at the offset, in INNER's bytes, where the decompressor was reading.
Memory: the buffer, and LZ4's two blocks (up to 8 MiB for frames of 4 MiB
blocks; 128 KiB for binstore's).
VERIFIER says who checks the frame being read: :UNDECIDED until its header is
read; :OURS when it has a checksum of its content and none of each block
\(binstore's frames, the `lz4' tool's by default), which binstore computes
over the bytes it gives out, while TAIL holds the last four bytes of the
frame read so far (at its end, the checksum written); :LIBRARY otherwise."
  (verifier :undecided :type (member :undecided :ours :library))
  (tail 0 :type (unsigned-byte 32)))

(defun make-lz4-source (inner)
  "A new LZ4-SOURCE decompressing the byte source INNER."
  (%make-lz4-source inner))

(define-context-kind **lz4-decompression-contexts** "LZ4 decompression"
  :create (lambda ()
            (cffi:with-foreign-object (pointer :pointer)
              (let ((code (%lz4f-create-decompression-context pointer +lz4f-version+)))
                (when (lz4f-error-p code)
                  (error 'restore-error
                         :message (format nil "LZ4: cannot make a decompression context: ~a"
                                          (%lz4f-error-name code)))))
              (let ((dctx (cffi:mem-ref pointer :pointer)))
                (cons dctx (make-xxh32-state #'%lz4f-free-decompression-context dctx
                                             'restore-error)))))
  :reset (lambda (context)
           (%lz4f-reset-decompression-context (car context))
           t)
  :free (lambda (context) (free-lz4-context #'%lz4f-free-decompression-context context)))

(defmethod open-decompressor ((source lz4-source))
  (fill-cell source (decompressing-source-cell source) **lz4-decompression-contexts**))

(defun lz4-decompress (dctx in-address in-count out-pointer out-count skip-checksums)
  "One call of LZ4F_decompress: the bytes of input used, of output made,
and its result."
  (cffi:with-foreign-objects ((in-size :size) (out-size :size)
                              (options '(:struct lz4f-decompress-options)))
    (setf (cffi:mem-ref in-size :size) in-count
          (cffi:mem-ref out-size :size) out-count)
    (setf (cffi:foreign-slot-value options '(:struct lz4f-decompress-options) 'stable-dst) 0
          (cffi:foreign-slot-value options '(:struct lz4f-decompress-options) 'skip-checksums)
          (if skip-checksums 1 0))
    (dotimes (i 2)
      (setf (cffi:mem-aref (cffi:foreign-slot-pointer options '(:struct lz4f-decompress-options)
                                                      'reserved)
                           :unsigned-int i)
            0))
    (let ((result (%lz4f-decompress dctx out-pointer out-size
                                    (cffi:make-pointer in-address) in-size options)))
      (values (cffi:mem-ref in-size :size) (cffi:mem-ref out-size :size) result))))

(defun lz4-frame-check (dctx)
  "Who checks the frame DCTX is reading (see LZ4-SOURCE): :OURS, :LIBRARY,
or :UNDECIDED while its header is not all read."
  (cffi:with-foreign-objects ((info '(:struct lz4f-frame-info)) (size :size))
    (setf (cffi:mem-ref size :size) 0)
    (cond ((lz4f-error-p (%lz4f-get-frame-info dctx info (cffi:null-pointer) size))
           :undecided)
          ((and (= 1 (cffi:foreign-slot-value info '(:struct lz4f-frame-info)
                                              'content-checksum-flag))
                (= 0 (cffi:foreign-slot-value info '(:struct lz4f-frame-info)
                                              'block-checksum-flag)))
           :ours)
          (t :library))))

(defun note-lz4-tail (source in-address used)
  "The USED bytes at IN-ADDRESS are the next of SOURCE's frame: keep its
last four in SOURCE's TAIL."
  (let ((tail (lz4-source-tail source))
        (pointer (cffi:make-pointer in-address)))
    (loop for i from (max 0 (- used 4)) below used
          do (setf tail (logior (ash tail -8) (ash (cffi:mem-aref pointer :uint8 i) 24))))
    (setf (lz4-source-tail source) tail)))

(defmethod decompressor-step ((source lz4-source) context in-address in-count out-pointer out-count)
  (let ((dctx (car context))
        (hash (cdr context))
        (frame-start (eq (decompressing-source-state source) :frame-start))
        (used 0)
        (made 0)
        (result 0))
    (when frame-start
      ;; a frame begins: read its header alone (no output), so that the
      ;; library, told whether to skip the checksums, hashes none of it
      (setf (lz4-source-verifier source) :undecided
            (lz4-source-tail source) 0)
      (%xxh32-reset hash 0)
      (multiple-value-setq (used made result)
        (lz4-decompress dctx in-address in-count out-pointer 0 nil))
      (unless (lz4f-error-p result)
        (note-lz4-tail source in-address used)
        (setf (lz4-source-verifier source) (lz4-frame-check dctx))))
    ;; (called without input too: the library may have output to give)
    (when (or (not frame-start) (and (not (lz4f-error-p result)) (plusp result)))
      (multiple-value-bind (more-used more-made more-result)
          (lz4-decompress dctx (+ in-address used) (- in-count used) out-pointer out-count
                          (eq (lz4-source-verifier source) :ours))
        (unless (lz4f-error-p more-result)
          (unless (eq (lz4-source-verifier source) :library)
            (%xxh32-update hash out-pointer more-made)
            (note-lz4-tail source (+ in-address used) more-used))
          (when (eq (lz4-source-verifier source) :undecided)
            (setf (lz4-source-verifier source) (lz4-frame-check dctx))))
        (incf used more-used)
        (setf made more-made
              result more-result)))
    (if (and (eql result 0)
             (eq (lz4-source-verifier source) :ours)
             (/= (lz4-source-tail source) (%xxh32-digest hash)))
        ;; the checksum is the last four bytes used
        (values used made :content-checksum-mismatch (max 0 (- used 4)))
        (values used made result))))

(defmethod decompressor-error ((source lz4-source) code)
  (cond ((eq code :content-checksum-mismatch)
         "the checksum of the frame's content does not match")
        ((lz4f-error-p code) (%lz4f-error-name code))))

(defmethod frame-header-bytes ((source lz4-source))
  7)                                    ; LZ4F_HEADER_SIZE_MIN

(defmethod method-name ((source lz4-source)) "LZ4")
