;;;; Runs of elements read straight from the input window, the cars of a
;;;; list and the elements of a simple vector: the commonest elements are
;;;; taken in loops that keep the position in a register, checked against
;;;; the window's end each time.  They are the leaves (integers of up to
;;;; eight bytes, floats and complexes of floats, NIL, T, short strings),
;;;; references to objects already made, conses of two leaves (strings
;;;; aside) or small references, and short lists and vectors of leaves.  Any
;;;; other tag, and any element the window does not hold whole, goes
;;;; through READ-OBJECT, which reads it the same way or signals what is
;;;; wrong.
;;;;
;;;; Here: the loops, each written once for lists and vectors by
;;;; DEFINE-RUN-FILLER (FILL-CARS, FILL-ELEMENTS and the loops of one kind
;;;; they call); the table of the kinds of element they dispatch on; the
;;;; readers of references, leaves and small containers of leaves.  The
;;;; readers of numbers and strings from the window are with their codecs,
;;;; numbers.lisp and strings.lisp.

(in-package #:binstore)

;;; References ---------------------------------------------------------

(declaim (inline window-ref-id))
(defun window-ref-id (sap p end last)
  "If SAP+P (P below END) holds a reference, small, SHORT-REF whose second
byte is below END, REF with an id WINDOW-VARINT reads, or, when LAST (the
id the last reference named, -1 for none) is not -1, NEXT-REF: the id and
the reference's size in bytes; otherwise 0 and 0.  As WINDOW-INTEGER, it
reads nothing else and calls nothing."
  (declare (type index p end) (type fixnum last))
  (let ((tag (mem-u8 sap p)))
    ;; the small references' range as one comparison, by wrapping around:
    ;; the commonest case falls through
    (cond ((< (ldb (byte 8 0) (- tag +first-small-ref-tag+)) +small-ref-count+)
           (values (- tag +first-small-ref-tag+) 1))
          ((= tag +tag-next-ref+)
           (if (>= last 0)
               (values (1+ last) 1)
               (values 0 0)))
          ((short-ref-tag-p tag)
           (if (< (+ p 1) end)
               (values (short-ref-id tag (mem-u8 sap (+ p 1))) 2)
               (values 0 0)))
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

(declaim (inline window-ref))
(defun window-ref (rs sap p end)
  "If SAP+P (P below END) holds a reference WINDOW-REF-ID reads, naming an
object made before (below MADE-BELOW): that object and the offset after
the reference, its id now the id named last; otherwise NIL and NIL (the
general path reads it, or signals what is wrong).  The loops over runs of
references (FILL-REF-CARS, FILL-REF-ELEMENTS) make the same checks in
place.
  The leaf readers that call this may read several leaves and then give
up, leaving them to the general path, which reads them again: they never
read a NEXT-REF (WINDOW-PURE-LEAF and WINDOW-LEAF leave it to the general
path), so what they read does not depend on the id named last, and
reading it again names the same ids in the same order."
  (declare (type restore-state rs) (type index p end))
  (let* ((refs (settled-refs rs))
         (made (made-below rs)))
    (multiple-value-bind (id size) (window-ref-id sap p end (rs-last-ref rs))
      (let ((id (truly-the index id))) ; an index whenever SIZE is not 0
        (if (and (plusp size) (< id made))
            (values (progn (setf (rs-last-ref rs) id)
                           (locally (declare (optimize (safety 0)))
                             (svref refs id)))
                    (truly-the index (+ p size)))
            (values nil nil))))))

(declaim (inline window-cons-ref-id))
(defun window-cons-ref-id (rs sap p end)
  "If SAP+P (P below END) holds a CONS-REF or SHORT-CONS-REF (the caller
has seen one of their tags) the window holds whole, naming a cons made
before whose entry in the table of conses by id is filled: the id and the
offset after the reference; otherwise NIL and NIL.  An entry CONS-BY-ID
has yet to fill is left to the general path, so that the loops over leaves
call nothing for it.  Reads nothing past END."
  (declare (type restore-state rs) (type index p end))
  (multiple-value-bind (id next)
      (let ((tag (mem-u8 sap p)))
        (cond ((= tag +tag-cons-ref+) (window-varint sap (+ p 1) end))
              ((< (+ p 1) end)
               (values (short-cons-ref-id tag (mem-u8 sap (+ p 1))) (+ p 2)))
              (t (values 0 nil))))
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

;;; Leaves ---------------------------------------------------------------

(declaim (inline window-pure-leaf))
(defun window-pure-leaf (rs sap p end)
  "If the object at SAP+P (P below END) is a leaf the window holds whole
whose reading gives no id (an integer, a single-float, NIL, T, or a
reference to an object or a cons made before): that object and the offset
after it; otherwise NIL and NIL.  Reading one changes nothing but the
cache of conses by id, so a reader may read several and then give up."
  (declare (type restore-state rs) (type index p end))
  (let ((tag (mem-u8 sap p)))
    (cond ((>= tag +first-small-int-tag+)
           (values (small-int-value tag) (+ p 1)))
          ((or (>= tag +first-small-ref-tag+) (= tag +tag-ref+) (short-ref-tag-p tag))
           (window-ref rs sap p end))
          ((or (= tag +tag-cons-ref+) (short-cons-ref-tag-p tag))
           (window-cons-ref rs sap p end))
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
  (let ((tag (mem-u8 sap p)))
    (cond ((>= tag +first-small-int-tag+)
           (values (small-int-value tag) (+ p 1)))
          ((or (>= tag +first-small-ref-tag+) (= tag +tag-ref+) (short-ref-tag-p tag))
           (window-ref rs sap p end))
          ((= tag +tag-base-string+) (window-base-string rs p end))
          ((= tag +tag-string+) (window-character-string rs p end))
          ((or (= tag +tag-cons-ref+) (short-cons-ref-tag-p tag))
           (window-cons-ref rs sap p end))
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
                               (register rs (fixed-float-value sap q +tag-complex-single+))
                               (fixed-leaf-value sap q tag))
                           (+ p size))))))))

(declaim (inline window-leaf-bytes))
(defun window-leaf-bytes (rs sap p end)
  "Bytes of the leaf WINDOW-LEAF would read at SAP+P, or NIL; reads nothing."
  (declare (type restore-state rs) (type index p end))
  (when (< p end)
    (let* ((tag (mem-u8 sap p))
           (size (cond ((>= tag +first-small-int-tag+) 1)
                       ((>= tag +first-small-ref-tag+)
                        (and (< (- tag +first-small-ref-tag+) (rs-next-id rs)) 1))
                       ((or (= tag +tag-cons-ref+) (short-cons-ref-tag-p tag))
                        (let ((next (nth-value 1 (window-cons-ref-id rs sap p end))))
                          (and next (- next p))))
                       (t (leaf-bytes tag)))))
      (and size (<= (+ p size) end) size))))

;;; Small containers of leaves ---------------------------------------------
;;; Here, not in lists.lisp and arrays.lisp, which come after this file:
;;; WINDOW-ELEMENT reads all three, and both fillers call it.

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
         (car-bytes (and (= (mem-u8 sap p) +tag-cons+)
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
  (let ((n (if (< (+ p 1) end) (mem-u8 sap (+ p 1)) #xFF)))
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
        (let ((tag (mem-u8 sap p)))
          (cond ((= tag +tag-cons+) (window-pair rs p end))
                ((= tag +tag-list+) (window-short-list rs p end))
                ((= tag +tag-simple-vector+) (window-short-vector rs p end))
                (t (values nil nil)))))))

;;; The kinds of element ---------------------------------------------------

(defconstant +general-kind+ 0 "A tag only READ-OBJECT reads.")
(defconstant +integer-kind+ 1 "A tag of integers WINDOW-INTEGER reads.")
(defconstant +single-kind+ 2 "The single-float tag.")
(defconstant +boxed-kind+ 3 "A tag WINDOW-BOX reads.")
(defconstant +string-kind+ 4 "A tag WINDOW-STRING reads.")
(defconstant +ref-kind+ 5 "A tag of references WINDOW-REF-ID reads.")
(defconstant +leaf-kind+ 6 "A tag of another leaf, a CONS, a LIST or a SIMPLE-VECTOR, WINDOW-ELEMENT may read.")

(define-load-time-global **window-kinds**
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
        (loop for tag from +tag-short-ref+ below (+ +tag-short-ref+ +short-ref-tags+)
              do (kind +ref-kind+ tag))
        (kind +ref-kind+ +tag-next-ref+)
        (kind +leaf-kind+ +tag-nil+ +tag-t+ +tag-complex-single+ +tag-cons-ref+ +tag-cons+ +tag-list+ +tag-simple-vector+)
        (loop for tag from +tag-short-cons-ref+ below (+ +tag-short-cons-ref+ +short-cons-ref-tags+)
              do (kind +leaf-kind+ tag)))
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
      (aref **window-kinds** (mem-u8 sap p))
      +general-kind+))

(declaim (inline window-integer-next-p))
(defun window-integer-next-p (sap p end)
  "True when the element at SAP+P is one WINDOW-INTEGER takes, or a
single-float (checked between other leaves, to go back to the loops of
those)."
  (and (< p end)
       (let ((kind (aref **window-kinds** (mem-u8 sap p))))
         (or (= kind +integer-kind+) (= kind +single-kind+)))))

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

;;; The fillers ---------------------------------------------------------
;;; A list's cars and a simple vector's elements are read by the same
;;; loops.  DEFINE-RUN-FILLER takes each loop, written once, and defines a
;;; function for each collection; (macroexpand-1 '(define-run-filler ...))
;;; on any use below shows the two functions, as flexi-streams'
;;; DEFINE-CHAR-ENCODERS shows its encoders.

(defmacro define-run-filler (shape (list-filler vector-filler) &body body)
  "Define LIST-FILLER, which stores what BODY reads in the cars of a fresh
proper list, and VECTOR-FILLER, which stores it in the elements of a fresh
simple vector, from BODY, written once: each function is BODY inside
MACROLETs that give the vocabulary below its collection's meaning.  BODY
names the restore RS, the window's end END, and the offset P, an INDEX it
moves past each element it reads (it binds the window's address SAP).

SHAPE :PART is a loop over elements of one kind, while the window holds
them, that the :WHOLE fillers call:
  (LIST-FILLER rs c p end) stores from the cons C on (nothing when C is
    NIL) and returns the offset reached, the cons reached (the first whose
    car was not stored, or NIL at the list's end) and, when it reached the
    list's end, its last cons.
  (VECTOR-FILLER rs v i n p end) stores from index I on, below N, and
    returns the index and the offset reached.
  BODY's first form is a string, what it reads, for the docstrings; the
  rest loops, and leaves only through
    (STOP)          return, the element at P not read;
    (COLLECT x)     store X in the next place, P past its element; return
                    when that was the last place.

SHAPE :WHOLE is the filler of a whole collection: BODY loops over passes
of the window, each running the loop of the kind of element at P (in
place, or a :PART filler), and the general reader between them.
  (LIST-FILLER rs run) reads the cars of RUN, a fresh proper list, and
    returns its last cons.
  (VECTOR-FILLER rs v &optional (n (length v))) reads the first N elements
    of the fresh simple vector V, and returns V.
  The place is the cons C (with LAST, the cons before it), or the index I:
    (PLACE-P)       true while there is a place: (CONSP C), (< I N);
    (PUT x)         store X at the place: (SETF (CAR C) X), (SETF (SVREF V I) X);
    (ADVANCE)       go to the next place: (PSETF C (CDR C) LAST C), (INCF I);
    (PLACE-SOURCE)  the place as REGISTER-BOXES takes it: C and 0, V and I;
    (WITH-OWN-PLACE form...)  run the FORMs on copies of P and of the
                    place, in variables of their own, copied back after;
    (FILL-PART list-filler vector-filler)  run that :PART filler from the
                    place and P, and take the place and offset it reached;
    (RESULT)        what the filler returns: LAST, V."
  (ecase shape
    (:part
     (destructuring-bind (what &rest forms) body
       (check-type what string)
       `(progn
          (defun ,list-filler (rs c p end)
            ,(format nil "Store in the cars of the fresh proper list from the cons C on ~a ~
the window holds from P (below END) on (none when C is NIL); return the offset reached, ~
the cons reached (the first whose car was not stored, or NIL at the list's end) and, ~
when this reached the list's end, its last cons." what)
            (declare (type restore-state rs) (type list c) (type index p end) (optimize speed))
            (macrolet ((stop () '(return-from ,list-filler (values p c nil)))
                       (stop-at-end () '(return-from ,list-filler (values p nil c)))
                       (collect (x)
                         `(progn (setf (car c) ,x)
                                 ;; the list is proper: its cdrs are conses up to NIL
                                 (let ((next (truly-the list (cdr c))))
                                   (when (null next)
                                     (stop-at-end))
                                   (setf c next)))))
              (when (null c)            ; the general path ended the list
                (return-from ,list-filler (values p nil nil)))
              ,@forms))
          (defun ,vector-filler (rs v i n p end)
            ,(format nil "Store into the simple vector V, from index I on (below N), ~a ~
the window holds from P (below END) on; return the index and the offset reached." what)
            (declare (type restore-state rs) (type simple-vector v) (type index i n p end)
                     (optimize speed))
            (macrolet ((stop () '(return-from ,vector-filler (values i p)))
                       (collect (x)
                         `(progn (setf (svref v i) ,x
                                       i (truly-the index (1+ i))) ; below N before
                                 (when (>= i n)
                                   (stop)))))
              (when (>= i n)
                (stop))
              ,@forms)))))
    (:whole
     `(progn
        (defun ,list-filler (rs run)
          "Read the cars of RUN, a fresh proper list; return its last cons."
          (declare (type restore-state rs) (type cons run) (optimize speed))
          (let ((c run) (last run))
            (macrolet ((place-p () '(consp c))
                       (put (x) `(setf (car c) ,x))
                       ;; the next cons from C, in a register, before LAST,
                       ;; which may live on the stack: from LAST each cdr
                       ;; would wait for a store and a load
                       (advance () '(psetf c (cdr c) last c))
                       (place-source () '(values c 0))
                       (with-own-place (&body forms)
                         `(multiple-value-setq (p c last)
                            (let ((p p) (c c) (last last))
                              (declare (type index p))
                              ,@forms
                              (values p c last))))
                       (fill-part (list-part vector-part)
                         (declare (ignore vector-part))
                         `(multiple-value-bind (q d dlast) (,list-part rs c p end)
                            (setf p q c d)
                            (when dlast
                              (setf last dlast))))
                       (result () 'last))
              ,@body)))
        (defun ,vector-filler (rs v &optional (n (length v)))
          "Read the first N elements of the fresh simple vector V (all of them, or
a T array's, into its storage vector); return V."
          (declare (type restore-state rs) (type simple-vector v) (type index n)
                   (optimize speed))
          (let ((i 0))
            (declare (type index i))
            (macrolet ((place-p () '(< i n))
                       (put (x) `(setf (svref v i) ,x))
                       (advance () '(incf i))
                       (place-source () '(values v i))
                       (with-own-place (&body forms)
                         `(multiple-value-setq (p i)
                            (let ((p p) (i i))
                              (declare (type index p i))
                              ,@forms
                              (values p i))))
                       (fill-part (list-part vector-part)
                         (declare (ignore list-part))
                         `(multiple-value-setq (i p) (,vector-part rs v i n p end)))
                       (result () 'v))
              ,@body)))))))

;;; The loops of one kind each have a function of their own, measured:
;;; inside FILL-CARS or FILL-ELEMENTS, whose other loops need many registers,
;;; such a loop kept its vector and index, or the table of objects and its
;;; count, on the stack (and marked the GC card of every store); a list of
;;; 1,000,000 short strings took 168M instructions to restore there, 160M
;;; here, and a vector of them 149M, 145M here.  (FILL-INTEGER-CARS was a
;;; loop inside FILL-CARS: on its own it tests a cons less per car.)

(define-run-filler :part (fill-integer-cars fill-integer-elements)
  "the integers (see WINDOW-INTEGER)"
  (let ((sap (ibuf-sap (rs-ibuf rs))))
    (loop
      (unless (< p end)
        (stop))
      (multiple-value-bind (value size) (window-integer sap p end)
        (when (zerop size)
          (stop))
        (setf p (truly-the index (+ p size)))
        (collect value)))))

;;; The checks WINDOW-REF makes are made in place, as exits from the loop:
;;; through its two values the loop took 8-10% more instructions.  The id
;;; named last is kept in a register for NEXT-REF, and stored in the state
;;; with each element, which is read for good: the loop never gives one up.
(define-run-filler :part (fill-ref-cars fill-ref-elements)
  "the objects named by the references"
  (let ((sap (ibuf-sap (rs-ibuf rs)))
        (refs (settled-refs rs))
        (made (made-below rs))
        (last (rs-last-ref rs)))
    (declare (type fixnum last))
    (loop
      (unless (< p end)
        (stop))
      (multiple-value-bind (id size) (window-ref-id sap p end last)
        (let ((id (truly-the index id))) ; an index whenever SIZE is not 0
          (when (or (zerop size) (>= id made))
            (stop))
          (setf p (truly-the index (+ p size))
                last id
                (rs-last-ref rs) id)
          ;; below MADE, within REFS (see WINDOW-REF)
          (collect (locally (declare (optimize (safety 0)))
                     (svref refs id))))))))

(define-run-filler :part (fill-string-cars fill-string-elements)
  "the short strings (each fresh, taking an id when tracked)"
  (let ((sap (ibuf-sap (rs-ibuf rs))))
    (loop
      (unless (and (< p end) (string-tag-p (mem-u8 sap p)))
        (stop))
      (multiple-value-bind (s next) (window-string rs (mem-u8 sap p) p end)
        (unless next
          (stop))
        (setf p next)
        (collect s)))))

(define-run-filler :whole (fill-cars fill-elements)
  (let ((ib (rs-ibuf rs)))
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
           ;; integers, the commonest elements
           (fill-part fill-integer-cars fill-integer-elements))
          (#.+single-kind+
           (with-own-place
             (loop while (and (place-p) (window-single-float-p sap p end))
                   do (put (fixed-float-value sap (+ p 1) +tag-single-float+))
                      (setf p (+ p 5))
                      (advance))))
          (#.+boxed-kind+
           ;; double-floats, or complexes of them, each a fresh box, taking
           ;; their ids together after
           (multiple-value-bind (source position) (place-source)
             (let ((from p))
               (with-own-place
                 (flet ((boxes (tag)
                          ;; inline, called with a constant TAG: the tests on
                          ;; it fold away
                          (loop named boxes
                                while (and (place-p) (< p end))
                                do (let ((stop (next-box-slice rs p end)))
                                     (loop while (and (place-p) (< p stop))
                                           do (let ((x (window-box sap p end tag)))
                                                (unless x
                                                  (return-from boxes))
                                                (put x)
                                                (setf p (truly-the index
                                                                   (+ p (box-bytes tag))))
                                                (advance)))))
                          ;; counted from the bytes read: a list's loop
                          ;; counts no conses
                          (when (> p from)
                            (register-boxes rs source position
                                            (truncate (- p from) (box-bytes tag))))))
                   (declare (inline boxes))
                   (if (= (mem-u8 sap p) +tag-double-float+)
                       (boxes +tag-double-float+)
                       (boxes +tag-complex-double+)))))))
          (#.+string-kind+
           (fill-part fill-string-cars fill-string-elements))
          (#.+ref-kind+
           (fill-part fill-ref-cars fill-ref-elements))
          (#.+leaf-kind+
           ;; other leaves, and then any leaf, until the next small integer
           (loop while (and (place-p) (< p end))
                 do (multiple-value-bind (value next) (window-element rs sap p end)
                      (unless next
                        (return))
                      (put value)
                      (setf p next)
                      (advance)
                      (when (window-integer-next-p sap p end)
                        (return))))))
        (setf (ibuf-pos ib) p)
        (cond ((not (place-p)) (return (result)))
              ((= p start)
               ;; the general path, for a container or another object only
               ;; READ-OBJECT reads, for a leaf the window does not hold
               ;; whole, or one its loop refuses (READ-OBJECT signals what
               ;; is wrong); then for the next objects while they are of
               ;; the general kind (a list of instances)
               (loop do (put (read-object rs))
                        (advance)
                     while (and (place-p)
                                (= (window-kind (ibuf-sap ib) (ibuf-pos ib) (ibuf-end ib))
                                   +general-kind+)))))))))
