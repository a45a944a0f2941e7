;;;; Numbers: integers of every size, floats, ratios and complexes.

(in-package #:binstore)

;;; Integers ---------------------------------------------------------

(defconstant +max-fixnum-bytes+ 9 "The most bytes an integer of 64 bits takes.")

;;; The PUT- functions store at an output pointer and return the pointer
;;; after what they stored.  A loop that writes many numbers keeps its
;;; output as such a pointer: the compiler holds a SAP in a register as the
;;; raw address, where an offset is a tagged fixnum shifted before each use.

(declaim (inline put-fixnum))
(defun put-fixnum (out n)
  "Store the integer N, which fits in 64 signed bits, in its shortest form at
the pointer OUT; return the pointer after it.  The caller has made room."
  (declare (type pointer out) (type (signed-byte 64) n))
  (cond ((<= +smallest-in-tag-integer+ n +largest-in-tag-integer+)
         (setf (mem-u8 out 0) (+ n +small-int-bias+))
         (pointer+ out 1))
        ((<= 0 n 255)
         (setf (mem-u8 out 0) +tag-uint8+
               (mem-u8 out 1) n)
         (pointer+ out 2))
        ((<= -256 n -1)
         (setf (mem-u8 out 0) +tag-negint8+
               (mem-u8 out 1) (- -1 n))
         (pointer+ out 2))
        ((typep n '(signed-byte 16))
         (setf (mem-u8 out 0) +tag-int16+
               (mem-s16 out 1) n)
         (pointer+ out 3))
        ((typep n '(signed-byte 32))
         (setf (mem-u8 out 0) +tag-int32+
               (mem-s32 out 1) n)
         (pointer+ out 5))
        (t
         (setf (mem-u8 out 0) +tag-int64+
               (mem-s64 out 1) n)
         (pointer+ out 9))))

(defun fixnum-bytes (n)
  "Bytes PUT-FIXNUM stores for N."
  (declare (type (signed-byte 64) n))
  (cond ((<= +smallest-in-tag-integer+ n +largest-in-tag-integer+) 1)
        ((<= -256 n 255) 2)
        ((typep n '(signed-byte 16)) 3)
        ((typep n '(signed-byte 32)) 5)
        (t 9)))

(defun write-fixnum-near-end (ob n)
  "WRITE-FIXNUM when the window may not hold the widest form: reserve exactly."
  (declare (type (signed-byte 64) n))
  (let ((p (reserve ob (fixnum-bytes n))))  ; first: it may move the window
    (put-fixnum (pointer+ (obuf-sap ob) p) n)
    (values)))                          ; not the pointer: it would be boxed

(declaim (inline write-fixnum))
(defun write-fixnum (ob n)
  "Write the integer N, which fits in 64 signed bits, in its shortest form."
  (declare (type (signed-byte 64) n))
  (let ((p (obuf-pos ob)))
    (declare (type index p))            ; (for ECL, as in RESERVE)
    (if (<= (+ p +max-fixnum-bytes+) (obuf-end ob))
        (let ((sap (obuf-sap ob)))
          (setf (obuf-pos ob) (pointer- (put-fixnum (pointer+ sap p) n) sap)))
        (write-fixnum-near-end ob n))))

(defun write-bignum (ob n)
  "Write an integer outside 64 signed bits: sign and magnitude, little-endian."
  (declare (type integer n))
  (let* ((magnitude (abs n))
         (nbytes (ceiling (integer-length magnitude) 8))
         (full-words (floor nbytes 8)))
    (write-u8 ob +tag-bignum+)
    (write-varint ob (+ (* 2 nbytes) (if (minusp n) 1 0)))
    (dotimes (i full-words)
      (write-u64 ob (bignum-digit magnitude i)))
    (let ((last (if (< full-words (bignum-digit-count magnitude))
                    (bignum-digit magnitude full-words)
                    0)))
      (dotimes (i (- nbytes (* 8 full-words)))
        (write-u8 ob (ldb (byte 8 (* 8 i)) last))))))

(defun octets->integer (ib nbytes)
  "Read NBYTES little-endian bytes as a non-negative integer: into the
digits of a fresh bignum, a word at a time, with a zero digit on top so that
the magnitude's top bit is not taken for a sign; normalizing then gives the
integer (a fixnum when it fits)."
  (declare (type index nbytes))
  (multiple-value-bind (words rest) (floor nbytes 8)
    (let* ((digits (+ words (if (plusp rest) 1 0) 1))
           (big (make-digits digits)))
      (dotimes (i words)
        (setf (digit big i) (read-u64 ib)))
      (let ((last 0))
        (declare (type (unsigned-byte 64) last))
        (dotimes (k rest)
          (setf last (logior last (ash (read-u8 ib) (* 8 k)))))
        (when (plusp rest)
          (setf (digit big words) last)))
      (setf (digit big (1- digits)) 0)
      (digits-integer big digits))))

(defun read-bignum (rs)
  (let* ((ib (rs-ibuf rs))
         (v (read-varint ib))
         (nbytes (ash v -1)))
    (check-count ib nbytes 1 "a bignum")
    (charge rs (+ 16 nbytes))
    (let ((magnitude (octets->integer ib nbytes)))
      (register rs (if (logbitp 0 v) (- magnitude) magnitude)))))

;;; Floats -----------------------------------------------------------
;;; Written as their IEEE 754 bits through sap-ref, so -0.0, infinities and
;;; NaN payloads survive exactly.

(declaim (inline put-single-float put-double-float write-single-float write-double-float))
(defun put-single-float (out x)
  "Store the single-float X with its tag at the pointer OUT; return the
pointer after it."
  (declare (type pointer out) (type single-float x))
  (setf (mem-u8 out 0) +tag-single-float+
        (mem-single out 1) x)
  (pointer+ out 5))

(defun put-double-float (out x)
  "Store the double-float X with its tag at the pointer OUT; return the
pointer after it."
  (declare (type pointer out) (type double-float x))
  (setf (mem-u8 out 0) +tag-double-float+
        (mem-double out 1) x)
  (pointer+ out 9))

(defun write-single-float (ob x)
  (declare (type single-float x))
  (with-reserved (sap p ob 5)           ; RESERVE first: it may move the window
    (put-single-float (pointer+ sap p) x)
    (values)))

(defun write-double-float (ob x)
  (declare (type double-float x))
  (with-reserved (sap p ob 9)
    (put-double-float (pointer+ sap p) x)
    (values)))

;;; Ratios and complexes ----------------------------------------------
;;; Their parts are integers or floats, never containers, so they nest at
;;; most one level.

(defun write-ratio (ss x)
  (write-u8 (ss-obuf ss) +tag-ratio+)
  (write-object ss (numerator x))
  (write-object ss (denominator x)))

(defun read-integer-part (rs what)
  (let ((n (read-object rs)))
    (unless (integerp n)
      (restore-invalid rs (format nil "~a is ~s, not an integer" what (type-of n))
                       "an integer"))
    n))

(defun read-ratio (rs)
  (let* ((num (read-integer-part rs "a ratio's numerator"))
         (den (read-integer-part rs "a ratio's denominator")))
    (unless (> den 1)
      (restore-invalid rs (format nil "ratio denominator ~d" den) "a denominator above 1"))
    (register rs (/ num den))))

(declaim (inline put-complex-float))
(defun put-complex-float (out x)
  "Store X, a complex of double-floats or of single-floats, with its tag at
the pointer OUT; return the pointer after it.  Dispatching on the complex's
own type reads the parts unboxed (REALPART of an unknown complex conses a
float)."
  (declare (type pointer out))
  (etypecase x
    ((complex double-float)
     (setf (mem-u8 out 0) +tag-complex-double+
           (mem-double out 1) (realpart x)
           (mem-double out 9) (imagpart x))
     (pointer+ out 17))
    ((complex single-float)
     (setf (mem-u8 out 0) +tag-complex-single+
           (mem-single out 1) (realpart x)
           (mem-single out 5) (imagpart x))
     (pointer+ out 9))))

(defun write-complex (ss x)
  (declare (optimize speed))
  (let ((ob (ss-obuf ss)))
    (cond ((typep x '(complex rational))
           (write-u8 ob +tag-complex-rational+)
           (write-object ss (realpart x))
           (write-object ss (imagpart x)))
          ((typep x '(or (complex double-float) (complex single-float)))
           (write-complex-float ob x))
          (t (write-complex-float ob (float-complex-by-contagion ss x))))))

(defun float-complex-by-contagion (ss x)
  "X, a complex neither rational nor of two single or two double floats, as
the complex of floats the format has: on CLISP, which keeps parts of
different types (#C(0.25d0 -1)), the complex whose parts are X's converted
to the widest float format among them, as the standard's float contagion
makes (COMPLEX 0.25d0 -1) on every other Lisp (doc/FORMAT.md, Across
Lisps).  UNSTORABLE-OBJECT for a part of a float format the format lacks
\(CLISP's short and long floats, ECL's long floats)."
  (let ((re (realpart x)) (im (imagpart x)))
    (flet ((format-part-p (part) (typep part '(or rational single-float double-float))))
      (unless (and (format-part-p re) (format-part-p im))
        (unstorable ss x)))
    (let ((type (if (or (typep re 'double-float) (typep im 'double-float))
                    'double-float
                    'single-float)))
      (complex (coerce re type) (coerce im type)))))

(defun write-complex-float (ob x)
  (declare (type (or (complex double-float) (complex single-float)) x))
  (with-reserved (sap p ob (if (typep x '(complex double-float)) 17 9))
    (put-complex-float (pointer+ sap p) x)
    (values)))

;;; Numbers in blocks --------------------------------------------------
;;; Lists and vectors are mostly numbers.  Their writers make room for a
;;; block of elements at once and keep the position in a register, writing
;;; each number that needs no lookup with PUT-LEAF.

(defconstant +max-leaf-bytes+ 17 "The most bytes PUT-LEAF stores: a complex of doubles.")

(deftype boxed-leaf ()
  "The numbers PUT-LEAF writes that are heap objects, with an identity."
  '(or double-float (complex double-float) (complex single-float)))

(declaim (inline put-plain-leaf))
(defun put-plain-leaf (out x boxed)
  "PUT-LEAF without a table: store X at the pointer OUT when it is a fixnum
or a single float, or with BOXED a double or a complex of floats; return
the pointer after it, or OUT itself, writing nothing, for anything else."
  (declare (type pointer out))
  (cond ((typep x 'fixnum) (put-fixnum out x))
        ((typep x 'single-float) (put-single-float out x))
        ((not boxed) out)
        ((typep x 'double-float) (put-double-float out x))
        ((typep x '(or (complex double-float) (complex single-float)))
         (put-complex-float out x))
        (t out)))

(defconstant +short-container-elements+ 8
  "The most elements (conses of a list, elements of a simple vector) that
WRITE-SHORT-LEAF-LIST and WRITE-SHORT-LEAF-VECTOR write: their count takes
a byte, and room for them is cheap to reserve.")

(declaim (inline immediate-leaf-p))
(defun immediate-leaf-p (x boxed)
  "True when PUT-IMMEDIATE-LEAF (with BOXED) writes X."
  (or (typep x '(or (member nil t) fixnum single-float)) ; ECL open-codes MEMBER, not EQL
      (and boxed (typep x 'boxed-leaf))))

(declaim (inline put-immediate-leaf))
(defun put-immediate-leaf (out x boxed)
  "PUT-PLAIN-LEAF for NIL and T too: store X at the pointer OUT when it is
NIL, T, a fixnum or a single float, or with BOXED a double or a complex of
floats; return the pointer after it, or OUT itself, writing nothing."
  (declare (type pointer out))
  (cond ((null x) (setf (mem-u8 out 0) +tag-nil+) (pointer+ out 1))
        ((eq x t) (setf (mem-u8 out 0) +tag-t+) (pointer+ out 1))
        (t (put-plain-leaf out x boxed))))

(declaim (inline put-leaf))
(defun put-leaf (sap p x refs)
  "Store X at SAP+P when it is a number without parts: an integer of 63
bits, a float or a complex of floats.  REFS is LEAF-REFS: with reference
tracking, a boxed one (a BOXED-LEAF) written before is stored as a
reference, and a new one takes the next id, as WRITE-OBJECT does.  Return
the offset after it, or NIL, writing nothing, for anything else.  The
caller has made room for +MAX-LEAF-BYTES+."
  (declare (type index p) (type (or null identity-table) refs))
  (let ((id (if (and refs (typep x 'boxed-leaf))
                (identity-table-get-or-add refs x)
                -1)))
    (if (>= id 0)
        (put-ref sap p id refs)
        (let* ((out (pointer+ sap p))
               (after (put-plain-leaf out x t)))
          (and (not (pointer= after out))
               (pointer- after sap))))))

(declaim (inline leaf-p))
(defun leaf-p (x)
  "True when PUT-LEAF takes X."
  (typep x '(or fixnum single-float boxed-leaf)))

(declaim (inline put-leaf-quickly))
(defun put-leaf-quickly (out x refs)
  "PUT-LEAF for the loops without calls: store X at the pointer OUT when it
is a fixnum or a single float, or a double or a complex of floats that
needs no table (REFS is NIL) or that REFS gives an id without a call (see
IDENTITY-TABLE-ADD-QUICKLY); return the pointer after it, or OUT itself,
writing nothing, for anything else (which PUT-LEAF then takes, if a number)."
  (declare (type pointer out) (type (or null identity-table) refs))
  ;; immediates first, on the shortest path; each PUT-PLAIN-LEAF below is
  ;; cut down to the types its branch leaves
  (cond ((typep x '(or fixnum single-float)) (put-plain-leaf out x nil))
        ((null refs) (put-plain-leaf out x t))
        ((and (typep x 'boxed-leaf) (identity-table-add-quickly refs x))
         (put-plain-leaf out x t))
        (t out)))

(defun write-leaf-near-end (ob x refs)
  "Write X, when LEAF-P, as PUT-LEAF would but with an exact reservation,
as near the window's end (where MAX-TO-WRITE may leave less room than
+MAX-LEAF-BYTES+); true if it was written."
  (typecase x
    (fixnum (write-fixnum-near-end ob x) t)
    (single-float (write-single-float ob x) t)
    (boxed-leaf
     (let ((id (if refs (identity-table-get-or-add refs x) -1)))
       (cond ((>= id 0) (write-ref ob id refs))
             ((typep x 'double-float) (write-double-float ob x))
             (t (write-complex-float ob x))))
     t)))

(defun put-plain-elements (window-address p v start end boxed)
  "Store the elements of V from START below END at WINDOW-ADDRESS+P (an
integer, as for PUT-LEAF-CARS) for as long as each
is a fixnum or a single float, or with BOXED a double or a complex of floats
too, as PUT-LEAF does without tracking; return the offset after them and the
index of the first one not stored.  A loop without calls, its output a
pointer, as in PUT-PLAIN-CARS (but without PUT-LEAF-QUICKLY's path through
the table, which takes registers the loop over a vector of fixnums then
spills: it ran 60% slower).  The caller has made room for END - START times
+MAX-LEAF-BYTES+, and END is within V (checked here, once: the elements
are read unchecked)."
  (declare (type word window-address) (type index p start end)
           (type simple-vector v) (optimize speed))
  (unless (<= end (length v))
    (error "put-plain-elements: end ~d past a vector of ~d" end (length v)))
  (let* ((sap (address-pointer window-address))
         (out (pointer+ sap p))
         (i start))
    (declare (type index i))
    (flet ((element (i)
             ;; I is below END, within V
             (locally (declare (optimize (safety 0)))
               (svref v i))))
      (declare (inline element))
      (loop
        ;; four integers written in their tag at a time (the commonest
        ;; elements), one store for their four bytes
        (loop while (<= (+ i 4) end)
              do (let ((a (element i)) (b (element (+ i 1)))
                       (c (element (+ i 2))) (d (element (+ i 3))))
                   (unless (and (typep a '(integer #.+smallest-in-tag-integer+
                                                   #.+largest-in-tag-integer+))
                                (typep b '(integer #.+smallest-in-tag-integer+
                                                   #.+largest-in-tag-integer+))
                                (typep c '(integer #.+smallest-in-tag-integer+
                                                   #.+largest-in-tag-integer+))
                                (typep d '(integer #.+smallest-in-tag-integer+
                                                   #.+largest-in-tag-integer+)))
                     (return))
                   (setf (mem-u32 out 0)
                         (logior (+ a +small-int-bias+)
                                 (ash (+ b +small-int-bias+) 8)
                                 (ash (+ c +small-int-bias+) 16)
                                 (ash (+ d +small-int-bias+) 24))
                         out (pointer+ out 4)
                         i (+ i 4))))
        (when (>= i end)
          (return))
        (let ((x (element i)))
          (if (typep x 'fixnum)
              ;; fixnums not all in their tag: one at a time, to the run's end
              (loop (setf out (put-fixnum out (truly-the fixnum x)) ; tested below
                          i (+ i 1))
                    (unless (< i end)
                      (return))
                    (setf x (element i))
                    (unless (typep x 'fixnum)
                      (return)))
              (let ((after (put-plain-leaf out x boxed)))
                (when (pointer= after out)
                  (return))
                (setf out after
                      i (+ i 1)))))))
    (values (pointer- out sap) i)))

(declaim (inline next-in-run))
(defun next-in-run (c mark list)
  "The cdr of the cons C, in a walk of LIST that keeps the cons MARK for
Brent's method (see WRITE-CARS-COUNTING): reaching MARK means LIST is
circular.  A walk whose length is known passes *NO-MARK*."
  (declare (type cons c))
  (let ((next (cdr c)))
    (when (eq next mark)
      (circular-list-error list))
    next))

(declaim (inline put-tracked-boxes))
(defun put-tracked-boxes (window-address p source start k mark list refs complex vector)
  "Store at WINDOW-ADDRESS+P (an integer, as for PUT-PLAIN-ELEMENTS) boxes
of a run: double-floats, or with COMPLEX complexes of double-floats, new
ones of the chunk of the heap met last, while REFS is in seen bits, each
claimed through WITH-SEEN-BITS-CURSOR with no call; TAKE-BOX-RUN then gives
them their ids together, as the run of SOURCE they are, with no entry each.
With VECTOR, SOURCE is a simple vector and the run its elements from START
below K (within it: checked once, then read unchecked); return the offset
after them and the index of the first one not stored.  Otherwise SOURCE is
a cons and the run at most K cars of the chain from it (MARK and LIST as
for NEXT-IN-RUN); return the offset, the cons reached (the one whose car
was not stored, or the cdr after the last car stored) and how many were
stored.  None is stored when REFS cannot take boxes this way; a box not
taken (met before, or in another chunk) is left to PUT-LEAF.  Inlined with
COMPLEX and VECTOR constant: one loop for each kind of box and source
(PUT-TRACKED-DOUBLE-CARS and the others below)."
  (declare (type word window-address) (type index p start k)
           (type identity-table refs) (optimize speed))
  (when (and vector (> k (length (the simple-vector source))))
    (error "put-tracked-boxes: end ~d past a vector of ~d" k (length source)))
  (with-seen-bits-cursor ((claim flush ready) refs)
    (let* ((sap (address-pointer window-address))
           (out (pointer+ sap p))
           (i start)                    ; the vector's index
           (c (if vector nil source))   ; the list's cons
           (left (if vector 0 k))       ; the list's cars still allowed
           (taken 0))
      (declare (type index i left taken) (type list c))
      (inline-flet ((finish (reached)
                      (flush)
                      (take-box-run refs source start taken)
                      (if vector
                          (values (pointer- out sap) i)
                          (values (pointer- out sap) reached (- k left)))))
        (unless ready
          (return-from put-tracked-boxes
            (if vector (values p start) (values p source 0))))
        (loop
          (when (if vector (>= i k) (zerop left))
            (return))
          (let ((x (if vector
                       (locally (declare (optimize (safety 0))) ; I is below K, within SOURCE
                         (svref source i))
                       (car c))))
            (unless (and (if complex
                             (typep x '(complex double-float))
                             (typep x 'double-float))
                         (claim x))
              (return))
            (setf taken (1+ taken)
                  out (if complex (put-complex-float out x) (put-double-float out x))))
          (if vector
              (incf i)
              ;; C is SOURCE, a cons, or a cons found below: a list
              ;; only to have a value on the vector's path
              (let ((next (next-in-run (truly-the cons c) mark list)))
                (decf left)
                (unless (consp next)
                  (return-from put-tracked-boxes (finish next)))
                (setf c next))))
        (finish c)))))

(defun put-tracked-double-elements (window-address p v start end refs)
  "PUT-TRACKED-BOXES for the double-floats of the simple vector V."
  (put-tracked-boxes window-address p v start end nil nil refs nil t))

(defun put-tracked-complex-elements (window-address p v start end refs)
  "PUT-TRACKED-BOXES for the complexes of double-floats of the simple vector V."
  (put-tracked-boxes window-address p v start end nil nil refs t t))

(defun write-leaf-elements (ob v start end refs)
  "Write the elements of V from START below END for as long as PUT-LEAF
takes them; return the index of the first one not written."
  (declare (type obuf ob) (type simple-vector v) (type index start end)
           (optimize speed))
  (let ((i start))
    (declare (type index i))
    (loop
      (when (>= i end)
        (return i))
      (let* ((p (obuf-pos ob))
             (block (min (- end i) (floor (- (obuf-end ob) p) +max-leaf-bytes+))))
        (declare (type index p block))
        (if (zerop block)
            ;; near the window's end: one element, with an exact reservation
            (progn
              (unless (write-leaf-near-end ob (svref v i) refs)
                (return i))
              (incf i))
            (let ((sap (obuf-sap ob)) (stop (+ i block)))
              (declare (type index stop))
              (loop
                ;; what needs no table, in a loop of its own (called only
                ;; for a number: a vector of other objects comes here for
                ;; each element)
                (when (and (< i stop)
                           ;; with a table, it stops at once at a boxed one
                           (if refs
                               (typep (svref v i) '(or fixnum single-float))
                               (leaf-p (svref v i))))
                  (multiple-value-setq (p i)
                    (put-plain-elements (obuf-base ob) p v i stop (null refs))))
                (unless (< i stop)
                  (return))
                ;; new doubles or complexes, while the table is in seen bits
                ;; (once it hashes, PUT-LEAF takes each)
                (when (and refs (not (it-hashed refs)))
                  (let ((x (svref v i)))
                    (cond ((typep x 'double-float)
                           (multiple-value-setq (p i)
                             (put-tracked-double-elements (obuf-base ob) p v i stop refs)))
                          ((typep x '(complex double-float))
                           (multiple-value-setq (p i)
                             (put-tracked-complex-elements (obuf-base ob) p v i stop refs)))))
                  (unless (< i stop)
                    (return)))
                (let ((q (put-leaf sap p (svref v i) refs)))
                  (unless q
                    (setf (obuf-pos ob) p)
                    (return-from write-leaf-elements i))
                  ;; below the window's end, which BLOCK allowed for
                  (setf p (truly-the index q))
                  (incf i)))
              (setf (obuf-pos ob) p)))))))

(defun read-complex-rational (rs)
  (flet ((part (what)
           (let ((x (read-object rs)))
             (unless (rationalp x)
               (restore-invalid rs (format nil "~a is ~s" what (type-of x)) "a rational"))
             x)))
    (let* ((re (part "a complex's real part"))
           (im (part "a complex's imaginary part")))
      (when (zerop im)
        (restore-invalid rs "a rational complex with a zero imaginary part"
                         "a non-zero imaginary part"))
      (register rs (complex re im)))))

(defun read-complex-single (rs)
  (register rs (read-fixed-float (rs-ibuf rs) +tag-complex-single+)))

(defun read-complex-double (rs)
  (register rs (read-fixed-float (rs-ibuf rs) +tag-complex-double+)))

;;; Reading from the window ---------------------------------------------
;;; The readers of numbers for the loops over runs of elements
;;; (src/codecs/runs.lisp): each reads straight from the window, the
;;; position kept in a register, and decodes what it finds with
;;; FIXED-INTEGER-VALUE or FIXED-FLOAT-VALUE (src/io/payloads.lisp), as
;;; READ-TAGGED does through the input buffer.

(declaim (inline leaf-bytes))
(defun leaf-bytes (tag)
  "Bytes, tag included, of the leaf WINDOW-LEAF reads for the type tag TAG,
or NIL if it reads none of that tag: NIL, T, or a number of fixed size, its
tag and FIXED-PAYLOAD-BYTES."
  ;; one table: as the tag's byte added to FIXED-PAYLOAD-BYTES, it cost
  ;; WINDOW-SHORT-LIST a move before each load of a payload
  (case tag
    ((#.+tag-nil+ #.+tag-t+) 1)
    ((#.+tag-uint8+ #.+tag-negint8+) 2)
    (#.+tag-int16+ 3)
    ((#.+tag-int32+ #.+tag-single-float+) 5)
    ((#.+tag-int64+ #.+tag-double-float+ #.+tag-complex-single+) 9)
    (#.+tag-complex-double+ 17)
    (t nil)))

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

(declaim (inline window-integer))
(defun window-integer (sap p end)
  "If SAP+P (P below END) holds an integer tag and its payload (none, or 1,
2, 4 or 8 bytes), whole in the window, and its value is a fixnum: that
value and its size in bytes; otherwise 0 and 0.  It reads nothing else and
calls nothing, so the loops that inline it keep it in registers.  Returning a size
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
