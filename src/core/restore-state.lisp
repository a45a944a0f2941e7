;;;; What one RESTORE carries from object to object: the input buffer, the
;;;; vector of objects by id, the depth, the allocation allowance and the
;;;; containers whose contents will arrive in FILL records.  Reading an
;;;; object with it, which calls up into the decoder, is reading.lisp.

(in-package #:binstore)

(define-global **unset** (make-symbol "UNSET")
  "Stands for the value of an unbound slot while an instance is read.")

;;; Empty vectors for the slots that start without one: shared, as nothing
;;; is ever stored in a vector of length 0 (a restore of a small object made
;;; six of them, a third of what it allocated besides the object).
(define-global **no-objects** (make-array 0))
(define-global **no-lengths** (make-array 0 :element-type 'fixnum))
(define-global **no-characters** (make-string 0))

(defstruct (pending-fill (:constructor make-pending-fill (kind object info depth)))
  kind object info depth)

;;; A long run of boxed floats (double-floats and complexes of them, in a
;;; list or a simple vector, read by the loops of FILL-CARS and
;;; FILL-ELEMENTS) takes consecutive ids, but its boxes are not stored by id
;;; as they are made: a run of a million doubles would write 8 MB of ids,
;;; and clear them after, for references that data of numbers seldom makes.
;;; The run is noted instead (a LAZY-RUN), its entries left 0, and the
;;; vector of ids is not even grown for it: the ids past its end are all in
;;; lazy runs, and a fresh part of it is 0 (with no vector kept from an
;;; earlier restore, growing it for a million doubles made 12 MB of fresh
;;; memory, a fifth of the restore's time).  Before any
;;; reference is resolved, the runs noted so far are stored by id
;;; (SETTLE-LAZY-RUNS): a restore that meets references pays what it paid
;;; before, once, and the loops over references check nothing per element.

(defstruct (lazy-run (:constructor make-lazy-run (start n source position)))
  (start 0 :type index)                 ; the id of its first box
  (n 0 :type index)                     ; how many boxes
  ;; the first box is the car of the cons SOURCE (a list's run), or
  ;; element POSITION of the simple vector SOURCE
  (source nil :type (or cons simple-vector))
  (position 0 :type index))

(defstruct (open-run (:constructor make-open-run (first-id n left)))
  "A long run of conses, read a piece at a time (READ-LIST-IN-PIECES),
whose N cons ids, from FIRST-ID, were all given when its first piece was
made; LEFT of its conses are still to make."
  (first-id 0 :type index)
  (n 0 :type index)
  (left 0 :type index))

(defconstant +lazy-run-boxes+ 32
  "Runs of boxes shorter than this are stored by id as they are made: a
LAZY-RUN costs more than their entries.")

;;; The state lives on the stack of the call to DECODE, as a store's does
;;; (see store-state.lisp): a restore of a small object allocated 300
;;; bytes, most of them this state and its IBUF, fresh memory the processor
;;; had to fetch and zero.  Every vector it holds comes from the heap, made
;;; by a called function (a slot's constructor argument, or its initform,
;;; could be made on the stack with it).
(declaim (inline %make-restore-state make-restore-state))
(defstruct (restore-state (:conc-name rs-) (:constructor %make-restore-state))
  (ibuf nil :type ibuf)
  (refs **no-objects** :type simple-vector)
  (next-id 0 :type index)
  (last-ref -1 :type fixnum)           ; the id the last reference named (NEXT-REF)
  (cons-refs **no-objects** :type simple-vector) ; cons id -> cons
  (run-lengths **no-lengths** ; first cons id of a run -> its length, 0 for 1
   :type (simple-array fixnum (*)))
  (next-cons-id 0 :type index)
  (next-later 0 :type index)           ; LATER containers so far
  (depth 0 :type index)                ; containers open in the current record
  (depth-base 0 :type index)           ; logical depth where the current record starts
  (max-depth nil :type (or null index))
  (stack-limit 0 :type word)    ; how far the control stack may grow (STACK-LIMIT)
  (alloc-left nil :type (or null index)) ; bytes we may still allocate
  (allocated 0 :type index)            ; bytes of small objects so far (KEEP-RUNWAYS)
  (next-look +prefault-bytes+ :type index) ; ALLOCATED at the next look at the runways
  (runways nil :type (or null cons))   ; the cons runway and the other one, from then
  (lazy-runs **no-objects** :type simple-vector) ; LAZY-RUNs not settled, in id order,
  (lazy-count 0 :type index)                     ; LAZY-COUNT of them
  (open-runs '() :type list)           ; OPEN-RUNs, innermost first
  (pending nil)                        ; LATER rank -> pending-fill
  (postponed '())                      ; (table . pairs) to insert once the record is complete
  (finish '())                         ; (instance . functions) to call then, newest first
  (scratch **no-characters** :type (simple-array character (*))) ; names being looked up (grown as needed)
  (track t)                            ; heap objects get ids (+track-objects+)
  (track-conses nil)                   ; conses get ids (+track-conses+)
  (intern-symbols t))

(defconstant +stack-margin+ (* 256 1024)
  "Control stack kept free beyond the decoder's deepest recursion, for handlers
and the debugger.")

(declaim (notinline initial-refs))
(defun initial-refs (ibuf)
  "A vector of objects by id for a restore from IBUF: the kept one, else
one sized from the input.  Not inline: the vector must not be made on the
stack with the state (see above)."
  (or (take-scratch +scratch-refs+)
      ;; each id costs at least a byte of input: start from a share of it,
      ;; growing past that
      (make-array (max 256 (min (ash (available ibuf) -5) (* 1024 1024))))))

(defun make-restore-state (ibuf &key max-depth intern-symbols max-alloc)
  "A state for a restore reading IBUF."
  (%make-restore-state :ibuf ibuf :max-depth max-depth
                       :refs (initial-refs ibuf)
                       :stack-limit (stack-limit +stack-margin+)
                       :alloc-left (and max-alloc (min max-alloc +largest-index+))
                       :intern-symbols intern-symbols))

(defun clear-cons-refs (rs)
  "Clear what the restore stored in its vectors of conses by id: for each
run, its length and the filled entries, which start at its first cons."
  (declare (type restore-state rs) (optimize speed))
  (let ((refs (rs-cons-refs rs))
        (lengths (rs-run-lengths rs))
        (used (rs-next-cons-id rs))
        (k 0))
    (declare (type index k used))
    (loop while (< k used)
          do (let ((n (aref lengths k)))
               (declare (type index n))
               ;; the first entry is always filled; the others of a longer
               ;; run up to the last one a reference filled.  A single cons
               ;; left its length 0 (see REGISTER-RUN).
               (setf (svref refs k) 0)
               (when (> n 1)
                 (loop for i of-type index from (1+ k) below (+ k n)
                       while (consp (svref refs i))
                       do (setf (svref refs i) 0))
                 (setf (aref lengths k) 0))
               (incf k (max n 1))))))      ; every run has a cons: never stuck

(defun clear-refs (rs)
  "Clear what the restore stored in its vector of objects by id: every
entry below NEXT-ID but those of the lazy runs not settled (which may reach
past its end)."
  (declare (type restore-state rs) (optimize speed))
  (let* ((refs (rs-refs rs))
         (runs (rs-lazy-runs rs))
         (length (length refs))
         (from 0))
    (declare (type index from))
    (flet ((clear (start end)
             (fill refs 0 :start (min start length) :end (min end length))))
      (dotimes (i (rs-lazy-count rs))
        (let ((run (svref runs i)))
          (declare (type lazy-run run))
          (clear from (lazy-run-start run))
          (setf from (+ (lazy-run-start run) (lazy-run-n run)))))
      (clear from (rs-next-id rs)))))

(defun finish-restore-state (rs)
  "The restore is complete: clear the vectors of objects by id (they must
not keep the restored data alive) and keep them for the next restore.  RS
is not used after this."
  (flet ((keep-p (vector)
           (<= 2048 (* 8 (length vector)) *scratch-limit*)))
    (when (keep-p (rs-refs rs))
      (clear-refs rs)
      (offer-scratch +scratch-refs+ (rs-refs rs)))
    (when (keep-p (rs-cons-refs rs))
      (clear-cons-refs rs)
      (offer-scratch +scratch-cons-refs+ (cons (rs-cons-refs rs) (rs-run-lengths rs))))))

(define-scratch-kind +scratch-refs+ (lambda (refs) (* +word-bytes+ (length refs))))
(define-scratch-kind +scratch-cons-refs+
  (lambda (pair) (* 2 +word-bytes+ (length (car pair)))))

(defun restore-invalid (rs message &optional expected)
  (invalid (rs-ibuf rs) message expected))

(defun grow-refs (rs needed)
  "Make the vector of objects by id at least NEEDED long, doubling it at
least."
  ;; Every id below NEXT-ID has its entry (its object, or 0 in a lazy run
  ;; not settled) or lies past the end in a lazy run, so the new part needs
  ;; no filling.
  (declare (type restore-state rs) (type index needed))
  (let* ((refs (rs-refs rs))
         (new (make-array (max needed (* 2 (length refs))))))
    (prefault-vector new (* +word-bytes+ (length refs)))
    (replace new refs)
    (setf (rs-refs rs) new)))

(declaim (inline refs-for))
(defun refs-for (rs needed)
  "The vector of objects by id, grown first if it is shorter than NEEDED."
  (declare (type restore-state rs) (type index needed))
  (when (> needed (length (rs-refs rs)))
    (grow-refs rs needed))
  (rs-refs rs))

(declaim (inline register-always register))
(defun register-always (rs object)
  "Give OBJECT the next id; return OBJECT."
  (let ((id (rs-next-id rs)))
    (setf (svref (refs-for rs (1+ id)) id) object
          (rs-next-id rs) (1+ id))
    object))

(defun register (rs object)
  "Give OBJECT, a heap object of a tracked kind, the next id when the stream
tracks objects; return OBJECT."
  (if (rs-track rs)
      (register-always rs object)
      object))

(defun put-boxes (refs start n source position)
  "Store in REFS from START the N boxes from the car of the cons SOURCE on,
or from element POSITION of the simple vector SOURCE."
  (declare (type simple-vector refs) (type index start n position)
           (type (or cons simple-vector) source) (optimize speed))
  (if (consp source)
      (loop for k of-type index from start below (+ start n)
            for c = source then (cdr c)
            do (setf (svref refs k) (car c)))
      (replace refs source :start1 start :end1 (+ start n) :start2 position)))

(defun register-boxes (rs source position n)
  "The N boxes just made (by a loop over boxed floats) from the car of the
cons SOURCE on, or from element POSITION of the simple vector SOURCE, take
the next N ids (when the stream tracks objects): stored by id now if they
are few, else as a lazy run (see LAZY-RUN), which takes no room in the
vector of objects by id until it is settled: it may end past the vector's
end, which then grows only if a reference is resolved."
  (declare (type restore-state rs) (type (or cons simple-vector) source)
           (type index position n))
  (when (rs-track rs)
    (let ((start (rs-next-id rs)))
      (if (< n +lazy-run-boxes+)
          (put-boxes (refs-for rs (+ start n)) start n source position)
          (let ((runs (rs-lazy-runs rs))
                (count (rs-lazy-count rs)))
            (when (= count (length runs))
              (setf runs (replace (make-array (max 16 (* 2 count))) runs)
                    (rs-lazy-runs rs) runs))
            (setf (svref runs count) (make-lazy-run start n source position)
                  (rs-lazy-count rs) (1+ count))))
      (setf (rs-next-id rs) (+ start n))))
  (values))

(defun settle-lazy-runs (rs)
  "Store the boxes of every lazy run by id (a reference is about to be
resolved)."
  (declare (type restore-state rs))
  (let ((runs (rs-lazy-runs rs))
        (refs (refs-for rs (rs-next-id rs))))
    (dotimes (i (rs-lazy-count rs))
      (let ((run (svref runs i)))
        (put-boxes refs (lazy-run-start run) (lazy-run-n run)
                   (lazy-run-source run) (lazy-run-position run))
        (setf (svref runs i) 0)))
    (setf (rs-lazy-count rs) 0)))

(declaim (inline settled-refs))
(defun settled-refs (rs)
  "The vector of objects by id, every entry below NEXT-ID holding its
object: what references are resolved in."
  (declare (type restore-state rs))
  (when (plusp (rs-lazy-count rs))
    (settle-lazy-runs rs))
  (rs-refs rs))

(defun grow-cons-refs (rs)
  "Make room for more cons ids: first vectors sized from the input (a cons
costs at least a byte of it), then doubling."
  (let ((old (rs-cons-refs rs)))
    (destructuring-bind (refs . lengths)
        (if (zerop (length old))
            (or (take-scratch +scratch-cons-refs+)
                (let ((n (max 256 (min (available (rs-ibuf rs)) (* 4 1024 1024)))))
                  (cons (make-array n) (make-array n :element-type 'fixnum))))
            (cons (make-array (* 2 (length old)))
                  (make-array (* 2 (length old)) :element-type 'fixnum)))
      (replace refs old)
      (replace lengths (rs-run-lengths rs))
      (setf (rs-cons-refs rs) refs
            (rs-run-lengths rs) lengths))))

;;; A run of conses takes consecutive cons ids, but only its first cons is
;;; stored by id when the run is made (with the run's length, by the same
;;; id, for clearing after): most conses are never referenced, and storing
;;; each would cost a write per cons and a clear after.  The entry of any
;;; later cons of a run is filled when that cons is first asked for, by
;;; following cdrs from the nearest filled entry below it; the cdrs inside a
;;; run never change once it is made, so that entry's cons leads to it.

(declaim (inline register-run))
(defun register-run (rs run n)
  "Give the N conses of the fresh list RUN the next N cons ids.  Inline:
a single cons (a CONS record) is a run, and there may be millions."
  (declare (type restore-state rs) (type cons run) (type index n))
  (let ((id (rs-next-cons-id rs)))
    (loop while (> (+ id n) (length (rs-cons-refs rs)))
          do (grow-cons-refs rs))
    (setf (svref (rs-cons-refs rs) id) run
          (rs-next-cons-id rs) (+ id n))
    ;; a length of 0, which every entry past the last id has, means 1
    (when (> n 1)
      (setf (aref (rs-run-lengths rs) id) n))
    run))

(defun cons-by-id (rs id size)
  "The cons with ID, named by the reference just read, of SIZE bytes (a
CONS-REF or SHORT-CONS-REF)."
  (declare (type restore-state rs) (type unsigned-byte id) (type (integer 1 11) size)
           (optimize speed))
  (unless (< id (rs-next-cons-id rs))
    (invalid (rs-ibuf rs) (format nil "reference to cons ~d, which is not defined yet" id)
             "a cons id defined earlier" (reference-offset rs size)))
  (let* ((refs (rs-cons-refs rs))
         (entry (svref refs id)))
    (if (consp entry)
        entry
        ;; Every run's first cons is filled, so the nearest filled entry
        ;; below ID is in ID's run, and so is every entry up to ID.  Each
        ;; entry is scanned and filled at most once over the whole restore.
        ;; Inside a run every cdr is a cons, but where an open run's conses
        ;; made so far end: the rest is made then.
        (let* ((from (loop for k of-type index downfrom (1- id)
                           when (consp (svref refs k)) return k))
               (c (svref refs from)))
          (loop for k of-type index from (1+ from) to id
                do (setf c (or (cdr c) (complete-open-run rs c k))
                         (svref refs k) c))
          c))))

(defun complete-open-run (rs tail id)
  "Make the conses still to make of the open run whose cons ID is the one
after TAIL, the last it has made (a reference named ID, or one after it),
link them after TAIL, and return the first.  The run's reader then reads
their cars as it reads those before them: the list goes on past TAIL."
  (declare (type restore-state rs) (type cons tail) (type index id))
  (let ((run (find-if (lambda (run)
                        (and (<= (open-run-first-id run) id)
                             (< id (+ (open-run-first-id run) (open-run-n run)))))
                      (rs-open-runs rs))))
    (unless (and run (plusp (open-run-left run)))
      (error "binstore bug: a run's cdrs end before its last cons"))
    (let ((rest (make-long-list rs (open-run-left run))))
      (setf (cdr tail) rest
            (open-run-left run) 0)
      rest)))

(defun reference-offset (rs size)
  "The offset of the reference just read, SIZE bytes long."
  (- (ibuf-offset (rs-ibuf rs)) size))

(declaim (inline varint-reference-size))
(defun varint-reference-size (id)
  "The size of a REF or CONS-REF to ID: its tag and a varint, in its
shortest form (the only one READ-VARINT accepts)."
  (1+ (varint-length id)))

(defun undefined-id (rs id size)
  "Signal that the reference just read, of SIZE bytes, names an id not given."
  (invalid (rs-ibuf rs) (format nil "reference to id ~d, which is not defined yet" id)
           "an id defined earlier" (reference-offset rs size)))

(declaim (inline object-by-id))
(defun object-by-id (rs id size)
  "The object with ID, named by the reference just read, of SIZE bytes (1
for a small reference or a next-ref, 2 for a short-ref); ID becomes the id
named last."
  (if (< id (rs-next-id rs))
      (progn (setf (rs-last-ref rs) id)
             (svref (settled-refs rs) id))
      (undefined-id rs id size)))

(defun next-ref-object (rs)
  "The object a NEXT-REF, just read, names: the one whose id is one above
the id the record's last reference named.  A NEXT-REF before any
reference is invalid."
  (let ((last (rs-last-ref rs)))
    (if (< last 0)
        (invalid (rs-ibuf rs) "next-ref before any reference" "a reference before it"
                 (reference-offset rs 1))
        (object-by-id rs (1+ last) 1))))

(defun runway-reach (rs bytes)
  "How far the next runways may reach, together, past the BYTES about to be
allocated (which RS-ALLOCATED counts already), before LOOK-AT-RUNWAY gives
each kind its share and EXTEND-RUNWAY bounds that by +RUNWAY-BYTES+ (or the
next huge page boundary): when the whole input is in the window, what the
rest of it promises at the rate of small objects so far, less those BYTES,
which its rest holds (so a restore about to end maps little it will not
use); from a stream, which does not tell, as much again as was allocated
before them, so that the reach grows with the restore."
  (declare (type restore-state rs) (type index bytes))
  (let* ((ib (rs-ibuf rs))
         (heap (heap-size))
         (before (- (rs-allocated rs) bytes)))
    (if (ibuf-refill-fn ib)
        (min heap before)
        (let ((rest (ceiling (* before (available ib)) (max 1 (ibuf-offset ib)))))
          (max 0 (- (min heap rest) bytes))))))

(defun look-at-runways (rs bytes conses)
  "KEEP-RUNWAYS' look, every +LOOK-BYTES+ of small objects from the first
+PREFAULT-BYTES+ on, before BYTES are allocated at the point of conses
(CONSES true) or of other objects: that point's runway must reach past them."
  (declare (type restore-state rs) (type index bytes))
  (let ((runways (or (rs-runways rs)
                     (setf (rs-runways rs) (cons (make-runway) (make-runway)))))
        (reach (runway-reach rs bytes)))
    (setf (rs-next-look rs) (+ (rs-allocated rs) +look-bytes+))
    (look-at-runway (car runways) t reach (if conses bytes 0)
                    (runway-moved (cdr runways)))
    (look-at-runway (cdr runways) nil reach (if conses 0 bytes)
                    (runway-moved (car runways)))))

(declaim (inline keep-runways))
(defun keep-runways (rs bytes &optional conses)
  "Before BYTES of small objects are allocated, conses when CONSES: count
them, and every +LOOK-BYTES+ look at the runways (LOOK-AT-RUNWAYS).
Inline: between looks it costs an addition and a comparison."
  (declare (type restore-state rs) (type index bytes))
  (let ((allocated (+ (rs-allocated rs) bytes)))
    (setf (rs-allocated rs) allocated)
    (when (>= allocated (rs-next-look rs))
      (look-at-runways rs bytes conses))))

(defconstant +piece-conses+ (floor +look-bytes+ 16)
  "The conses of a piece: those allocated between two looks at the runways.")

(defun make-piece (rs n)
  "A fresh list of N conses, N at most +PIECE-CONSES+, consed on the runway
of conses (KEEP-RUNWAYS first)."
  (declare (type restore-state rs) (type index n) (optimize speed))
  (keep-runways rs (* 16 n) t)
  (make-list n))

(defun make-long-list (rs n)
  "A fresh list of N conses, consed +LOOK-BYTES+ at a time on the runway of
conses.  MAKE-LIST would make a list this long one large object, on pages
of its own that no runway maps ahead, each faulted in as it is written
after a full collection."
  (declare (type restore-state rs) (type index n) (optimize speed))
  (let ((list '())
        (left n))
    (declare (type index left))
    (loop while (> left 0)
          do (let ((k (min left +piece-conses+)))
               (keep-runways rs (* 16 k) t)
               (loop repeat k do (push nil list))
               (decf left k)))
    list))

(declaim (inline charge))
(defun charge (rs bytes &optional conses)
  "Count BYTES of memory about to be allocated (conses when CONSES) against
max-to-read.  For an object under +LARGE-OBJECT-BYTES+, which SBCL makes
at the thread's allocation point, keep the heap's pages ahead mapped
(KEEP-RUNWAYS); a larger one gets pages of its own, which PREFAULT-VECTOR
maps where they land."
  (declare (type restore-state rs) (type unsigned-byte bytes))
  (let ((left (rs-alloc-left rs)))
    (when left
      (if (<= bytes left)
          (setf (rs-alloc-left rs) (- left bytes))
          (error 'restore-limit-exceeded :limit :max-to-read :value left
                                 :offset (ibuf-offset (rs-ibuf rs))
                                 :message "restoring would allocate more memory than max-to-read allows"))))
  (when (< bytes +large-object-bytes+)
    (keep-runways rs bytes conses)))

(defun restore-too-deep (rs)
  "Signal that the input nests deeper than max-depth or the control stack allows."
  (declare (type restore-state rs))
  (let ((max (rs-max-depth rs)))
    (if (and max (> (+ (rs-depth rs) (rs-depth-base rs)) max))
        (error 'restore-limit-exceeded :limit :max-depth :value max
                               :offset (ibuf-offset (rs-ibuf rs))
                               :message "the data nests deeper than max-depth")
        (error 'restore-limit-exceeded :limit :nesting :value +max-physical-depth+
                               :offset (ibuf-offset (rs-ibuf rs))
                               :message "the input nests deeper than the control stack allows (binstore itself never writes more than +max-physical-depth+ levels)"))))

(declaim (inline check-restore-depth))
(defun check-restore-depth (rs)
  "Refuse to nest deeper than max-depth, or than the control stack allows:
two comparisons inline, the signalling out of line."
  (declare (type restore-state rs))
  (let ((max (rs-max-depth rs)))
    (when (or (and max (> (+ (rs-depth rs) (rs-depth-base rs)) max))
              (stack-exhausted-p (rs-stack-limit rs)))
      (restore-too-deep rs))))

(defmacro nested ((rs) &body body)
  "Run BODY, which reads a container's contents, one level deeper: the
depth is checked on entry, and BODY's values are returned."
  (let ((state (gensym "RS")))
    `(let ((,state ,rs))
       (incf (rs-depth ,state))
       (check-restore-depth ,state)
       (multiple-value-prog1 (counting-nesting ((restore-too-deep ,state))
                               ,@body)
         (decf (rs-depth ,state))))))
