;;;; Conses and lists.
;;;;
;;;; A run of conses linked by their cdrs is written with its length, so the
;;;; conses need no tag each:
;;;;   LIST n  car1 .. carn                 the run ends in NIL
;;;;   DOTTED-LIST n  car1 .. carn  tail    the run ends in a non-NIL atom, or
;;;;                                        (shared-list mode) a shared cons
;;;;   CONS car tail                        a run of one cons that is dotted
;;;; With shared list structures, a run stops before any cons written
;;;; already, whose reference then follows as the tail.  Tails are followed
;;;; by iteration on both sides, so a long chain of runs never deepens the
;;;; recursion.
;;;;
;;;; Like every container, a run has a header (the tag and n) and contents
;;;; (the cars and the tail), which a deferred run writes separately.

(in-package #:binstore)

(declaim (inline list-tag-p))
(defun list-tag-p (tag)
  "True for the tags that begin a run of conses."
  (or (= tag +tag-list+) (= tag +tag-dotted-list+) (= tag +tag-cons+)
      (= tag +tag-int64-list+)))

;;; The list header: the one place its bytes are chosen and written.  Every
;;; writer of a run (the run-at-a-time writer, the short leaf lists, the
;;; one-walk writer that fills its header in after the cars) goes through
;;; LIST-HEADER-TAG and PUT-LIST-HEADER.

(declaim (inline list-header-tag))
(defun list-header-tag (n tail packed)
  "The tag of the header of a run of N conses followed by TAIL (NIL for a
proper list); PACKED when the run's cars are all INT64-ELEMENT-Ps and are
to be written packed (only for a proper list of more than one)."
  (declare (type index n))
  (cond ((and packed (null tail) (> n 1)) +tag-int64-list+)
        ((null tail) +tag-list+)
        ((= n 1) +tag-cons+)
        (t +tag-dotted-list+)))

(declaim (inline list-header-length))
(defun list-header-length (tag n)
  "Bytes of the list header of TAG for a run of N conses."
  (declare (type index n))
  (if (= tag +tag-cons+) 1 (1+ (varint-length n))))

(declaim (inline put-list-header))
(defun put-list-header (sap p tag n)
  "Store at SAP+P the list header of TAG (from LIST-HEADER-TAG, or
+TAG-DOTTED-LIST+ for a run of one) for a run of N conses: the tag, then N
as a varint unless TAG is +TAG-CONS+; room for LIST-HEADER-LENGTH bytes
checked by the caller.  Return the offset after it."
  (declare (type index p n))
  (setf (mem-u8 sap p) tag)
  (if (= tag +tag-cons+)
      (1+ p)
      (put-varint sap (1+ p) n)))

