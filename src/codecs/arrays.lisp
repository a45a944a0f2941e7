;;;; Arrays.
;;;;
;;;;   SIMPLE-VECTOR       n, n objects (a container: header n, contents)
;;;;   SPECIALIZED-VECTOR  element-type code, n, raw payload
;;;;   ARRAY               every other array: flags, element-type code, rank,
;;;;                       dimensions, [fill pointer], then either the
;;;;                       displaced-to array and offset, or the contents
;;;;
;;;; Raw payloads are little-endian and packed (bit, 2 and 4 bit elements
;;;; LSB first within a byte; unused bits of the last byte zero), which is how
;;;; SBCL lays them out in memory on little-endian machines, so they move
;;;; with one block copy.  Fixnum and (unsigned-byte 62) vectors hold tagged
;;;; words in SBCL and are converted element by element.

(in-package #:binstore)

(defconstant +array-fill-pointer+ 1)
(defconstant +array-adjustable+ 2)
(defconstant +array-displaced+ 4)

(declaim (inline element-bits element-type-of-code))
(defun element-bits (code) (third (svref +element-types+ code)))
(defun element-type-of-code (code) (second (svref +element-types+ code)))

(defun element-type-code-of-type (array)
  "The format's code for ARRAY's element type, found from the type."
  (let ((type (array-element-type-name array))) ; on SBCL ARRAY-ELEMENT-TYPE
    (or (position type +element-types+ :key #'second :test #'equal)
        (error 'unstorable-object :object array
                                  :message (format nil "array element type ~s is not known" type)))))

(define-load-time-global **element-type-code-by-widetag**
    (let ((table (make-array 256 :initial-element nil)))
      (loop for (nil type) across +element-types+
            ;; every type on SBCL; ECL has no arrays of element type NIL
            when (array-element-type-supported-p type)
              do (let ((v (make-array 0 :element-type type)))
                   (setf (svref table (array-widetag v))
                         (element-type-code-of-type v))))
      table)
  "For a simple vector's widetag, the code ELEMENT-TYPE-CODE-OF-TYPE gives
every simple vector with that widetag: looked up in one load, where the
search by type compares type specifiers with EQUAL.")

(declaim (inline element-type-code))
(defun element-type-code (array)
  "The format's code for ARRAY's element type."
  (or (and (typep array 'simple-1d-array) ; on SBCL (SIMPLE-ARRAY * (*))
           (svref **element-type-code-by-widetag** (array-widetag array)))
      (element-type-code-of-type array)))

(defun read-element-type-code (rs)
  (let ((code (read-u8 (rs-ibuf rs))))
    (unless (< code (length +element-types+))
      (restore-invalid rs (format nil "array element type code ~d" code)
                       "a code listed in doc/FORMAT.md"))
    code))

(declaim (inline payload-bytes))
(defun payload-bytes (code count)
  "Bytes of raw payload for COUNT elements of the element type CODE."
  (let ((bits (element-bits code)))
    (declare (type (integer 0 128) bits) (type unsigned-byte count))
    (if (< count (expt 2 55))           ; word arithmetic, the usual case
        (ceiling (* (the (unsigned-byte 55) count) bits) 8)
        (ceiling (* count bits) 8))))

(defun storage-bytes (code count)
  "Bytes of memory COUNT elements of the element type CODE occupy."
  (case code
    ((#.+element-type-t+ #.+element-type-character+) (* 8 count))
    (#.+element-type-base-char+ count)
    (#.+element-type-nil+ 0)
    (t (payload-bytes code count))))

(defun raw-element-code-p (code)
  "True for element type codes whose payload is raw bytes (not T or
characters)."
  (not (or (= code +element-type-t+) (= code +element-type-character+)
           (= code +element-type-base-char+))))

(defun check-payload-count (rs code count what)
  "Signal unless the payload of COUNT elements of the raw element type CODE
could follow (for element type NIL, there is none: charge COUNT instead).
WHAT names the payload's bytes in the message."
  (if (= code +element-type-nil+)
      (progn
        (charge rs count)               ; the limit first, as for any vector
        (unless (< count array-dimension-limit)
          (restore-invalid rs (format nil "a vector of element type NIL of ~d elements" count)
                           "a length below ARRAY-DIMENSION-LIMIT")))
      ;; a count this large can never fit: clamped, it still fails the check
      (check-count (rs-ibuf rs) (min (payload-bytes code count) (expt 2 62)) 1 what)))

;;; Raw payloads ----------------------------------------------------------

;;; Fixnum and (unsigned-byte 62) vectors hold their elements as tagged
;;; words, the value shifted left by the fixnum tag bits: the payload, plain
;;; 64-bit integers, is written and read a block at a time with the shift.

(defconstant +words-per-block+ 512)

(defun put-untagged-words (from-address to-address k)
  "Store at TO-ADDRESS the K tagged words at FROM-ADDRESS, each as the
8-byte integer it holds: four words a step, then one at a time.  A function
of its own, called once a block: inside WRITE-TAGGED-WORDS, around its
calls to make room, the addresses lived on the stack as integers, checked
and reloaded at every word.  The addresses come as integers, which are
fixnums: a SAP passed to a function not inline is boxed, 16 bytes each."
  (declare (type word from-address to-address)
           (type (integer 0 #.+words-per-block+) k) (optimize speed))
  (let ((from (address-pointer from-address)) (to (address-pointer to-address)) (left k))
    (declare (type pointer from to)
             (type (integer 0 #.+words-per-block+) left))
    (flet ((put (offset)
             (setf (mem-s64 to offset)
                   (ash (mem-s64 from offset) (- +fixnum-tag-bits+)))))
      (declare (inline put))
      ;; the addresses move on, not an index: a tagged index is shifted
      ;; before every access
      (loop while (>= left 4)
            do (put 0) (put 8) (put 16) (put 24)
               (setf from (pointer+ from 32) to (pointer+ to 32))
               (decf left 4))
      (dotimes (j left)
        (put (* 8 j))))))

(defun write-tagged-words (ob storage count)
  "Write the COUNT elements of STORAGE, a fixnum or (unsigned-byte 62)
vector, as 8-byte integers."
  (declare (type index count) (optimize speed))
  (with-pinned-objects (storage)
    (let ((src (vector-pointer storage)) (i 0))
      (declare (type index i))
      (loop while (< i count)
            do (let* ((k (min (- count i) +words-per-block+))
                      (p (progn (make-room-for ob (* 8 k)) (obuf-pos ob))))
                 (declare (type index p))
                 (put-untagged-words (+ (pointer-address src) (* 8 i)) (+ (obuf-base ob) p) k)
                 (setf (obuf-pos ob) (+ p (* 8 k)))
                 (incf i k))))))

(defun put-tagged-words (from-address to-address k fixnum-p)
  "Store at TO-ADDRESS the K 8-byte integers at FROM-ADDRESS as tagged
words, each checked to fit a fixnum (FIXNUM-P) or an (unsigned-byte 62):
four a step, the addresses integers, as in PUT-UNTAGGED-WORDS.  Return K,
or the index of the first integer that does not fit, before which all are
stored."
  (declare (type word from-address to-address)
           (type (integer 0 #.+words-per-block+) k) (optimize speed))
  ;; No branch per word: an integer fits when, BIAS added to it (modulo
  ;; 2^64; a fixnum's range starts at -BIAS), it is below 2^LIMIT-BITS, so
  ;; the OR of all those sums says whether every one fits.  Only a block
  ;; with a misfit is looked at again, to name the first.
  (let* ((from (address-pointer from-address)) (to (address-pointer to-address)) (left k)
         (bias (if fixnum-p (1+ most-positive-fixnum) 0))
         (limit-bits (if fixnum-p (1+ (integer-length most-positive-fixnum)) 62))
         (sums 0))
    (declare (type pointer from to) (type (integer 0 #.+words-per-block+) left)
             (type word bias sums) (type (integer 0 64) limit-bits))
    (flet ((biased (u) (logand (+ u bias) #.(1- (expt 2 64))))
           (fits-p (biased) (zerop (ash biased (- limit-bits)))))
      (declare (inline biased fits-p))
      (flet ((put (offset)
               (let ((u (mem-u64 from offset)))
                 (setf sums (logior sums (biased u)))
                 (setf (mem-u64 to offset) (logand (ash u +fixnum-tag-bits+) #.(1- (expt 2 64)))))))
        (declare (inline put))
        (loop while (>= left 4)
              do (put 0) (put 8) (put 16) (put 24)
                 (setf from (pointer+ from 32) to (pointer+ to 32))
                 (decf left 4))
        (dotimes (j left)
          (put (* 8 j))))
      (if (fits-p sums)
          k
          (let ((from (address-pointer from-address)))
            (dotimes (i k k)
              (unless (fits-p (biased (mem-u64 from (* 8 i))))
                (return i))))))))

(defun read-tagged-words (rs storage code count)
  "Read COUNT 8-byte integers into STORAGE, a vector of element type CODE
(fixnum or (unsigned-byte 62)), checking each fits it."
  (declare (type index count) (optimize speed))
  (let ((ib (rs-ibuf rs))
        (fixnum-p (= code +element-type-fixnum+))
        (i 0)
        (mapped 0))                   ; elements whose pages PREFAULT has seen
    (declare (type index i mapped))
    (with-pinned-objects (storage)
      (let ((dst (vector-pointer storage)))
        (loop while (< i count)
              do (need ib 8)          ; refills; at least one word in the window
                 (when (>= i mapped)  ; a new window: as far as it goes
                   (setf mapped (+ i (min (- count i) (floor (available ib) 8))))
                   (prefault (+ (pointer-address dst) (* 8 i)) (* 8 (- mapped i))))
                 (let* ((p (ibuf-pos ib))
                        (k (min (- count i) (floor (available ib) 8) +words-per-block+))
                        (done (put-tagged-words (+ (ibuf-base ib) p)
                                                (+ (pointer-address dst) (* 8 i)) k fixnum-p)))
                   (declare (type index p k done))
                   (when (< done k)
                     (invalid ib (format nil "~d is not of type ~s"
                                         (mem-s64 (ibuf-sap ib) (+ p (* 8 done)))
                                         (element-type-of-code code))
                              "an element of the array's type"
                              (+ (ibuf-offset ib) (* 8 done))))
                   (setf (ibuf-pos ib) (+ p (* 8 k)))
                   (incf i k)))))))

(defun payload-integer-signed-p (code)
  "True when the element type CODE is a signed integer type."
  (let ((type (element-type-of-code code)))
    (or (eq type 'fixnum) (and (consp type) (eq (first type) 'signed-byte)))))

(defun float-element-parts (code)
  "For an element type CODE of floats or complex floats, the format of each
part (SINGLE-FLOAT or DOUBLE-FLOAT) and the parts per element (1 or 2);
NIL for any other code."
  (let ((type (element-type-of-code code)))
    (cond ((member type '(single-float double-float)) (values type 1))
          ((and (consp type) (eq (first type) 'complex)
                (member (second type) '(single-float double-float)))
           (values (second type) 2)))))

(defun put-float-elements (octets storage code count)
  "Store the COUNT float (or complex float) elements of STORAGE in OCTETS,
as the format's payload of element type CODE."
  (multiple-value-bind (format parts) (float-element-parts code)
    (let ((width (if (eq format 'single-float) 4 8)))
      (with-pinned-objects (octets)
        (let ((sap (vector-pointer octets)))
          (dotimes (i count)
            (let ((x (aref storage i))
                  (at (* i parts width)))
              (flet ((put (part offset)
                       (if (eq format 'single-float)
                           (setf (mem-single sap offset) (coerce part 'single-float))
                           (setf (mem-double sap offset) (coerce part 'double-float)))))
                (put (realpart x) at)
                (when (= parts 2)
                  (put (imagpart x) (+ at width)))))))))))

(defun take-float-elements (octets storage code count)
  "Fill the first COUNT elements of STORAGE with the floats (or complex
floats) of the format's payload of element type CODE in OCTETS."
  (multiple-value-bind (format parts) (float-element-parts code)
    (let ((width (if (eq format 'single-float) 4 8)))
      (with-pinned-objects (octets)
        (let ((sap (vector-pointer octets)))
          (dotimes (i count)
            (let ((at (* i parts width)))
              (flet ((take (offset)
                       (if (eq format 'single-float)
                           (mem-single sap offset)
                           (mem-double sap offset))))
                (setf (aref storage i)
                      (if (= parts 2)
                          (complex (take at) (take (+ at width)))
                          (take at))))))))))
  storage)

(defun write-payload-elementwise (ob storage code count)
  "Write COUNT elements of STORAGE one at a time, packed as the format
packs them: for a platform whose memory does not hold them so (see
ELEMENTWISE-PAYLOAD-P; never on SBCL).  Integers of any width, floats and
complex floats."
  (let* ((bits (element-bits code))
         (nbytes (payload-bytes code count))
         (octets (make-array nbytes :element-type '(unsigned-byte 8) :initial-element 0)))
    (if (float-element-parts code)
        (put-float-elements octets storage code count)
        (dotimes (i count)
          (let ((v (ldb (byte bits 0) (aref storage i)))
                (bit (* i bits)))
            (if (< bits 8)
                (multiple-value-bind (byte at) (floor bit 8)
                  (setf (aref octets byte) (logior (aref octets byte) (ash v at))))
                (dotimes (k (floor bits 8))
                  (setf (aref octets (+ (floor bit 8) k)) (ldb (byte 8 (* 8 k)) v)))))))
    (with-pinned-objects (octets)
      (write-octets-from-address ob (pointer-address (vector-pointer octets)) nbytes))))

(defun read-payload-elementwise (rs storage code count)
  "Read COUNT elements packed as the format packs them into STORAGE one at
a time (see WRITE-PAYLOAD-ELEMENTWISE), checking each integer fits."
  (let* ((ib (rs-ibuf rs))
         (bits (element-bits code))
         (signed (payload-integer-signed-p code))
         (nbytes (payload-bytes code count))
         (start (ibuf-offset ib))
         (octets (make-array nbytes :element-type '(unsigned-byte 8))))
    (with-pinned-objects (octets)
      (read-octets-to-address ib (pointer-address (vector-pointer octets)) nbytes))
    (if (float-element-parts code)
        (take-float-elements octets storage code count)
        (let ((type (element-type-of-code code)))
          (dotimes (i count)
            (let* ((bit (* i bits))
                   (v (if (< bits 8)
                          (ldb (byte bits (mod bit 8)) (aref octets (floor bit 8)))
                          (let ((v 0))
                            (dotimes (k (floor bits 8) v)
                              (setf v (logior v (ash (aref octets (+ (floor bit 8) k)) (* 8 k)))))))))
              (when (and signed (logbitp (1- bits) v))
                (decf v (ash 1 bits)))
              (unless (typep v type)
                (invalid ib (format nil "element ~d does not fit ~s" v type)
                         "an element of the array's type" (+ start (floor bit 8))))
              (setf (aref storage i) v)))))
    storage))

(defun write-payload (ob storage code count)
  "Write COUNT elements of the simple specialized vector STORAGE."
  ;; ELEMENTWISE-PAYLOAD-P is NIL on SBCL: the branch is not compiled
  (if (elementwise-payload-p code)
      (write-payload-elementwise ob storage code count)
      (case code
        ((#.+element-type-ub62+ #.+element-type-fixnum+)
         (write-tagged-words ob storage count))
        (t
         (let* ((bits (element-bits code))
                (whole (floor (* count bits) 8))
                (partial-bits (mod (* count bits) 8)))
           (with-pinned-objects (storage)
             (let ((sap (vector-pointer storage)))
               (write-octets-from-address ob (pointer-address sap) whole)
               (unless (zerop partial-bits)
                 (write-u8 ob (ldb (byte partial-bits 0) (mem-u8 sap whole)))))))))))

(defun range-checked-code-p (code)
  "True for the element types whose payload, copied as it is, can hold
values outside the type, which CHECK-PAYLOAD-RANGE refuses:
(unsigned-byte 7), 15, 31 and 63, stored in a byte, two, four or eight.
\(The (unsigned-byte 62) payload is checked as it is converted, by
READ-TAGGED-WORDS.)"
  (let ((type (element-type-of-code code)))
    (and (/= code +element-type-ub62+)
         (consp type) (eq (first type) 'unsigned-byte)
         (< (second type) (element-bits code)))))

(defun check-payload-range (rs address nbytes code start-offset)
  "Signal if a value in the payload copied to ADDRESS (an integer, as for
WRITE-OCTETS-FROM-ADDRESS) is outside its element type (see
RANGE-CHECKED-CODE-P)."
  (when (range-checked-code-p code)
    (let ((sap (address-pointer address))
          (width (floor (element-bits code) 8))
          (limit (expt 2 (second (element-type-of-code code)))))
      (loop for i from 0 below nbytes by width
            for v = (ecase width
                      (1 (mem-u8 sap i))
                      (2 (mem-u16 sap i))
                      (4 (mem-u32 sap i))
                      (8 (mem-u64 sap i)))
            when (>= v limit)
              do (invalid (rs-ibuf rs)
                          (format nil "element ~d does not fit ~s" v
                                  (element-type-of-code code))
                          "an element of the array's type" (+ start-offset i))))))

(defun read-payload (rs storage code count)
  "Fill the first COUNT elements of the simple specialized vector STORAGE."
  (let ((ib (rs-ibuf rs)))
    ;; ELEMENTWISE-PAYLOAD-P is NIL on SBCL: the branch is not compiled
    (if (elementwise-payload-p code)
        (read-payload-elementwise rs storage code count)
        (case code
          ((#.+element-type-ub62+ #.+element-type-fixnum+)
           (read-tagged-words rs storage code count))
          (t
           (let ((nbytes (payload-bytes code count))
                 (partial-bits (mod (* count (element-bits code)) 8))
                 (start (ibuf-offset ib)))
             (with-pinned-objects (storage)
               (let ((sap (vector-pointer storage)))
                 (read-octets-to-address ib (pointer-address sap) nbytes)
                 ;; SBCL expects the unused bits after the last element to be zero
                 (unless (zerop partial-bits)
                   (setf (mem-u8 sap (1- nbytes))
                         (ldb (byte partial-bits 0) (mem-u8 sap (1- nbytes)))))
                 (check-payload-range rs (pointer-address sap) nbytes code start)))))))
    storage))

;;; Simple vectors --------------------------------------------------------

(defun write-simple-vector-header (ss v)
  (when (plusp (length v))
    (expect-tracked-elements ss (length v) (svref v 0)))
  (write-u8 (ss-obuf ss) +tag-simple-vector+)
  (write-varint (ss-obuf ss) (length v))
  nil)

(defun write-simple-vector-contents (ss v &optional (n (length v)))
  "Write the first N elements of the simple vector V (all of them, or a T
array's, from its storage vector)."
  (declare (type simple-vector v) (type index n))
  (let ((ob (ss-obuf ss)) (i 0) (refs (leaf-refs ss)))
    (declare (type index i))
    (loop
      ;; numbers, the commonest elements, in blocks; the call is made only
      ;; for one, as it would return at once for anything else
      (when (and (< i n) (leaf-p (svref v i)))
        (setf i (write-leaf-elements ob v i n refs)))
      (when (>= i n)
        (return))
      (let ((x (svref v i)))
        ;; in a run of symbols, ask for what the ones ahead will need, as
        ;; WRITE-CARS-COUNTING does
        (when (and (symbolp x) (prefetch-symbols-p ss))
          (when (< (+ i 8) n)
            (prefetch-object (svref v (+ i 8))))
          (when (< (+ i 4) n)
            (prefetch-symbol-parts ss (svref v (+ i 4)))))
        (write-object ss x))
      (incf i))))

(declaim (inline short-leaf-vector-candidate-p))
(defun short-leaf-vector-candidate-p (v)
  "True when the simple vector V is short enough for WRITE-SHORT-LEAF-VECTOR:
the test, inline in WRITE-CONTAINER-OBJECT, that spares the call for
others."
  (<= (length v) +short-container-elements+))

(defun write-short-leaf-vector (ss v)
  "Write the simple vector V when it has at most +SHORT-CONTAINER-ELEMENTS+
elements, each a leaf PUT-IMMEDIATE-LEAF takes (boxed ones only without
reference tracking), as WRITE-OBJECT would write it, in one function: a
reference if it was written before, otherwise its header and elements
(its id is taken first, which is the same, as such elements take none);
return true.  Otherwise return NIL, having written nothing and taken no
id: too deep, deferred, another kind of element, or too little room.  The
elements are all looked at before anything is written or taken."
  (declare (type store-state ss) (type simple-vector v) (optimize speed))
  (let* ((ob (ss-obuf ss))
         (boxed (not (ss-track ss)))
         (n (length v))
         (p (obuf-pos ob)))
    (unless (and (<= n +short-container-elements+)
                 (inline-container-allowed-p ss)
                 (>= (- (obuf-end ob) p) (+ 2 (* +short-container-elements+ +max-leaf-bytes+)))
                 ;; a loop, not EVERY of a closure, which ECL allocates
                 (loop for x across v always (immediate-leaf-p x boxed)))
      (return-from write-short-leaf-vector nil))
    (unless (and (ss-track ss) (written-before-or-remember-p ss v))
      (let* ((sap (obuf-sap ob))
             (out (pointer+ sap p)))
        (setf (mem-u8 out 0) +tag-simple-vector+
              (mem-u8 out 1) n
              out (pointer+ out 2))
        (dotimes (i n)
          (setf out (put-immediate-leaf out (svref v i) boxed)))
        (setf (obuf-pos ob) (pointer- out sap))))
    t))

(defun read-simple-vector-header (rs)
  (declare (optimize speed))
  (let* ((ib (rs-ibuf rs))
         ;; an index, the input holding a byte per element: so declared,
         ;; MAKE-ARRAY allocates inline instead of calling its general
         ;; form (which cost some 200 instructions a vector)
         (n (the index (check-count ib (read-varint ib) 1 "a vector"))))
    (charge rs (* 8 (+ n 2)))
    (let ((v (make-array n)))
      ;; every element will be written; a stream's window bounds how many
      ;; can be yet, at a byte each
      (prefault-vector v (* 8 (min n (available ib))))
      v)))

;;; FILL-ELEMENTS, which reads a simple vector's elements, is in runs.lisp:
;;; DEFINE-RUN-FILLER writes it and FILL-CARS from one body.

(defun fill-simple-vector (rs v)
  (fill-elements rs v))

(defun read-simple-vector (rs)
  "Read a simple vector whose tag was just consumed (READ-CONTAINER's work
for it, in one function)."
  (declare (optimize speed))
  (let ((v (read-simple-vector-header rs)))
    (register rs v)
    (nested (rs) (fill-elements rs v))))

;;; Specialized simple vectors ---------------------------------------------

(defun make-specialized-vector (code n)
  "A fresh simple vector of N elements of the element type CODE.  Each
branch names its type as a constant, so MAKE-ARRAY allocates inline: given
the type at run time, it parses the type specifier on every call (about
330 ns, more than copying a 1 KB payload)."
  (declare (type index n))
  (macrolet ((by-code ()
               `(case code
                  ,@(loop for (code type) across +element-types+
                          collect `(,code (make-array n :element-type ',type)))
                  (t (error "no element type has code ~d" code)))))
    (by-code)))

(define-load-time-global **copied-element-bits**
    (let ((table (make-array 256 :element-type '(unsigned-byte 8) :initial-element 0)))
      (loop for (code nil bits) across +element-types+
            do (when (and bits (plusp bits) (raw-element-code-p code)
                          (/= code +element-type-ub62+) (/= code +element-type-fixnum+)
                          (not (elementwise-payload-p code))) ; on SBCL (NOT NIL)
                 (setf (aref table code) bits)))
      table)
  "For each element type code whose payload is the vector's memory as it
is (copied in one block): bits per element.  Zero for every other code.")
(declaim (type (simple-array (unsigned-byte 8) (256)) **copied-element-bits**))

(defun put-copied-vector (ob v code n bits)
  "Write the specialized vector V (N elements of the element type CODE,
whose payload is its memory as it is, BITS bits an element) with its
header, in one block under one room check, if the window holds them all;
return true if written.  The general path's calls and arithmetic on
integers of any size cost more than copying a kilobyte."
  (declare (type obuf ob) (type (simple-array * (*)) v) (type (unsigned-byte 8) code)
           (type (unsigned-byte 55) n) (type (integer 1 128) bits) (optimize speed))
  (let* ((payload-bits (* n bits))
         (whole (ash payload-bits -3))
         (partial-bits (logand payload-bits 7))
         (p (obuf-pos ob))
         (tag (vector-tag code))
         (length-at (+ p (if tag 1 2)))
         (header-end (+ length-at (varint-length n)))
         (end (+ header-end whole (if (zerop partial-bits) 0 1))))
    (when (<= end (obuf-end ob))
      (let ((sap (obuf-sap ob)))
        (if tag
            (setf (mem-u8 sap p) tag)
            (setf (mem-u8 sap p) +tag-specialized-vector+
                  (mem-u8 sap (+ p 1)) code))
        (put-varint sap length-at n)
        (with-pinned-objects (v)
          (let ((from (vector-pointer v)))
            (copy-memory from (pointer+ sap header-end) whole)
            ;; the unused bits of the last byte are written as zeros
            (unless (zerop partial-bits)
              (setf (mem-u8 sap (+ header-end whole))
                    (ldb (byte partial-bits 0) (mem-u8 from whole))))))
        (setf (obuf-pos ob) end)
        t))))

;;; Numeric payloads told to a sink that wants them (SINK-NOTE-PAYLOAD):
;;; what is written does not change.

(define-load-time-global **payload-element-widths**
    (let ((table (make-array 256 :element-type '(unsigned-byte 8) :initial-element 0)))
      (loop for (code type bits) across +element-types+
            do (when (and bits (raw-element-code-p code) (member bits '(16 32 64 128)))
                 (setf (aref table code)
                       (if (and (consp type) (eq (first type) 'complex))
                           (/ bits 16)  ; a complex's two parts, each a float
                           (/ bits 8)))))
      table)
  "For each element type code whose payload is whole numbers or floats of
2, 4 or 8 bytes each (a complex's parts counted apart): that width; zero for
every other code (bits, bytes, characters, objects).")
(declaim (type (simple-array (unsigned-byte 8) (256)) **payload-element-widths**))

(defun note-payload (ob code count)
  "Tell OB's PAYLOAD-SINK, if it has one, that the payload of COUNT elements
of the element type CODE begins at OB's position, when the elements are
numbers of 2, 4 or 8 bytes."
  (declare (type obuf ob) (type (unsigned-byte 8) code) (type index count))
  (let ((sink (obuf-payload-sink ob))
        (width (aref **payload-element-widths** code)))
    (when (and sink (plusp width) (plusp count))
      (sink-note-payload sink (obuf-total ob) (payload-bytes code count) width))))

(defun write-specialized-vector (ob v code)
  "Tag, element type code (unless the tag says it: VECTOR-TAG), length,
payload: in one block where PUT-COPIED-VECTOR can, otherwise piece by piece."
  (declare (type obuf ob) (type (simple-array * (*)) v) (type (unsigned-byte 8) code)
           (optimize speed))
  (let ((n (length v))
        (bits (aref **copied-element-bits** code)))
    (unless (and (plusp bits) (< n (expt 2 55)) (null (obuf-payload-sink ob))
                 (put-copied-vector ob v code n bits))
      (let ((tag (vector-tag code)))
        (if tag
            (write-u8 ob tag)
            (progn (write-u8 ob +tag-specialized-vector+)
                   (write-u8 ob code))))
      (write-varint ob n)
      (unless (= code +element-type-nil+) ; such a vector has no elements to write
        (note-payload ob code n)
        (write-payload ob v code n)))))

(defun read-specialized-vector (rs implied-code)
  "Read a specialized vector whose tag was just consumed: of the element type
IMPLIED-CODE when its tag says one (VECTOR-TAG), else of the code that
follows.  The common case, a payload copied as it is and whole in the window
after a short length, is decided here with the window's bytes in hand; every
other goes to READ-SPECIALIZED-VECTOR-IN-GENERAL, which also signals what
is wrong."
  (declare (optimize speed) (type (or null (unsigned-byte 8)) implied-code))
  (let* ((ib (rs-ibuf rs))
         (sap (ibuf-sap ib))
         (p (ibuf-pos ib))
         (end (ibuf-end ib))
         (code (cond (implied-code) ((< p end) (mem-u8 sap p))))
         (bits (if code (aref **copied-element-bits** code) 0)))
    (declare (type index p end))
    (multiple-value-bind (n from) (if (plusp bits)
                                      (window-varint sap (if implied-code p (+ p 1)) end)
                                      (values nil nil))
      (let ((nbytes (and from (ceiling (* (the index n) bits) 8))))
        (if (and nbytes (<= (+ from nbytes) end))
            (let ((v (progn (charge rs (+ 16 nbytes))
                            (make-specialized-vector code n))))
              ;; its pages mapped in one call, as READ-PAYLOAD's are: the
              ;; runway need not reach that far yet (PREFAULT looks first,
              ;; and leaves alone pages mapped already)
              (prefault-vector v nbytes)
              (with-pinned-objects (v)
                (let ((to (vector-pointer v)))
                  (copy-window-bytes sap from to nbytes)
                  ;; SBCL expects the unused bits after the last element to be zero
                  (let ((partial-bits (mod (* n bits) 8)))
                    (unless (zerop partial-bits)
                      (setf (mem-u8 to (1- nbytes))
                            (ldb (byte partial-bits 0) (mem-u8 to (1- nbytes))))))
                  (setf (ibuf-pos ib) (+ from nbytes))
                  (when (range-checked-code-p code)
                    (check-payload-range rs (pointer-address to) nbytes code
                                         (+ (ibuf-consumed ib) from)))))
              (register rs v))
            (read-specialized-vector-in-general rs implied-code))))))

(defun read-specialized-vector-in-general (rs implied-code)
  (let* ((ib (rs-ibuf rs))
         (code (or implied-code (read-element-type-code rs)))
         (n (read-varint ib)))
    (unless (raw-element-code-p code)
      (restore-invalid rs "a specialized vector of element type t or a character type"
                       "a raw element type code"))
    (check-payload-count rs code n "the payload bytes of a specialized vector")
    (charge rs (+ 16 (payload-bytes code n)))
    (let ((v (make-specialized-vector code n)))
      (unless (= code +element-type-nil+)
        (read-payload rs v code n))
      (register rs v))))

;;; Every other array -------------------------------------------------------

(defun array-flags (a)
  (logior (if (array-has-fill-pointer-p a) +array-fill-pointer+ 0)
          ;; on SBCL ADJUSTABLE-ARRAY-P, true of every array not simple
          (if (format-adjustable-p a) +array-adjustable+ 0)
          (if (array-displacement a) +array-displaced+ 0)))

(defun general-t-array-p (a)
  "True for the arrays whose contents are arbitrary objects (containers)."
  (and (eq (array-element-type a) t) (not (array-displacement a))))

(defun write-array-header (ss a)
  "Flags, element type, rank, dimensions, fill pointer and, for a displaced
array, the array it is displaced to and the offset."
  (let ((ob (ss-obuf ss)) (code (element-type-code a)))
    (write-u8 ob +tag-array+)
    (write-u8 ob (array-flags a))
    (write-u8 ob code)
    (write-varint ob (array-rank a))
    (dolist (d (array-dimensions a)) (write-varint ob d))
    (when (array-has-fill-pointer-p a) (write-varint ob (fill-pointer a)))
    (multiple-value-bind (target offset) (array-displacement a)
      (when target
        (write-displaced-target ss target)
        (write-varint ob offset)))
    nil))

(defun write-array-contents (ss a)
  "The elements of a non-displaced array, in row-major order."
  (let ((ob (ss-obuf ss))
        (storage (array-storage a))
        (n (array-total-size a))
        (code (element-type-code a)))
    (cond ((= code +element-type-t+) (write-simple-vector-contents ss storage n))
          ((= code +element-type-character+) (write-utf8-chars ob storage 0 n))
          ((= code +element-type-base-char+)
           (with-pinned-objects (storage)
             (write-octets-from-address ob (pointer-address (vector-pointer storage)) n)))
          ((= code +element-type-nil+))
          (t (note-payload ob code n)
             (write-payload ob storage code n)))))

(defun write-general-array (ss a)
  "An array that is neither a simple vector nor a T array with contents."
  (write-array-header ss a)
  (unless (array-displacement a)
    (write-array-contents ss a)))

;;; Reading: the header yields the array (allocated, or displaced) and the
;;; element type code, which FILL-ARRAY needs.

(defun read-dimensions (rs)
  (let* ((ib (rs-ibuf rs))
         (rank (read-varint ib)))
    (unless (< rank array-rank-limit)
      (restore-invalid rs (format nil "array rank ~d" rank)
                       (format nil "a rank below ~d" array-rank-limit)))
    (let ((dims (loop repeat rank collect (read-varint ib)))
          (total 1))
      (dolist (d dims)
        (unless (< d array-dimension-limit)
          (restore-invalid rs (format nil "array dimension ~d" d) "a valid dimension"))
        (setf total (* total d))
        (unless (< total array-total-size-limit)
          (restore-invalid rs "array total size too large" "a valid array size")))
      (values dims total))))

(defun read-array-header (rs)
  "Read an ARRAY header; return the array and its element type code."
  (let* ((ib (rs-ibuf rs))
         (flags (read-u8 ib))
         (code (read-element-type-code rs)))
    (unless (< flags 8)
      (restore-invalid rs (format nil "array flags #x~x" flags) "flags below 8"))
    (multiple-value-bind (dims total) (read-dimensions rs)
      (let ((fill-pointer (when (logtest flags +array-fill-pointer+)
                            (let ((fp (read-varint ib)))
                              (unless (and (= (length dims) 1) (<= fp total))
                                (restore-invalid rs (format nil "fill pointer ~d" fp)
                                                 "a fill pointer within a vector"))
                              fp)))
            (adjustable (logtest flags +array-adjustable+))
            (type (element-type-of-code code)))
        (if (logtest flags +array-displaced+)
            (values (read-displaced-array rs dims total type fill-pointer adjustable)
                    code)
            (progn
              (if (raw-element-code-p code)
                  (check-payload-count rs code total "the payload bytes of an array")
                  (check-count ib total 1 "an array"))
              (charge rs (+ 64 (storage-bytes code total)))
              (values (make-array dims :element-type type :fill-pointer fill-pointer
                                       :adjustable adjustable)
                      code)))))))

(defun read-displaced-array (rs dims total type fill-pointer adjustable)
  (let* ((target (read-object rs))
         (offset (read-varint (rs-ibuf rs))))
    (unless (and (arrayp target)
                 (or (equal (array-element-type target) (upgraded-array-element-type type))
                     ;; ABCL's array displaced to an (unsigned-byte 16)
                     ;; vector says T, but the format names its target's
                     (equal (array-element-type-name target) type))
                 (<= (+ offset total) (array-total-size target)))
      (restore-invalid rs "an array displaced to something it cannot fit in"
                       "an array of the same element type, large enough"))
    (make-array dims :element-type type :fill-pointer fill-pointer
                     :adjustable adjustable
                     :displaced-to target :displaced-index-offset offset)))

(defun fill-array (rs a code)
  "Read the contents of the freshly made, non-displaced array A."
  (let ((storage (array-storage a))
        (n (array-total-size a)))
    (cond ((= code +element-type-t+) (fill-elements rs storage n))
          ((= code +element-type-character+) (read-utf8-into (rs-ibuf rs) storage n))
          ((= code +element-type-base-char+) (read-base-chars-into rs storage 0 n))
          ((= code +element-type-nil+))
          (t (read-payload rs storage code n)))
    (store-array-storage a storage)     ; on SBCL nothing: STORAGE is A's own
    a))
