;;;; An EQ table from objects to ids, specialised for what STORE needs:
;;;; look an object up, and add it with the next id if it is new.
;;;;
;;;; Open addressing, hashed on the object's address (see ADDRESS-SLOT:
;;;; neighbouring addresses stay neighbours, separate regions do not collide),
;;;; probing with a fixed step (see +PROBE-STEP+).  Addresses change when the garbage collector moves objects:
;;;; the table remembers the GC epoch it was built in, and rebuilds itself
;;;; when a collection has happened since (rare: storing allocates little).
;;;; An object the current operation holds is referenced from the stack, and
;;;; SBCL's collector does not move such objects, so a collection in the
;;;; middle of an operation cannot misplace it; the next operation rebuilds.

(in-package #:binstore)

(defstruct (identity-table (:conc-name it-) (:constructor %make-identity-table))
  ;; KEYS and IDS always have MASK + 1 slots: a slot index masked with MASK
  ;; is within both, which PROBE and IDENTITY-TABLE-GET-OR-ADD rely on
  (keys nil :type simple-vector)              ; 0 marks an empty slot
  (ids nil :type (simple-array (unsigned-byte 32) (*)))
  (mask 0 :type index)
  (count 0 :type index)
  (limit 0 :type index)                       ; the count at which the table grows
  (epoch sb-kernel::*gc-epoch* :type cons)
  (scratch-kind +scratch-table+ :type fixnum)) ; which spare vectors it may use

(declaim (ftype function table-vectors))

(defun half-full (slots)
  "The count at which a table of SLOTS slots grows: it is kept at most
half full, so probes stay short."
  (floor slots 2))

(defun install-vectors (table keys ids)
  "Make KEYS and IDS TABLE's vectors, with the mask and limit they give.
The one place that sets them: it checks what the unchecked accesses of
PROBE rely on, that both have the same power-of-two number of slots."
  (declare (type identity-table table) (type simple-vector keys)
           (type (simple-array (unsigned-byte 32) (*)) ids))
  (let ((n (length keys)))
    (assert (and (= n (length ids)) (plusp n) (= n (ash 1 (1- (integer-length n)))))
            () "identity table vectors of ~d and ~d slots" n (length ids))
    (setf (it-keys table) keys (it-ids table) ids
          (it-mask table) (1- n) (it-limit table) (half-full n))
    table))
(defun make-identity-table (&key (size 1024) (scratch-kind +scratch-table+))
  (let ((n (max 64 (ash 1 (integer-length (1- (* 2 size)))))))
    (multiple-value-bind (keys ids) (table-vectors n scratch-kind)
      (install-vectors (%make-identity-table :keys keys :ids ids :scratch-kind scratch-kind)
                       keys ids))))

(declaim (inline address-slot))
(defun address-slot (object mask)
  "The home slot of OBJECT.  Objects within one 4 KiB page land in one run
of 256 slots, in address order, so walking data allocated in order touches
the table in order; the page picks where that run starts by a
multiplicative hash, so that separate regions of the heap (SBCL keeps conses
apart from other objects) do not pile onto the same slots."
  (declare (type fixnum mask))
  (let* ((a (sb-kernel:get-lisp-obj-address object))
         (h (logand (* (ash a -12) #x9E3779B97F4A7C15) #xFFFFFFFFFFFFFFFF)))
    (logand (+ (ash (ash h -32) 8) (logand (ash a -4) 255)) mask)))

(defconstant +probe-step+ 257
  "Distance between the slots a probe tries.  Odd, so a probe can reach
every slot.  Not 1: a page packed with 16-byte objects (doubles, conses)
fills its whole run of 256 slots, and a page whose run lands on such a run
would, probing slot by slot, have every object walk past it (27 probes on
average for a list of a million doubles).  A step just over a run moves
each of them to the next run instead (0.1 probes).")

(defconstant +smallest-kept-table+ 2048
  "Slots below which a table is not worth keeping for the next store.  The
first table of every store has this many, so a store of a little data
allocates no table at all (a fresh one was 24 KB, most of a small store's
allocation).")

(defun table-vectors (size kind)
  "Empty keys and ids vectors of at least SIZE slots: the spare ones kept
from an earlier store when they are large enough and not over sixteen times
too large (clearing and scattering over a huge table would cost more than
fresh memory), else new ones."
  (let ((spare (and (>= size +smallest-kept-table+)
                    (take-scratch kind
                                  (lambda (pair)
                                    (<= size (length (car pair)) (* 16 size)))))))
    (if spare
        (values (car spare) (cdr spare))
        (values (make-array size :initial-element 0)
                (make-array size :element-type '(unsigned-byte 32))))))

(defun release-identity-table (table)
  "The store using TABLE is over: keep its vectors, cleared, for the next
store when they are large enough to be worth it."
  (let ((keys (it-keys table)))
    (when (>= (length keys) +smallest-kept-table+)
      (let ((bytes (* 12 (length keys))))
        (when (<= bytes *scratch-limit*)
          (fill keys 0)
          (offer-scratch (it-scratch-kind table) (cons keys (it-ids table)) bytes))))
    ;; its vectors may now serve another table: this one gets a single
    ;; slot and a limit of 0, so a later use grows it afresh
    (install-vectors table (make-array 1 :initial-element 0)
                     (make-array 1 :element-type '(unsigned-byte 32)))
    (setf (it-count table) 0 (it-limit table) 0)
    nil))

(defun rebuild-identity-table (table new-size)
  "Re-insert every entry into empty vectors of (at least) NEW-SIZE slots, at
the positions the objects' current addresses give.  The vectors are allocated
before the GC epoch is read: allocating may collect, and a collection during
the re-insertion means starting it again, in the same vectors."
  (declare (type identity-table table) (type (integer 64 #.(expt 2 40)) new-size)
           (optimize speed))
  (multiple-value-bind (keys ids) (table-vectors new-size (it-scratch-kind table))
    (declare (type simple-vector keys) (type (simple-array (unsigned-byte 32) (*)) ids))
    (let ((mask (1- (length keys))))
      (loop
        (let ((epoch sb-kernel::*gc-epoch*)
              (old-keys (it-keys table))
              (old-ids (it-ids table)))
          (declare (type (simple-array (unsigned-byte 32) (*)) old-ids))
          (dotimes (i (length old-keys))
            (let ((key (svref old-keys i)))
              (unless (eql key 0)
                (let ((j (address-slot key mask)))
                  (loop until (eql (svref keys j) 0)
                        do (setf j (logand (+ j +probe-step+) mask)))
                  (setf (svref keys j) key
                        (aref ids j) (aref old-ids i))))))
          (when (eq epoch sb-kernel::*gc-epoch*)
            (install-vectors table keys ids)
            (setf (it-epoch table) epoch)
            (return table))
          (fill keys 0))))))

(declaim (inline grow-if-full))
(defun grow-if-full (table)
  "Keep the table at most half full (probes stay short); grow
fourfold while it is small, so a large store rebuilds it few times."
  (when (>= (it-count table) (it-limit table))
    (let ((size (length (it-keys table))))
      (rebuild-identity-table table (max 64 (if (< size (expt 2 20)) (* 4 size) (* 2 size)))))))

(declaim (inline identity-table-current))
(defun identity-table-current (table)
  "TABLE, rebuilt first if a collection has moved objects since it was built."
  (unless (eq (it-epoch table) sb-kernel::*gc-epoch*)
    (rebuild-identity-table table (length (it-keys table))))
  table)

(declaim (inline probe))
(defun probe (table object)
  "The index of OBJECT's slot in TABLE, or of the empty slot where it goes."
  (declare (type identity-table table) (optimize speed))
  (let* ((keys (it-keys table))
         (mask (it-mask table))
         (i (address-slot object mask)))
    (declare (type index i))
    (loop
      ;; I is masked, so within KEYS (see the structure): unchecked
      (let ((key (locally (declare (optimize (safety 0))) (svref keys i))))
        (when (or (eq key object) (eql key 0))
          (return i)))
      (setf i (logand (+ i +probe-step+) mask)))))

(defun identity-table-get (table object)
  "The id of OBJECT, or -1."
  (declare (type identity-table table) (optimize speed))
  (identity-table-current table)
  (let ((i (probe table object)))
    (locally (declare (optimize (safety 0)))   ; I comes from PROBE
      (if (eql (svref (it-keys table) i) 0)
          -1
          (aref (it-ids table) i)))))

(declaim (inline identity-table-get-or-add))
(defun identity-table-get-or-add (table object id)
  "The id of OBJECT if it is in TABLE; otherwise add it with ID and return
-1.  One probe where GET then ADD would take two."
  (declare (type identity-table table) (type (unsigned-byte 32) id) (optimize speed))
  (grow-if-full table)
  (identity-table-current table)
  (let ((i (probe table object))
        (keys (it-keys table))
        (ids (it-ids table)))
    (locally (declare (optimize (safety 0)))   ; I comes from PROBE
      (if (eql (svref keys i) 0)
          (progn (setf (svref keys i) object
                       (aref ids i) id)
                 (incf (it-count table))
                 -1)
          (aref ids i)))))

(declaim (inline identity-table-add))
(defun identity-table-add (table object id)
  "Record that OBJECT, not in TABLE, has ID; return ID."
  (identity-table-get-or-add table object id)
  id)

(defun identity-table-expect (table n)
  "Make room for N more entries at once, sparing the rebuilds of growing
step by step (each pays page faults on new vectors)."
  (let ((needed (* 2 (+ (it-count table) n))))
    (when (> needed (length (it-keys table)))
      (rebuild-identity-table table (ash 1 (integer-length needed))))))