(declaim (inline int64-element-p))
(defun int64-element-p (x)
  "True for an integer that needs the 8-byte form: a list of only such is
written packed, without their tag bytes.  A fixnum is tested first, by
its range alone: on ECL, whose fixnums are 62 bits, (SIGNED-BYTE 63) is a
generic comparison."
  (if (typep x 'fixnum)
      (not (typep x '(signed-byte 32)))
      (typep x '(signed-byte 63))))

(declaim (inline int64-run-p))
(defun int64-run-p (list n)
  "True when each of the first N cars of LIST is an INT64-ELEMENT-P."
  (declare (type index n))
  (and (int64-element-p (car list))
       (loop repeat n
             for c = list then (cdr c)
             always (int64-element-p (car c)))))

(defun list-run (ss list)
  "Length and tail of the run starting at the cons LIST, and whether every
car is an INT64-ELEMENT-P.  With shared list structures the run stops
before a cons written already, and its conses get their ids here (the
decoder gives them theirs when it allocates the run)."
  (declare (type cons list) (optimize speed))
  (if (ss-lists ss)
      (multiple-value-bind (n tail) (claim-cons-run ss list)
        (declare (type index n))
        (when (zerop n)
          (error "binstore bug: a run starts at a cons written before"))
        ;; the cars are looked at in a walk of their own, when the first
        ;; needs the 8-byte form (claiming is faster without them)
        (values n tail (int64-run-p list n)))
      ;; Count with a second pointer going twice as fast, to detect a cycle,
      ;; noting on the way whether every car needs the 8-byte integer form.
      (let ((n 1) (c (cdr list)) (fast (cdr list))
            (int64 (int64-element-p (car list))))
        (declare (type index n))
        (loop while (consp c)
              do (incf n)
                 (when int64
                   (setf int64 (int64-element-p (car c))))
                 (setf c (cdr c))
                 (when (consp fast)
                   (setf fast (cdr fast))
                   (when (consp fast)
                     (setf fast (cdr fast))
                     (when (eq fast c) (circular-list-error list)))))
        (values n c int64))))

(defun write-int64-run (ob list n)
  "Write the N cars of LIST, integers of INT64-ELEMENT-P's range (SBCL's
fixnums, some of them bignums on ECL), as 8-byte integers: blocks of them
go straight into the window with one bounds check each."
  (declare (type index n) (optimize speed))
  (let ((c list))
    (loop while (> n 0)
          do (let* ((k (min n 512))
                    (p (progn (make-room-for ob (* 8 k)) (obuf-pos ob)))
                    (sap (obuf-sap ob)))
               (declare (type index k p))
               (dotimes (i k)
                 (setf (mem-s64 sap (+ p (* 8 i))) (the (signed-byte 63) (car c))
                       c (cdr c)))
               (setf (obuf-pos ob) (+ p (* 8 k)))
               (decf n k)))))

(defvar *no-mark* (list :no-mark)
  "A cons that no list holds: the MARK of a walk whose length is known, which
needs no check for a cycle (see NEXT-IN-RUN).")

(declaim (inline put-number-cars))
(defun put-number-cars (sap p c k mark packed refs list)
  "Store the cars from the cons C on at SAP+P, at most K of them, for as
long as PUT-LEAF-QUICKLY takes each (with PACKED, for as long as each is an
INT64-ELEMENT-P, as its 8 bytes).  Return the offset after them, the cons
reached (the one whose car was not stored, or the cdr after the last car
stored) and how many were stored.  A cons reached that is MARK means LIST
is circular.  The caller has made room for K times +MAX-LEAF-BYTES+.
A loop without calls, so that its variables stay in registers (around the
calls that looking a boxed number up may make, they live on the stack, and
each step waits for the cons stored there just before), and whose output
is a pointer (see PUT-FIXNUM).  Inlined with PACKED and REFS constant or
declared, below, so that each copy keeps only its own path: a loop holding
the path through the table too spilled variables to the stack."
  (declare (type pointer sap) (type index p k) (type cons c)
           (type (or null identity-table) refs) (optimize speed))
  (let ((out (pointer+ sap p))
        (left k))
    (declare (type pointer out) (type index left))
    (loop
      (when (zerop left)
        (return))
      (let* ((x (car c))
             (after (cond ((not packed) (put-leaf-quickly out x refs))
                          ((int64-element-p x)
                           (setf (mem-s64 out 0) x)
                           (pointer+ out 8))
                          (t out))))
        (when (pointer= after out)
          (return))
        (setf out after
              left (truly-the index (1- left))))
      (let ((next (next-in-run c mark list)))
        (unless (consp next)
          (return-from put-number-cars
            (values (pointer- out sap) next (- k left))))
        (setf c next)))
    (values (pointer- out sap) c (- k left))))

(defun put-plain-cars (window-address p c k mark list)
  "PUT-NUMBER-CARS without a table, at WINDOW-ADDRESS (see PUT-LEAF-CARS)."
  (declare (type word window-address))
  (put-number-cars (address-pointer window-address) p c k mark nil nil list))

(defun put-tracked-cars (window-address p c k mark refs list)
  "PUT-NUMBER-CARS with the table REFS, at WINDOW-ADDRESS (see PUT-LEAF-CARS)."
  (declare (type word window-address) (type identity-table refs))
  (put-number-cars (address-pointer window-address) p c k mark nil refs list))

(defun put-packed-cars (window-address p c k mark list)
  "PUT-NUMBER-CARS for a packed run, at WINDOW-ADDRESS (see PUT-LEAF-CARS)."
  (declare (type word window-address))
  (put-number-cars (address-pointer window-address) p c k mark t nil list))

(defun put-fixnum-cars (window-address p c k mark list)
  "PUT-PLAIN-CARS for cars that are fixnums, which need no table: store them
from the cons C on at WINDOW-ADDRESS+P, at most K of them, for as long as
each is a fixnum, and return as PUT-PLAIN-CARS does.  Lists of small integers are
common and this loop has nothing else to test: about two thirds of the
instructions of PUT-PLAIN-CARS per car.  The walk goes on while the cdr is
a list, not a cons: the car of NIL is NIL, which ends the run as any car
that is not a fixnum does, so reaching the end costs no test of its own."
  (declare (type word window-address) (type index p k) (type cons c)
           (optimize speed))
  (let* ((sap (address-pointer window-address))
         (out (pointer+ sap p))
         (left k)
         (c c))
    (declare (type index left) (type list c))
    (loop
      (when (zerop left)
        (return))
      (let ((x (car c)))
        (unless (typep x 'fixnum)
          (return))
        (setf out (put-fixnum out x)
              left (truly-the index (1- left))))
      (let ((next (cdr c)))
        (when (eq next mark)
          (circular-list-error list))
        (unless (listp next)
          (return-from put-fixnum-cars (values (pointer- out sap) next (- k left))))
        (setf c next)))
    (values (pointer- out sap) c (- k left))))

(defun put-tracked-double-cars (window-address p c k mark refs list)
  "PUT-TRACKED-BOXES for the double-floats among the cars from the cons C
on, at most K: PUT-TRACKED-CARS without a call for each."
  (put-tracked-boxes window-address p c 0 k mark list refs nil nil))

(defun put-tracked-complex-cars (window-address p c k mark refs list)
  "PUT-TRACKED-BOXES for the complexes of double-floats among the cars from
the cons C on, at most K."
  (put-tracked-boxes window-address p c 0 k mark list refs t nil))

(defun put-leaf-cars (window-address p c k mark packed refs list)
  "Write the cars from the cons C on at WINDOW-ADDRESS+P, at most K of them,
for as long as each is a number PUT-LEAF takes (with PACKED, an
INT64-ELEMENT-P, as its 8 bytes).  Return the offset after them, the cons
reached (the one whose car was not written, or the cdr after the last car
written) and how many were written.  A cons reached that is MARK means LIST is circular.  The caller
has made room for K times +MAX-LEAF-BYTES+.  The window's address comes as
an integer, a fixnum, as it does to the loops this calls: a SAP passed to a
function not inline is boxed, 16 bytes of garbage for each call."
  (declare (type word window-address) (type index p k) (type cons c)
           (optimize speed))
  (let ((written 0)
        (sap (address-pointer window-address)))
    (declare (type index written))
    (loop
      ;; what needs no call, in a loop of its own
      (multiple-value-bind (q next n)
          (cond (packed (put-packed-cars window-address p c (- k written) mark list))
                ;; only at the block's start, so that a list mixing
                ;; fixnums with other numbers does not go back and forth
                ;; between this loop and another
                ((and (zerop written) (typep (car c) 'fixnum))
                 (put-fixnum-cars window-address p c k mark list))
                ((and refs (typep (car c) 'double-float))
                 (put-tracked-double-cars window-address p c (- k written) mark refs list))
                ((and refs (typep (car c) '(complex double-float)))
                 (put-tracked-complex-cars window-address p c (- k written) mark refs list))
                (refs (put-tracked-cars window-address p c (- k written) mark refs list))
                (t (put-plain-cars window-address p c (- k written) mark list)))
        (declare (type index q n))
        (setf p q
              written (truly-the index (+ written n)))
        (unless (consp next)
          (return-from put-leaf-cars (values p next written)))
        (setf c next))
      (when packed                      ; a car that is not an INT64-ELEMENT-P
        (return))
      ;; then boxed numbers looked up in REFS: one, or while the table
      ;; hashes (then PUT-LEAF-QUICKLY takes none), up to the next plain car
      (loop
        (when (= written k)
          (return-from put-leaf-cars (values p c written)))
        (let ((x (car c)))
          (when (typep x '(or fixnum single-float))
            (return))
          (let ((q (put-leaf sap p x refs)))
            (unless q
              (return-from put-leaf-cars (values p c written)))
            (setf p (truly-the index q)
                  written (truly-the index (1+ written)))))
        (let ((next (next-in-run c mark list)))
          (unless (consp next)
            (return-from put-leaf-cars (values p next written)))
          (setf c next))
        (unless (and refs (it-hashed refs))
          (return))))
    (values p c written)))

(defun write-symbol-cars (ss c k mark list)
  "Write the cars from the cons C on, at most K of them, for as long as each
is a symbol, asking 8 cars ahead for each symbol's first line and 4 ahead
for its name and table slot (see prefetch.lisp).  Return the cons reached
(the one whose car was not written, or the cdr after the last car written)
and how many were written.  A cons reached that is MARK means LIST is
circular."
  (declare (type store-state ss) (type cons c) (type index k) (optimize speed))
  (flet ((ahead (x n)
           ;; the cons N after X, or the list's end
           (dotimes (i n x)
             (if (consp x) (setf x (cdr x)) (return x)))))
    (let* ((written 0)
           (near (ahead c 4))
           (far (ahead near 4)))
      (declare (type index written))
      (loop
        (when (= written k)
          (return))
        (let ((x (car c)))
          (unless (symbolp x)
            (return))
          (when (consp far)
            (prefetch-object (car far))
            (setf far (cdr far)))
          (when (consp near)
            (prefetch-symbol-parts ss (car near))
            (setf near (cdr near)))
          (write-object ss x)
          (incf written)
          (let ((next (next-in-run c mark list)))
            (unless (consp next)
              (return-from write-symbol-cars (values next written)))
            (setf c next))))
      (values c written))))

(defun write-leaf-cars (ob list n refs)
  "Write the first N cars of LIST for as long as PUT-LEAF takes them; return
the cons of the first car not written and how many are left."
  (declare (type obuf ob) (type index n) (optimize speed))
  (let ((c list))
    (loop
      (when (zerop n)
        (return (values c 0)))
      (let* ((p (obuf-pos ob))
             (block (min n (floor (- (obuf-end ob) p) +max-leaf-bytes+))))
        (declare (type index p block))
        (if (zerop block)
            ;; near the window's end: one car, with an exact reservation
            (progn
              (unless (write-leaf-near-end ob (car c) refs)
                (return (values c n)))
              (setf c (cdr c))
              (decf n))
            (multiple-value-bind (q next written)
                (put-leaf-cars (obuf-base ob) p c block *no-mark* nil refs list)
              (declare (type index q written))
              (setf (obuf-pos ob) q
                    c next)
              (decf n written)
              (when (< written block)
                (return (values c n)))))))))

(declaim (inline write-run-header))
(defun write-run-header (ss list n tail int64)
  "Write the tag and length of the run of N conses at LIST, whose tail is
TAIL and whose cars are all INT64-ELEMENT-Ps when INT64; return for the
contents N, or -N for a packed run of integers.  (A fixnum, where a cons of
the length and the tail was garbage for every list written this way: the
tail is where the contents' walk ends.)"
  (declare (type index n))
  (let* ((ob (ss-obuf ss))
         (tag (list-header-tag n tail int64)))
    (expect-tracked-elements ss n (car list))
    (make-room-for ob (list-header-length tag n))
    (setf (obuf-pos ob) (put-list-header (obuf-sap ob) (obuf-pos ob) tag n))
    (if (= tag +tag-int64-list+) (- n) n)))

(defun write-claimed-run (ss list n tail)
  "Write the run of N conses at LIST, whose conses are claimed already
(shared list structures) and which TAIL follows, with its length known;
then its tail."
  (declare (type index n))
  (write-list-contents ss list (write-run-header ss list n tail (int64-run-p list n))))

(declaim (inline short-list-element-p))
(defun short-list-element-p (x boxed)
  "True when WRITE-SHORT-LEAF-LIST may take X: a leaf PUT-IMMEDIATE-LEAF
takes (with BOXED), or a symbol, which it writes as a reference when it was
written before."
  (or (immediate-leaf-p x boxed) (symbolp x)))

(declaim (inline short-leaf-list-candidate-p))
(defun short-leaf-list-candidate-p (ss list)
  "True when conses are not tracked and the first car of the cons LIST is
of a kind that WRITE-SHORT-LEAF-LIST may take: the test, inline in
WRITE-CONTAINER-OBJECT, that spares the call for other lists (a list of
instances).  (With tracked conses, see SHORT-TRACKED-LIST-CANDIDATE-P.)"
  (and (not (ss-lists ss))
       (short-list-element-p (car list) t)))

(declaim (inline short-tracked-list-candidate-p))
(defun short-tracked-list-candidate-p (ss list)
  "True when conses are tracked and the first car of the cons LIST, not
written before, is of a kind that WRITE-SHORT-LEAF-LIST then takes."
  (and (ss-lists ss)
       (immediate-leaf-p (car list) nil)))

(defun write-short-leaf-list (ss list)
  "Write LIST when it is a run of at most +SHORT-CONTAINER-ELEMENTS+ conses whose
cars, and tail when dotted, are leaves PUT-IMMEDIATE-LEAF takes (boxed ones
only without reference tracking, where they take no id) or symbols written
before (as references), as WRITE-OBJECT would write it, in one function
that calls nothing but the symbols' lookups; return true.  Otherwise return
NIL, having written nothing: where the run is deferred or too deep, a
longer or circular list, a first car needing the 8-byte form (a run of
them is packed), another kind of car, a symbol not written before, or too
little room in the window.  A list of a few numbers (a point, a pair, a
small record) or an alist's pair of a keyword and a number otherwise took
a dozen calls through the general writer.  With tracked conses (LIST not
written before) only NIL, T, fixnums and singles are taken, and the run's
conses are claimed once the rest is known to be written here: a pair of
numbers cost 1,150 instructions through the general writer.  Should a cons
of the run have been written before, the run ends there, written with
that length through the general writer."
  (declare (type store-state ss) (type cons list) (optimize speed))
  (let* ((ob (ss-obuf ss))
         (lists (ss-lists ss))
         (boxed (not (ss-track ss)))
         (n 0)
         (tail list))
    (declare (type index n))
    (flet ((takes-p (x)
             ;; with tracked conses, no symbol: its lookup could fail after
             ;; the conses are claimed
             (if lists (immediate-leaf-p x nil) (short-list-element-p x boxed))))
      (declare (inline takes-p))
      (when (or (int64-element-p (car list))
                (not (inline-container-allowed-p ss)))
        (return-from write-short-leaf-list nil))
      ;; the kinds first, so that a list with another kind of element (a
      ;; plist with strings) costs no symbol lookup
      (loop while (consp tail)
            do (when (or (= n +short-container-elements+)
                         (not (takes-p (car tail))))
                 (return-from write-short-leaf-list nil))
               (incf n)
               (setf tail (cdr tail)))
      (unless (takes-p tail)
        (return-from write-short-leaf-list nil)))
    (let ((p (obuf-pos ob)))
      (when (< (- (obuf-end ob) p) (+ 2 (* (1+ +short-container-elements+) +max-leaf-bytes+)))
        (return-from write-short-leaf-list nil))
      (when lists
        (multiple-value-bind (k rest) (claim-cons-run ss list n)
          (declare (type index k))
          (unless (= k n)
            ;; a cons of the run was written before: the run ends there
            (write-claimed-run ss list k rest)
            (return-from write-short-leaf-list t))))
      (let* ((sap (obuf-sap ob))
             (out (pointer+ sap p))
             (refs (ss-refs ss))
             ;; the id named last, put back if the list is left to the
             ;; general writer after references were put (see PUT-REF)
             (last-ref (it-last-ref refs)))
        ;; the header, as WRITE-LIST-HEADER writes it
        (setf out (pointer+ sap (put-list-header sap p (list-header-tag n tail nil) n)))
        (flet ((put (x)
                 (if (and x (not (eq x t)) (symbolp x))
                     (let ((id (identity-table-get-recurring refs x)))
                       (when (< id 0)
                         (setf (it-last-ref refs) last-ref)
                         (return-from write-short-leaf-list nil))
                       (setf out (pointer+ sap (put-ref sap (pointer- out sap) id refs))))
                     (let ((after (put-immediate-leaf out x boxed)))
                       (when (pointer= after out)
                         (setf (it-last-ref refs) last-ref)
                         (return-from write-short-leaf-list nil))
                       (setf out after)))))
          ;; inline, so that it neither closes over OUT nor leaves by a
          ;; non-local exit
          (declare (inline put))
          (loop for c = list then (cdr c)
                repeat n
                do (put (car c)))
          (when tail
            (put tail)))
        (setf (obuf-pos ob) (pointer- out sap))
        t))))

(defun write-list-header (ss list)
  "Write the tag and length of the run at LIST (see WRITE-RUN-HEADER)."
  (multiple-value-bind (n tail int64) (list-run ss list)
    (write-run-header ss list n tail int64)))

(defun write-list-contents (ss list info)
  "Write the cars of the run at LIST, whose WRITE-LIST-HEADER returned INFO,
then its tail.  A tail that starts a new run (a cons written before becomes
a reference) is written here too, in a loop rather than by recursion."
  (declare (type fixnum info))
  (loop
    (when (minusp info)                 ; packed, so proper: nothing follows
      (write-int64-run (ss-obuf ss) list (- info))
      (return))
    (let ((c list) (n info) (ob (ss-obuf ss)) (refs (leaf-refs ss)))
      (declare (type index n))
      (loop
        (when (zerop n)
          (return))
        (if (and (leaf-p (car c)) (> n 1) (leaf-p (cadr c)))
            ;; numbers, the commonest elements, in blocks (a call pays
            ;; for itself from two cars on)
            (multiple-value-setq (c n) (write-leaf-cars ob c n refs))
            (progn (write-object ss (car c))
                   (setf c (cdr c))
                   (decf n))))
      ;; C, past the run's last cons, is its tail
      (cond ((null c) (return))
            ((and (consp c) (ss-lists ss))
             (when (written-before-p ss c)
               (return))
             (setf list c
                   info (write-list-header ss c)))
            (t (write-object ss c) (return))))))

;;; One walk ------------------------------------------------------------
;;; A run's length precedes its cars, so the writer above walks each run
;;; twice: to count, then to write.  Following cdrs is a chain of dependent
;;; loads, and that second walk was half the time of storing a long list of
;;; numbers.  When the output stays in memory (a HOLDABLE obuf), a run is
;;; instead written in one walk behind a gap that the window holds on to;
;;; with the length known at the end, the header goes into the gap.  The
;;; gap starts at two bytes (the tag and a one-byte length, enough for 127
;;; conses) and widens by a byte each time the count reaches the next
;;; varint length (128, 16384, ...), moving the contents written so far:
;;; little is moved (at most the first 16383 cars for runs below two
;;; million), where moving the whole run once at the end would cost a copy
;;; of it.  The bytes are exactly those of the two walks.
;;;
;;; With shared list structures, a run's conses take their ids before any
;;; of its cars is written, as the decoder gives them theirs when it
;;; allocates the run.  Claiming them all first is a walk of its own, and
;;; a list of integers needing the 8-byte form takes a third, to see that
;;; all do before the header says so.  For such a run the one walk instead
;;; claims +CLAIM-BLOCK+ conses ahead of the cars it writes, packed while
;;; they can be.  Cars that hold no conses (numbers, characters, symbols,
;;; strings) take no cons id, so the run's ids stay consecutive; before any
;;; other car, the rest of the run is claimed at once.

(defun one-walk-list-p (ss list)
  "True when the run at LIST is written in one walk without tracked conses:
conses are not tracked, the output is holdable and the run has more than
one cons.  (With tracked conses, see TRACKED-ONE-WALK-LIST-P.)"
  (and (not (ss-lists ss))
       (obuf-holdable (ss-obuf ss))
       (consp (cdr list))))

(defconstant +claim-block+ 1024
  "Conses a run of tracked conses written in one walk claims at a time:
16 KB of them, held in the nearest cache until their cars are written.")

(declaim (inline cons-free-p))
(defun cons-free-p (x)
  "True when writing X writes no cons: then it takes no cons id."
  (typep x '(or number character symbol string)))

(defun unpack-int64-cars (ob contents n)
  "The N cars written from absolute offset CONTENTS were written packed (8
bytes each, as in an INT64-LIST): give each its INT64 tag back."
  (declare (type obuf ob) (type index contents n) (optimize speed))
  (make-room-for ob n)                  ; may open a new window: offsets after
  (let ((c (- contents (obuf-flushed ob)))
        (sap (obuf-sap ob)))
    (declare (type index c))
    ;; backwards: each value moves to or past where it was read
    (loop for i of-type fixnum from (1- n) downto 0
          do (let ((v (mem-u64 sap (+ c (* 8 i)))))
               (setf (mem-u64 sap (+ c (* 9 i) 1)) v
                     (mem-u8 sap (+ c (* 9 i))) +tag-int64+)))
    (setf (obuf-pos ob) (+ c (* 9 n)))))

(defun widen-gap (ob contents)
  "Move the contents written from absolute offset CONTENTS one byte on, to
give the header before them one more byte; return their new offset."
  (declare (type obuf ob) (type index contents))
  (make-room-for ob 1)                  ; may open a new window: offsets after
  (let ((from (- contents (obuf-flushed ob))))
    (move-window-bytes ob from (1+ from) (- (obuf-pos ob) from))
    (incf (obuf-pos ob))
    (1+ contents)))

(defun write-cars-counting (ss list contents claimed frontier)
  "Write the cars of the run at LIST from absolute offset CONTENTS, behind
a gap of two bytes; return its length, its tail, whether the cars were
written packed, and the gap's size at the end.  Cars are written packed
while they are all INT64-ELEMENT-Ps, which every car of an INT64-LIST is;
the first other car, or a dotted tail, unpacks them.  Without tracked
conses (CLAIMED NIL) a circular list is caught by Brent's method: the cons
reached at each power-of-two step is kept, and meeting it again means a
cycle.  With them, CLAIMED conses of the run are claimed already, FRONTIER
following them, and the run ends where claiming more stops: at the end, or
before a cons claimed before (the tail then)."
  (declare (type store-state ss) (type cons list) (type index contents)
           (type (or null index) claimed) (optimize speed))
  (let ((ob (ss-obuf ss)) (n 0) (c list) (packed (int64-element-p (car list)))
        (refs (leaf-refs ss)) (boxed-leaves nil)
        ;; no cycle to catch with tracked conses: no lap is ever reached
        (mark (if claimed *no-mark* list)) (lap (if claimed +largest-index+ 1))
        (gap 2) (widen-at 128)          ; a count of WIDEN-AT needs GAP + 1
        (ended nil))
    (declare (type index n lap gap widen-at))
    (flet ((claim (limit)
             ;; claim up to LIMIT more conses from FRONTIER on
             (multiple-value-bind (k next) (claim-more-conses ss frontier limit)
               (declare (type index k))
               (setf claimed (+ (the index claimed) k)
                     frontier next
                     ended (or (< k limit) (not (consp next)))))))
      (declare (inline claim))
      (flet ((goes-on-p ()
               ;; whether C, the cons after the last car written, is of
               ;; the run: with tracked conses, claimed or claimable now
               (cond ((not (consp c)) nil)
                     ((not claimed) t)
                     ((< n (the index claimed)) t)
                     (ended nil)
                     (t (claim +claim-block+)
                        (< n (the index claimed)))))
             (ahead ()
               ;; conses of the run that may be walked now without claiming
               (if claimed (- (the index claimed) n) (- lap n))))
        (declare (inline goes-on-p ahead))
        (flet ((next ()
                 ;; step to the next cons: true while the run goes on
                 (incf n)
                 (setf c (cdr c))
                 (cond ((not (goes-on-p)) nil)
                       ((eq c mark) (circular-list-error list))
                       (t (when (= n lap)
                            (setf mark c lap (* 2 lap)))
                          t)))
               (unpack ()
                 (when packed
                   (unpack-int64-cars ob contents n)
                   (setf packed nil)))
               (takes-p (x)
                 ;; whether PUT-LEAF-CARS takes X.  Only after a car that was a
                 ;; boxed number (a double or a complex) does this look at a
                 ;; heap object's header: the general writer would not always
                 ;; need it (a symbol written before is found by address).
                 (cond (packed (int64-element-p x))
                       ((typep x '(or fixnum single-float)))
                       (boxed-leaves (leaf-p x)))))
          (declare (inline next takes-p))
          (loop
            (when (>= n widen-at)
              ;; the position is in the obuf here, whichever way we came
              (setf contents (widen-gap ob contents)
                    gap (1+ gap)
                    widen-at (min (* 128 widen-at) +largest-index+)))
            (let ((x (car c)))
              (when (and packed (not (int64-element-p x)))
                (unpack))
              (let ((block (if (and (takes-p x)
                                    ;; a call pays for itself from two cars on
                                    (let ((more (cdr c)))
                                      (and (consp more) (takes-p (car more)))))
                               (min (floor (- (obuf-end ob) (obuf-pos ob)) +max-leaf-bytes+)
                                    ;; up to LAP and WIDEN-AT, NEXT's look at
                                    ;; them can wait for the end of the block
                                    (ahead) (- widen-at n))
                               0)))
                (declare (type index block))
                (if (zerop block)
                    ;; not two numbers PUT-LEAF-CARS takes, or near the
                    ;; window's end
                    (if (and (symbolp x) (prefetch-symbols-p ss))
                        ;; a run of symbols, with prefetching; up to LAP and
                        ;; WIDEN-AT as for a block
                        (multiple-value-bind (next written)
                            (write-symbol-cars ss c (min (ahead) (- widen-at n)) mark list)
                          (declare (type index written))
                          (incf n written)
                          (setf c next boxed-leaves nil)
                          (unless (goes-on-p)
                            (return))
                          (when (= n lap)
                            (setf mark c lap (* 2 lap))))
                        (progn (when (and claimed (not ended) (not (cons-free-p x)))
                                 ;; X may take cons ids: the run's first
                                 (claim (- +largest-index+ (the index claimed))))
                               (if packed (write-s64 ob x) (write-object ss x))
                               ;; X's header is in the cache now
                               (setf boxed-leaves (leaf-p x))
                               (unless (next) (return))))
                    (multiple-value-bind (p next written)
                        (put-leaf-cars (obuf-base ob) (obuf-pos ob) c block
                                       mark packed refs list)
                      (declare (type index p written))
                      ;; X at least is written, and NEXT's steps are taken: N
                      ;; reaches LAP only at the block's end
                      (setf (obuf-pos ob) p)
                      (incf n written)
                      (setf c next)
                      (unless (goes-on-p)
                        (return))
                      (when (= n lap)
                        (setf mark c lap (* 2 lap))))))))
          (when c
            (unpack)))))
    (values n c packed gap)))

(defun finish-one-walk-list (ob start n tail packed gap)
  "Fill the GAP bytes at absolute offset START with the header of the run
of N conses written after them, moving the contents when the header needs
more room (only when N reached a varint length with the last car)."
  (declare (type obuf ob) (type index start n gap))
  (let ((delta (- (1+ (varint-length n)) gap)))
    (when (plusp delta)
      ;; may open a new window, which carries the held bytes along
      (make-room-for ob delta)
      (let ((contents (- (+ start gap) (obuf-flushed ob))))
        (move-window-bytes ob contents (+ contents delta) (- (obuf-pos ob) contents))
        (incf (obuf-pos ob) delta)))
    (let ((p (- start (obuf-flushed ob)))
          (sap (obuf-sap ob)))
      ;; never the CONS form: the gap was sized for a tag and a length
      ;; before the run's length was known
      (put-list-header sap p (cond (packed +tag-int64-list+)
                                   ((null tail) +tag-list+)
                                   (t +tag-dotted-list+))
                       n))))

(defun write-list-in-one-walk (ss list &optional claimed frontier)
  "Write the run at LIST and its tail in one walk (see above); with tracked
conses, CLAIMED of its conses are claimed already, and FRONTIER follows
them."
  (let* ((ob (ss-obuf ss))
         (start (obuf-total ob))
         (outermost (null (obuf-hold ob))))
    (when outermost
      (setf (obuf-hold ob) start))
    (reserve ob 2)
    (multiple-value-bind (n tail packed gap) (write-cars-counting ss list (+ start 2) claimed frontier)
      (unless (null tail)
        (write-object ss tail))
      (finish-one-walk-list ob start n tail packed gap))
    (when outermost
      (setf (obuf-hold ob) nil))))

(declaim (inline tracked-one-walk-list-p))
(defun tracked-one-walk-list-p (ss list)
  "True when the run at LIST, with shared list structures, is written in one
walk (WRITE-TRACKED-LIST): the output is holdable, the run has more than one
cons and its first car needs the 8-byte form, so that the run may be
packed.  Two walks would then be three (see WRITE-LIST-HEADER).  For other
cars two walks cost less, measured: the walk of a list allocated in order
is fast, and the one walk's blocks and its loop cost more than they save."
  (and (ss-lists ss)
       (int64-element-p (car list))
       (consp (cdr list))
       (obuf-holdable (ss-obuf ss))))

(defun write-tracked-list (ss list)
  "Write the run at LIST, not written before, which TRACKED-ONE-WALK-LIST-P
takes: its first +CLAIM-BLOCK+ conses are claimed; a longer run is written
in one walk, claiming as it goes, a shorter one with its length known."
  (declare (type store-state ss) (type cons list))
  (multiple-value-bind (n tail) (claim-cons-run ss list +claim-block+)
    (declare (type index n))
    (if (and (= n +claim-block+) (consp tail))
        (write-list-in-one-walk ss list n tail)
        (write-claimed-run ss list n tail))))

;;; Decoding -----------------------------------------------------------

(defun read-run-length (rs tag)
  "Read the length of the run announced by TAG (1 for a CONS), checked
against the input left and counted against max-to-read (CHARGE)."
  (declare (type restore-state rs) (type (unsigned-byte 8) tag) (optimize speed))
  (let* ((ib (rs-ibuf rs))
         (n (if (= tag +tag-cons+)
                1
                ;; an index, the input holding a byte per element
                (the index (check-count ib (read-varint ib) (if (= tag +tag-int64-list+) 8 1)
                                        "a list")))))
    (when (zerop n)
      (restore-invalid rs "a list of length 0" "a length of at least 1"))
    (charge rs (* 16 n) t)
    n))

(declaim (inline long-run-p))
(defun long-run-p (n)
  "True when a run of N conses is too long for MAKE-LIST, which would make
it one large object (see MAKE-LONG-LIST)."
  (declare (type index n))
  (>= (* 16 n) +large-object-bytes+))

(declaim (inline make-run))
(defun make-run (rs n)
  "A fresh list of N conses, a run whose length READ-RUN-LENGTH read (it
kept the runways for a short one); its conses get ids when the stream
tracks conses.  Inline: a short list's read calls nothing for it."
  (declare (type restore-state rs) (type index n))
  (let ((run (if (long-run-p n)
                 (make-long-list rs n)
                 (make-list n))))
    (when (rs-track-conses rs)
      (register-run rs run n))
    run))

(defun read-list-header (rs tag)
  "Allocate the run announced by TAG (MAKE-RUN); return it and its tag (the
fill info)."
  (declare (type restore-state rs) (type (unsigned-byte 8) tag) (optimize speed))
  (values (make-run rs (read-run-length rs tag)) tag))

;;; FILL-CARS, which reads a run's cars, is in runs.lisp: DEFINE-RUN-FILLER
;;; writes it and FILL-ELEMENTS from one body.

(defun fill-int64-cars (rs run)
  "Read the 8-byte integers of RUN, a fresh proper list: straight from the
window while it holds them, with one comparison each, then through
READ-FIXED-INTEGER (which refills it).  Each is an INT64's payload.
Return RUN's last cons."
  (declare (type restore-state rs) (type cons run) (optimize speed))
  (let* ((ib (rs-ibuf rs))
         (sap (ibuf-sap ib))
         (end (ibuf-end ib))
         (p (ibuf-pos ib))
         (c run)
         (last run))
    (declare (type index end p) (type list c) (type cons last))
    (loop while (and (consp c) (<= (+ p 8) end))
          do (setf (car c) (fixed-integer-value sap p +tag-int64+)
                   p (+ p 8)
                   last c
                   c (cdr c)))
    (setf (ibuf-pos ib) p)
    (loop while (consp c)
          do (setf (car c) (read-fixed-integer ib +tag-int64+)
                   last c
                   c (cdr c)))
    last))

(declaim (inline fill-run))
(defun fill-run (rs run packed)
  "Read the cars of RUN, a fresh proper list, 8-byte integers when PACKED;
return its last cons."
  (if packed
      (fill-int64-cars rs run)
      (fill-cars rs run)))

(defun read-list-in-pieces (rs n packed)
  "Read a long proper list of N conses (LONG-RUN-P), of 8-byte integers when
PACKED, and return it.  The conses are made a piece at a time (MAKE-PIECE),
each piece's cars read while its conses are still in the processor's
cache, then the next piece made and linked after it.  When the stream
tracks conses, the whole run takes its ids with the first piece and is an
open run until its last piece is made: a reference to a cons not made yet
makes the rest at once (COMPLETE-OPEN-RUN), and the cars are read on
through it."
  (declare (type restore-state rs) (type index n) (optimize speed))
  (let* ((k (min n +piece-conses+))
         (head (make-piece rs k))
         (tracked (rs-track-conses rs))
         (run (make-open-run (rs-next-cons-id rs) n (- n k))))
    (when tracked
      (register-run rs head n)
      (push run (rs-open-runs rs)))
    (let ((piece head))
      (loop
        (let ((last (fill-run rs piece packed))
              (left (open-run-left run)))
          (when (zerop left)
            (return))
          (let* ((k (min left +piece-conses+))
                 (next (make-piece rs k)))
            (setf (cdr last) next
                  (open-run-left run) (- left k)
                  piece next)))))
    ;; the runs read in its cars, inside it, are closed
    (when tracked
      (pop (rs-open-runs rs)))
    head))

(defun read-proper-list (rs packed)
  "Read a proper list whose tag was just consumed, a LIST, or an INT64-LIST
when PACKED (READ-CONTAINER's work for them, in one function)."
  (declare (optimize speed))
  (let ((n (read-run-length rs (if packed +tag-int64-list+ +tag-list+))))
    (nested (rs)
      (if (long-run-p n)
          (read-list-in-pieces rs n packed)
          (let ((run (make-run rs n)))
            (fill-run rs run packed)
            run)))))

(defun fill-list (rs run tag)
  "Read the cars of RUN, then (for a dotted run) its tail, following runs
of runs iteratively."
  (declare (type restore-state rs))
  (loop
    ;; a packed run ends the list, first or continuing a dotted one
    (when (= tag +tag-int64-list+)
      (fill-int64-cars rs run)
      (return))
    (let ((last (fill-cars rs run)))
      (when (= tag +tag-list+)
        (return))
      (let* ((ib (rs-ibuf rs))
             (next-tag (peek-u8 ib)))
        (if (list-tag-p next-tag)
            (progn
              (read-u8 ib)
              (multiple-value-bind (next info) (read-list-header rs next-tag)
                (setf (cdr last) next
                      run next
                      tag info)))
            (progn (setf (cdr last) (read-object rs))
                   (return)))))))
