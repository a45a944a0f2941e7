;;;; The output region: one growing block of foreign memory that (STORE NIL
;;;; ...) writes into, and that an adjustable vector spills into when full.
;;;;
;;;; It is mapped with mmap and grown with mremap (MAP-MEMORY, REMAP-MEMORY),
;;;; which moves pages instead of copying bytes (where the system has no
;;;; mremap, REMAP-MEMORY copies them), so everything written keeps its
;;;; offset: the obuf is holdable (see output.lisp) at no cost.  Like the tables, the largest
;;;; region is kept between calls, so a repeated store writes into memory
;;;; already faulted in.

(in-package #:binstore)

(defstruct (region (:constructor %make-region (address size)))
  (address 0 :type word)
  (size 0 :type index))

(defconstant +region-granule+ (* 64 1024)
  "Regions are mapped and grown in multiples of this many bytes.")

(defun granules (n)
  (* +region-granule+ (max 1 (ceiling n +region-granule+))))

(defun region-failure (size errno)
  (error 'store-error :message (format nil "cannot map ~d bytes for the output: ~a"
                                       size (errno-text errno))))

(defun map-region (size)
  "A fresh region of at least SIZE bytes."
  (let ((size (granules size)))
    (multiple-value-bind (address errno) (map-memory size)
      (if address
          (%make-region address size)
          (region-failure size errno)))))

(defun unmap-region (region)
  "Give REGION's memory back to the system."
  (multiple-value-bind (ok errno) (unmap-memory (region-address region) (region-size region))
    (unless ok
      (error "cannot unmap the ~d bytes of an output region: ~a"
             (region-size region) (errno-text errno)))))

(defun grow-region (region size)
  "Grow REGION to at least SIZE bytes, keeping its contents (it may move)."
  (let ((new-size (granules size)))
    (multiple-value-bind (address errno)
        (remap-memory (region-address region) (region-size region) new-size)
      (unless address
        (region-failure new-size errno))
      (setf (region-address region) address
            (region-size region) new-size))))

(defun take-region (size)
  "A region of at least SIZE bytes: the kept one (grown if it is smaller),
else a fresh one."
  (let ((kept (take-scratch +scratch-output+)))
    (cond ((null kept) (map-region size))
          ((< (region-size kept) size) (grow-region kept size) kept)
          (t kept))))

(defun give-back-region (region)
  "Keep REGION for the next store, or unmap it."
  (offer-scratch +scratch-output+ region))

(define-scratch-kind +scratch-output+ #'region-size #'unmap-region)

(defun region-room (ob n)
  "The region is full: at least double it."
  (let ((region (obuf-sink ob)))
    (grow-region region (max (* 2 (region-size region)) (+ (obuf-pos ob) n)))
    (setf (obuf-base ob) (region-address region)
          (obuf-capacity ob) (region-size region))))

(defun switch-to-region (ob region)
  "Carry on writing OB into REGION (the held bytes move along).  Return the
number of bytes the old window keeps."
  (let ((keep (open-window-carrying ob (region-address region) (region-size region))))
    (setf (obuf-sink ob) region
          (obuf-room-fn ob) #'region-room
          (obuf-holdable ob) t)
    keep))

(defun call-with-region-obuf (limit fn)
  "Call FN with an OBUF writing into a region, given back however FN exits."
  (let* ((region (take-region +region-granule+))
         (ob (%make-obuf :base (region-address region) :capacity (region-size region)
                         :end (first-window-end (region-size region) limit)
                         :limit limit :room-fn #'region-room :sink region :holdable t)))
    (declare (dynamic-extent ob))       ; FN is given it for its extent only
    (unwind-protect (funcall fn ob)
      (give-back-region (obuf-sink ob)))))

(defun region-to-vector (ob)
  "A fresh simple octet vector holding everything written to OB."
  (let ((v (make-array (obuf-pos ob) :element-type '(unsigned-byte 8))))
    (prefault-vector v (obuf-pos ob))
    (with-pinned-objects (v)
      (copy-memory (obuf-sap ob) (vector-pointer v) (obuf-pos ob)))
    v))
