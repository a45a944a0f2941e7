;;;; An EQ table from objects to ids, specialised for what STORE needs:
;;;; look an object up, and add it with the next id if it is new.  Ids are
;;;; the order of adding (0, 1, 2 ...), and the table keeps its objects in a
;;;; vector in that order, but for runs of new boxed floats that a loop
;;;; writes from a list or vector: such a run is kept as where it comes
;;;; from (a box run: the list or vector, where in it, how many), so that a
;;;; million doubles do not cost a million stores to the vector and a
;;;; million to clear it after.
;;;;
;;;; Most objects a store meets are met once: data without sharing is added
;;;; object by object and never looked up with success.  So a table starts
;;;; as SEEN BITS only, one bit per 16-byte granule of the address space
;;;; (every heap object starts on its own granule): adding an object sets a
;;;; bit in memory a 32nd the size of the data, touched in address order,
;;;; where a hash table writes a slot in memory larger than the data.  An id
;;;; is only needed when an object is met a second time (its bit is already
;;;; set); the table then hashes every object so far on its address (see
;;;; ADDRESS-SLOT) and answers from the hash table until the store ends.
;;;;
;;;; Two kinds of objects take other ways in.  Symbols, packages and class
;;;; descriptors are met again as a rule (a keyword in every record): they
;;;; go straight into the hash table, so that meeting them again does not
;;;; end the seen bits for everything else.  And the conses of a list, with
;;;; shared list structures, take their ids a run at a time: a table of
;;;; runs keeps one entry per run, not one per cons.
;;;;
;;;; Addresses change when the garbage collector moves objects: the table
;;;; remembers the GC epoch it was indexed in; after a collection it checks
;;;; whether any of its objects moved, and indexes them afresh only then
;;;; (rare: storing allocates little, and what survives is seldom moved).
;;;; An object the current operation holds is referenced from the stack, and
;;;; SBCL's collector does not move such objects, so a collection in the
;;;; middle of an operation cannot misplace it; the next operation reindexes.

