;;;; How binstore reaches this system: *COMPRESSION-HOOK* (src/api.lisp), set
;;;; when this file is loaded.  Until then STORE with :compression, and a
;;;; RESTORE that meets a compressed record, signal COMPRESSION-UNAVAILABLE.

(in-package #:binstore)

(defparameter *default-shuffle* '(:zstd t :lz4 nil)
  "Whether STORE's :COMPRESSION shuffles numeric array payloads when its
list does not say (:SHUFFLE), for each method.")

(defun make-compressing-sink (method arguments inner)
  "The sink of METHOD (:ZSTD or :LZ4) compressing into INNER, with
ARGUMENTS, the property list of a :COMPRESSION list: :LEVEL, :SHUFFLE, and
for zstd :WORKERS.  STORE-ERROR for any other key or a value out of range."
  (let ((allowed (ecase method (:zstd '(:level :workers :shuffle)) (:lz4 '(:level :shuffle)))))
    (loop for key in arguments by #'cddr
          unless (member key allowed)
            do (error 'store-error
                      :message (format nil "~(~s~) compression takes ~{~(~s~)~^ and ~}, not ~a"
                                       method allowed (brief key)))))
  (ecase method
    (:zstd (make-zstd-sink inner :level (getf arguments :level +zstd-default-level+)
                                 :workers (getf arguments :workers 0)
                                 :shuffle (getf arguments :shuffle
                                                (getf *default-shuffle* :zstd))))
    (:lz4 (make-lz4-sink inner :level (getf arguments :level 0)
                               :shuffle (getf arguments :shuffle
                                              (getf *default-shuffle* :lz4))))))

(defun make-frame-source (method inner)
  "The source of the record in the one METHOD (:ZSTD or :LZ4) frame at the
start of INNER, a restore's IBUF-SOURCE, of which it consumes exactly the
frame's bytes; the frame's content is the record or a shuffle container
\(shuffle.lisp).  Messages give offsets in INNER's place."
  (let ((offset (if (ibuf-source-p inner) (ibuf-source-offset inner) 0)))
    (make-unshuffling-source
     (ecase method
       (:zstd (%make-zstd-source inner t offset))
       (:lz4 (%make-lz4-source inner t offset))))))

(defun compression-hook-function (operation &rest arguments)
  "The *COMPRESSION-HOOK* of binstore/compression: see its documentation."
  (ecase operation
    (:sink (destructuring-bind (method options inner) arguments
             (make-compressing-sink method options inner)))
    (:source (destructuring-bind (method inner) arguments
               (make-frame-source method inner)))
    (:release (release-compression-context (first arguments)))))

(setf *compression-hook* #'compression-hook-function)
