;;;; zstd: a compressing sink and a decompressing source over libzstd's
;;;; streaming API (ZSTD_compressStream2, ZSTD_decompressStream).
;;;;
;;;; Every frame carries a checksum of its content (ZSTD_c_checksumFlag), which
;;;; the decompressor checks at the frame's end.

(in-package #:binstore)

(defconstant +zstd-job-bytes+ (* 1024 1024)
  "The bytes of input each of zstd's workers compresses at a time.")

(defun check-zstd-arguments (level workers)
  "STORE-ERROR unless LEVEL is an integer among zstd's levels and WORKERS
one from 0 to +ZSTD-MAX-WORKERS+."
  (unless (and (integerp level) (<= (%zstd-min-level) level (%zstd-max-level)))
    (error 'store-error
           :message (format nil "the zstd level must be an integer from ~d to ~d, not ~a"
                            (%zstd-min-level) (%zstd-max-level) (brief level))))
  (unless (typep workers `(integer 0 ,+zstd-max-workers+))
    (error 'store-error
           :message (format nil "the number of zstd workers must be an integer from 0 to ~d, ~
                                 not ~a" +zstd-max-workers+ (brief workers)))))

;;; ------------------------------------------------------------------
;;; Compressing

(defstruct (zstd-sink (:include compressing-sink)
                      (:constructor %make-zstd-sink (inner level workers)))
  "A byte sink that compresses the bytes it is given into one zstd frame,
with a content checksum, at LEVEL, with WORKERS threads of zstd's own (0:
none, in the caller's thread), and gives the frame to the byte sink INNER,
in blocks of at most 128 KiB as they come.  SINK-FINISH ends the frame and
returns INNER's SINK-FINISH value; SINK-ABORT drops it.  One store each."
  (level +zstd-default-level+ :type fixnum)
  (workers 0 :type fixnum))

(defun make-zstd-sink (inner &key (level +zstd-default-level+) (workers 0) shuffle)
  "A new ZSTD-SINK compressing into the byte sink INNER at LEVEL (an integer
from -131072, the fastest, to 22, the smallest; default 3) with WORKERS
threads (0 to 200, default 0).  With SHUFFLE, the payloads of numeric
arrays STORE gives it are byte-shuffled in the frame (a shuffle container,
doc/COMPRESSION.md), which RESTORE reads but which `zstd -d' does not turn
back into the record.  STORE-ERROR for any other level or number of
workers."
  (check-zstd-arguments level workers)
  (let ((sink (%make-zstd-sink inner level workers)))
    (setf (compressing-sink-shuffle sink) (and shuffle t))
    sink))

(defun zstd-check (code what)
  "CODE, unless it is a zstd error code: then STORE-ERROR saying WHAT
failed."
  (when (zstd-error-p code)
    (error 'store-error :message (format nil "zstd: ~a failed: ~a" what (%zstd-error-name code))))
  code)

(defun zstd-made (pointer condition-type what)
  "POINTER, a context zstd just made, unless it is null: then a condition
of CONDITION-TYPE saying WHAT could not be made."
  (when (cffi:null-pointer-p pointer)
    (error condition-type :message (format nil "zstd: cannot make a ~a context" what)))
  pointer)

(define-context-kind **zstd-compression-contexts** "zstd compression"
  :create (lambda () (zstd-made (%zstd-create-cstream) 'store-error "compression"))
  ;; the level, the checksum and the workers are set again after
  :reset (lambda (pointer)
           (not (zstd-error-p (%zstd-cctx-reset pointer +zstd-reset-session-and-parameters+))))
  :free #'%zstd-free-cstream)

(defmethod open-compressor ((sink zstd-sink))
  (let ((context (fill-cell sink (compressing-sink-cell sink) **zstd-compression-contexts**)))
    (zstd-check (%zstd-cctx-set-parameter context +zstd-c-compression-level+
                                          (zstd-sink-level sink))
                "setting the level")
    (zstd-check (%zstd-cctx-set-parameter context +zstd-c-checksum-flag+ 1)
                "asking for a checksum")
    (when (plusp (zstd-sink-workers sink))
      ;; its threads outlive a frame: freed when given back, never kept
      (setf (context-cell-keep (compressing-sink-cell sink)) nil)
      (zstd-check (%zstd-cctx-set-parameter context +zstd-c-nb-workers+ (zstd-sink-workers sink))
                  "setting the number of workers")
      ;; zstd's own jobs, 4 windows (8 MiB at level 3), leave a record of a
      ;; few MiB to one worker: jobs of +ZSTD-JOB-BYTES+ share it
      (zstd-check (%zstd-cctx-set-parameter context +zstd-c-job-size+ +zstd-job-bytes+)
                  "setting the job size"))
    context))

(defun zstd-compress (sink octets start end directive)
  "Give zstd the bytes of OCTETS from START below END with DIRECTIVE
\(+ZSTD-E-CONTINUE+, or +ZSTD-E-END+ to end the frame), and the output it
makes to the sink SINK wraps, until zstd has taken every byte (and, ending,
written the whole frame)."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (assert (<= start end (length octets)))
  (let* ((context (compressor-context sink))
         (output (compressing-sink-output sink)))
    (declare (type (simple-array (unsigned-byte 8) (*)) output))
    (cffi:with-foreign-objects ((in '(:struct zstd-in-buffer))
                                (out '(:struct zstd-out-buffer)))
      (cffi:with-pointer-to-vector-data (source octets)
        (cffi:with-pointer-to-vector-data (destination output)
          (setf (cffi:foreign-slot-value in '(:struct zstd-in-buffer) 'src)
                (cffi:inc-pointer source start)
                (cffi:foreign-slot-value in '(:struct zstd-in-buffer) 'size) (- end start)
                (cffi:foreign-slot-value in '(:struct zstd-in-buffer) 'pos) 0)
          (loop
            (setf (cffi:foreign-slot-value out '(:struct zstd-out-buffer) 'dst) destination
                  (cffi:foreign-slot-value out '(:struct zstd-out-buffer) 'size) (length output)
                  (cffi:foreign-slot-value out '(:struct zstd-out-buffer) 'pos) 0)
            (let ((left (zstd-check (%zstd-compress-stream2 context out in directive)
                                    "compressing")))
              (give-output sink (cffi:foreign-slot-value out '(:struct zstd-out-buffer) 'pos))
              (when (if (= directive +zstd-e-end+)
                        (zerop left)
                        (= (cffi:foreign-slot-value in '(:struct zstd-in-buffer) 'pos) (- end start)))
                (return)))))))))

(defmethod compress-octets ((sink zstd-sink) octets start end)
  (zstd-compress sink octets start end +zstd-e-continue+))

(defmethod sink-finish ((sink zstd-sink))
  (compressor-context sink)             ; an empty store's frame too
  (zstd-compress sink (compressing-sink-output sink) 0 0 +zstd-e-end+)
  (close-compressor sink)
  (call-next-method))

(defmethod method-name ((sink zstd-sink)) "zstd")

;;; ------------------------------------------------------------------
;;; Decompressing

(defstruct (zstd-source (:include decompressing-source)
                        (:constructor %make-zstd-source (inner &optional single-frame base-offset)))
  "A byte source that decompresses the zstd frames of the byte source
INNER, one after the other (as `zstd -d' does), reading INNER in blocks of
128 KiB (as far as the frame needs from a source that is not greedy).
Every byte after a frame must begin another (or a skippable frame).
Corrupt, truncated or foreign input signals INVALID-INPUT (TRUNCATED-INPUT
when the data end inside a frame) at the offset, in INNER's bytes, where
the decompressor was reading.  Memory: the buffer, and zstd's window (at
most 128 MiB, zstd's own limit; 8 MiB at most for frames of levels up to
19).")

(defun make-zstd-source (inner)
  "A new ZSTD-SOURCE decompressing the byte source INNER."
  (%make-zstd-source inner))

(define-context-kind **zstd-decompression-contexts** "zstd decompression"
  :create (lambda () (zstd-made (%zstd-create-dstream) 'restore-error "decompression"))
  :reset (lambda (pointer)
           (not (zstd-error-p (%zstd-dctx-reset pointer +zstd-reset-session-and-parameters+))))
  :free #'%zstd-free-dstream)

(defmethod open-decompressor ((source zstd-source))
  (fill-cell source (decompressing-source-cell source) **zstd-decompression-contexts**))

(defmethod decompressor-step ((source zstd-source) context in-address in-count out-pointer out-count)
  (cffi:with-foreign-objects ((in '(:struct zstd-in-buffer))
                              (out '(:struct zstd-out-buffer)))
    (setf (cffi:foreign-slot-value in '(:struct zstd-in-buffer) 'src) (cffi:make-pointer in-address)
          (cffi:foreign-slot-value in '(:struct zstd-in-buffer) 'size) in-count
          (cffi:foreign-slot-value in '(:struct zstd-in-buffer) 'pos) 0
          (cffi:foreign-slot-value out '(:struct zstd-out-buffer) 'dst) out-pointer
          (cffi:foreign-slot-value out '(:struct zstd-out-buffer) 'size) out-count
          (cffi:foreign-slot-value out '(:struct zstd-out-buffer) 'pos) 0)
    (let ((result (%zstd-decompress-stream context out in)))
      (values (cffi:foreign-slot-value in '(:struct zstd-in-buffer) 'pos)
              (cffi:foreign-slot-value out '(:struct zstd-out-buffer) 'pos)
              result))))

(defmethod decompressor-error ((source zstd-source) code)
  (and (zstd-error-p code) (%zstd-error-name code)))

(defmethod frame-header-bytes ((source zstd-source))
  5)                                    ; ZSTD_FRAMEHEADERSIZE_PREFIX

(defmethod method-name ((source zstd-source)) "zstd")
