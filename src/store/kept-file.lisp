;;;; The store file's descriptor, kept open between transactions.
;;;;
;;;; Opening and closing the store file costs two system calls when a
;;;; transaction loads its state and two more when it commits in place:
;;;; some 12 µs of a small transaction's 50 here.  So a store keeps the
;;;; descriptor it used last, with the device and inode numbers of the file
;;;; it is open on.  The next transaction looks at the file's name (one
;;;; stat(2), which it needs anyway for the file's size): when the name still
;;;; names that file, it reads and commits through the kept descriptor.  The
;;;; name names another file once a commit with :fsync, in this process or
;;;; another, has renamed a new file over it (or a program has removed it):
;;;; then the kept descriptor is closed and the file opened again.
;;;;
;;;; One transaction at a time uses a kept descriptor: it takes it from the
;;;; store's cell with compare-and-swap and gives it back at its end, so
;;;; threads sharing a store never share a file position; a thread that
;;;; finds the cell empty opens the file itself.  A descriptor is used only
;;;; by the process that opened it: a forked child closes its copy (the file
;;;; position is shared with the parent) and opens its own; a process
;;;; started from a saved image forgets it unclosed, as its number means
;;;; nothing there.

(in-package #:binstore)

(define-global **image-epoch** (list 0)
  "Counts (in its CAR) the starts of this image from a saved one: a kept
descriptor remembers the count it was opened at.")

(defun note-image-start ()
  (incf (car **image-epoch**)))

(call-when-image-starts 'note-image-start)

(defstruct (kept-file (:constructor make-kept-file (fd writable))
                      (:copier nil) (:predicate nil))
  "A descriptor FD open on a store file, which DEVICE and INODE name (NIL
until its fstat(2), or on a platform without them: then it is not kept);
WRITABLE when opened for writing too; opened by the process PROCESS while
the image's epoch was EPOCH."
  (fd 0 :type fixnum :read-only t)
  (device nil :type (or null (unsigned-byte 64)))
  (inode nil :type (or null (unsigned-byte 64)))
  (writable nil :read-only t)
  (process (process-id) :read-only t)
  (epoch (car **image-epoch**) :read-only t))

(defun make-kept-file-cell ()
  "The cell a store keeps its descriptor in: empty."
  (make-array 1 :initial-element nil))

(defun close-kept-file (kept)
  "Close KEPT's descriptor when this process opened it; forget it either
way.  Never signals: a failed close(2) has freed the descriptor anyway."
  (when (and (= (kept-file-epoch kept) (car **image-epoch**))
             (= (kept-file-process kept) (process-id)))
    (system-close (kept-file-fd kept)))
  nil)

(defun take-kept-file (cell)
  "Take the descriptor kept in CELL: a KEPT-FILE this process may use, or
NIL (none kept, another thread has it, or another process opened it)."
  (let ((kept (svref cell 0)))
    (when (and kept (eq kept (compare-and-swap (svref cell 0) kept nil)))
      (if (and (= (kept-file-epoch kept) (car **image-epoch**))
               (= (kept-file-process kept) (process-id)))
          kept
          ;; a forked child's copy shares the parent's file position
          (close-kept-file kept)))))

(defun give-back-kept-file (cell kept)
  "Keep KEPT in CELL for the next transaction, unless one is kept already
\(another thread's) or the file it is open on is not known: then close it."
  (unless (and (kept-file-inode kept)
               (null (compare-and-swap (svref cell 0) nil kept)))
    (close-kept-file kept))
  nil)

(defun release-kept-file (cell)
  "Close the descriptor kept in CELL, if any (the store is being closed)."
  (let ((kept (take-kept-file cell)))
    (when kept
      (close-kept-file kept))))

(defun close-kept-file-when-collected (owner cell)
  "Close the descriptor kept in CELL once OWNER, the store that keeps it,
is garbage: a store its program never closed gives its descriptor back."
  (call-when-collected owner (lambda ()
                               (let ((kept (svref cell 0)))
                                 (when kept
                                   (setf (svref cell 0) nil)
                                   (close-kept-file kept))))))

(defun note-kept-file-identity (kept status)
  "Remember in KEPT the file STATUS, its descriptor's FILE-STATUS, names."
  (setf (kept-file-device kept) (file-status-device status)
        (kept-file-inode kept) (file-status-inode status)))

(defun kept-file-names-p (kept status)
  "Whether KEPT is open on the file STATUS (a FILE-STATUS of the store
file's name) describes."
  (and (kept-file-inode kept)
       (eql (kept-file-device kept) (file-status-device status))
       (eql (kept-file-inode kept) (file-status-inode status))))
