;;;; The staging vector: what a store to a stream is written through, and a
;;;; restore from a stream read through, pinned for the call.
;;;;
;;;; Made afresh, its 64 KiB cost a small call more than everything else
;;;; together: storing a six-element list to a stream took 7-8 µs, against
;;;; 0.3 µs into a vector, most of it spent making and zeroing the vector.
;;;; So one is kept between calls (see scratch.lisp), as the output region
;;;; is.  Nothing it held is ever read again: a window starts empty.

(in-package #:binstore)

(defconstant +stream-buffer-size+ (* 64 1024)
  "Bytes of the window a stream is written or read through.")

(define-scratch-kind +scratch-staging+ #'length)

(defun take-staging (size)
  "An octet vector of at least SIZE bytes, the caller's alone, to stage a
stream through: the kept one, for up to +STREAM-BUFFER-SIZE+ bytes, else a
new one."
  (declare (type index size))
  (or (and (<= size +stream-buffer-size+)
           (take-scratch +scratch-staging+))
      (make-array (max size +stream-buffer-size+) :element-type '(unsigned-byte 8))))

(defun give-back-staging (vector)
  "The call staging through VECTOR (from TAKE-STAGING) is over: keep it if
it is of the size kept."
  (when (= (length vector) +stream-buffer-size+)
    (offer-scratch +scratch-staging+ vector)))