(in-package #:binstore)

(defconstant +granule-shift+ (integer-length (1- (* 2 +word-bytes+)))
  "Log2 of the granule: SBCL aligns every heap object to two words.")

(defconstant +chunk-shift+ 12
  "Log2 of the address range a block of seen bits covers (4 KiB).")

(defconstant +seen-word-shift+ (integer-length (1- +seen-word-bits+))
  "Log2 of the bits in a word of seen bits (the platform's +SEEN-WORD-BITS+:
64 on SBCL, fewer where a 64-bit word is not an unboxed integer).")

(defconstant +block-words+ (/ (ash 1 (- +chunk-shift+ +granule-shift+)) +seen-word-bits+)
  "Words of seen bits per block: a bit for each granule of a chunk.")

(defconstant +recent-chunks+ 4
  "Chunks whose blocks an identity table remembers besides the last one (see
RECENT-CHUNK-BASE): as many runs of objects as a walk commonly reads at once.")

(deftype u32-vector () '(simple-array (unsigned-byte 32) (*)))
(deftype word-vector () '(simple-array seen-word (*))) ; on SBCL WORD
(deftype id-or-none () "An id, or -1 for none." '(integer -1 #.(1- (expt 2 32))))

(defstruct (identity-table (:conc-name it-) (:constructor %make-identity-table))
  ;; The objects by entry, 0 past ENTRIES.  In a table of runs (LENGTHS
  ;; given) an entry is a cons and LENGTHS says how many conses of its cdr
  ;; chain it stands for; otherwise it is one object.  Ids follow the
  ;; entries in order.
  (objects (make-array 64) :type simple-vector)
  (entries 0 :type index)
  (lengths nil :type (or null (simple-array fixnum (*))))
  (count 0 :type index)                       ; ids given
  ;; The id the last reference written named, -1 before the first: a
  ;; reference to the id above it is written as NEXT-REF (store-state.lisp).
  ;; Here because every writer of references has the table at hand.
  (last-ref -1 :type fixnum)
  ;; Runs of boxes taken with no entries (see NOTE-BOX-RUN), in a table
  ;; that is not one of runs.  Run R is the four elements from 4R of
  ;; BOX-RUNS: the entries made before it, its source (a cons, whose cars
  ;; its boxes are, or a simple vector), the index of its first box in a
  ;; vector (0 for a list), and how many boxes; their ids follow those of
  ;; the entries and runs before it.
  (box-runs (make-array 0) :type simple-vector)
  (box-run-count 0 :type index)
  ;; Seen bits.  Block B holds the bits of chunk (address >> +chunk-shift+)
  ;; (CHUNKS B), at +BLOCK-WORDS+ * B in BITS.  DIRECTORY maps chunks to
  ;; blocks: open addressing, an entry is B + 1, 0 is empty.  INSTALL-BLOCKS
  ;; keeps BITS exactly +BLOCK-WORDS+ words per element of CHUNKS and the
  ;; DIRECTORY at least twice as long as CHUNKS, a power of two, so a probe
  ;; always meets an empty entry and a block index is always within BITS.
  (chunks (make-array 16 :element-type 'fixnum) :type (simple-array fixnum (*)))
  (bits (make-array (* 16 +block-words+) :element-type 'seen-word) :type word-vector)
  (directory (make-array 32 :element-type '(unsigned-byte 32)) :type u32-vector)
  (blocks 0 :type index)                      ; blocks in use
  (last-chunk -1 :type fixnum)                ; the chunk met last, and its block's
  (last-base 0 :type index)                   ; first word: objects come in runs
  ;; The chunks met lately and their blocks' first words, pairs at 2K and
  ;; 2K + 1, -1 for none; RECENT-NEXT is the pair to replace next.  A walk
  ;; of records reads a few runs at once (structures, their doubles, their
  ;; strings: each kind apart in the heap), so the chunk changes at nearly
  ;; every object; these spare most of them the directory's probe.
  (recent (make-array (* 2 +recent-chunks+) :element-type 'fixnum :initial-element -1)
   :type (simple-array fixnum (#.(* 2 +recent-chunks+))))
  (recent-next 0 :type (mod #.+recent-chunks+))
  ;; The hash table, once HASHED.  Slot I is the two words at 2I and 2I + 1
  ;; of SLOTS: the key (0 when empty) and its id, so a probe that finds its
  ;; key has the id in the same cache line.  SLOTS always holds MASK + 1
  ;; slots: a slot index masked with MASK is within it, which PROBE relies on.
  (hashed nil :type boolean)                  ; whether every object is in it
  (hashed-count 0 :type index)                ; objects in it
  (slots (make-array 2 :initial-element 0) :type simple-vector)
  (mask 0 :type index)
  (limit 0 :type index)                       ; the count at which the hash table grows
  (epoch (current-gc-epoch) :type gc-epoch)
  (scratch-kind +scratch-table+ :type fixnum)) ; which spare table it may become

;;; The vector of objects

(defun grow-objects (table needed)
  "Make room in TABLE's vector of objects (and of run lengths) for NEEDED
entries."
  (let ((old (it-objects table))
        (used (it-entries table)))
    (when (< (length old) needed)
      (let ((n (max needed (* 2 (length old)))))
        (setf (it-objects table) (replace (make-array n :initial-element 0) old :end2 used))
        (when (it-lengths table)
          (setf (it-lengths table) (replace (make-array n :element-type 'fixnum)
                                            (it-lengths table) :end2 used)))))))

(declaim (inline append-entry))
(defun append-entry (table object)
  "Make OBJECT the next entry."
  (let ((entry (it-entries table)))
    (when (= entry (length (it-objects table)))
      (grow-objects table (1+ entry)))
    (setf (svref (it-objects table) entry) object
          (it-entries table) (1+ entry))))

(declaim (inline append-object))
(defun append-object (table object)
  "Give OBJECT the next id; return -1 (what adding answers)."
  (append-entry table object)
  (incf (it-count table))
  -1)

(defun map-box-run (fn runs r id)
  "Call FN with each box of the box run R of RUNS (an IT-BOX-RUNS) and its
id, from ID on."
  (declare (type function fn) (type simple-vector runs) (type index r id))
  (let ((source (svref runs (+ (* 4 r) 1)))
        (start (svref runs (+ (* 4 r) 2)))
        (n (svref runs (+ (* 4 r) 3))))
    (declare (type index start n))
    (if (consp source)
        (loop for c = source then (cdr c)
              for k of-type index from id below (+ id n)
              do (funcall fn (car c) k))
        (loop for i of-type index from start below (+ start n)
              for k of-type index from id
              do (funcall fn (svref source i) k)))))

(defun map-objects (fn table)
  "Call FN with each object of TABLE and its id, in the order of the ids."
  (declare (type function fn) (type identity-table table))
  (let ((objects (it-objects table))
        (lengths (it-lengths table))
        (runs (it-box-runs table))
        (r 0)
        (id 0))
    (declare (type index id r))
    (flet ((box-runs-at (entry)
             ;; the box runs noted when ENTRY entries had been made
             (loop while (and (< r (it-box-run-count table))
                              (= (the index (svref runs (* 4 r))) entry))
                   do (map-box-run fn runs r id)
                      (incf id (the index (svref runs (+ (* 4 r) 3))))
                      (incf r))))
      (dotimes (entry (it-entries table))
        (box-runs-at entry)
        (let ((object (svref objects entry)))
          (if lengths
              (dotimes (k (aref lengths entry))
                (funcall fn object id)
                (incf id)
                (setf object (cdr object)))
              (progn (funcall fn object id)
                     (incf id)))))
      (box-runs-at (it-entries table)))))

(defconstant +box-run-least+ 4
  "Boxes a loop must have taken for them to be noted as a box run; fewer
take entries, as any object.")

(defun note-box-run (table source start n)
  "Give the N boxes of SOURCE (the cars of its first N conses, or the
elements of a simple vector from START), which have just had their seen
bits set, the next ids, as a box run: they take no entries, and so cost no
store each, nor clearing each when the store is over."
  (declare (type identity-table table) (type index start n))
  (let* ((r (it-box-run-count table))
         (runs (it-box-runs table)))
    (when (>= (* 4 r) (length runs))
      (setf runs (replace (make-array (max 64 (* 2 (length runs))) :initial-element 0) runs)
            (it-box-runs table) runs))
    (setf (svref runs (* 4 r)) (it-entries table)
          (svref runs (+ (* 4 r) 1)) source
          (svref runs (+ (* 4 r) 2)) start
          (svref runs (+ (* 4 r) 3)) n
          (it-box-run-count table) (1+ r))
    (incf (it-count table) n)
    nil))

;;; Seen bits

(defun install-blocks (table chunks bits directory)
  "Make CHUNKS, BITS and DIRECTORY TABLE's block vectors.  The one place
that sets them: it checks what the unchecked accesses of MARK-SEEN rely on."
  (declare (type identity-table table) (type (simple-array fixnum (*)) chunks)
           (type word-vector bits) (type u32-vector directory))
  (let ((n (length chunks)) (d (length directory)))
    (assert (and (plusp n) (= (length bits) (* +block-words+ n))
                 (>= d (* 2 n)) (= d (ash 1 (1- (integer-length d)))))
            () "seen-bit vectors of ~d blocks, ~d words and ~d entries" n (length bits) d)
    (setf (it-chunks table) chunks (it-bits table) bits (it-directory table) directory)
    table))

(declaim (inline chunk-home))
(defun chunk-home (chunk mask)
  (logand (multiplicative-hash chunk) mask))

(defun directory-slot (table chunk)
  "The index of CHUNK's entry in TABLE's directory, or of the empty entry
where it goes."
  (declare (type identity-table table) (type (unsigned-byte 60) chunk) (optimize speed))
  (let* ((directory (it-directory table))
         (chunks (it-chunks table))
         (mask (1- (length directory))))
    (do ((i (chunk-home chunk mask) (logand (1+ i) mask)))
        (nil)
      (declare (type index i))
      (let ((entry (aref directory i)))
        (when (or (zerop entry) (= chunk (aref chunks (1- entry))))
          (return i))))))

(defun grow-blocks (table)
  "Double the number of blocks TABLE can hold, keeping the ones in use."
  (let* ((n (* 2 (length (it-chunks table))))
         (chunks (make-array n :element-type 'fixnum))
         (bits (make-array (* +block-words+ n) :element-type 'seen-word))
         (used (it-blocks table)))
    (replace chunks (it-chunks table) :end2 used)
    (replace bits (it-bits table) :end2 (* +block-words+ used))
    (install-blocks table chunks bits (make-array (* 2 n) :element-type '(unsigned-byte 32)))
    (dotimes (b used)
      (setf (aref (it-directory table) (directory-slot table (aref chunks b))) (1+ b)))))

(defun chunk-base (table chunk)
  "The first word of CHUNK's seen bits, giving it a block if it has none."
  (declare (type identity-table table) (type (unsigned-byte 60) chunk) (optimize speed))
  (let ((i (directory-slot table chunk)))
    (if (plusp (aref (it-directory table) i))
        (* +block-words+ (1- (aref (it-directory table) i)))
        (let ((b (it-blocks table)))
          (when (= b (length (it-chunks table)))
            (grow-blocks table)
            (setf i (directory-slot table chunk)))
          (setf (aref (it-chunks table) b) chunk
                (aref (it-directory table) i) (1+ b)
                (it-blocks table) (1+ b))
          (* +block-words+ b)))))

(deftype granule ()
  "The granule of an address within its chunk."
  `(unsigned-byte ,(- +chunk-shift+ +granule-shift+)))

(declaim (inline address-chunk address-granule))
(defun address-chunk (address)
  (declare (type heap-address address))
  (ash address (- +chunk-shift+)))
(defun address-granule (address)
  "The granule of ADDRESS within its chunk."
  (declare (type heap-address address))
  (ldb (byte (- +chunk-shift+ +granule-shift+) +granule-shift+) address))

(declaim (inline mark-seen-at))
(defun mark-seen-at (table base address)
  "Set the seen bit of ADDRESS, whose chunk's bits start at word BASE; true
if it was set already."
  (declare (type identity-table table) (type index base) (optimize speed))
  (let* ((granule (address-granule address))
         (k (+ base (ash granule (- +seen-word-shift+))))
         (bit (ash 1 (logand granule (1- +seen-word-bits+))))
         (bits (it-bits table)))
    (declare (type granule granule) (type index k) (type seen-word bit))
    ;; BASE is a block's first word (see INSTALL-BLOCKS) and K within its
    ;; block: unchecked
    (locally (declare (optimize (safety 0)))
      (let ((word (aref bits k)))
        (or (logtest word bit)
            (progn (setf (aref bits k) (logior word bit)) nil))))))

(declaim (inline recent-base))
(defun recent-base (table chunk)
  "The first word of CHUNK's seen bits when it is one of the chunks met
lately, else NIL: the look that needs no call."
  (declare (type identity-table table) (type (unsigned-byte 60) chunk))
  (let ((recent (it-recent table)))
    (loop for k of-type index from 0 below (* 2 +recent-chunks+) by 2
          when (= chunk (aref recent k))
            return (aref recent (1+ k)))))

(defun recent-chunk-base (table chunk)
  "CHUNK-BASE for a chunk other than the last one met, which it becomes:
answered from the chunks met lately when it is one of them, otherwise from
the directory, and then remembered in place of the oldest of them."
  (declare (type identity-table table) (type (unsigned-byte 60) chunk) (optimize speed))
  (let ((base (or (recent-base table chunk)
                  (let ((base (chunk-base table chunk))
                        (recent (it-recent table))
                        (k (* 2 (it-recent-next table))))
                    (setf (aref recent k) chunk
                          (aref recent (1+ k)) base
                          (it-recent-next table) (mod (1+ (it-recent-next table))
                                                      +recent-chunks+))
                    base))))
    (declare (type index base))
    (setf (it-last-chunk table) chunk (it-last-base table) base)
    base))

(declaim (inline mark-seen))
(defun mark-seen (table object)
  "Set OBJECT's seen bit; true if it was set already."
  (declare (type identity-table table) (optimize speed))
  (let* ((address (object-address object))
         (chunk (address-chunk address))
         ;; the chunks met lately are looked at here, without a call: a
         ;; walk of records meets a few runs of objects by turns
         ;; (structures, their doubles, their strings)
         (base (cond ((= chunk (it-last-chunk table)) (it-last-base table))
                     ((recent-base table chunk))
                     (t (recent-chunk-base table chunk)))))
    (declare (type index base))
    (mark-seen-at table base address)))

(declaim (inline seen-p))
(defun seen-p (table object)
  "Whether OBJECT's seen bit is set.  The chunk met last and those met
lately are looked at first, as MARK-SEEN does, then the directory, without
taking a block for a chunk that has none."
  (declare (type identity-table table) (optimize speed))
  (let* ((address (object-address object))
         (chunk (address-chunk address))
         (granule (address-granule address))
         (base (cond ((= chunk (it-last-chunk table)) (it-last-base table))
                     ((recent-base table chunk))
                     (t (let ((entry (aref (it-directory table) (directory-slot table chunk))))
                          (if (plusp entry)
                              (* +block-words+ (1- entry))
                              (return-from seen-p nil)))))))
    (declare (type index base))
    (logbitp (logand granule (1- +seen-word-bits+))
             (aref (it-bits table) (+ base (ash granule (- +seen-word-shift+)))))))

(defun clear-seen (table)
  "Clear TABLE's seen bits and directory, touching only the blocks in use.
Entries leave the directory newest first, so each one's probe still finds
it: the entries it passed when it went in are older, and still there."
  (declare (type identity-table table) (optimize speed))
  (let ((blocks (it-blocks table)))
    (fill (it-bits table) 0 :end (* +block-words+ blocks))
    (loop for b of-type fixnum from (1- blocks) downto 0
          do (setf (aref (it-directory table) (directory-slot table (aref (it-chunks table) b))) 0))
    (fill (it-recent table) -1)
    (setf (it-blocks table) 0 (it-last-chunk table) -1 (it-last-base table) 0)))

;;; The hash table

(defun half-full (slots)
  "The count at which a hash table of SLOTS slots grows: it is kept at most
half full, so probes stay short."
  (floor slots 2))

(defun make-slots (n)
  "An empty vector of N hash slots."
  (make-array (* 2 n) :initial-element 0))

(defun install-slots (table slots)
  "Make SLOTS TABLE's hash vector, with the mask and limit it gives.  The
one place that sets it: it checks what the unchecked accesses of PROBE rely
on, that it holds a power of two of slots."
  (declare (type identity-table table) (type simple-vector slots))
  (let ((n (floor (length slots) 2)))
    (assert (and (plusp n) (= (length slots) (* 2 n)) (= n (ash 1 (1- (integer-length n)))))
            () "an identity table vector of ~d words" (length slots))
    (setf (it-slots table) slots
          (it-mask table) (1- n) (it-limit table) (half-full n))
    table))

(declaim (inline slot-count slot-key slot-id))
(defun slot-count (table)
  "The number of slots of TABLE's hash table."
  (1+ (it-mask table)))

(defun slot-key (slots i)
  "The key of slot I of SLOTS, 0 when it is empty.  Unchecked: I must come
from PROBE (masked), or be below the slot count."
  (declare (type simple-vector slots) (type index i))
  (locally (declare (optimize (safety 0)))
    (svref slots (ash i 1))))

(defun slot-id (slots i)
  "The id of the key in slot I of SLOTS (unchecked, as SLOT-KEY)."
  (declare (type simple-vector slots) (type index i))
  (locally (declare (optimize (safety 0)))
    (the index (svref slots (1+ (ash i 1))))))

(declaim (inline address-slot))
(defun address-slot (object mask)
  "The home slot of OBJECT.  Objects within one 4 KiB page land in one run
of 256 slots, in address order, so walking data allocated in order touches
the table in order; the page picks where that run starts by a
multiplicative hash, so that separate regions of the heap (SBCL keeps conses
apart from other objects) do not pile onto the same slots."
  (declare (type fixnum mask))
  (let ((a (object-address object)))
    (declare (type heap-address a))
    (logand (+ (ash (multiplicative-hash (ash a -12)) 8) (logand (ash a -4) 255)) mask)))

(defconstant +probe-step+ 257
  "Distance between the slots a probe tries.  Odd, so a probe can reach
every slot.  Not 1: a page packed with 16-byte objects (doubles, conses)
fills its whole run of 256 slots, and a page whose run lands on such a run
would, probing slot by slot, have every object walk past it (27 probes on
average for a list of a million doubles).  A step just over a run moves
each of them to the next run instead (0.1 probes).")

(declaim (inline probe))
(defun probe (table object)
  "The index of OBJECT's slot in TABLE's hash table, or of the empty slot
where it goes."
  (declare (type identity-table table) (optimize speed))
  (let* ((slots (it-slots table))
         (mask (it-mask table))
         (i (address-slot object mask)))
    (declare (type index i))
    (loop
      ;; I is masked, so within SLOTS (see the structure)
      (let ((key (slot-key slots i)))
        (when (or (eq key object) (eql key 0))
          (return i)))
      (setf i (logand (+ i +probe-step+) mask)))))

(declaim (inline prefetch-home))
(defun prefetch-home (table object)
  "Ask for the cache line of OBJECT's home slot, ahead of looking it up."
  (declare (type identity-table table))
  (prefetch-svref (it-slots table) (ash (address-slot object (it-mask table)) 1)))

;;; Putting objects in the hash table

(declaim (inline fill-slot))
(defun fill-slot (table i object id)
  "Enter OBJECT with ID at slot I, which PROBE found for it (empty, or
holding OBJECT already)."
  (declare (type identity-table table) (type index i id))
  (let ((slots (it-slots table)))
    (when (eql (slot-key slots i) 0)
      (incf (it-hashed-count table)))
    ;; I comes from PROBE, so within SLOTS: unchecked
    (locally (declare (optimize (safety 0)))
      (setf (svref slots (ash i 1)) object
            (svref slots (1+ (ash i 1))) id))))

(declaim (inline put-in-hash))
(defun put-in-hash (table object id)
  "Enter OBJECT with ID at its slot (its own, if it is there already)."
  (declare (type identity-table table) (type index id))
  (fill-slot table (probe table object) object id))

(defun rehash (table slots)
  "Move TABLE's hash entries into an empty vector of SLOTS slots, at the
slots their objects' current addresses give.  A collection while they move
leaves some at addresses of the epoch before: TABLE's epoch is still that
one, so the next operation of the table finds it changed and indexes
afresh (see REINDEX)."
  (declare (type identity-table table) (type index slots))
  (let ((old (it-slots table))
        (old-count (slot-count table)))
    (install-slots table (make-slots slots))
    (setf (it-hashed-count table) 0)
    (dotimes (i old-count)
      (let ((key (slot-key old i)))
        (unless (eql key 0)
          (put-in-hash table key (slot-id old i)))))))

(declaim (inline grow-if-full))
(defun grow-if-full (table)
  "Keep the hash table at most half full (probes stay short); grow
fourfold while it is small, so a large store rehashes few times."
  (when (>= (it-hashed-count table) (it-limit table))
    (let ((size (slot-count table)))
      (rehash table (if (< size (expt 2 20)) (* 4 size) (* 2 size))))))

(declaim (inline hash-add))
(defun hash-add (table object)
  "Give OBJECT, not in TABLE's hash table, the next id there; return -1."
  (grow-if-full table)
  (put-in-hash table object (it-count table))
  (append-object table object))

(defun start-hashing (table)
  "An object was met again: from now on TABLE answers every question from
its hash table, which every object so far now enters (the recurring ones
are there already).  As in REHASH, a collection meanwhile leaves TABLE's
epoch behind, for the next operation to index afresh."
  (let ((needed (* 2 (+ 64 (it-count table)))))
    (when (< (slot-count table) needed)
      (rehash table (ash 1 (integer-length needed)))))
  (clear-seen table)
  (setf (it-hashed table) t)
  (map-objects (lambda (object id) (put-in-hash table object id)) table)
  table)

(declaim (inline hash-id))
(defun hash-id (table object)
  "The id TABLE's hash table holds for OBJECT at its current address, or -1."
  (declare (type identity-table table))
  (let ((i (probe table object))
        (slots (it-slots table)))
    (if (eql (slot-key slots i) 0) -1 (slot-id slots i))))

(defun hashed-where-they-are-p (table)
  "Whether every key of TABLE's hash table is found by PROBE at its slot:
none has moved since it went in, or none so far that a look misses it.
Reads the slots in order, and the keys' addresses only (not their memory)."
  (declare (type identity-table table) (optimize speed))
  (let ((slots (it-slots table)))
    (dotimes (i (slot-count table) t)
      (let ((key (slot-key slots i)))
        (unless (or (eql key 0) (= (probe table key) i))
          (return nil))))))

(defun indexed-where-they-are-p (table)
  "Whether TABLE answers right for every object it has at the objects'
current addresses: its hash table finds each of its keys, and, in seen
bits, each object not in the hash table has its bit set.  (A bit set for an
address no object of TABLE has is harmless: meeting an object there starts
hashing, and the hash table answers.)  Changes nothing; must run with
collections held off."
  (declare (type identity-table table))
  (and (hashed-where-they-are-p table)
       (or (it-hashed table)
           (block seen
             (map-objects (lambda (object id)
                            (declare (ignore id))
                            (unless (or (seen-p table object)
                                        (>= (hash-id table object) 0))
                              (return-from seen nil)))
                          table)
             t))))

(defun mark-all-seen (table)
  "Set the seen bit of every object of TABLE afresh, at its current address."
  (declare (type identity-table table))
  (clear-seen table)
  (map-objects (lambda (object id)
                 (declare (ignore id))
                 (mark-seen table object))
               table))

(defun index-afresh (table)
  "Enter every object of TABLE again at its current address, in the hash
table and, in seen bits, in the seen bits too."
  (rehash table (slot-count table))
  (unless (it-hashed table)
    (mark-all-seen table)))

(defconstant +reindex-tries+ 3
  "Times REINDEX indexes a table with collections free to run, before it
holds them off for one more.")

(defun reindex (table)
  "A collection has run since TABLE was indexed: make it right at the
objects' current addresses, and take the current epoch.

Most collections move none of a store's objects (those that survive one or
two are no longer young, and a young collection leaves them be), and
looking at every key costs far less than indexing it again; so first the
table is checked, with collections held off, and indexed afresh only when
an object has moved.  Indexing afresh, a collection may run meanwhile: then
the table is checked and indexed again, and after +REINDEX-TRIES+ such
tries it is indexed with collections held off, so that a thread collecting
back to back cannot keep a store from its end."
  (loop repeat +reindex-tries+
        do (when (without-collections
                   (when (indexed-where-they-are-p table)
                     (setf (it-epoch table) (current-gc-epoch))))
             (return-from reindex table))
           (let ((epoch (current-gc-epoch)))
             (index-afresh table)
             ;; no collection meanwhile: right as indexed, nothing to check
             (when (eq epoch (current-gc-epoch))
               (setf (it-epoch table) epoch)
               (return-from reindex table))))
  (without-collections
    (index-afresh table)
    (setf (it-epoch table) (current-gc-epoch)))
  table)

(declaim (inline identity-table-current))
(defun identity-table-current (table)
  "TABLE, checked first if a collection has run since, and indexed afresh
if it moved objects."
  (unless (eq (it-epoch table) (current-gc-epoch))
    (reindex table))
  table)

;;; What the store uses

(declaim (ftype (function (identity-table t) (values id-or-none &optional))
                get-or-add-met-again identity-table-get-recurring)
         (ftype (function (identity-table t &optional t) (values id-or-none &optional))
                identity-table-get))

(defun make-identity-table (&key (scratch-kind +scratch-table+) runs)
  "An empty table: the spare one of SCRATCH-KIND kept from an earlier store
if there is one, else a small new one.  A table of RUNS is filled with
IDENTITY-TABLE-START-RUN and IDENTITY-TABLE-CLAIM (and only so)."
  (let ((table (or (take-scratch scratch-kind)
                   (let ((table (%make-identity-table
                                 :scratch-kind scratch-kind
                                 :lengths (and runs (make-array 64 :element-type 'fixnum)))))
                     (install-slots table (make-slots 64))))))
    (setf (it-epoch table) (current-gc-epoch)
          (it-last-ref table) -1)
    table))

(defun identity-table-get-recurring (table object)
  "The id of OBJECT, of a kind met again as a rule (a symbol, package or
class descriptor: see the file's header), or -1.  It is looked up in the
hash table in any state."
  (declare (type identity-table table) (optimize speed))
  (identity-table-current table)
  (hash-id table object))

(defun identity-table-add-recurring (table object)
  "Give OBJECT, of a kind met again as a rule and not in TABLE, the next id;
return it.  It goes straight into the hash table, so meeting it again does
not end the seen-bit state."
  (let ((id (it-count table)))
    (identity-table-current table)
    (hash-add table object)
    id))

(defun identity-table-get (table object &optional mark)
  "The id of OBJECT, or -1.  With MARK true, a new OBJECT is also marked as
about to take an id: it is an object written as its parts, whose id follows
theirs (a structure after its class, a ratio after its numerator), and
IDENTITY-TABLE-ADD-MARKED must give it that id once they are written.  In
seen bits, marking is setting its bit, so the question and the bit take
one look instead of two."
  (declare (type identity-table table) (optimize speed))
  (identity-table-current table)
  (cond ((it-hashed table) (identity-table-get-recurring table object))
        ((if mark (mark-seen table object) (seen-p table object))
         (start-hashing table)
         (identity-table-get-recurring table object))
        (t -1)))

(declaim (inline identity-table-add-marked))
(defun identity-table-add-marked (table object)
  "Give OBJECT, which IDENTITY-TABLE-GET answered -1 for and marked, the next
id; return it.  What happened since is allowed for: if the table has
started hashing, OBJECT goes into the hash table; if a collection has moved
objects, indexing them afresh did not set OBJECT's bit (it is not an entry
yet), so it is set again here (in the common case it is set already, in the
chunk met last)."
  (declare (type identity-table table) (optimize speed))
  (let ((id (it-count table)))
    (identity-table-current table)
    (if (it-hashed table)
        (hash-add table object)
        (progn (mark-seen table object)
               (append-object table object)))
    id))

(defun get-or-add-met-again (table object)
  "GET-OR-ADD for an OBJECT whose seen bit was set: start hashing, then
look it up (a bit is shared only by objects at the same address, so it is
there unless it is not a heap object)."
  (start-hashing table)
  (let ((id (identity-table-get-recurring table object)))
    (if (>= id 0) id (hash-add table object))))

(declaim (inline identity-table-get-or-add))
(defun identity-table-get-or-add (table object)
  "The id of OBJECT if it is in TABLE; otherwise give it the next id (the
table's count) and return -1.  One look where GET then ADD would take two."
  (declare (type identity-table table) (optimize speed))
  (identity-table-current table)
  (cond ((it-hashed table)
         (grow-if-full table)
         (let ((i (probe table object))
               (slots (it-slots table)))
           (if (eql (slot-key slots i) 0)
               (progn (fill-slot table i object (it-count table))
                      (append-object table object))
               (slot-id slots i))))
        ((mark-seen table object) (get-or-add-met-again table object))
        (t (append-object table object))))

;;; The loops that write numbers keep their variables in registers only as
;;; long as they call nothing.  What follows is the one case of GET-OR-ADD
;;; they take without a call: a new object in the chunk met last, the
;;; common case for doubles in a list or a vector, allocated in order and
;;; never met again.  A loop over a run of boxes (PUT-TRACKED-BOXES, in a
;;; list or a vector) takes them through WITH-SEEN-BITS-CURSOR, and gives
;;; them their ids together at its end (TAKE-BOX-RUN).  The loop that meets a boxed number now and then
;;; (PUT-NUMBER-CARS) takes one at a time, with IDENTITY-TABLE-ADD-QUICKLY.

(defmacro with-seen-bits-cursor (((claim flush &optional (ready (gensym "READY"))) table)
                                 &body body)
  "Run BODY, a loop taking objects new to TABLE (not a table of runs) one
after another, with three local names:
  READY     true when TABLE, not a table of runs, can take them this way:
            it is in seen bits, indexed in the current GC epoch, with a
            chunk met last (a table of runs in that state may be used too,
            by a caller that knows it is);
  (CLAIM x) sets the seen bit of the heap object X and returns true when
            it was clear; returns NIL, changing nothing, when it was set (X
            was met before), when X lies outside the chunk met last, or when
            a collection has run since READY was found;
  (FLUSH)   puts the word of bits being set back in the table.
BODY must call FLUSH before it leaves once it has called CLAIM; the objects claimed then need their ids (TAKE-BOX-RUN
or APPEND-OBJECT).  The word of bits stays in a variable between claims,
as 64 neighbouring objects share one: in the table, each claim would wait
for the store of the one before it to reach its own load.  The one
test-and-set of seen bits in a loop; MARK-SEEN-AT is the one for a single
object."
  (let ((bits (gensym "BITS")) (base (gensym "BASE")) (chunk (gensym "CHUNK"))
        (epoch (gensym "EPOCH")) (k (gensym "K")) (word (gensym "WORD")) (it (gensym "TABLE")))
    `(let* ((,it ,table)
            (,ready (and (not (it-hashed ,it))
                         (null (it-lengths ,it))
                         (eq (it-epoch ,it) (current-gc-epoch))
                         (>= (it-last-chunk ,it) 0)))
            (,bits (it-bits ,it))
            (,base (it-last-base ,it))
            (,chunk (it-last-chunk ,it))
            (,epoch (it-epoch ,it))
            (,k -1)
            (,word 0))
       (declare (type identity-table ,it) (type word-vector ,bits)
                (type index ,base) (type fixnum ,chunk ,k) (type seen-word ,word)
                (ignorable ,ready))
       (inline-flet ((,claim (x)
                       ;; the address first, then the epoch: a collection
                       ;; after the check leaves the bits and the address
                       ;; of the same epoch
                       (let ((address (object-address x)))
                         (when (and (eq ,epoch (current-gc-epoch))
                                    (= (address-chunk address) ,chunk))
                           (let* ((granule (address-granule address))
                                  ;; within the chunk's block, so within BITS
                                  (wk (truly-the index (+ ,base (ash granule (- +seen-word-shift+)))))
                                  (bit (ash 1 (logand granule (1- +seen-word-bits+)))))
                             (declare (type granule granule) (type seen-word bit))
                             (unless (= wk ,k)
                               (locally (declare (optimize (safety 0)))
                                 (when (>= ,k 0)
                                   (setf (aref ,bits ,k) ,word))
                                 (setf ,k wk
                                       ,word (aref ,bits wk))))
                             (unless (logtest ,word bit)
                               (setf ,word (logior ,word bit))
                               t)))))
                     (,flush ()
                       (when (>= ,k 0)
                         ;; a word of the chunk's block, within BITS
                         (locally (declare (optimize (safety 0)))
                           (setf (aref ,bits ,k) ,word)))))
         ,@body))))

(defun take-box-run (table source start n)
  "Give the N new boxes a loop of WITH-SEEN-BITS-CURSOR claimed, the first N
cars from the cons SOURCE or the elements of the simple vector SOURCE from
START, the next ids: as a box run (NOTE-BOX-RUN) when they are
+BOX-RUN-LEAST+ or more, else as entries."
  (declare (type identity-table table) (type index start n))
  (cond ((>= n +box-run-least+) (note-box-run table source start n))
        ((consp source)
         (loop for c = source then (cdr c)
               repeat n
               do (append-object table (car c))))
        (t
         (loop for i of-type index from start below (+ start n)
               do (append-object table (svref source i)))))
  nil)

(declaim (inline identity-table-add-quickly))
(defun identity-table-add-quickly (table object)
  "Give OBJECT, a heap object, the next id and return true, when TABLE (not
a table of runs) can tell at once that it is new: the table is still in
seen bits, indexed in the current GC epoch, OBJECT lies in the chunk met
last, its bit is clear and the vector of objects has room.  Otherwise
return NIL, changing nothing; the caller then asks
IDENTITY-TABLE-GET-OR-ADD.  (The conditions are WITH-SEEN-BITS-CURSOR's,
checked here for a single object.)"
  (declare (type identity-table table) (optimize speed))
  (let ((address (object-address object))
        (entry (it-entries table))
        (objects (it-objects table)))
    (when (and (not (it-hashed table))
               (eq (it-epoch table) (current-gc-epoch))
               (= (address-chunk address) (it-last-chunk table))
               (< entry (length objects))
               (not (mark-seen-at table (it-last-base table) address)))
      ;; APPEND-OBJECT, with the room checked above
      (setf (svref objects entry) object
            (it-entries table) (1+ entry)
            (it-count table) (1+ (it-count table)))
      t)))

;;; Runs of conses: a list's conses take their ids together, and a table
;;; of runs keeps one entry for them all (a million conses of a list in
;;; seen bits cost a bit each, not a bit and a slot).

(defun identity-table-start-run (table list)
  "Open a run at the cons LIST in TABLE, a table of runs: its conses are
then claimed one by one, LIST first, with IDENTITY-TABLE-CLAIM."
  (identity-table-current table)
  (append-entry table list)
  (setf (aref (it-lengths table) (1- (it-entries table))) 0)
  nil)

(declaim (inline identity-table-claim))
(defun identity-table-claim (table cons)
  "If CONS, the next of the open run's cdr chain, is not in TABLE, give it
the next id as part of the run and return true; otherwise return NIL (the
run ends before it)."
  (declare (type identity-table table) (optimize speed))
  (identity-table-current table)
  (when (if (it-hashed table)
            (progn
              (grow-if-full table)
              (let ((i (probe table cons)))
                (when (eql (slot-key (it-slots table) i) 0)
                  (fill-slot table i cons (it-count table))
                  t)))
            (not (mark-seen table cons)))
    (incf (aref (the (simple-array fixnum (*)) (it-lengths table)) (1- (it-entries table))))
    (incf (it-count table))
    t))

(declaim (inline claim-bits-loop))
(defun claim-bits-loop (table c limit)
  "The loop of CLAIM-RUN-IN-BITS: claim the conses of the cdr chain from C
on (at most LIMIT, unless it is NIL), in the seen bits of TABLE (a table of
runs, in seen bits), while each lies in the chunk met last, the GC epoch is
TABLE's and its bit is clear; return the cons reached (or what ends the
chain) and how many were claimed, leaving their count to the caller.  It
calls nothing, so that its variables stay in registers: with the calls to
take a new chunk or index afresh in the loop, they lived on the stack, and
each cdr waited for the store and the load of the one before.  The word of
bits being set stays in a register while the conses stay within its 64
granules.  Inline in two functions, with and without a limit, so that the
loop without one tests nothing for it."
  (declare (type identity-table table) (type (or null index) limit) (optimize speed))
  (let ((n 0))
    (declare (type index n))
    (with-seen-bits-cursor ((claim flush) table)
      ;; a collection during the loop shows in the caller's check of the
      ;; epoch, which then indexes afresh
      ;; (TRULY-THE: what the tests just found, for ECL, which does not
      ;; carry it)
      (loop while (and (or (null limit) (< n (truly-the index limit)))
                       (consp c)
                       (claim c))
            do (setf n (truly-the index (1+ n))
                     c (cdr (truly-the cons c))))
      (flush))
    (values c n)))

(defun claim-bits-in-chunk (table c)
  "CLAIM-BITS-LOOP without a limit: the claims of a whole run."
  (claim-bits-loop table c nil))

(defun claim-some-bits-in-chunk (table c limit)
  "CLAIM-BITS-LOOP with a LIMIT (its test, a cost at every cons, only here)."
  (claim-bits-loop table c limit))

(defun claim-run-in-bits (table list limit)
  "IDENTITY-TABLE-CLAIM-MORE with seen bits: CLAIM-BITS-IN-CHUNK claims
conses for as long as it can; between its calls, the table takes the chunk
of the next cons, or is indexed afresh after a collection."
  (declare (type identity-table table) (type index limit) (optimize speed))
  (let ((total 0) (c list)
        (entry (1- (it-entries table))))
    (declare (type index total entry))
    (loop
      (multiple-value-bind (next n) (if (= limit +largest-index+)
                                        (claim-bits-in-chunk table c)
                                        (claim-some-bits-in-chunk table c (- limit total)))
        (declare (type index n))
        ;; the claims so far in the run, before any indexing afresh
        (incf (aref (the (simple-array fixnum (*)) (it-lengths table)) entry) n)
        (incf (it-count table) n)
        (incf total n)
        (setf c next))
      (cond ((or (not (consp c)) (= total limit))
             (return))
            ((not (eq (it-epoch table) (current-gc-epoch)))
             ;; conses moved: index them all again, this run's so far too
             (identity-table-current table))
            ((/= (address-chunk (object-address c)) (it-last-chunk table))
             ;; a new block may be allocated, and collect: go round
             (recent-chunk-base table (address-chunk (object-address c))))
            (t                          ; its bit is set: claimed before
             (return))))
    (values total c)))

(defconstant +short-claim+ 8
  "The most conses a claim for which IDENTITY-TABLE-CLAIM-MORE claims one
by one, with IDENTITY-TABLE-CLAIM, in seen bits too: for the pairs and short
lists of an alist, the calls and set-up of CLAIM-RUN-IN-BITS cost more than
its loop saves.")

(declaim (inline identity-table-claim-more))
(defun identity-table-claim-more (table list limit)
  "Claim for the run open in TABLE (a table of runs) the cdr chain from
LIST on, which continues it, up to the first cons TABLE has, its end, or
LIMIT conses; return how many conses were claimed and what follows them.
Between two calls for one run, nothing else may enter TABLE: the run's
conses take consecutive ids, as the decoder gives them."
  (declare (type identity-table table) (type index limit))
  (if (or (it-hashed table) (<= limit +short-claim+))
      (let ((n 0) (c list))
        (declare (type index n))
        (loop while (and (< n limit) (consp c) (identity-table-claim table c))
              do (incf n)
                 (setf c (cdr c)))
        (values n c))
      (claim-run-in-bits table list limit)))

(defun identity-table-claim-run (table list limit)
  "Open a run at the cons LIST, not in TABLE (a table of runs), and claim
its cdr chain up to the first cons TABLE has, its end, or LIMIT conses;
return how many conses were claimed and what follows them.
IDENTITY-TABLE-CLAIM-MORE claims more of it."
  (declare (type identity-table table) (type cons list))
  (identity-table-start-run table list)
  (identity-table-claim-more table list limit))

(defun identity-table-expect (table n)
  "Make room for N more objects at once, sparing the copies of growing step
by step (and in a hash table the rehashes, each paying page faults)."
  (let ((count (it-count table)))
    (grow-objects table (+ (it-entries table) n))
    (when (it-hashed table)
      (let ((needed (* 2 (+ count n))))
        (when (> needed (slot-count table))
          (identity-table-current table)
          (rehash table (ash 1 (integer-length needed))))))))

(defun table-bytes (table)
  "Bytes of memory TABLE's vectors take."
  (+ (* 8 (length (it-objects table)))
     (* 8 (length (it-box-runs table)))
     (* 8 (length (or (it-lengths table) #())))
     (* 8 (length (it-chunks table)))
     (* (/ +seen-word-bits+ 8) (length (it-bits table)))
     (* 4 (length (it-directory table)))
     (* 8 (length (it-slots table)))))

(defun release-identity-table (table)
  "The store using TABLE is over: clear what it used and keep it as the
spare table of its kind, for the next store (see OFFER-SCRATCH), so the
objects it held can be collected and its memory serves again."
  (fill (it-objects table) 0 :end (it-entries table))
  (fill (it-box-runs table) 0 :end (* 4 (it-box-run-count table)))
  (setf (it-box-run-count table) 0)
  (clear-seen table)
  (let ((slots (slot-count table))
        (used (it-hashed-count table)))
    (if (> slots (max 64 (* 32 used)))
        ;; mostly empty (a store that stayed with seen bits after one that
        ;; hashed much): a new vector costs less than clearing this one
        (install-slots table (make-slots (max 64 (ash 1 (integer-length (* 2 used))))))
        (fill (it-slots table) 0)))
  (setf (it-count table) 0 (it-entries table) 0 (it-hashed-count table) 0
        (it-hashed table) nil (it-last-ref table) -1)
  (offer-scratch (it-scratch-kind table) table)
  nil)

(define-scratch-kind +scratch-table+ #'table-bytes)
(define-scratch-kind +scratch-cons-table+ #'table-bytes)
