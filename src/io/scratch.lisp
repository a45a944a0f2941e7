;;;; Working memory kept between calls.
;;;;
;;;; A large STORE needs a large identity table, a large RESTORE a large
;;;; vector of objects by id.  Freshly allocated, such memory is paid for
;;;; twice: the kernel faults every new page in (after a full collection SBCL
;;;; has handed its free pages back), and growing copies what was there.
;;;; Measured here, faulting costs more than the table's work itself (filling
;;;; a table for a million conses: 46 ms fresh, 16 ms in memory used before).
;;;; So the largest such buffer of each kind is kept, cleared, for the next
;;;; call, up to *SCRATCH-LIMIT* bytes; RELEASE-SCRATCH lets it go.
;;;;
;;;; Threads take a spare buffer with compare-and-swap, so two calls never
;;;; share one; a call that finds none allocates its own.

(in-package #:binstore)

(defvar *scratch-limit* (* 64 1024 1024)
  "The largest working buffer, in bytes, binstore keeps between calls to
reuse (one per kind: the store's tables of objects and of conses written
and its output region, the restore's vectors of objects and of conses by
id, and the vector streams are read and written through).  Reuse spares a
large store or restore the page faults of fresh memory, and a small one
to or from a stream the allocation of its 64 KiB vector.  0 keeps
nothing.  See RELEASE-SCRATCH.")

;;; A kind's buffer is kept as it is, not in a wrapper: a wrapper would be
;;; made at every call that gives a buffer back, and a small store or
;;; restore otherwise allocates nothing but its result.

(defconstant +scratch-kinds+ 6 "How many kinds of buffer are kept.")

(define-global **scratch** (make-array +scratch-kinds+ :initial-element nil)
  "The spare buffer of each kind, or NIL.")

(defconstant +scratch-table+ 0 "Kind: a store's table of objects (an identity table).")
(defconstant +scratch-cons-table+ 3 "Kind: a store's table of conses (an identity table).")
(defconstant +scratch-refs+ 1 "Kind: a restore's vector of objects by id.")
(defconstant +scratch-cons-refs+ 2 "Kind: a restore's (conses by id . run lengths) vectors.")
(defconstant +scratch-output+ 4 "Kind: a store's output region (foreign memory).")
(defconstant +scratch-staging+ 5 "Kind: the vector a stream is read or written through.")

(define-global **scratch-kinds** (make-array +scratch-kinds+ :initial-element nil)
  "For each kind, (BYTES . DISPOSE): the functions that measure one of its
buffers and free it when it is dropped (NIL: the collector frees it).  Set
once, where the buffers of the kind are defined (DEFINE-SCRATCH-KIND).")

(defun define-scratch-kind (kind bytes &optional dispose)
  "Say how a buffer of KIND is measured (BYTES, called with the buffer,
returns its size in bytes) and, for foreign memory, freed (DISPOSE)."
  (setf (svref **scratch-kinds** kind) (cons bytes dispose)))

(defun scratch-bytes (kind buffer)
  (funcall (the function (car (svref **scratch-kinds** kind))) buffer))

(defun drop-scratch (kind buffer)
  (let ((dispose (cdr (svref **scratch-kinds** kind))))
    (when dispose
      (funcall (the function dispose) buffer))))

(defun take-scratch (kind)
  "Take the spare buffer of KIND if there is one, else NIL.  The caller owns
it alone.  A spare buffer holds nothing a call could read: it is cleared,
or (a staging vector) only read where the call has written."
  (let ((spare (svref **scratch** kind)))
    (and spare
         (eq spare (compare-and-swap (svref **scratch** kind) spare nil))
         spare)))

(defun offer-scratch (kind buffer)
  "Keep BUFFER, already cleared, as the spare of KIND, unless it is over
*SCRATCH-LIMIT* or a spare at least as large is kept already (with
several threads both may be given back); drop the one not kept."
  ;; OLD may be taken by another thread while it is measured here: that
  ;; only reads its size, and the compare-and-swap then fails.
  (let ((old (svref **scratch** kind))
        (bytes (scratch-bytes kind buffer)))
    (if (and (<= bytes *scratch-limit*)
             (or (null old) (< (scratch-bytes kind old) bytes))
             (eq old (compare-and-swap (svref **scratch** kind) old buffer)))
        (when old (drop-scratch kind old))
        (drop-scratch kind buffer)))
  nil)

(defun release-scratch ()
  "Drop the working buffers binstore keeps between calls (see
*SCRATCH-LIMIT*), so the garbage collector can reclaim them (foreign
memory is freed at once).  Returns the number of bytes released."
  (loop for kind below (length **scratch**)
        for spare = (svref **scratch** kind)
        when (and spare (eq spare (compare-and-swap (svref **scratch** kind) spare nil)))
          sum (prog1 (scratch-bytes kind spare)
                (drop-scratch kind spare))))

;;; A kept output region is memory mapped by this process: in a process
;;; started from a saved image its address is unmapped, and writing there
;;; would fault.  So nothing kept outlives an image save.
(call-before-image-save 'release-scratch)
