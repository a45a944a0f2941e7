;;;; What one STORE carries from object to object: the output buffer, the
;;;; table of objects already written with their ids, the nesting depth and
;;;; the containers whose contents are deferred to FILL records; and the
;;;; errors about what cannot be stored (an unstorable object, a circular
;;;; list), which the codecs and the encoder signal and the API completes
;;;; with the path from the root.
;;;;
;;;; Ids are implicit: every object of a tracked kind gets the next id when
;;;; it is written, in the order the decoder completes them (see
;;;; doc/FORMAT.md), and a later occurrence is written as a reference.
;;;; Symbols, packages and class descriptors are tracked in every mode; with
;;;; track-references every other heap object too; with shared list
;;;; structures every cons as well.

(in-package #:binstore)

;;; The state lives on the stack of the call to ENCODE (inline constructors,
;;; DYNAMIC-EXTENT there): a fresh one from the heap is about 200 bytes the
;;; processor has never seen, and for a small store their cache misses and
;;; zeroing cost more than the writing.  Nothing keeps a reference to it
;;; past the call: no condition or kept buffer points back to a state.
(declaim (inline %make-store-state make-store-state))
(defstruct (store-state (:conc-name ss-) (:constructor %make-store-state))
  (obuf nil :type obuf)
  (refs nil :type identity-table)      ; object -> id, for what was written
  ;; cons -> cons id (shared list structures).  A table of its own: conses
  ;; live on pages of their own, and the two sequences of pages, hashed into
  ;; one table, would collide in long runs.
  (cons-refs nil :type (or null identity-table))
  (track nil)                          ; track-references
  (lists nil)                          ; support-shared-list-structures
  (next-later 0 :type index)           ; LATER containers so far: FILL names them by this
  (depth 0 :type index)                ; containers open in the current record
  (depth-base 0 :type index)           ; logical depth where the current record starts
  (max-depth nil :type (or null index))
  (deferred '())                       ; (object later-number logical-depth info), filled later
  (no-defer nil)                       ; true while writing parts that must be complete
  (store-class-slots nil)
  (descriptors nil :type (or null hash-table)) ; class (or user codec) -> class-descriptor
  (codec-stack '() :type list)         ; objects whose DECODE codec's value is being written
  (last-wrapper nil)                   ; the layout of the instance asked for last,
  (last-descriptor nil)                ; and its class's descriptor
  (last-package nil)                   ; the package written last, and its id
  (last-package-id 0 :type index)
  (root nil))                          ; the data, to locate unstorable objects

(defun make-store-state (obuf &key track lists max-depth store-class-slots root)
  "A state for a store writing to OBUF.  Its tables are kept ones or new
ones from the heap (a function's result is never on the stack)."
  (%make-store-state :obuf obuf
                     :refs (make-identity-table)
                     :cons-refs (and track lists
                                     (make-identity-table :scratch-kind +scratch-cons-table+
                                                          :runs t))
                     :track (and track t) :lists (and track lists t)
                     :max-depth max-depth
                     :store-class-slots store-class-slots
                     :root root))

(declaim (inline written-id remember claim-cons-run
                 written-recurring-before-p remember-recurring))
(defun written-id (ss object)
  "The id OBJECT was written with (a cons id for a cons), or -1.  Any other
object not written before is marked as about to be (see
IDENTITY-TABLE-GET): REMEMBER must follow."
  (if (consp object)
      (let ((conses (ss-cons-refs ss)))
        (if conses (identity-table-get conses object) -1))
      (identity-table-get (ss-refs ss) object t)))

(defun remember (ss object)
  "OBJECT, which WRITTEN-ID found new, has just been written (its header, or
its parts): give it the next id."
  (identity-table-add-marked (ss-refs ss) object))

(defun written-recurring-before-p (ss object)
  "For a symbol, package or class descriptor, kinds met again as a rule:
if OBJECT was written before, write a reference to it and return T."
  (let ((id (identity-table-get-recurring (ss-refs ss) object)))
    (when (>= id 0)
      (write-ref (ss-obuf ss) id (ss-refs ss))
      t)))

(defun remember-recurring (ss object)
  "A symbol, package or class descriptor has just been written: give it the
next id (see WRITTEN-RECURRING-BEFORE-P)."
  (identity-table-add-recurring (ss-refs ss) object))

(defun claim-cons-run (ss list &optional (limit +largest-index+))
  "Give the run of conses from LIST, which was not written before, the next
cons ids (shared list structures): LIST and its cdrs up to the first cons
written before, the end, or LIMIT conses.  Return how many, and what
follows them.  (CLAIM-MORE-CONSES claims more of the run.)"
  (identity-table-claim-run (ss-cons-refs ss) list limit))

(defun claim-more-conses (ss list limit)
  "Claim for the run CLAIM-CONS-RUN opened the conses from LIST on, which
continues it, as CLAIM-CONS-RUN would; nothing else may take a cons id
between the two."
  (identity-table-claim-more (ss-cons-refs ss) list limit))

(declaim (inline tracked-kind-p))
(defun tracked-kind-p (x)
  "True unless X is of a kind that never takes an id (or, for conses, takes
one only with shared list structures)."
  (not (typep x '(or fixnum character single-float symbol cons))))

(defconstant +prefetch-from-count+ (expt 2 15)
  "Objects in the hash table past which their slots alone (a cache line
each, met in no order) outgrow a cache of 2 MiB: from there on prefetching
ahead of symbols pays (see PREFETCH-SYMBOLS-P).")

(declaim (inline prefetch-symbols-p))
(defun prefetch-symbols-p (ss)
  "Whether the collection writers should prefetch ahead of a run of symbols
(see prefetch.lisp): once the table holds more objects than the caches
nearest the processor hold lines, finding a symbol's slot and reading its
name miss the cache as a rule.  Below that, as with a pool of symbols met
again and again, they hit, and asking ahead costs more than it saves."
  (> (it-hashed-count (ss-refs ss)) +prefetch-from-count+))

(declaim (inline prefetch-symbol-parts))
(defun prefetch-symbol-parts (ss x)
  "When X is a symbol, ask for what writing it will look at after its first
line (which a PREFETCH-OBJECT some elements earlier should have brought in
by now): its name, and its slot in the table, where symbols are looked up
in every mode."
  (when (symbolp x)
    (prefetch-object (symbol-name x))
    (prefetch-home (ss-refs ss) x)))

(defun expect-tracked-elements (ss n first)
  "A container of N elements, the first FIRST, is about to be written: when
objects are tracked and FIRST is of a tracked kind, its siblings probably
are too, so make room for them in the table at once."
  (when (and (ss-track ss) (> n 1000) (tracked-kind-p first))
    ;; at most a million at once: beyond that, growing costs little in
    ;; proportion, and a wrong guess must not cost much memory
    (identity-table-expect (ss-refs ss) (min n 1000000))))

(defun finish-store-state (ss)
  "The store is complete: keep the identity table's memory for the next one."
  (release-identity-table (ss-refs ss))
  (when (ss-cons-refs ss)
    (release-identity-table (ss-cons-refs ss))))

(declaim (inline next-ref-p))
(defun next-ref-p (id table)
  "True when a reference to ID, 32 or above, is written as NEXT-REF: ID is
one above the id the last reference written named, which TABLE (the
store's table of objects) keeps.  Ids below 32 keep their one-byte small
reference, so the output does not change for them."
  (declare (type index id) (type identity-table table))
  (and (>= id +small-ref-count+) (= id (1+ (it-last-ref table)))))

(defun write-ref (ob id table)
  "Write a back-reference to ID: a small reference, a NEXT-REF, a short-ref
or a ref, the shortest that holds it.  TABLE is the store's table of
objects, which keeps the id named, for the next reference."
  (declare (type index id) (type identity-table table))
  (let ((next (next-ref-p id table)))
    (setf (it-last-ref table) id)
    (cond ((< id +small-ref-count+)
           (write-u8 ob (+ +first-small-ref-tag+ id)))
          (next (write-u8 ob +tag-next-ref+))
          ((< id +short-ref-limit+)
           (let ((k (- id +first-short-ref-id+)))
             (write-u8 ob (+ +tag-short-ref+ (ash k -8)))
             (write-u8 ob (ldb (byte 8 0) k))))
          (t (write-u8 ob +tag-ref+) (write-varint ob id)))))

(declaim (inline ref-length))
(defun ref-length (id table)
  "Bytes WRITE-REF and PUT-REF take for a reference to ID written now."
  (declare (type index id))
  (cond ((< id +small-ref-count+) 1)
        ((next-ref-p id table) 1)
        ((< id +short-ref-limit+) 2)
        (t (1+ (varint-length id)))))

(declaim (inline put-ref))
(defun put-ref (sap p id table)
  "Store a back-reference to ID at SAP+P (room for 6 bytes checked by the
caller); return the offset after it.  The bytes of WRITE-REF, and as it,
note ID in TABLE as the id named last."
  (declare (type index p) (type (unsigned-byte 32) id) (type identity-table table))
  (let ((next (next-ref-p id table)))
    (setf (it-last-ref table) id)
    (cond ((< id +small-ref-count+)
           (setf (mem-u8 sap p) (+ +first-small-ref-tag+ id))
           (1+ p))
          (next
           (setf (mem-u8 sap p) +tag-next-ref+)
           (1+ p))
          ((< id +short-ref-limit+)
           (let ((k (- id +first-short-ref-id+)))
             (setf (mem-u8 sap p) (+ +tag-short-ref+ (ash k -8))
                   (mem-u8 sap (1+ p)) (ldb (byte 8 0) k))
             (+ p 2)))
          (t (setf (mem-u8 sap p) +tag-ref+)
             (put-varint sap (1+ p) id)))))

(defun write-cons-ref (ob id)
  "Write a reference to the cons ID: a short-cons-ref or a cons-ref, the
shorter that holds it."
  (declare (type index id))
  (if (< id +short-cons-ref-limit+)
      (progn (write-u8 ob (+ +tag-short-cons-ref+ (ash id -8)))
             (write-u8 ob (ldb (byte 8 0) id)))
      (progn (write-u8 ob +tag-cons-ref+)
             (write-varint ob id))))

(declaim (inline leaf-refs))
(defun leaf-refs (ss)
  "The table the number writers (PUT-LEAF) look boxed numbers up in: the
table of objects written when references are tracked, else NIL."
  (and (ss-track ss) (ss-refs ss)))

(declaim (inline written-before-or-remember-p))
(defun written-before-or-remember-p (ss object)
  "For an object without parts: if it was written before, write a reference
and return T; otherwise give it the next id now (it is complete as soon as it
is written) and return NIL."
  (let ((id (identity-table-get-or-add (ss-refs ss) object)))
    (when (>= id 0)
      (write-ref (ss-obuf ss) id (ss-refs ss))
      t)))

(declaim (inline written-before-p))
(defun written-before-p (ss object)
  "If OBJECT was written before, write a reference to it and return T;
otherwise (but for a cons) REMEMBER must follow, as WRITTEN-ID says."
  (let ((id (written-id ss object)))
    (when (>= id 0)
      (if (consp object)
          (write-cons-ref (ss-obuf ss) id)
          (write-ref (ss-obuf ss) id (ss-refs ss)))
      t)))

(defun depth-limit-error (max track lists)
  "Signal that the data nests deeper than MAX, naming the option that
would store it when the store does not keep every identity (TRACK,
LISTS): such data is most likely circular."
  (error 'store-limit-exceeded
         :limit :max-depth :value max
         :message (cond ((not track)
                         (format nil "the data nests deeper than max-depth (it may be circular, which ~
                          :track-references nil cannot store: store it with :track-references t, ~
                          the default)"))
                        ((not lists)
                         (format nil "the data nests deeper than max-depth (it may be circular through ~
                          conses, which :support-shared-list-structures nil cannot store: store ~
                          it with :support-shared-list-structures t, the default)"))
                        (t "the data nests deeper than max-depth"))))

(declaim (inline check-store-depth))
(declaim (inline inline-container-allowed-p))
(defun inline-container-allowed-p (ss)
  "True when a container written now is neither deferred (a LATER record)
nor past max-depth: what the writers of short containers in one function
check before writing one."
  (let ((max (ss-max-depth ss)))
    (and (< (ss-depth ss) +max-physical-depth+)
         (or (null max) (< (+ (ss-depth ss) (ss-depth-base ss)) max)))))

(defun check-store-depth (ss)
  "Signal LIMIT-EXCEEDED when the logical depth passes max-depth."
  (let ((max (ss-max-depth ss)))
    (when (and max (> (+ (ss-depth ss) (ss-depth-base ss)) max))
      (depth-limit-error max (ss-track ss) (ss-lists ss)))))

;;; What cannot be stored: the errors that name the object, and where it
;;; sits.

(declaim (ftype (function (t) nil) circular-list-error)) ; signals, never returns
(defun circular-list-error (list)
  "Signal CIRCULAR-LIST for LIST; ENCODE adds the path to it."
  (error 'circular-list :list list))

(declaim (ftype (function (t) (values boolean &optional)) unstorable-p))
(defun unstorable-p (x)
  "True for objects binstore refuses to store: they stand for code or for
resources of the running image."
  (typep x '(or function stream pointer class system-object)))

(defun storable-instance-p (x)
  (and (typep x '(or structure-object standard-object condition))
       (not (unstorable-p x))))

(declaim (ftype (function (t t) nil) unstorable)) ; signals, never returns
(defun unstorable (ss x)
  (error 'unstorable-object :object x :path (path-to ss x)
                            :message "this kind of object cannot be stored"))

;;; Where an unstorable object sits: found after the fact by a breadth-first
;;; search from the root, so the writer keeps no path while it works.

(defun object-children (x)
  "The (child . step) pairs of X that the writer would visit."
  (let ((children '()))
    (flet ((add (child step) (push (cons child step) children)))
      (typecase x
        (cons (add (car x) '(:car)) (add (cdr x) '(:cdr)))
        (array
         (when (eq (array-element-type x) t)
           (dotimes (i (array-total-size x))
             (add (row-major-aref x i) (list (if (vectorp x) :elt :aref) i)))))
        (hash-table
         (maphash (lambda (k v) (add k (list :key k)) (add v (list :value k))) x))
        (t
         (when (storable-instance-p x)
           (dolist (slotd (class-slots (class-of x)))
             (let ((name (slot-definition-name slotd)))
               ;; a structure's slots are always bound (and ABCL's
               ;; SLOT-BOUNDP fails on them)
               (when (or (typep x 'structure-object) (slot-boundp x name))
                 (add (slot-value x name) (list :slot name)))))))))
    (nreverse children)))

(defun path-to (ss target)
  "A list of steps from the stored root to TARGET, or NIL if not found."
  (let ((seen (make-hash-table :test 'eq))
        (queue (make-array 16 :adjustable t :fill-pointer 0)))
    (vector-push-extend (cons (ss-root ss) '()) queue)
    (loop for i from 0
          while (< i (length queue))
          do (destructuring-bind (x . path) (aref queue i)
               (when (eq x target)
                 (return-from path-to (reverse path)))
               (loop for (child . step) in (object-children x)
                     unless (or (gethash child seen)
                                (typep child '(or number character symbol)))
                       do (setf (gethash child seen) t)
                          (vector-push-extend (cons child (cons step path)) queue))))
    nil))
