;;;; What one RESTORE carries from object to object: the input buffer, the
;;;; vector of objects by id, the depth, the allocation allowance and the
;;;; containers whose contents will arrive in FILL records.

(in-package #:binstore)

(sb-ext:defglobal **unset** (make-symbol "UNSET")
  "Stands for the value of an unbound slot while an instance is read.")

;;; Empty vectors for the slots that start without one: shared, as nothing
;;; is ever stored in a vector of length 0 (a restore of a small object made
;;; six of them, a third of what it allocated besides the object).
(sb-ext:defglobal **no-objects** (make-array 0))
(sb-ext:defglobal **no-lengths** (make-array 0 :element-type 'fixnum))
(sb-ext:defglobal **no-characters** (make-string 0))

(defstruct (pending-fill (:constructor make-pending-fill (kind object info depth)))
  kind object info depth)

;;; A long run of boxed floats (double-floats and complexes of them, in a
;;; list or a simple vector, read by the loops of FILL-CARS and
;;; FILL-ELEMENTS) takes consecutive ids, but its boxes are not stored by id
;;; as they are made: a run of a million doubles would write 8 MB of ids,
;;; and clear them after, for references that data of numbers seldom makes.
;;; The run is noted instead (a LAZY-RUN), its entries left 0.  Before any
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
  (cons-refs **no-objects** :type simple-vector) ; cons id -> cons
  (run-lengths **no-lengths** ; first cons id of a run -> its length, 0 for 1
   :type (simple-array fixnum (*)))
  (next-cons-id 0 :type index)
  (next-later 0 :type index)           ; LATER containers so far
  (depth 0 :type index)                ; containers open in the current record
  (depth-base 0 :type index)           ; logical depth where the current record starts
  (max-depth nil :type (or null index))
  (stack-floor 0 :type sb-ext:word)    ; the control stack must stay above this
  (alloc-left nil :type (or null index)) ; bytes we may still allocate
  (allocated 0 :type index)            ; bytes of small objects so far (KEEP-RUNWAYS)
  (next-look +prefault-bytes+ :type index) ; ALLOCATED at the next look at the runways
  (runways nil :type (or null cons))   ; the cons runway and the other one, from then
  (lazy-runs **no-objects** :type simple-vector) ; LAZY-RUNs not settled, in id order,
  (lazy-count 0 :type index)                     ; LAZY-COUNT of them
  (pending nil)                        ; LATER rank -> pending-fill
  (postponed '())                      ; (table . pairs) to insert once the record is complete
  (scratch **no-characters** :type (simple-array character (*))) ; names being looked up (grown as needed)
  (track t)                            ; heap objects get ids (+track-objects+)
  (track-conses nil)                   ; conses get ids (+track-conses+)
  (intern-symbols t))

(defconstant +stack-margin+ (* 256 1024)
  "Control stack kept free below the decoder, for handlers and the debugger.")

(declaim (inline current-stack-floor))
(defun current-stack-floor ()
  "Lowest control stack address the decoder may recurse down to."
  (+ (sb-kernel:get-lisp-obj-address sb-vm:*control-stack-start*) +stack-margin+))

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
                       :stack-floor (current-stack-floor)
                       :alloc-left (and max-alloc (min max-alloc (- most-positive-fixnum 16)))
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
entry below NEXT-ID but those of the lazy runs not settled."
  (declare (type restore-state rs) (optimize speed))
  (let ((refs (rs-refs rs))
        (runs (rs-lazy-runs rs))
        (from 0))
    (declare (type index from))
    (dotimes (i (rs-lazy-count rs))
      (let ((run (svref runs i)))
        (declare (type lazy-run run))
        (fill refs 0 :start from :end (lazy-run-start run))
        (setf from (+ (lazy-run-start run) (lazy-run-n run)))))
    (fill refs 0 :start from :end (rs-next-id rs))))

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

(define-scratch-kind +scratch-refs+ (lambda (refs) (* sb-vm:n-word-bytes (length refs))))
(define-scratch-kind +scratch-cons-refs+
  (lambda (pair) (* 2 sb-vm:n-word-bytes (length (car pair)))))

(defun restore-invalid (rs message &optional expected)
  (invalid (rs-ibuf rs) message expected))

(defun grow-refs (rs)
  ;; Every id below NEXT-ID has its entry (its object, or 0 in a lazy run
  ;; not settled), so the new part needs no filling.
  (let* ((refs (rs-refs rs))
         (new (make-array (* 2 (length refs)))))
    (prefault-vector new (* sb-vm:n-word-bytes (length refs)))
    (replace new refs)
    (setf (rs-refs rs) new)))

(declaim (inline register-always register))
(defun register-always (rs object)
  "Give OBJECT the next id; return OBJECT."
  (let ((id (rs-next-id rs)))
    (when (>= id (length (rs-refs rs)))
      (grow-refs rs))
    (setf (svref (rs-refs rs) id) object
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
are few, else as a lazy run (see LAZY-RUN)."
  (declare (type restore-state rs) (type (or cons simple-vector) source)
           (type index position n))
  (when (rs-track rs)
    (let ((start (rs-next-id rs)))
      (loop while (> (+ start n) (length (rs-refs rs)))
            do (grow-refs rs))
      (if (< n +lazy-run-boxes+)
          (put-boxes (rs-refs rs) start n source position)
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
  (let ((runs (rs-lazy-runs rs)))
    (dotimes (i (rs-lazy-count rs))
      (let ((run (svref runs i)))
        (put-boxes (rs-refs rs) (lazy-run-start run) (lazy-run-n run)
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

(defun cons-by-id (rs id)
  "The cons with ID, named by the CONS-REF just read."
  (declare (type restore-state rs) (type unsigned-byte id) (optimize speed))
  (unless (< id (rs-next-cons-id rs))
    (invalid (rs-ibuf rs) (format nil "reference to cons ~d, which is not defined yet" id)
             "a cons id defined earlier" (reference-offset rs id nil)))
  (let* ((refs (rs-cons-refs rs))
         (entry (svref refs id)))
    (if (consp entry)
        entry
        ;; Every run's first cons is filled, so the nearest filled entry
        ;; below ID is in ID's run, and so is every entry up to ID.  Each
        ;; entry is scanned and filled at most once over the whole restore.
        (let* ((from (loop for k of-type index downfrom (1- id)
                           when (consp (svref refs k)) return k))
               (c (svref refs from)))
          (loop for k of-type index from (1+ from) to id
                do (setf c (cdr c)
                         (svref refs k) c))
          c))))

(defun reference-offset (rs id small)
  "The offset of the reference to ID just read: a SMALL one is its tag; a
REF or CONS-REF is its tag and a varint, in its shortest form (the only
one READ-VARINT accepts)."
  (- (ibuf-offset (rs-ibuf rs)) (if small 1 (1+ (varint-length id)))))

(defun undefined-id (rs id small)
  "Signal that the reference just read, SMALL or not, names an id not given."
  (invalid (rs-ibuf rs) (format nil "reference to id ~d, which is not defined yet" id)
           "an id defined earlier" (reference-offset rs id small)))

(declaim (inline object-by-id))
(defun object-by-id (rs id small)
  "The object with ID, named by the reference just read (SMALL or not)."
  (if (< id (rs-next-id rs))
      (svref (settled-refs rs) id)
      (undefined-id rs id small)))

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
         (heap (sb-ext:dynamic-space-size))
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

(declaim (inline charge))
(defun charge (rs bytes &optional conses)
  "Count BYTES of memory about to be allocated (conses when CONSES) against
max-to-read.  For an object under SB-VM:LARGE-OBJECT-SIZE, which SBCL makes
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
  (when (< bytes sb-vm:large-object-size)
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
              (< (sb-sys:sap-int (sb-kernel:current-sp)) (rs-stack-floor rs)))
      (restore-too-deep rs))))

(defmacro nested ((rs) &body body)
  "Run BODY, which reads a container's contents, one level deeper: the
depth is checked on entry, and BODY's values are returned."
  (let ((state (gensym "RS")))
    `(let ((,state ,rs))
       (incf (rs-depth ,state))
       (check-restore-depth ,state)
       (multiple-value-prog1 (progn ,@body)
         (decf (rs-depth ,state))))))

;;; Reading an object: the in-tag cases (small integers, small references)
;;; are handled here, inline in every caller's loop; every other tag goes to
;;; the dispatch in decoder.lisp.

(declaim (ftype (function (restore-state (unsigned-byte 8)) t) read-tagged))

(declaim (inline object-from-tag read-object))
(defun object-from-tag (rs tag)
  "Read the object whose tag TAG was just consumed."
  (declare (type restore-state rs) (type (unsigned-byte 8) tag) (optimize speed))
  (cond ((>= tag +first-small-int-tag+) (- tag +small-int-bias+))
        ((>= tag +first-small-ref-tag+)
         (object-by-id rs (- tag +first-small-ref-tag+) t))
        ;; the commonest boxed leaf, allocated here without a call
        ((= tag +tag-double-float+) (register rs (read-double (rs-ibuf rs))))
        (t (read-tagged rs tag))))

(defun read-object (rs)
  "Read the next object."
  (declare (type restore-state rs) (optimize speed))
  (object-from-tag rs (read-u8 (rs-ibuf rs))))

;;; Runs of elements read in a loop: the commonest elements are taken
;;; straight from the window with the position kept in a register, checked
;;; against the window's end each time.  They are the leaves (integers of up
;;; to eight bytes, floats and complexes of floats, NIL, T, short strings),
;;; references to objects already made, and conses of two leaves (strings
;;; aside) or small references.  Any other tag, and any element the window
;;; does not hold whole, goes through READ-OBJECT, which reads it the same
;;; way or signals what is wrong.

(declaim (inline leaf-bytes))
(defun leaf-bytes (tag)
  "Bytes, tag included, of the leaf WINDOW-LEAF reads for the type tag TAG,
or NIL if it reads none of that tag."
  (case tag
    ((#.+tag-nil+ #.+tag-t+) 1)
    ((#.+tag-uint8+ #.+tag-negint8+) 2)
    (#.+tag-int16+ 3)
    ((#.+tag-int32+ #.+tag-single-float+) 5)
    ((#.+tag-int64+ #.+tag-double-float+ #.+tag-complex-single+) 9)
    (#.+tag-complex-double+ 17)
    (t nil)))

(declaim (inline window-ref-id))
(defun window-ref-id (sap p end)
  "If SAP+P (P below END) holds a reference, small or REF with an id
WINDOW-VARINT reads: the id and the reference's size in bytes; otherwise 0
and 0.  As WINDOW-INTEGER, it reads nothing else and calls nothing."
  (declare (type index p end))
  (let ((tag (sb-sys:sap-ref-8 sap p)))
    ;; the small references' range as one comparison, by wrapping around:
    ;; the commonest case falls through
    (cond ((< (ldb (byte 8 0) (- tag +first-small-ref-tag+)) +small-ref-count+)
           (values (- tag +first-small-ref-tag+) 1))
          ((= tag +tag-ref+)
           (multiple-value-bind (id next) (window-varint sap (+ p 1) end)
             (if next
                 (values id (- next p))
                 (values 0 0))))
          (t (values 0 0)))))

(declaim (inline made-below))
(defun made-below (rs)
  "The count of objects made so far, within the table of objects by id: an
id below it names an object, with no other check."
  (declare (type restore-state rs))
  (min (rs-next-id rs) (length (rs-refs rs))))

(declaim (inline window-made-ref))
(defun window-made-ref (refs made sap p end)
  "If SAP+P (P below END) holds a reference WINDOW-REF-ID reads, naming an
object of REFS, the table of objects by id, below MADE (MADE-BELOW): that
object and the offset after the reference; otherwise NIL and NIL (the
general path reads it, or signals what is wrong).  The loops over runs of
references (FILL-REF-CARS, FILL-REF-ELEMENTS) hold REFS and MADE and make
the same two checks in place, as exits from the loop: through this
function's two values they took 8-10% more instructions."
  (declare (type simple-vector refs) (type index made p end))
  (multiple-value-bind (id size) (window-ref-id sap p end)
    (let ((id (sb-ext:truly-the index id))) ; an index whenever SIZE is not 0
      (if (and (plusp size) (< id made))
          (values (locally (declare (optimize (safety 0)))
                    (svref refs id))
                  (sb-ext:truly-the index (+ p size)))
          (values nil nil)))))

(declaim (inline window-ref))
(defun window-ref (rs sap p end)
  "WINDOW-MADE-REF with the restore's table of objects."
  (declare (type restore-state rs) (type index p end))
  (window-made-ref (settled-refs rs) (made-below rs) sap p end))

(declaim (inline window-cons-ref-id))
(defun window-cons-ref-id (rs sap p end)
  "If SAP+P (P below END) holds a CONS-REF whose varint the window holds,
naming a cons made before whose entry in the table of conses by id is
filled: the id and the offset after the reference; otherwise NIL and NIL.
An entry CONS-BY-ID has yet to fill is left to the general path, so that
the loops over leaves call nothing for it.  Reads nothing past END."
  (declare (type restore-state rs) (type index p end))
  (multiple-value-bind (id next) (window-varint sap (+ p 1) end)
    (if (and next
             (< id (rs-next-cons-id rs))
             (consp (svref (rs-cons-refs rs) id)))
        (values id next)
        (values nil nil))))

(declaim (inline window-cons-ref))
(defun window-cons-ref (rs sap p end)
  "As WINDOW-REF, for a CONS-REF WINDOW-CONS-REF-ID reads: the cons and the
offset after the reference, or NIL and NIL."
  (declare (type restore-state rs) (type index p end))
  (multiple-value-bind (id next) (window-cons-ref-id rs sap p end)
    (if next
        (values (svref (rs-cons-refs rs) id) next)
        (values nil nil))))

(defconstant +window-string-bytes+ 64
  "The longest base string WINDOW-BASE-STRING reads.")

;;; The two string readers are inline only in the loops over runs of
;;; strings, through WINDOW-STRING (where a call and its spills cost as much
;;; as a short string's own work), and called elsewhere.
(declaim (sb-ext:maybe-inline window-ascii-string window-base-string))
(defun window-ascii-string (rs p end)
  "If the window holds at P (below END) the tag of a record whose payload
is a count of fewer than +WINDOW-STRING-BYTES+ characters followed by them,
all ASCII, in bytes the window holds in whole words: a new base string of
them (charged, without an id) and the offset after it; otherwise NIL and
NIL, having changed nothing but made a string no one sees.  The characters
move a word at a time, the last word masked to the string's length (SBCL
keeps the bytes after a base string's last character zero); the words'
high bits, gathered as they move, say whether all were ASCII."
  (declare (type restore-state rs) (type index p end) (optimize speed))
  (let* (;; the window's address, taken here rather than passed: an
         ;; address passed to a function not inline is boxed, which cost every
         ;; element of the callers' loops 16 bytes of garbage
         (sap (ibuf-sap (rs-ibuf rs)))
         (n (if (< (+ p 1) end) (sb-sys:sap-ref-8 sap (+ p 1)) 128))
         (from (+ p 2))
         (words (ceiling n 8)))
    (declare (type index n from words))
    (if (or (>= n +window-string-bytes+)
            (> (+ from (* 8 words)) end))
        (values nil nil)
        (let ((s (make-string n :element-type 'base-char))
              (high 0)
              (whole (floor n 8))
              (k (logand n 7)))
          (declare (type sb-ext:word high) (type index whole) (type (integer 0 7) k))
          ;; every offset below is within the window, below END: an index
          (dotimes (w whole)
            (let ((word (sb-sys:sap-ref-64 sap (sb-ext:truly-the index (+ from (* 8 w))))))
              (setf high (logior high word)
                    (sb-kernel:%vector-raw-bits s w) word)))
          (unless (zerop k)
            ;; the last word holds K characters
            (let ((word (ldb (byte (* 8 k) 0)
                             (sb-sys:sap-ref-64 sap (sb-ext:truly-the index (+ from (* 8 whole)))))))
              (setf high (logior high word)
                    (sb-kernel:%vector-raw-bits s whole) word)))
          (if (logtest high #x8080808080808080)
              (values nil nil)
              (progn (charge rs n)
                     (values s (sb-ext:truly-the index (+ from n)))))))))

(defun window-base-string (rs p end)
  "If the window holds at P (below END) a base string WINDOW-ASCII-STRING
reads: the new string, with its id, and the offset after it; otherwise NIL
and NIL."
  (declare (type restore-state rs) (type index p end) (inline window-ascii-string))
  (multiple-value-bind (s next) (window-ascii-string rs p end)
    (if next
        (values (register rs s) next)
        (values nil nil))))

(declaim (sb-ext:maybe-inline window-character-string))
(defun window-character-string (rs p end)
  "If the window holds at P (below END) a string of fewer than
+WINDOW-STRING-BYTES+ characters, whole (characters of one or two bytes of
UTF-8 are decoded here; from the first wider one, DECODE-UTF8-WINDOW takes
the rest): the new string (with its id) and the offset after it;
otherwise NIL and NIL, having changed nothing but made a string no one
sees (the general path reads longer forms, and signals what is wrong with
bad ones).  The characters are checked as they are decoded, in one pass."
  (declare (type restore-state rs) (type index p end) (optimize speed))
  (let* (;; as in WINDOW-BASE-STRING, the address is not passed
         (sap (ibuf-sap (rs-ibuf rs)))
         (n (if (< (+ p 1) end) (sb-sys:sap-ref-8 sap (+ p 1)) 128))
         (q (+ p 2)))
    (declare (type index n q))
    (if (>= n +window-string-bytes+)
        (values nil nil)
        (let ((s (make-string n)))
          (dotimes (i n)
            (let ((b (if (< q end) (sb-sys:sap-ref-8 sap q) #xFF)))
              (cond ((< b #x80)
                     (setf (schar s i) (code-char b)
                           q (+ q 1)))
                    ((and (<= #xC2 b #xDF) (< (+ q 1) end)
                          (= (logand (sb-sys:sap-ref-8 sap (+ q 1)) #xC0) #x80))
                     (setf (schar s i) (code-char (logior (ash (logand b #x1F) 6)
                                                          (logand (sb-sys:sap-ref-8 sap (+ q 1))
                                                                  #x3F)))
                           q (+ q 2)))
                    (t
                     ;; a wider character (or a bad one): the rest by the
                     ;; general decoder, in one call
                     (multiple-value-bind (j next)
                         (decode-utf8-window s i n (sb-sys:sap-int sap) q end)
                       (declare (type index j next))
                       (unless (= j n)
                         (return-from window-character-string (values nil nil)))
                       (setf q next)
                       (return))))))
          (charge rs (* 4 n))
          (values (register rs s) q)))))

(defconstant +box-slice-bytes+ (* 16 1024)
  "Input the loops over double-floats and complexes read between two looks
at the runways (KEEP-RUNWAYS): a box takes at most twice the bytes it is read
from.")

(declaim (inline next-box-slice))
(defun next-box-slice (rs q end)
  "The end of the next slice of the window, from Q (below END), that a loop
over boxed floats reads; its boxes are counted for the runways first."
  (declare (type restore-state rs) (type index q end))
  (let ((stop (min end (+ q +box-slice-bytes+))))
    (keep-runways rs (* 2 (- stop q)))
    stop))

(declaim (inline box-bytes window-box))
(defun box-bytes (tag)
  "The bytes of a box of TAG, +TAG-DOUBLE-FLOAT+ or +TAG-COMPLEX-DOUBLE+."
  (if (= tag +tag-double-float+) 9 17))

(defun window-box (sap p end tag)
  "If SAP+P (P below END) holds a box of TAG (a double-float, or a complex
of two: see BOX-BYTES) whole in the window: a fresh box for it; otherwise
NIL.  For the loops over runs of them: inlined with a constant TAG, its
tests on TAG fold away; the loops count the boxes (from the bytes read, in
a list) and give them their ids after (REGISTER-BOXES)."
  (declare (type index p end) (type (unsigned-byte 8) tag))
  (and (= (sb-sys:sap-ref-8 sap p) tag)
       (<= (+ p (box-bytes tag)) end)
       (if (= tag +tag-double-float+)
           (sb-sys:sap-ref-double sap (+ p 1))
           (complex (sb-sys:sap-ref-double sap (+ p 1))
                    (sb-sys:sap-ref-double sap (+ p 9))))))

(declaim (inline fixed-leaf-value))
(defun fixed-leaf-value (sap q tag)
  "The value of the leaf of fixed size that TAG begins, its payload at SAP+Q:
NIL, T, an integer of one to eight bytes, or (for any other tag) a
single-float."
  (case tag
    (#.+tag-nil+ nil)
    (#.+tag-t+ t)
    (#.+tag-uint8+ (sb-sys:sap-ref-8 sap q))
    (#.+tag-negint8+ (- -1 (sb-sys:sap-ref-8 sap q)))
    (#.+tag-int16+ (sb-sys:signed-sap-ref-16 sap q))
    (#.+tag-int32+ (sb-sys:signed-sap-ref-32 sap q))
    (#.+tag-int64+ (sb-sys:signed-sap-ref-64 sap q))
    (t (sb-sys:sap-ref-single sap q))))

(declaim (inline window-pure-leaf))
(defun window-pure-leaf (rs sap p end)
  "If the object at SAP+P (P below END) is a leaf the window holds whole
whose reading gives no id (an integer, a single-float, NIL, T, or a
reference to an object or a cons made before): that object and the offset
after it; otherwise NIL and NIL.  Reading one changes nothing but the
cache of conses by id, so a reader may read several and then give up."
  (declare (type restore-state rs) (type index p end))
  (let ((tag (sb-sys:sap-ref-8 sap p)))
    (cond ((>= tag +first-small-int-tag+)
           (values (- tag +small-int-bias+) (+ p 1)))
          ((or (>= tag +first-small-ref-tag+) (= tag +tag-ref+))
           (window-ref rs sap p end))
          ((= tag +tag-cons-ref+) (window-cons-ref rs sap p end))
          (t (let ((size (leaf-bytes tag))
                   (q (+ p 1)))
               (if (or (null size) (> (+ p size) end)
                       ;; the boxed floats LEAF-BYTES sizes, which take ids
                       (= tag +tag-double-float+) (= tag +tag-complex-single+)
                       (= tag +tag-complex-double+))
                   (values nil nil)
                   (values (fixed-leaf-value sap q tag) (+ p size))))))))

(declaim (inline window-leaf))
(defun window-leaf (rs sap p end)
  "If the object at SAP+P (P below END) is a leaf the window holds whole,
that object and the offset after it; otherwise NIL and NIL.  An object of
a tracked kind read here (a double, complex or string) takes its id, as
READ-OBJECT would give it."
  (declare (type restore-state rs) (type index p end))
  ;; WINDOW-PURE-LEAF's first clauses are written out again here: built on
  ;; it, the loops that inline this one spilled more (a list of pairs of
  ;; integers took 6% more instructions to restore)
  (let ((tag (sb-sys:sap-ref-8 sap p)))
    (cond ((>= tag +first-small-int-tag+)
           (values (- tag +small-int-bias+) (+ p 1)))
          ((or (>= tag +first-small-ref-tag+) (= tag +tag-ref+))
           (window-ref rs sap p end))
          ((= tag +tag-base-string+) (window-base-string rs p end))
          ((= tag +tag-string+) (window-character-string rs p end))
          ((= tag +tag-cons-ref+) (window-cons-ref rs sap p end))
          ((or (= tag +tag-double-float+) (= tag +tag-complex-double+))
           (let ((x (window-box sap p end tag)))
             (if x
                 (values (register rs x) (+ p (box-bytes tag)))
                 (values nil nil))))
          (t (let ((size (leaf-bytes tag))
                   (q (+ p 1)))
               (if (or (null size) (> (+ p size) end))
                   (values nil nil)
                   (values (if (= tag +tag-complex-single+)
                               (register rs (complex (sb-sys:sap-ref-single sap q)
                                                     (sb-sys:sap-ref-single sap (+ q 4))))
                               (fixed-leaf-value sap q tag))
                           (+ p size))))))))

(declaim (inline window-leaf-bytes))
(defun window-leaf-bytes (rs sap p end)
  "Bytes of the leaf WINDOW-LEAF would read at SAP+P, or NIL; reads nothing."
  (declare (type restore-state rs) (type index p end))
  (when (< p end)
    (let* ((tag (sb-sys:sap-ref-8 sap p))
           (size (cond ((>= tag +first-small-int-tag+) 1)
                       ((>= tag +first-small-ref-tag+)
                        (and (< (- tag +first-small-ref-tag+) (rs-next-id rs)) 1))
                       ((= tag +tag-cons-ref+)
                        (let ((next (nth-value 1 (window-cons-ref-id rs sap p end))))
                          (and next (- next p))))
                       (t (leaf-bytes tag)))))
      (and size (<= (+ p size) end) size))))

(declaim (inline window-nesting-allowed-p))
(defun window-nesting-allowed-p (rs)
  "True when max-depth allows a container one level deeper than the run
being read: what the window readers of small containers check first."
  (declare (type restore-state rs))
  (let ((max (rs-max-depth rs)))
    (or (null max) (< (+ (rs-depth rs) (rs-depth-base rs)) max))))

(defun window-pair (rs p end)
  "If the object the window holds at P (below END) is a cons whose car and cdr are both
leaves the window holds, and max-depth allows the cons, make it and return
it and the offset after it; otherwise NIL and NIL.  Both leaves are checked
before either is read, so nothing takes an id unless the cons is made."
  (declare (type restore-state rs) (type index p end) (optimize speed))
  (let* (;; as in WINDOW-BASE-STRING, the address is not passed
         (sap (ibuf-sap (rs-ibuf rs)))
         (car-bytes (and (= (sb-sys:sap-ref-8 sap p) +tag-cons+)
                         (window-nesting-allowed-p rs)
                         (window-leaf-bytes rs sap (+ p 1) end)))
         (cdr-bytes (and car-bytes (window-leaf-bytes rs sap (+ p 1 car-bytes) end))))
    (if (null cdr-bytes)
        (values nil nil)
        (let* ((car (window-leaf rs sap (+ p 1) end))
               (cell (cons car (window-leaf rs sap (+ p 1 car-bytes) end))))
          (charge rs 16 t)
          (when (rs-track-conses rs)
            (register-run rs cell 1))
          (values cell (+ p 1 car-bytes cdr-bytes))))))

(defconstant +window-short-elements+ 8
  "The most elements WINDOW-SHORT-LIST and WINDOW-SHORT-VECTOR read: their
count is a one-byte varint.")

(declaim (inline window-short-count))
(defun window-short-count (rs sap p end)
  "The count of the LIST or SIMPLE-VECTOR whose tag is at SAP+P (P below
END) when the window holds it and it is at most +WINDOW-SHORT-ELEMENTS+
(a one-byte varint, the count itself), and max-depth allows the
container; otherwise NIL."
  (declare (type restore-state rs) (type index p end))
  (let ((n (if (< (+ p 1) end) (sb-sys:sap-ref-8 sap (+ p 1)) #xFF)))
    (and (<= n +window-short-elements+)
         (window-nesting-allowed-p rs)
         n)))

(declaim (inline window-short-element))
(defun window-short-element (rs sap q end)
  "The element of a short list or vector at SAP+Q, as WINDOW-PURE-LEAF
reads it, and the offset after it; NIL and NIL when the window ends at Q
or the element is not a pure leaf."
  (declare (type restore-state rs) (type index q end))
  (if (< q end)
      (window-pure-leaf rs sap q end)
      (values nil nil)))

(defun window-short-list (rs p end)
  "If the object the window holds at P (below END) is a LIST of at most
+WINDOW-SHORT-ELEMENTS+ elements that WINDOW-PURE-LEAF reads, and max-depth
allows it: make it and return it and the offset after it; otherwise NIL
and NIL.  The list takes its cons ids after its elements are read, which
is the same: a pure leaf takes none, and a reference to one of the list's
own conses is refused (it names an id not yet given), which leaves the
list to the general path."
  (declare (type restore-state rs) (type index p end) (optimize speed))
  (let* ((sap (ibuf-sap (rs-ibuf rs)))
         (n (window-short-count rs sap p end))
         (q (+ p 2)))
    (declare (type index q))
    (flet ((refuse ()
             (return-from window-short-list (values nil nil))))
      (declare (inline refuse))
      ;; a list of length 0 is invalid: the general path says so
      (unless (and n (plusp n))
        (refuse))
      (let ((run (let ((run nil))
                   (dotimes (i n run)
                     (push nil run)))))
        (loop for c on run
              do (multiple-value-bind (value next) (window-short-element rs sap q end)
                   (unless next
                     (refuse))
                   (setf (car c) value
                         q next)))
        (charge rs (* 16 n) t)
        (when (rs-track-conses rs)
          (register-run rs run n))
        (values run q)))))

(defun window-short-vector (rs p end)
  "If the object the window holds at P (below END) is a SIMPLE-VECTOR of at
most +WINDOW-SHORT-ELEMENTS+ elements that WINDOW-PURE-LEAF reads, and
max-depth allows it: make it (with its id, when objects are tracked) and
return it and the offset after it; otherwise NIL and NIL, as
WINDOW-SHORT-LIST and for the same reasons: the vector takes its id after
its elements are read, which is the same, and a reference to itself is
refused."
  (declare (type restore-state rs) (type index p end) (optimize speed))
  (let* ((sap (ibuf-sap (rs-ibuf rs)))
         (n (window-short-count rs sap p end))
         (q (+ p 2)))
    (declare (type index q))
    (flet ((refuse ()
             (return-from window-short-vector (values nil nil))))
      (declare (inline refuse))
      (unless n
        (refuse))
      (let ((v (make-array n)))
        (dotimes (i n)
          (multiple-value-bind (value next) (window-short-element rs sap q end)
            (unless next
              (refuse))
            (setf (svref v i) value
                  q next)))
        ;; as READ-SIMPLE-VECTOR-HEADER charges it
        (charge rs (* 8 (+ n 2)))
        (values (register rs v) q)))))

(declaim (inline window-element))
(defun window-element (rs sap p end)
  "As WINDOW-LEAF, and also for a short list or simple vector of pure
leaves (see WINDOW-SHORT-LIST) and a cons of two leaves (see WINDOW-PAIR)."
  (declare (type restore-state rs) (type index p end))
  (multiple-value-bind (value next) (window-leaf rs sap p end)
    (if next
        (values value next)
        (let ((tag (sb-sys:sap-ref-8 sap p)))
          (cond ((= tag +tag-cons+) (window-pair rs p end))
                ((= tag +tag-list+) (window-short-list rs p end))
                ((= tag +tag-simple-vector+) (window-short-vector rs p end))
                (t (values nil nil)))))))

(declaim (inline window-integer))
(defun window-integer (sap p end)
  "If SAP+P (P below END) holds an integer tag and its payload (none, or 1,
2, 4 or 8 bytes), whole in the window, and its value is a fixnum: that
value and its size in bytes; otherwise 0 and 0.  It reads nothing else and
calls nothing, so the loops below keep it in registers.  Returning a size
rather than the offset after it lets them add it knowing the sum stays
below END, with no test for NIL or check of type."
  (declare (type index p end))
  (let ((tag (sb-sys:sap-ref-8 sap p))
        (room (- end p)))
    (flet ((fits (size) (<= size room)))
      (declare (inline fits))
      (cond ((>= tag +first-small-int-tag+)
             (values (- tag +small-int-bias+) 1))
            ((and (= tag +tag-uint8+) (fits 2))
             (values (sb-sys:sap-ref-8 sap (+ p 1)) 2))
            ((and (= tag +tag-negint8+) (fits 2))
             (values (- -1 (sb-sys:sap-ref-8 sap (+ p 1))) 2))
            ((and (= tag +tag-int16+) (fits 3))
             (values (sb-sys:signed-sap-ref-16 sap (+ p 1)) 3))
            ((and (= tag +tag-int32+) (fits 5))
             (values (sb-sys:signed-sap-ref-32 sap (+ p 1)) 5))
            ((and (= tag +tag-int64+) (fits 9))
             ;; a fixnum, as every writer makes it: another value would
             ;; need a bignum here, and the loops a GC barrier on each store
             (let ((value (sb-sys:signed-sap-ref-64 sap (+ p 1))))
               (if (typep value 'fixnum)
                   (values value 9)
                   (values 0 0))))
            (t (values 0 0))))))

(declaim (inline window-single-float-p))
(defun window-single-float-p (sap p end)
  "True when SAP+P holds a single-float whole in the window (below END)."
  (declare (type index p end))
  (and (<= (+ p 5) end) (= (sb-sys:sap-ref-8 sap p) +tag-single-float+)))

(declaim (inline string-tag-p))
(defun string-tag-p (tag)
  (or (= tag +tag-base-string+) (= tag +tag-string+)))

(declaim (inline window-string))
(defun window-string (rs tag p end)
  "WINDOW-BASE-STRING or WINDOW-CHARACTER-STRING as TAG, a STRING-TAG-P tag,
says, both inline: the one reader of the loops over runs of strings."
  (declare (inline window-base-string window-character-string))
  (if (= tag +tag-base-string+)
      (window-base-string rs p end)
      (window-character-string rs p end)))

(defconstant +general-kind+ 0 "A tag only READ-OBJECT reads.")
(defconstant +integer-kind+ 1 "A tag of integers WINDOW-INTEGER reads.")
(defconstant +single-kind+ 2 "The single-float tag.")
(defconstant +boxed-kind+ 3 "A tag WINDOW-BOXED-FLOAT reads.")
(defconstant +string-kind+ 4 "A tag WINDOW-STRING reads.")
(defconstant +ref-kind+ 5 "A tag of references WINDOW-REF-ID reads.")
(defconstant +leaf-kind+ 6 "A tag of another leaf, a CONS, a LIST or a SIMPLE-VECTOR, WINDOW-ELEMENT may read.")

(sb-ext:define-load-time-global **window-kinds**
    (let ((kinds (make-array 256 :element-type '(unsigned-byte 8)
                                 :initial-element +general-kind+)))
      (flet ((kind (kind &rest tags)
               (dolist (tag tags)
                 (setf (aref kinds tag) kind))))
        (loop for tag from +first-small-int-tag+ to #xFF
              do (kind +integer-kind+ tag))
        (kind +integer-kind+ +tag-uint8+ +tag-negint8+ +tag-int16+ +tag-int32+ +tag-int64+)
        (kind +single-kind+ +tag-single-float+)
        (kind +boxed-kind+ +tag-double-float+ +tag-complex-double+)
        (kind +string-kind+ +tag-base-string+ +tag-string+)
        (loop for tag from +first-small-ref-tag+ below (+ +first-small-ref-tag+ +small-ref-count+)
              do (kind +ref-kind+ tag))
        (kind +ref-kind+ +tag-ref+)
        (kind +leaf-kind+ +tag-nil+ +tag-t+ +tag-complex-single+ +tag-cons-ref+ +tag-cons+ +tag-list+ +tag-simple-vector+))
      kinds)
  "For each tag byte, which loop of FILL-CARS and FILL-ELEMENTS reads what
starts with it: each pass over the window jumps to that loop, which runs
while its kind of element follows.  Conses, proper lists and simple
vectors go to the loop of other leaves, which makes the short ones of
leaves there (WINDOW-ELEMENT); other containers, symbols and every other
tag go to READ-OBJECT.")
(declaim (type (simple-array (unsigned-byte 8) (256)) **window-kinds**))

(declaim (inline window-kind))
(defun window-kind (sap p end)
  "The kind in **WINDOW-KINDS** of the tag at SAP+P, or +GENERAL-KIND+ when
P is not below END (the window is used up: READ-OBJECT refills it)."
  (declare (type index p end))
  (if (< p end)
      (aref **window-kinds** (sb-sys:sap-ref-8 sap p))
      +general-kind+))

(declaim (inline window-integer-next-p))
(defun window-integer-next-p (sap p end)
  "True when the element at SAP+P is one WINDOW-INTEGER takes, or a
single-float (checked between other leaves, to go back to the loops of
those)."
  (and (< p end)
       (let ((kind (aref **window-kinds** (sb-sys:sap-ref-8 sap p))))
         (or (= kind +integer-kind+) (= kind +single-kind+)))))

(defun fill-ref-cars (rs c p end)
  "Store in the cars of the fresh proper list from the cons C on the objects
named by the references the window holds from P (below END) on (none when
C is NIL); return the offset reached, the cons reached (the first whose car
was not stored, or NIL at the list's end) and, when this reached the list's
end, its last cons.  A function of its own, as FILL-INTEGER-ELEMENTS:
inside FILL-CARS the table and its count lived on the stack."
  (declare (type restore-state rs) (type list c) (type index p end) (optimize speed))
  (let ((sap (ibuf-sap (rs-ibuf rs)))
        (refs (settled-refs rs))
        (made (made-below rs)))
    (when (null c)                      ; FILL-CARS's general path ended the list
      (return-from fill-ref-cars (values p nil nil)))
    (loop
      (unless (< p end)
        (return (values p c nil)))
      (multiple-value-bind (id size) (window-ref-id sap p end)
        (let ((id (sb-ext:truly-the index id))) ; an index whenever SIZE is not 0
          (when (or (zerop size) (>= id made))
            (return (values p c nil)))
          ;; below MADE, within REFS (see WINDOW-MADE-REF)
          (setf (car c) (locally (declare (optimize (safety 0)))
                          (svref refs id))
                p (sb-ext:truly-the index (+ p size)))))
      ;; the list is proper: its cdrs are conses up to NIL
      (let ((next (sb-ext:truly-the list (cdr c))))
        (when (null next)
          (return (values p nil c)))
        (setf c next)))))

(defun fill-string-cars (rs c p end)
  "Store in the cars of the fresh proper list from the cons C on the short
strings the window holds from P (below END) on, each fresh and taking an id
when tracked (none when C is NIL); return what FILL-REF-CARS returns.  A
function of its own, as FILL-REF-CARS: inside FILL-CARS, beside that
function's other variables, the loop kept more of its own on the stack (a
list of 1,000,000 short strings: 168M instructions to restore, 160M here)."
  (declare (type restore-state rs) (type list c) (type index p end) (optimize speed))
  (let ((sap (ibuf-sap (rs-ibuf rs))))
    (when (null c)                      ; as in FILL-REF-CARS
      (return-from fill-string-cars (values p nil nil)))
    (loop
      (unless (and (< p end) (string-tag-p (sb-sys:sap-ref-8 sap p)))
        (return (values p c nil)))
      (multiple-value-bind (s next) (window-string rs (sb-sys:sap-ref-8 sap p) p end)
        (unless next
          (return (values p c nil)))
        (setf (car c) s
              p next))
      (let ((next (sb-ext:truly-the list (cdr c)))) ; the list is proper
        (when (null next)
          (return (values p nil c)))
        (setf c next)))))

(defun fill-cars (rs run)
  "Read the cars of RUN, a fresh proper list; return its last cons."
  (declare (type restore-state rs) (type cons run) (optimize speed))
  (let ((c run) (last run) (ib (rs-ibuf rs)))
    (loop
      (let* ((sap (ibuf-sap ib)) (end (ibuf-end ib))
             (start (ibuf-pos ib)) (p start))
        (declare (type index p start end))
        ;; Each pass runs the loop of the kind of element at P, in its own
        ;; variables and calling nothing where it can, so that it runs in
        ;; registers; it stops at another kind, or at an element the
        ;; window does not hold whole.
        (case (window-kind sap p end)
          (#.+integer-kind+
           ;; integers, the commonest cars
           (let ((q p) (d c) (dlast last))
             (declare (type index q))
             (loop while (and (consp d) (< q end))
                   do (multiple-value-bind (value size) (window-integer sap q end)
                        (when (zerop size)
                          (return))
                        (setf (car d) value
                              q (sb-ext:truly-the index (+ q size))
                              dlast d
                              d (cdr d))))
             (setf p q c d last dlast)))
          (#.+single-kind+
           (let ((q p) (d c) (dlast last))
             (declare (type index q))
             (loop while (and (consp d) (window-single-float-p sap q end))
                   do (setf (car d) (sb-sys:sap-ref-single sap (+ q 1))
                            q (+ q 5)
                            dlast d
                            d (cdr d)))
             (setf p q c d last dlast)))
          (#.+boxed-kind+
           ;; double-floats, or complexes of them, each a fresh box, taking
           ;; their ids together after
           (let ((q p) (d c) (dlast last))
             (declare (type index q))
             (flet ((boxes (tag)
                      ;; inline, called with a constant TAG: the tests on
                      ;; it fold away
                      (loop named boxes
                            while (and (consp d) (< q end))
                            do (let ((stop (next-box-slice rs q end)))
                                 (loop while (and (consp d) (< q stop))
                                       do (let ((x (window-box sap q end tag)))
                                            (unless x
                                              (return-from boxes))
                                            (setf (car d) x
                                                  q (sb-ext:truly-the index
                                                                      (+ q (box-bytes tag))))
                                            ;; the next cons from D, in a
                                            ;; register, before DLAST, which
                                            ;; lives on the stack: from
                                            ;; DLAST each cdr would wait for
                                            ;; a store and a load
                                            (psetf d (cdr d) dlast d)))))
                      (when (> q p)
                        (register-boxes rs c 0 (truncate (- q p) (box-bytes tag))))))
               (declare (inline boxes))
               (if (= (sb-sys:sap-ref-8 sap p) +tag-double-float+)
                   (boxes +tag-double-float+)
                   (boxes +tag-complex-double+)))
             (setf p q c d last dlast)))
          (#.+string-kind+
           (multiple-value-bind (q d dlast) (fill-string-cars rs c p end)
             (setf p q c d)
             (when dlast
               (setf last dlast))))
          (#.+ref-kind+
           (multiple-value-bind (q d dlast) (fill-ref-cars rs c p end)
             (setf p q c d)
             (when dlast
               (setf last dlast))))
          (#.+leaf-kind+
           ;; other leaves, and then any leaf, until the next small integer
           (loop while (and (consp c) (< p end))
                 do (multiple-value-bind (value next) (window-element rs sap p end)
                      (unless next
                        (return))
                      (setf (car c) value
                            p next
                            last c
                            c (cdr c))
                      (when (window-integer-next-p sap p end)
                        (return))))))
        (setf (ibuf-pos ib) p)
        (cond ((not (consp c)) (return last))
              ((= p start)
               ;; the general path, for a container or another object only
               ;; READ-OBJECT reads, for a leaf the window does not hold
               ;; whole, or one its loop refuses (READ-OBJECT signals what
               ;; is wrong); then for the next objects while they are of
               ;; the general kind (a list of instances)
               (loop do (setf (car c) (read-object rs)
                              last c
                              c (cdr c))
                     while (and (consp c)
                                (= (window-kind (ibuf-sap ib) (ibuf-pos ib) (ibuf-end ib))
                                   +general-kind+)))))))))

(defun fill-integer-elements (rs v i n p end)
  "Store into the simple vector V, from index I on (below N), the integers (see
WINDOW-INTEGER) the window holds from P (below END) on; return the index and the
offset reached.  A function of its own: inside FILL-ELEMENTS, whose other
loops need many registers, this loop kept the vector and the index on the
stack and marked the GC card of every store."
  (declare (type restore-state rs) (type simple-vector v) (type index i n p end)
           (optimize speed))
  (let ((sap (ibuf-sap (rs-ibuf rs))))
    (loop while (and (< i n) (< p end))
          do (multiple-value-bind (value size) (window-integer sap p end)
               (when (zerop size)
                 (return))
               (setf (svref v i) value
                     p (sb-ext:truly-the index (+ p size)))
               (incf i)))
    (values i p)))

(defun fill-ref-elements (rs v i n p end)
  "Store into the simple vector V, from index I on (below N), the objects named by
the references the window holds from P (below END) on; return the index
and the offset reached.  A function of its own, as FILL-REF-CARS: inside
FILL-ELEMENTS the table and its count lived on the stack."
  (declare (type restore-state rs) (type simple-vector v) (type index i n p end)
           (optimize speed))
  (let ((sap (ibuf-sap (rs-ibuf rs)))
        (refs (settled-refs rs))
        (made (made-below rs)))
    (loop while (and (< i n) (< p end))
          do (multiple-value-bind (id size) (window-ref-id sap p end)
               (let ((id (sb-ext:truly-the index id))) ; as in FILL-REF-CARS
                 (when (or (zerop size) (>= id made))
                   (return))
                 (setf (svref v i) (locally (declare (optimize (safety 0)))
                                     (svref refs id))
                       p (sb-ext:truly-the index (+ p size))
                       i (sb-ext:truly-the index (1+ i))))))
    (values i p)))

(defun fill-string-elements (rs v i n p end)
  "Store into the simple vector V, from index I on (below N), the short strings the
window holds from P (below END) on, each fresh and taking an id when
tracked; return the index and the offset reached.  A function of its own,
as FILL-STRING-CARS (a vector of 1,000,000 short strings: 149M
instructions to restore inside FILL-ELEMENTS, 145M here)."
  (declare (type restore-state rs) (type simple-vector v) (type index i n p end)
           (optimize speed))
  (let ((sap (ibuf-sap (rs-ibuf rs))))
    (loop while (and (< i n) (< p end) (string-tag-p (sb-sys:sap-ref-8 sap p)))
          do (multiple-value-bind (s next) (window-string rs (sb-sys:sap-ref-8 sap p) p end)
               (unless next
                 (return))
               (setf (svref v i) s
                     p next
                     i (sb-ext:truly-the index (1+ i)))))
    (values i p)))

(defun fill-elements (rs v &optional (n (length v)))
  "Read the first N elements of the fresh simple vector V (all of them, or a
T array's, into its storage vector); return V."
  (declare (type restore-state rs) (type simple-vector v) (type index n) (optimize speed))
  (let ((i 0) (ib (rs-ibuf rs)))
    (declare (type index i))
    (loop
      (let* ((sap (ibuf-sap ib)) (end (ibuf-end ib))
             (start (ibuf-pos ib)) (p start))
        (declare (type index p start end))
        ;; as in FILL-CARS, a pass runs the loop of the kind at P
        (case (window-kind sap p end)
          (#.+integer-kind+
           (multiple-value-setq (i p) (fill-integer-elements rs v i n p end)))
          (#.+single-kind+
           (let ((q p) (j i))
             (declare (type index q j))
             (loop while (and (< j n) (window-single-float-p sap q end))
                   do (setf (svref v j) (sb-sys:sap-ref-single sap (+ q 1))
                            q (+ q 5))
                      (incf j))
             (setf p q i j)))
          (#.+boxed-kind+
           (let ((q p) (j i))
             (declare (type index q j))
             (flet ((boxes (tag)
                      ;; as in FILL-CARS: inline, with a constant TAG
                      (loop named boxes
                            while (and (< j n) (< q end))
                            do (let ((stop (next-box-slice rs q end)))
                                 (loop while (and (< j n) (< q stop))
                                       do (let ((x (window-box sap q end tag)))
                                            (unless x
                                              (return-from boxes))
                                            (setf (svref v j) x
                                                  q (sb-ext:truly-the index
                                                                      (+ q (box-bytes tag)))))
                                          (incf j))))))
               (declare (inline boxes))
               (if (= (sb-sys:sap-ref-8 sap p) +tag-double-float+)
                   (boxes +tag-double-float+)
                   (boxes +tag-complex-double+)))
             (when (> j i)
               (register-boxes rs v i (- j i)))
             (setf p q i j)))
          (#.+string-kind+
           (multiple-value-setq (i p) (fill-string-elements rs v i n p end)))
          (#.+ref-kind+
           (multiple-value-setq (i p) (fill-ref-elements rs v i n p end)))
          (#.+leaf-kind+
           (loop while (and (< i n) (< p end))
                 do (multiple-value-bind (value next) (window-element rs sap p end)
                      (unless next
                        (return))
                      (setf (svref v i) value
                            p next)
                      (incf i)
                      (when (window-integer-next-p sap p end)
                        (return))))))
        (setf (ibuf-pos ib) p)
        (cond ((>= i n) (return v))
              ((= p start)
               ;; as in FILL-CARS: the general path
               (loop do (setf (svref v i) (read-object rs))
                        (incf i)
                     while (and (< i n)
                                (= (window-kind (ibuf-sap ib) (ibuf-pos ib) (ibuf-end ib))
                                   +general-kind+)))))))))
