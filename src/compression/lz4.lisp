;;;; LZ4: a compressing sink and a decompressing source over liblz4's frame
;;;; API (LZ4F_compressBegin/Update/End, LZ4F_decompress).
;;;;
;;;; Frames have 64 KiB linked blocks, each with a checksum: a corrupt block
;;;; is refused before any of its bytes is given out.  (No checksum of the
;;;; whole content: see WITH-LZ4-PREFERENCES.)

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
still), with a checksum of each block, and gives the frame to the byte
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

(define-context-kind **lz4-compression-contexts** "LZ4 compression"
  :create (lambda ()
            (cffi:with-foreign-object (pointer :pointer)
              (lz4-check (%lz4f-create-compression-context pointer +lz4f-version+)
                         "making a compression context")
              (cffi:mem-ref pointer :pointer)))
  ;; LZ4F_compressBegin starts every frame afresh, whatever came before
  :reset (constantly t)
  :free #'%lz4f-free-compression-context)

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
                       (lz4-check (%lz4f-compress-begin context destination (length output)
                                                        preferences)
                                  "beginning the frame"))))
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
                               (cffi:with-pointer-to-vector-data (destination output)
                                 (lz4-check (%lz4f-compress-update context destination (length output)
                                                                   (cffi:inc-pointer source start) n
                                                                   (cffi:null-pointer))
                                            "compressing")))))
               (give-output sink written)
               (incf start n)))))

(defmethod sink-finish ((sink lz4-sink))
  (let* ((context (compressor-context sink))
         (output (compressing-sink-output sink))
         (written (cffi:with-pointer-to-vector-data (destination output)
                    (lz4-check (%lz4f-compress-end context destination (length output)
                                                   (cffi:null-pointer))
                               "ending the frame"))))
    (give-output sink written))
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
blocks; 128 KiB for binstore's).")

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
              (cffi:mem-ref pointer :pointer)))
  :reset (lambda (pointer)
           (%lz4f-reset-decompression-context pointer)
           t)
  :free #'%lz4f-free-decompression-context)

(defmethod open-decompressor ((source lz4-source))
  (fill-cell source (decompressing-source-cell source) **lz4-decompression-contexts**))

(defmethod decompressor-step ((source lz4-source) context in-address in-count out-pointer out-count)
  (cffi:with-foreign-objects ((in-size :size) (out-size :size))
    (setf (cffi:mem-ref in-size :size) in-count
          (cffi:mem-ref out-size :size) out-count)
    (let ((result (%lz4f-decompress context out-pointer out-size
                                    (cffi:make-pointer in-address) in-size (cffi:null-pointer))))
      (values (cffi:mem-ref in-size :size) (cffi:mem-ref out-size :size) result))))

(defmethod decompressor-error ((source lz4-source) code)
  (and (lz4f-error-p code) (%lz4f-error-name code)))

(defmethod frame-header-bytes ((source lz4-source))
  7)                                    ; LZ4F_HEADER_SIZE_MIN

(defmethod method-name ((source lz4-source)) "LZ4")
