;;;; Reading objects, as the codecs and the decoder do: one object by its tag
;;;; (the in-tag cases inline, every other tag through READ-TAGGED, the
;;;; decoder's dispatch), and runs of elements straight from the window.
;;;; Split from restore-state.lisp, whose state it reads: it calls up into
;;;; the engine (READ-TAGGED), which the state itself never does.

(in-package #:binstore)

;;; Reading an object: the in-tag cases (small integers, small references)
;;; are handled here, inline in every caller's loop; every other tag goes to
;;; the dispatch in decoder.lisp, through the protocol (protocol.lisp).

(declaim (inline object-from-tag read-object))
(defun object-from-tag (rs tag)
  "Read the object whose tag TAG was just consumed."
  (declare (type restore-state rs) (type (unsigned-byte 8) tag) (optimize speed))
  (cond ((>= tag +first-small-int-tag+) (small-int-value tag))
        ((>= tag +first-small-ref-tag+)
         (object-by-id rs (- tag +first-small-ref-tag+) t))
        ;; the commonest boxed leaf, allocated here without a call
        ((= tag +tag-double-float+)
         (register rs (read-fixed-float (rs-ibuf rs) +tag-double-float+)))
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
  (let ((tag (mem-u8 sap p)))
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
    (let ((id (truly-the index id))) ; an index whenever SIZE is not 0
      (if (and (plusp size) (< id made))
          (values (locally (declare (optimize (safety 0)))
                    (svref refs id))
                  (truly-the index (+ p size)))
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
;;; as a short string's own work), and called elsewhere: declared inline so
;;; that their definitions are kept for that, then NOTINLINE after them.
(declaim (inline window-ascii-string window-base-string))
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
         (n (if (< (+ p 1) end) (mem-u8 sap (+ p 1)) 128))
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
          (declare (type word high) (type index whole) (type (integer 0 7) k))
          ;; every offset below is within the window, below END: an index
          (dotimes (w whole)
            (let ((word (mem-u64 sap (truly-the index (+ from (* 8 w))))))
              (setf high (logior high word)
                    (string-word s w) word)))
          (unless (zerop k)
            ;; the last word holds K characters
            (let ((word (ldb (byte (* 8 k) 0)
                             (mem-u64 sap (truly-the index (+ from (* 8 whole)))))))
              (setf high (logior high word)
                    (string-word s whole) word)))
          (if (logtest high #x8080808080808080)
              (values nil nil)
              (progn (charge rs n)
                     (values s (truly-the index (+ from n)))))))))

(defun window-base-string (rs p end)
  "If the window holds at P (below END) a base string WINDOW-ASCII-STRING
reads: the new string, with its id, and the offset after it; otherwise NIL
and NIL."
  (declare (type restore-state rs) (type index p end) (inline window-ascii-string))
  (multiple-value-bind (s next) (window-ascii-string rs p end)
    (if next
        (values (register rs s) next)
        (values nil nil))))

(declaim (notinline window-ascii-string window-base-string))

(declaim (inline window-character-string))
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
         (n (if (< (+ p 1) end) (mem-u8 sap (+ p 1)) 128))
         (q (+ p 2)))
    (declare (type index n q))
    (if (>= n +window-string-bytes+)
        (values nil nil)
        (let ((s (make-string n)))
          (dotimes (i n)
            (let ((b (if (< q end) (mem-u8 sap q) #xFF)))
              (cond ((< b #x80)
                     (setf (schar s i) (code-char b)
                           q (+ q 1)))
                    ((and (<= #xC2 b #xDF) (< (+ q 1) end)
                          (= (logand (mem-u8 sap (+ q 1)) #xC0) #x80))
                     (setf (schar s i) (code-char (logior (ash (logand b #x1F) 6)
                                                          (logand (mem-u8 sap (+ q 1))
                                                                  #x3F)))
                           q (+ q 2)))
                    (t
                     ;; a wider character (or a bad one): the rest by the
                     ;; general decoder, in one call
                     (multiple-value-bind (j next)
                         (decode-utf8-window s i n (pointer-address sap) q end)
                       (declare (type index j next))
                       (unless (= j n)
                         (return-from window-character-string (values nil nil)))
                       (setf q next)
                       (return))))))
          (charge rs (* 4 n))
          (values (register rs s) q)))))

(declaim (notinline window-character-string))

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
  (and (= (mem-u8 sap p) tag)
       (<= (+ p (box-bytes tag)) end)
       ;; a constant tag in each branch: the decoding folds to its loads
       (if (= tag +tag-double-float+)
           (fixed-float-value sap (+ p 1) +tag-double-float+)
           (fixed-float-value sap (+ p 1) +tag-complex-double+))))

(declaim (inline fixed-leaf-value))
(defun fixed-leaf-value (sap q tag)
  "The value of the leaf of fixed size that TAG begins, its payload at SAP+Q:
NIL, T, an integer of one to eight bytes, or (for any other tag) a
single-float."
  (case tag
    (#.+tag-nil+ nil)
    (#.+tag-t+ t)
    ;; each integer tag a clause of its own: the decoding folds to its load
    (#.+tag-uint8+ (fixed-integer-value sap q +tag-uint8+))
    (#.+tag-negint8+ (fixed-integer-value sap q +tag-negint8+))
    (#.+tag-int16+ (fixed-integer-value sap q +tag-int16+))
    (#.+tag-int32+ (fixed-integer-value sap q +tag-int32+))
    (#.+tag-int64+ (fixed-integer-value sap q +tag-int64+))
    (t (fixed-float-value sap q +tag-single-float+))))

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
  (let ((tag (mem-u8 sap p)))
    (cond ((>= tag +first-small-int-tag+)
           (values (small-int-value tag) (+ p 1)))
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

(declaim (inline window-integer))
(defun window-integer (sap p end)
  "If SAP+P (P below END) holds an integer tag and its payload (none, or 1,
2, 4 or 8 bytes), whole in the window, and its value is a fixnum: that
value and its size in bytes; otherwise 0 and 0.  It reads nothing else and
calls nothing, so the loops below keep it in registers.  Returning a size
rather than the offset after it lets them add it knowing the sum stays
below END, with no test for NIL or check of type."
  (declare (type index p end))
  (let ((tag (mem-u8 sap p))
        (room (- end p)))
    (flet ((fits (size) (<= size room)))
      (declare (inline fits))
      (cond ((>= tag +first-small-int-tag+)
             (values (small-int-value tag) 1))
            ((and (= tag +tag-uint8+) (fits 2))
             (values (fixed-integer-value sap (+ p 1) +tag-uint8+) 2))
            ((and (= tag +tag-negint8+) (fits 2))
             (values (fixed-integer-value sap (+ p 1) +tag-negint8+) 2))
            ((and (= tag +tag-int16+) (fits 3))
             (values (fixed-integer-value sap (+ p 1) +tag-int16+) 3))
            ((and (= tag +tag-int32+) (fits 5))
             (values (fixed-integer-value sap (+ p 1) +tag-int32+) 5))
            ((and (= tag +tag-int64+) (fits 9))
             ;; a fixnum, as every writer makes it: another value would
             ;; need a bignum here, and the loops a GC barrier on each store
             (let ((value (fixed-integer-value sap (+ p 1) +tag-int64+)))
               (if (typep value 'fixnum)
                   (values value 9)
                   (values 0 0))))
            (t (values 0 0))))))

(declaim (inline window-single-float-p))
(defun window-single-float-p (sap p end)
  "True when SAP+P holds a single-float whole in the window (below END)."
  (declare (type index p end))
  (and (<= (+ p 5) end) (= (mem-u8 sap p) +tag-single-float+)))

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
        (let ((id (truly-the index id))) ; an index whenever SIZE is not 0
          (when (or (zerop size) (>= id made))
            (return (values p c nil)))
          ;; below MADE, within REFS (see WINDOW-MADE-REF)
          (setf (car c) (locally (declare (optimize (safety 0)))
                          (svref refs id))
                p (truly-the index (+ p size)))))
      ;; the list is proper: its cdrs are conses up to NIL
      (let ((next (truly-the list (cdr c))))
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
      (unless (and (< p end) (string-tag-p (mem-u8 sap p)))
        (return (values p c nil)))
      (multiple-value-bind (s next) (window-string rs (mem-u8 sap p) p end)
        (unless next
          (return (values p c nil)))
        (setf (car c) s
              p next))
      (let ((next (truly-the list (cdr c)))) ; the list is proper
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
                              q (truly-the index (+ q size))
                              dlast d
                              d (cdr d))))
             (setf p q c d last dlast)))
          (#.+single-kind+
           (let ((q p) (d c) (dlast last))
             (declare (type index q))
             (loop while (and (consp d) (window-single-float-p sap q end))
                   do (setf (car d) (fixed-float-value sap (+ q 1) +tag-single-float+)
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
                                                  q (truly-the index
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
               (if (= (mem-u8 sap p) +tag-double-float+)
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
                     p (truly-the index (+ p size)))
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
               (let ((id (truly-the index id))) ; as in FILL-REF-CARS
                 (when (or (zerop size) (>= id made))
                   (return))
                 (setf (svref v i) (locally (declare (optimize (safety 0)))
                                     (svref refs id))
                       p (truly-the index (+ p size))
                       i (truly-the index (1+ i))))))
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
    (loop while (and (< i n) (< p end) (string-tag-p (mem-u8 sap p)))
          do (multiple-value-bind (s next) (window-string rs (mem-u8 sap p) p end)
               (unless next
                 (return))
               (setf (svref v i) s
                     p next
                     i (truly-the index (1+ i)))))
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
                   do (setf (svref v j) (fixed-float-value sap (+ q 1) +tag-single-float+)
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
                                                  q (truly-the index
                                                                      (+ q (box-bytes tag)))))
                                          (incf j))))))
               (declare (inline boxes))
               (if (= (mem-u8 sap p) +tag-double-float+)
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
