;;;; The C side of binstore/compression: libzstd's streaming API and liblz4's
;;;; frame API, bound with CFFI, and libxxhash's XXH32 for the checksum of
;;;; an LZ4 frame's content (lz4.lisp says why).  Nothing else in binstore calls C through
;;;; CFFI; binstore itself needs no C library at all (see *COMPRESSION-HOOK*
;;;; in src/api.lisp).
;;;;
;;;; Only what the filters use is bound.  The libraries are the runtime ones
;;;; (libzstd.so.1, liblz4.so.1, libxxhash.so.0: Debian's libzstd1,
;;;; liblz4-1 and libxxhash0), found by
;;;; their sonames, so no -dev package is needed.  Every function here is a
;;;; bare C call: the callers check lengths before, and results after (every
;;;; size_t result may be an error code: ZSTD-ERROR-P, LZ4F-ERROR-P).

(in-package #:binstore)

;;; The filters give C binstore's own pointers (a restore's window) and
;;; read output C wrote into a vector while CFFI still holds it: right
;;; where binstore's memory is the machine's and CFFI passes a vector's own
;;; data.  On CLISP and ABCL neither holds (CFFI copies a vector in and out
;;; around its body): compressed output would be wrong bytes, so this
;;; system refuses to load there, and STORE and RESTORE signal
;;; COMPRESSION-UNAVAILABLE.
(unless +machine-addresses-p+
  (error "binstore/compression runs on SBCL and ECL only: on ~a, binstore's ~
          memory is Lisp vectors that C cannot be given." (lisp-implementation-type)))

(cffi:define-foreign-library libzstd
  (:unix (:or "libzstd.so.1" "libzstd.so"))
  (t (:default "libzstd")))

(cffi:define-foreign-library liblz4
  (:unix (:or "liblz4.so.1" "liblz4.so"))
  (t (:default "liblz4")))

(cffi:define-foreign-library libxxhash
  (:unix (:or "libxxhash.so.0" "libxxhash.so"))
  (t (:default "libxxhash")))

(cffi:use-foreign-library libzstd)
(cffi:use-foreign-library liblz4)
(cffi:use-foreign-library libxxhash)

;;; ------------------------------------------------------------------
;;; zstd (zstd.h, "advanced compression API" and streaming decompression,
;;; stable since 1.4.0)

(cffi:defcstruct zstd-in-buffer         ; ZSTD_inBuffer
  (src :pointer)
  (size :size)
  (pos :size))

(cffi:defcstruct zstd-out-buffer        ; ZSTD_outBuffer
  (dst :pointer)
  (size :size)
  (pos :size))

(defconstant +zstd-c-compression-level+ 100 "ZSTD_c_compressionLevel")
(defconstant +zstd-c-checksum-flag+ 201 "ZSTD_c_checksumFlag")
(defconstant +zstd-c-nb-workers+ 400 "ZSTD_c_nbWorkers")
(defconstant +zstd-c-job-size+ 401 "ZSTD_c_jobSize")
(defconstant +zstd-e-continue+ 0 "ZSTD_e_continue")
(defconstant +zstd-e-end+ 2 "ZSTD_e_end")
(defconstant +zstd-default-level+ 3 "ZSTD_CLEVEL_DEFAULT")
(defconstant +zstd-max-workers+ 200
  "ZSTDMT_NBWORKERS_MAX on 64-bit hosts: the most worker threads zstd takes.")

(cffi:defcfun ("ZSTD_versionString" zstd-version-string) :string)
(cffi:defcfun ("ZSTD_isError" %zstd-is-error) :unsigned-int (code :size))
(cffi:defcfun ("ZSTD_getErrorName" %zstd-error-name) :string (code :size))
(cffi:defcfun ("ZSTD_minCLevel" %zstd-min-level) :int)
(cffi:defcfun ("ZSTD_maxCLevel" %zstd-max-level) :int)

(cffi:defcfun ("ZSTD_createCStream" %zstd-create-cstream) :pointer)
(cffi:defcfun ("ZSTD_freeCStream" %zstd-free-cstream) :size (zcs :pointer))
(cffi:defcfun ("ZSTD_CCtx_setParameter" %zstd-cctx-set-parameter) :size
  (cctx :pointer) (parameter :int) (value :int))
(cffi:defcfun ("ZSTD_compressStream2" %zstd-compress-stream2) :size
  (cctx :pointer) (output :pointer) (input :pointer) (end-op :int))
(defconstant +zstd-reset-session-and-parameters+ 3 "ZSTD_reset_session_and_parameters")
(cffi:defcfun ("ZSTD_CCtx_reset" %zstd-cctx-reset) :size (cctx :pointer) (reset :int))

(cffi:defcfun ("ZSTD_createDStream" %zstd-create-dstream) :pointer)
(cffi:defcfun ("ZSTD_freeDStream" %zstd-free-dstream) :size (zds :pointer))
(cffi:defcfun ("ZSTD_decompressStream" %zstd-decompress-stream) :size
  (zds :pointer) (output :pointer) (input :pointer))
(cffi:defcfun ("ZSTD_DCtx_reset" %zstd-dctx-reset) :size (dctx :pointer) (reset :int))

(declaim (inline zstd-error-p))
(defun zstd-error-p (code)
  "True when CODE, a size_t a zstd function returned, is an error code."
  (/= 0 (%zstd-is-error code)))

;;; ------------------------------------------------------------------
;;; LZ4 frames (lz4frame.h, stable API)

(defconstant +lz4f-version+ 100 "LZ4F_VERSION")
(defconstant +lz4f-max64kb+ 4 "LZ4F_max64KB, a LZ4F_blockSizeID_t")
(defconstant +lz4f-header-size-max+ 19 "LZ4F_HEADER_SIZE_MAX")
(defconstant +lz4-max-level+ 12 "LZ4HC_CLEVEL_MAX")
(defconstant +lz4-min-level+ -65536
  "The fastest level binstore takes: LZ4's acceleration saturates at 65537.")

(cffi:defcstruct lz4f-frame-info        ; LZ4F_frameInfo_t
  (block-size-id :int)
  (block-mode :int)
  (content-checksum-flag :int)
  (frame-type :int)
  (content-size :unsigned-long-long)
  (dict-id :unsigned-int)
  (block-checksum-flag :int))

(cffi:defcstruct lz4f-preferences       ; LZ4F_preferences_t
  (frame-info (:struct lz4f-frame-info))
  (compression-level :int)
  (auto-flush :unsigned-int)
  (favor-dec-speed :unsigned-int)
  (reserved :unsigned-int :count 3))

(cffi:defcfun ("LZ4_versionString" lz4-version-string) :string)
(cffi:defcfun ("LZ4F_isError" %lz4f-is-error) :unsigned-int (code :size))
(cffi:defcfun ("LZ4F_getErrorName" %lz4f-error-name) :string (code :size))

(cffi:defcfun ("LZ4F_createCompressionContext" %lz4f-create-compression-context) :size
  (cctx-pointer :pointer) (version :unsigned-int))
(cffi:defcfun ("LZ4F_freeCompressionContext" %lz4f-free-compression-context) :size
  (cctx :pointer))
(cffi:defcfun ("LZ4F_compressBound" %lz4f-compress-bound) :size
  (src-size :size) (preferences :pointer))
(cffi:defcfun ("LZ4F_compressBegin" %lz4f-compress-begin) :size
  (cctx :pointer) (dst :pointer) (dst-capacity :size) (preferences :pointer))
(cffi:defcfun ("LZ4F_compressUpdate" %lz4f-compress-update) :size
  (cctx :pointer) (dst :pointer) (dst-capacity :size) (src :pointer) (src-size :size)
  (options :pointer))
(cffi:defcfun ("LZ4F_compressEnd" %lz4f-compress-end) :size
  (cctx :pointer) (dst :pointer) (dst-capacity :size) (options :pointer))

(cffi:defcfun ("LZ4F_createDecompressionContext" %lz4f-create-decompression-context) :size
  (dctx-pointer :pointer) (version :unsigned-int))
(cffi:defcfun ("LZ4F_freeDecompressionContext" %lz4f-free-decompression-context) :size
  (dctx :pointer))
(cffi:defcfun ("LZ4F_resetDecompressionContext" %lz4f-reset-decompression-context) :void
  (dctx :pointer))
(cffi:defcfun ("LZ4F_decompress" %lz4f-decompress) :size
  (dctx :pointer) (dst :pointer) (dst-size-pointer :pointer)
  (src :pointer) (src-size-pointer :pointer) (options :pointer))
(cffi:defcfun ("LZ4F_getFrameInfo" %lz4f-get-frame-info) :size
  (dctx :pointer) (frame-info :pointer) (src :pointer) (src-size-pointer :pointer))

(cffi:defcstruct lz4f-decompress-options ; LZ4F_decompressOptions_t
  (stable-dst :unsigned-int)
  ;; since liblz4 1.9.4; a reserved field, ignored, before
  (skip-checksums :unsigned-int)
  (reserved :unsigned-int :count 2))

(declaim (inline lz4f-error-p))
(defun lz4f-error-p (code)
  "True when CODE, a size_t an LZ4F function returned, is an error code."
  (/= 0 (%lz4f-is-error code)))

(defmacro with-lz4-preferences ((preferences level) &body body)
  "Run BODY with PREFERENCES bound to an LZ4F_preferences_t on the stack:
all zero (the library's defaults: no checksum at all) but the compression
LEVEL and 64 KiB linked blocks.  The checksum of the content, which
binstore's frames carry, binstore computes itself (lz4.lisp)."
  `(cffi:with-foreign-object (,preferences '(:struct lz4f-preferences))
     (loop for i below (cffi:foreign-type-size '(:struct lz4f-preferences))
           do (setf (cffi:mem-aref ,preferences :unsigned-char i) 0))
     (let ((info (cffi:foreign-slot-pointer ,preferences '(:struct lz4f-preferences)
                                            'frame-info)))
       (setf (cffi:foreign-slot-value info '(:struct lz4f-frame-info) 'block-size-id)
             +lz4f-max64kb+
             (cffi:foreign-slot-value info '(:struct lz4f-frame-info) 'content-checksum-flag) 0
             (cffi:foreign-slot-value info '(:struct lz4f-frame-info) 'block-checksum-flag) 0))
     (setf (cffi:foreign-slot-value ,preferences '(:struct lz4f-preferences) 'compression-level)
           ,level)
     ,@body))

;;; ------------------------------------------------------------------
;;; XXH32 (xxhash.h, stable since 0.6): the checksum of LZ4 frames

(cffi:defcfun ("XXH32" %xxh32) :uint32 (input :pointer) (length :size) (seed :uint32))
(cffi:defcfun ("XXH32_createState" %xxh32-create-state) :pointer)
(cffi:defcfun ("XXH32_freeState" %xxh32-free-state) :int (state :pointer))
(cffi:defcfun ("XXH32_reset" %xxh32-reset) :int (state :pointer) (seed :uint32))
(cffi:defcfun ("XXH32_update" %xxh32-update) :int
  (state :pointer) (input :pointer) (length :size))
(cffi:defcfun ("XXH32_digest" %xxh32-digest) :uint32 (state :pointer))
