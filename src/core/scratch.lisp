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
reuse (one per kind: the store's tables of objects and of conses written,
the restore's vectors of objects and of conses by id).  Reuse spares a large store or restore the page faults of
fresh memory.  0 keeps nothing.  See RELEASE-SCRATCH.")

(sb-ext:defglobal **scratch** (make-array 4 :initial-element nil)
  "The spare buffer of each kind, as (bytes . buffer), or NIL.")

(defconstant +scratch-table+ 0 "Kind: the (keys . ids) vectors of a store's table of objects.")
(defconstant +scratch-cons-table+ 3 "Kind: the (keys . ids) vectors of a store's table of conses.")
(defconstant +scratch-refs+ 1 "Kind: a restore's vector of objects by id.")
(defconstant +scratch-cons-refs+ 2 "Kind: a restore's vector of conses by id.")

(defun take-scratch (kind acceptable-p)
  "Take the spare buffer of KIND if there is one and ACCEPTABLE-P (called
with it) is true of it; otherwise NIL.  A spare buffer is always cleared."
  (let ((entry (svref **scratch** kind)))
    (when (and entry
               (funcall acceptable-p (cdr entry))
               (eq entry (sb-ext:compare-and-swap (svref **scratch** kind) entry nil)))
      (cdr entry))))

(defun offer-scratch (kind buffer bytes)
  "Keep BUFFER, already cleared and BYTES large, as the spare of KIND, unless
it is over *SCRATCH-LIMIT* or a spare at least as large is kept already."
  (when (<= bytes *scratch-limit*)
    (let ((old (svref **scratch** kind)))
      (when (or (null old) (< (car old) bytes))
        (sb-ext:compare-and-swap (svref **scratch** kind) old (cons bytes buffer)))))
  nil)

(defun release-scratch ()
  "Drop the working buffers binstore keeps between calls (see
*SCRATCH-LIMIT*), so the garbage collector can reclaim them.  Returns the
number of bytes released."
  (loop for kind below (length **scratch**)
        for entry = (svref **scratch** kind)
        when (and entry (eq entry (sb-ext:compare-and-swap (svref **scratch** kind) entry nil)))
          sum (car entry)))
