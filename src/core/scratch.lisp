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
id).  Reuse spares a large store or restore the page faults of fresh
memory.  0 keeps nothing.  See RELEASE-SCRATCH.")

(sb-ext:defglobal **scratch** (make-array 5 :initial-element nil)
  "The spare buffer of each kind, as a SPARE, or NIL.")

(defconstant +scratch-table+ 0 "Kind: the (keys . ids) vectors of a store's table of objects.")
(defconstant +scratch-cons-table+ 3 "Kind: the (keys . ids) vectors of a store's table of conses.")
(defconstant +scratch-refs+ 1 "Kind: a restore's vector of objects by id.")
(defconstant +scratch-cons-refs+ 2 "Kind: a restore's vector of conses by id.")
(defconstant +scratch-output+ 4 "Kind: a store's output region (foreign memory).")

(defstruct (spare (:constructor make-spare (bytes buffer dispose)))
  (bytes 0 :type unsigned-byte)
  buffer
  ;; called with BUFFER when it is dropped: foreign memory must be freed
  (dispose nil :type (or null function)))

(defun drop-spare (spare)
  (when (and spare (spare-dispose spare))
    (funcall (spare-dispose spare) (spare-buffer spare))))

(defun take-scratch (kind acceptable-p)
  "Take the spare buffer of KIND if there is one and ACCEPTABLE-P (called
with it) is true of it; otherwise NIL.  A spare buffer is always cleared."
  (let ((spare (svref **scratch** kind)))
    (when (and spare
               (funcall acceptable-p (spare-buffer spare))
               (eq spare (sb-ext:compare-and-swap (svref **scratch** kind) spare nil)))
      (spare-buffer spare))))

(defun offer-scratch (kind buffer bytes &optional dispose)
  "Keep BUFFER, already cleared and BYTES large, as the spare of KIND, unless
it is over *SCRATCH-LIMIT* or a spare at least as large is kept already.
DISPOSE, if given, is called with a buffer that is not kept, or no longer."
  (let ((new (make-spare bytes buffer dispose))
        (old (svref **scratch** kind)))
    (if (and (<= bytes *scratch-limit*)
             (or (null old) (< (spare-bytes old) bytes))
             (eq old (sb-ext:compare-and-swap (svref **scratch** kind) old new)))
        (drop-spare old)
        (drop-spare new)))
  nil)

(defun release-scratch ()
  "Drop the working buffers binstore keeps between calls (see
*SCRATCH-LIMIT*), so the garbage collector can reclaim them (foreign
memory is freed at once).  Returns the number of bytes released."
  (loop for kind below (length **scratch**)
        for spare = (svref **scratch** kind)
        when (and spare (eq spare (sb-ext:compare-and-swap (svref **scratch** kind) spare nil)))
          sum (progn (drop-spare spare) (spare-bytes spare))))
