;;;; Lists written in one walk (in-memory outputs) against lists written in
;;;; two walks (streams): the bytes must be the same on every kind of place,
;;;; wherever a window ends, at every length where the header grows.

(in-package #:binstore-tests)

(def-suite list-output :in all
  :description "One-walk list writing: same bytes as two walks, on every output.")
(in-suite list-output)

(defun stream-bytes (data &rest options)
  "DATA stored through a stream, where lists are written in two walks."
  (let ((out (make-instance 'octet-output-stream)))
    (apply #'binstore:store out data options)
    (coerce (stream-octets out) '(simple-array (unsigned-byte 8) (*)))))

(defun vector-bytes (data capacity &rest options)
  "DATA stored into a fill-pointer vector of CAPACITY bytes (it spills into
an output region when that is too small)."
  (let ((vector (make-array capacity :element-type '(unsigned-byte 8)
                                     :fill-pointer 0 :adjustable t)))
    (apply #'binstore:store vector data options)
    (coerce vector '(simple-array (unsigned-byte 8) (*)))))

#+sbcl ; raw memory (a SAP) is SBCL's
(defun sap-bytes (data size &rest options)
  (call-with-foreign-octets
   size
   (lambda (sap)
     (sap-octets sap (apply #'binstore:store-to-sap sap size data options)))))

(defun check-one-walk-bytes (data &rest options)
  "Every in-memory place writes exactly the stream's bytes for DATA, which
round-trip; vectors too small for them spill at several points."
  (let* ((expected (apply #'stream-bytes data options))
         (n (length expected)))
    (is (equalp expected (apply #'binstore:store nil data options)))
    #+sbcl
    (is (equalp expected (apply #'sap-bytes data (+ n 16) options)))
    (is (equalp expected (apply #'vector-bytes data (+ n 16) options)))
    ;; spill points: at once, early, mid-way, in the last bytes
    (dolist (capacity (remove-duplicates (list 1 3 (floor n 3) (floor n 2) (- n 2) n)))
      (is (equalp expected (apply #'vector-bytes data (max 1 capacity) options))
          "spilling after ~d bytes changed the output" capacity))
    (check-same data (binstore:restore expected))))

(defparameter *header-lengths* '(2 3 127 128 129 16383 16384 16385)
  "Run lengths on both sides of each change of the varint's length.")

(defun int64-value (i)
  "An integer that needs the 8-byte form."
  (+ (expt 2 40) i))

(test (one-walk-run-lengths :fixture format-2-defaults)
  (dolist (n *header-lengths*)
    (check-one-walk-bytes (loop for i below n collect (mod i 100)))
    (check-one-walk-bytes (loop for i below n collect (int64-value i)))
    (check-one-walk-bytes (loop for i below n collect (mod i 100))
                          :track-references t)))

(test (one-walk-four-byte-length :fixture format-2-defaults)
  ;; 2^21 conses: the length needs 4 bytes, and the gap widens to it with
  ;; the last car (so the header is moved into place at the end); one more
  ;; cons, and the gap widens before that car is written
  (dolist (n (list (expt 2 21) (1+ (expt 2 21))))
    (let ((data (make-list n :initial-element 7)))
      (is (equalp (stream-bytes data) (binstore:store nil data)) "~d conses" n))))

(test (one-walk-packed-integers-unpacked :fixture format-2-defaults)
  ;; cars written packed until one needs its tag after all
  (dolist (n '(2 3 200 20000))
    (check-one-walk-bytes (append (loop for i below (1- n) collect (int64-value i)) '(5)))
    (check-one-walk-bytes (append (loop for i below (1- n) collect (int64-value i)) '("x")))
    (check-one-walk-bytes (list* (int64-value 0) (int64-value 1)
                                 (loop for i below n collect (mod i 7))))
    ;; a dotted tail: an INT64-LIST is always proper
    (check-one-walk-bytes (let ((l (loop for i below n collect (int64-value i))))
                            (setf (cdr (last l)) 99)
                            l))))

(test (one-walk-nested-and-dotted :fixture format-2-defaults)
  (check-one-walk-bytes (loop for i below 3
                              collect (loop for j below (+ 126 i) collect (int64-value j))))
  (check-one-walk-bytes (loop for i below 40 collect (make-list (* 100 i) :initial-element i)))
  (check-one-walk-bytes (list* 1 2 (make-list 300 :initial-element "s")))
  (check-one-walk-bytes (let ((l (make-list 500 :initial-element 1.5f0)))
                          (setf (cdr (last l)) "tail")
                          l))
  ;; shared strings among the cars take references
  (let ((s "shared"))
    (check-one-walk-bytes (list* 1 (make-list 400 :initial-element s))
                          :track-references t)))

(defun mixed-number (i)
  "A fresh object of the I-th of thirteen kinds: numbers the block writers
take, and kinds they leave to the general writer."
  (case (mod (* i 7) 13)
    (0 (- (mod i 33) 16)) (1 (- -300 i)) (2 (+ 70000 i)) (3 (int64-value i))
    (4 (float i 1f0)) (5 (float i 1d0)) (6 (complex (float i 1d0) -2d0))
    (7 (complex 1f0 (float i 1f0))) (8 (format nil "s~d" i)) (9 (/ 3 (+ 4 (* 2 i))))
    (10 nil) (11 (+ (expt 2 70) i)) (t (- (float i 1d0)))))

(test (numbers-in-blocks :fixture format-2-defaults)
  ;; in lists (one walk and two) and vectors, with and without reference
  ;; tracking (which takes doubles and complexes out of the blocks),
  ;; wherever a window ends
  (dolist (n '(2 13 200 3000))
    (let ((data (loop for i below n collect (mixed-number i))))
      (dolist (tracking '(nil t))
        (check-one-walk-bytes data :track-references tracking)
        (check-one-walk-bytes (coerce data 'simple-vector) :track-references tracking)
        (check-one-walk-bytes (list* 1.5f0 (float n 1d0) data) :track-references tracking))))
  ;; a double written twice keeps its identity when references are tracked
  (let* ((d (+ 0.5d0 (random 1d0)))
         (back (binstore:restore (binstore:store nil (list 1 d 2 d)))))
    (is (eq (second back) (fourth back)))))

(test (boxed-numbers-at-stream-window-ends :fixture format-2-defaults)
  ;; Through a stream, lists go in two walks and the window is a staging
  ;; buffer: runs of doubles and complexes, tracked or not, meet its end at
  ;; every offset, where they take an exact reservation (this once hung).
  ;; One double is shared, so tracked runs hold references too.
  (let ((shared 0.25d0))
    (dolist (make (list (lambda (i) (float i 1d0))
                        (lambda (i) (complex (float i 1d0) 1d0))
                        (lambda (i) (complex 1f0 (float i 1f0)))))
      (dotimes (prefix 17)
        (let ((data (append (make-list prefix :initial-element 7)
                            (loop for i below 9000
                                  collect (if (zerop (mod i 1000)) shared (funcall make i))))))
          (dolist (tracking '(nil t))
            (dolist (shape (list data (coerce data 'simple-vector)))
              (let ((bytes (handler-case
                               (with-timeout (20)
                                 (stream-bytes shape :track-references tracking))
                             (test-timeout () nil))))
                (is (equalp bytes (binstore:store nil shape :track-references tracking))
                    "~a, ~d fixnums first, tracking ~a: ~:[no bytes (timed out)~;different bytes~]"
                    (type-of (elt shape prefix)) prefix tracking bytes)
                (when bytes
                  (let ((back (binstore:restore bytes)))
                    (if tracking
                        (progn (check-same shape back)
                               (is (eq (elt back prefix) (elt back (+ prefix 1000)))))
                        ;; without tracking the shared double comes back as copies
                        (is (equalp shape back)))))))))))))

(test (character-strings-at-window-ends :fixture format-2-defaults)
  ;; strings of 1- to 4-byte characters on both sides of the short form's
  ;; 127 characters, written straight into the window or through the
  ;; general writer wherever the window ends
  (let ((chars (list #\a (code-char #xE9) (code-char #x3B1) (code-char #x20AC)
                     (code-char #x1F600))))
    (check-one-walk-bytes
     (loop for n in '(0 1 2 31 126 127 128 300)
           append (loop for c in chars
                        collect (make-string n :initial-element c)
                        collect (let ((s (make-string n :initial-element #\b)))
                                  (when (plusp n) (setf (char s (floor n 2)) c))
                                  s))))))

(test (one-walk-circular-lists :fixture format-2-defaults)
  ;; each kind of number the block writers take, tracked or not, packed
  (dolist (place (list nil (make-array 10 :element-type '(unsigned-byte 8)
                                          :fill-pointer 0 :adjustable t)))
    (dolist (shape '((0 . 1) (0 . 2) (10 . 1) (3 . 1000) (1000 . 77)))
      (dolist (element (list 1 1.5f0 2.5d0 #c(1d0 2d0) (int64-value 7)))
        (dolist (track '(nil t))
          (destructuring-bind (prefix . cycle) shape
            (let* ((loop-part (make-list cycle :initial-element element))
                   (list (append (make-list prefix :initial-element 2) loop-part)))
              (setf (cdr (last loop-part)) loop-part)
              (signals binstore:store-error
                (binstore:store place list :track-references track)))))))))

(test (one-walk-max-to-write :fixture format-2-defaults)
  ;; the limit also holds when only the header's growth crosses it
  (let* ((data (make-list 1000 :initial-element 1))
         (size (length (binstore:store nil data))))
    (is (= size (length (binstore:store nil data :max-to-write size))))
    (signals binstore:limit-exceeded (binstore:store nil data :max-to-write (1- size)))
    (signals binstore:limit-exceeded
      (binstore:store (make-array 4 :element-type '(unsigned-byte 8)
                                    :fill-pointer 0 :adjustable t)
                      data :max-to-write (1- size)))))

#+sbcl ; raw memory (a SAP) is SBCL's
(test (one-walk-sap-out-of-space :fixture format-2-defaults)
  ;; raw memory that ends inside a list: OUT-OF-SPACE, then USE-LARGER-SPACE
  ;; carries on with the held bytes where they were
  (let* ((data (loop for i below 5000 collect (int64-value i)))
         (expected (stream-bytes data)))
    (call-with-foreign-octets
     64
     (lambda (small)
       (call-with-foreign-octets
        (+ 64 (length expected))
        (lambda (large)
          (let ((written (handler-bind ((binstore:out-of-space
                                          (lambda (c)
                                            (binstore:use-larger-space
                                             large (+ 64 (length expected)) c))))
                           (binstore:store-to-sap small 64 data))))
            (is (= written (length expected)))
            (is (every (lambda (byte i) (= byte (sb-sys:sap-ref-8 large i)))
                       expected (loop for i below written collect i))))))))))

;;; Short lists of leaves (WRITE-SHORT-LEAF-LIST): checked against bytes
;;; built here from the format's rules and each leaf stored alone.

(defun stored-alone (x options)
  "The bytes of X stored alone with OPTIONS, without the tracking record
that may precede them (the bytes before NIL's own tag)."
  (let ((prefix (length (apply #'binstore:store nil nil options))))
    (subseq (apply #'binstore:store nil x options) (1- prefix))))

(defun expected-list-bytes (list options)
  "The bytes the format gives LIST (a run ending in NIL or another leaf),
stored alone with OPTIONS: the header, then each car and the tail as if
stored alone; a proper list of two or more 8-byte integers is packed."
  (let* ((prefix (butlast (coerce (apply #'binstore:store nil nil options) 'list)))
         (cars (loop for c on list collect (car c)))
         (tail (cdr (last list)))
         (n (length cars))
         (bytes (append prefix
                        (cond ((and (null tail) (> n 1)
                                    (every (lambda (x) (typep x '(and (signed-byte 63)
                                                                      (not (signed-byte 32)))))
                                           cars))
                               (append (list* binstore::+tag-int64-list+ (varint-octets n))
                                       (loop for x in cars
                                             append (loop for i below 8
                                                          collect (ldb (byte 8 (* 8 i)) x)))))
                              (t
                               (append (cond ((null tail) (list* binstore::+tag-list+ (varint-octets n)))
                                             ((= n 1) (list binstore::+tag-cons+))
                                             (t (list* binstore::+tag-dotted-list+ (varint-octets n))))
                                       (loop for x in cars
                                             append (coerce (stored-alone x options) 'list))
                                       (and tail (coerce (stored-alone tail options) 'list))))))))
    (coerce bytes '(simple-array (unsigned-byte 8) (*)))))

(defun short-list-leaf (state)
  "A fresh leaf of a random kind: immediates of every width, boxed floats,
and a character and a string (which the short-list writer leaves to the
general one)."
  (let ((k (random 16 state)))
    (case k
      (0 nil) (1 t)
      (2 (- (random 160 state) 16))                ; in the tag
      (3 (random 256 state)) (4 (- -1 (random 256 state)))
      (5 (- (random 65536 state) 32768))
      (6 (- (random (expt 2 32) state) (expt 2 31)))
      (7 (+ (expt 2 40) (random 1000 state)))      ; 8 bytes
      (8 (- (expt 2 62) (random 1000 state)))      ; 8 bytes, near the fixnum limit
      (9 (float (random 100 state) 1f0))
      (10 (float (random 100 state) 1d0))
      (11 (complex (float (random 9 state) 1d0) 1d0))
      (12 (complex 1f0 (float (random 9 state) 1f0)))
      (13 (code-char (+ 32 (random 2000 state))))
      (14 (format nil "s~d" (random 100 state)))
      (t (+ (expt 2 40) (random 1000 state))))))

(defun check-depth-limit-alike (general short wrap)
  "Check that GENERAL (a container the general writer takes) and SHORT (one
a short-container writer takes), each inside 0 to 3 levels of WRAP, are
stored or refused alike under max-depth 0 to 4."
  (dolist (depth '(0 1 2 3))
    (dolist (max '(0 1 2 3 4))
      (flet ((outcome (data)
               (dotimes (i depth)
                 (setf data (funcall wrap data)))
               (handler-case (progn (binstore:store nil data :max-depth max) :stored)
                 (binstore:limit-exceeded () :refused))))
        (is (eq (outcome general) (outcome short))
            "depth ~d, max-depth ~d" depth max)))))

(test (short-lists-of-leaves-bytes :fixture format-2-defaults)
  "Runs of up to eight conses and one more, proper, dotted and single
conses, of leaves of every kind, in each mode: the exact bytes the format
gives them, on every place, and a round trip."
  (let ((state (seeded-random-state 41)))
    (dolist (options '((:track-references nil) ()))
      (loop for n from 1 to 9
            do (dotimes (k 60)
                 (let* ((int64 (zerop (mod k 7)))  ; all 8-byte integers: packed
                        (cars (loop repeat n
                                    collect (if int64
                                                (+ (expt 2 40) (random 9 state))
                                                (short-list-leaf state))))
                        (list (if (and (oddp k) (not int64))
                                  (let ((l (copy-list cars)))
                                    (setf (cdr (last l)) (loop for x = (short-list-leaf state)
                                                              when x return x))
                                    l)
                                  cars)))
                   (is (equalp (expected-list-bytes list options)
                               (apply #'binstore:store nil list options))
                       "~s ~s" list options)
                   ;; without tracking, shared parts would come back apart
                   (if (getf options :track-references t)
                       (check-one-walk-bytes (list list (vector list) list))
                       (check-one-walk-bytes (list list) :track-references nil))))))))

(test (fixnum-runs-bytes :fixture format-2-defaults)
  "Long runs whose cars are mostly fixnums of every width (PUT-FIXNUM-CARS
takes a run of them at the start of each block, the general loops the rest),
broken by other leaves and by cars no block writer takes, proper and
dotted: the exact bytes the format gives them, on every place, spilling at
several points."
  (let ((state (seeded-random-state 47)))
    (dolist (options '((:track-references nil) ()))
      (dolist (n '(9 10 17 64 200 700))
        (dotimes (k 6)
          (let* ((cars (loop repeat n
                             collect (if (< (random 8 state) (min k 6))
                                         (short-list-leaf state)
                                         ;; a fixnum of every width
                                         (elt (list (random 144 state) (+ 144 (random 112 state))
                                                    (- -17 (random 200 state))
                                                    (- (random 65536 state) 32768)
                                                    (- (expt 2 31) (random 9 state))
                                                    (+ (expt 2 40) (random 9 state))
                                                    most-negative-fixnum)
                                              (random 7 state)))))
                 (list (if (oddp k)
                           (let ((l (copy-list cars)))
                             (setf (cdr (last l)) (random 100 state))
                             l)
                           cars)))
            (is (equalp (expected-list-bytes list options)
                        (apply #'binstore:store nil list options))
                "~s ~s" list options)
            (apply #'check-one-walk-bytes list options)))))))

(test (short-lists-keep-limits-and-cycles :fixture format-2-defaults)
  "A short list of leaves is one level deeper than what holds it, as any
list: max-depth refuses it where it refuses a list the short-list writer
leaves alone; a short circular list is refused without shared list
structures and written with them."
  (check-depth-limit-alike (list 1 #\a) (list 1 2) #'vector)
  (let ((ring (list 1 2 3)))
    (setf (cdr (last ring)) ring)
    (is (typep (handler-case (progn (binstore:store nil (list ring)) nil)
                 (error (c) c))
               'binstore:store-error))
    (let ((back (binstore:restore (binstore:store nil (list ring)
                                                  :support-shared-list-structures t))))
      (is (eq (first back) (cdddr (first back))))
      ;; (not SUBSEQ: ECL's takes the length of the list first)
      (is (equal '(1 2 3) (loop for x in (first back) repeat 3 collect x))))))

(test (short-vectors-of-leaves-bytes :fixture format-2-defaults)
  "Simple vectors of up to eight elements and one more, of leaves of every
kind (WRITE-SHORT-LEAF-VECTOR takes those of immediates, and of boxed
floats without tracking), in each mode: the bytes the format gives them, a
reference for a vector written before, and the depth limit of any vector."
  (let ((state (seeded-random-state 43)))
    (dolist (options '((:track-references nil) ()))
      (loop for n from 0 to 9
            do (dotimes (k 40)
                 (let* ((elements (loop repeat n collect (short-list-leaf state)))
                        (v (coerce elements 'simple-vector))
                        (expected (concatenate '(vector (unsigned-byte 8))
                                               (butlast (coerce (apply #'binstore:store nil nil options)
                                                                'list))
                                               (list binstore::+tag-simple-vector+ n)
                                               (loop for x in elements
                                                     append (coerce (stored-alone x options) 'list)))))
                   (is (equalp expected (apply #'binstore:store nil v options))
                       "~s ~s" v options)
                   (if (getf options :track-references t)
                       (let ((back (binstore:restore (binstore:store nil (list v (vector v) v)))))
                         (check-same (list v (vector v) v) back)
                         (is (eq (first back) (third back)))
                         (is (eq (first back) (aref (second back) 0))))
                       (check-same v (binstore:restore (apply #'binstore:store nil v options))
                                   :identity nil)))))))
  (check-depth-limit-alike (vector 1 #\a) (vector 1 2) #'list))

;;; With shared list structures, a run of integers needing the 8-byte form
;;; is written in one walk that claims its conses +CLAIM-BLOCK+ at a time
;;; ahead of the cars (other runs are written in two walks); a car
;;; that may hold conses first claims the rest of the run, so the ids stay
;;; those the decoder gives.  The stream's two walks are the reference.

(defun check-tracked-one-walk (data)
  "CHECK-ONE-WALK-BYTES with shared list structures, and every cons of DATA
restored as its own, shared where DATA shares it."
  (check-one-walk-bytes data :support-shared-list-structures t)
  (check-same data (binstore:restore (binstore:store nil data :support-shared-list-structures t))
              :conses t))

(defparameter *claim-lengths*
  (let ((b binstore::+claim-block+))
    (list 2 (1- b) b (1+ b) (1- (* 2 b)) (* 2 b) (1+ (* 2 b)) 5000 20000))
  "Run lengths on both sides of the first claims' ends.")

(test (tracked-one-walk-run-lengths :fixture format-2-defaults)
  (dolist (n *claim-lengths*)
    (check-tracked-one-walk (loop for i below n collect (mod i 100)))
    (check-tracked-one-walk (loop for i below n collect (int64-value i)))
    (check-tracked-one-walk (loop for i below n collect (float i 1d0)))
    (check-tracked-one-walk (loop for i below n collect (mixed-number i)))
    ;; packed integers, then a car or a tail that unpacks them
    (check-tracked-one-walk (append (loop for i below n collect (int64-value i)) '(5)))
    (check-tracked-one-walk (list* (int64-value 0) (int64-value 1)
                                   (loop for i below n collect (int64-value i))))))

(test (tracked-one-walk-shared-tails :fixture format-2-defaults)
  ;; a run that ends before conses written already, at and about the claim
  ;; blocks' ends: its tail is a reference
  (let ((b binstore::+claim-block+))
    (dolist (prefix (list 1 2 (1- b) b (1+ b) (* 2 b) 3000))
      (dolist (element (list 7 (int64-value 3) 2.5d0))
        (let* ((shared (loop for i below 50 collect i))
               (run (append (make-list prefix :initial-element element) shared)))
          (check-tracked-one-walk (list shared run))
          ;; the shared part written first from within the run's own cars
          (check-tracked-one-walk (list run (nthcdr (floor prefix 2) run))))))))

(test (tracked-one-walk-cars-holding-the-run :fixture format-2-defaults)
  ;; a car that holds conses of its own run further on, met in any claim
  ;; block: the rest of the run is claimed before that car is written, so
  ;; the car's conses are references into the run
  (let ((b binstore::+claim-block+))
    (dolist (n (list (+ b 10) (* 3 b)))
      (dolist (at (list 1 (1- b) b (+ b 5) (- n 3)))
        (dolist (wrap (list #'identity #'vector
                            (lambda (x) (list :in x))
                            (lambda (x) (let ((h (make-hash-table))) (setf (gethash 1 h) x) h))))
          (let* ((run (loop for i below n collect (int64-value i)))
                 (target (nthcdr (min (1- n) (+ at 2)) run)))
            (setf (nth at run) (funcall wrap target))
            (check-tracked-one-walk run)))))
    ;; and a cycle back into the run's middle, from a car and from its end
    (let ((run (loop for i below (* 3 b) collect (int64-value i))))
      (setf (nth (+ b 7) run) (nthcdr 5 run))
      (setf (cdr (last run)) (nthcdr (* 2 b) run))
      (let ((back (binstore:restore (binstore:store nil run :support-shared-list-structures t))))
        (is (eq (nth (+ b 7) back) (nthcdr 5 back)))
        (is (eq (nthcdr (* 3 b) back) (nthcdr (* 2 b) back)))))))

;;; Short lists of immediate leaves with tracked conses are written by
;;; WRITE-SHORT-LEAF-LIST, which claims their conses itself: every cons
;;; must come back as its own, wherever it is met again.

(defun lists-round-trip (data)
  "DATA stored with shared list structures, to a vector and through a
stream (the same bytes), restored; checked as CHECK-TRACKED-ONE-WALK does."
  (check-tracked-one-walk data)
  (binstore:restore (binstore:store nil data :support-shared-list-structures t)))

(test (tracked-short-lists :fixture format-2-defaults)
  ;; every length the short writer takes and one more, every kind of
  ;; element it takes, proper and dotted
  (dolist (n '(1 2 3 7 8 9))
    (dolist (element (list 5 -7 1.5f0 nil t (expt 2 40)))
      (let ((proper (make-list n :initial-element element))
            (dotted (let ((l (make-list n :initial-element element)))
                      (setf (cdr (last l)) 3)
                      l)))
        (lists-round-trip (list proper dotted proper (cdr dotted))))))
  ;; symbols, which it leaves to the general writer with tracked conses
  (lists-round-trip (list (list :k 1) (list :k 2) (cons 'sym 3) (list 4 'sym)))
  ;; met again: whole, from within, and as the tail of a later run
  (let* ((pair (cons 1 2))
         (short (list 1 2 3 4))
         (back (lists-round-trip (list pair short pair (cddr short) (list* 8 9 (cddr short))))))
    (is (eq (first back) (third back)))
    (is (eq (fourth back) (cddr (second back))))
    (is (eq (fourth back) (cddr (fifth back)))))
  ;; a short run whose third cons was written before: the run ends there
  (let* ((tail (list 3 4))
         (run (list* 1 2 tail))
         (back (lists-round-trip (list tail run))))
    (is (eq (first back) (cddr (second back)))))
  ;; cycles, which the short writer leaves to the general one
  (let ((two (list 1 2))
        (one (list 1)))
    (setf (cddr two) two
          (cdr one) one)
    (let ((back (binstore:restore (binstore:store nil (list two one)
                                                  :support-shared-list-structures t))))
      (is (eq (first back) (cddr (first back))))
      (is (eq (second back) (cdr (second back)))))))
