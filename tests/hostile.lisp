;;;; Hostile and damaged input: every byte sequence restores to data or
;;;; signals a BINSTORE-ERROR (invalid-input, limit-exceeded, or one of the
;;;; missing-* conditions, whose restarts are exercised here too) -- never a
;;;; raw Lisp error, heap or stack exhaustion, or a hang.

(in-package #:binstore-tests)

(def-suite hostile :in all
  :description "Truncated, malformed and malicious input; limits; restarts.")
(in-suite hostile)

;;; ------------------------------------------------------------------
;;; Helpers (prefixed: the test package is shared by every test file)

(defun hostile-octets (&rest parts)
  "A simple octet vector of PARTS: octets, or lists / vectors of octets."
  ;; filled by hand: ABCL's COERCE and MAP of a list take quadratic time
  (let* ((octets (make-array (loop for part in parts sum (if (integerp part) 1 (length part)))
                             :element-type '(unsigned-byte 8)))
         (i 0))
    (flet ((put (b) (setf (aref octets i) b i (1+ i))))
      (dolist (part parts octets)
        (etypecase part
          (integer (put part))
          (list (dolist (b part) (put b)))
          (vector (loop for b across part do (put b))))))))

(defun hostile-repeat (pattern count tail)
  "An octet vector: PATTERN (a list of octets) COUNT times, then TAIL."
  (let* ((n (length pattern))
         (v (make-array (+ (* n count) (length tail)) :element-type '(unsigned-byte 8)))
         (p 0))
    (declare (type (simple-array (unsigned-byte 8) (*)) v) (type fixnum p))
    (dotimes (i count)
      (dolist (b pattern)
        (setf (aref v p) b)
        (incf p)))
    (replace v tail :start1 p)
    v))

(defun hostile-condition (thunk &key (timeout 60))
  "Call THUNK under a TIMEOUT-second wall-clock limit.  Return the serious
condition it signalled (a timeout included), or NIL when it returned.  The
limit is a guard against hangs only, generous enough that a loaded machine
never meets it: no test asserts how fast anything is (that would depend on
the machine and its load); bounds on the work hostile input may cost are
counted in bytes consed or read (HOSTILE-COST)."
  (handler-case (progn (with-timeout (timeout) (funcall thunk)) nil)
    (serious-condition (c) c)))

(defun hostile-restore-condition (octets &rest keys)
  "The condition RESTORE signals on OCTETS with KEYS, or NIL."
  (hostile-condition (lambda () (apply #'binstore:restore octets keys))))

(defun hostile-describe (c)
  (if c
      (format nil "~s: ~a" (type-of c) (or (ignore-errors (princ-to-string c)) "?"))
      "no condition (it returned)"))

(defun hostile-cost (thunk)
  "Call THUNK as HOSTILE-CONDITION does; return the condition, the bytes
allocated meanwhile (SB-EXT:GET-BYTES-CONSED: the same on any machine and
under any load, where a time would not be), and the offset in the input
the condition names (NIL if none): how far the restore read."
  (let ((consed (bytes-consed)))
    (let ((c (hostile-condition thunk)))
      (values c
              (- (bytes-consed) consed)
              (typecase c
                (binstore:restore-error (binstore:restore-error-offset c))
                (binstore:limit-exceeded (binstore:limit-exceeded-offset c)))))))

(defvar *hostile-counter* 0)

(defun hostile-fresh-name (prefix)
  "A package or class name no other test (or earlier run) uses."
  (format nil "BINSTORE-HOSTILE-~a-~d-~d" prefix (get-universal-time)
          (incf *hostile-counter*)))

(defun hostile-nest (depth)
  "A list nested DEPTH levels deep in the car: (((... nil)))."
  (let ((x nil))
    (dotimes (i depth x)
      (setf x (list x)))))

(defun hostile-depth (x)
  "How many conses deep X nests through its cars."
  (loop for depth from 0
        while (consp x)
        do (setf x (car x))
        finally (return depth)))

;;; ------------------------------------------------------------------
;;; Truncation

(defun hostile-truncation-samples ()
  "Valid files, each a single object stored without an end marker, so no
strict non-empty prefix of them is a complete input."
  (list (binstore:store nil (list 1 -300 70000 (expt 2 70) 1/3 2.5d0 #c(1 2)))
        (binstore:store nil (list "héllo" (coerce "base" 'simple-base-string) #\λ
                                  :key 'car (make-symbol "U")))
        (binstore:store nil (let ((s "shared")) (vector s s #*1011 (make-array '(2 2) :initial-element 7))))
        (binstore:store nil (let ((h (make-hash-table :test 'equal)))
                              (setf (gethash "a" h) '(1 . 2) (gethash "b" h) h)
                              h))
        (binstore:store nil (list #p"/tmp/x.y" (make-array 5 :element-type 'double-float
                                                            :initial-element 1d0))
                        :output-magic-number t)
        (binstore:store nil (hostile-nest 1200))
        ;; runs of single-floats, doubles, complex doubles and references,
        ;; which the decoder reads in loops of their own
        (binstore:store nil (let ((s "s"))
                              (list (list 1.5f0 -2.5f0 3f0 4f0 5 6 1d0 2d0 3d0 #c(1d0 2d0) 4d0)
                                    (vector 1.5f0 -2.5f0 3f0 7 8f0 1d0 2d0 #c(3d0 -1d0) #c(0d0 1d0))
                                    s (list s s 1 s) (vector s s))))))

(test (hostile-truncation-everywhere :fixture format-2-defaults)
  "Every strict prefix of a valid file signals INVALID-INPUT (usually its
subtype TRUNCATED-INPUT) with an offset inside the prefix, never anything
else, and never returns."
  (dolist (file (hostile-truncation-samples))
    (let ((bad '()))
      (loop for n from 1 below (length file)
            for c = (hostile-restore-condition (subseq file 0 n))
            unless (and (typep c 'binstore:invalid-input)
                        (typep (binstore:restore-error-offset c) `(integer 0 ,n)))
              do (push (format nil "prefix ~d/~d: ~a, offset ~s" n (length file)
                               (hostile-describe c)
                               (and (typep c 'binstore:restore-error)
                                    (binstore:restore-error-offset c)))
                       bad))
      (is (null bad) "~d bad prefixes, first ones: ~{~a~^; ~}"
          (length bad) (subseq (reverse bad) 0 (min 3 (length bad)))))))

(test (hostile-truncation-separate-objects :fixture format-2-defaults)
  "A record of separately stored objects cut anywhere signals
TRUNCATED-INPUT: the record says how many objects it holds.  Cut before its
first byte, there is no record: END-OF-DATA."
  (let* ((objects (list 1 "two" '(3 3) #(4) 5.0d0))
         (file (binstore:store nil objects :as-separate-objects t)))
    (is (typep (hostile-restore-condition (subseq file 0 0)) 'binstore:end-of-data))
    (loop for n from 1 below (length file)
          for c = (hostile-restore-condition (subseq file 0 n))
          do (unless (typep c 'binstore:truncated-input)
               (fail "prefix ~d: ~a" n (hostile-describe c))))
    (is (equalp objects (multiple-value-list (binstore:restore file))))))

(test (hostile-truncated-string-is-truncated-input :fixture format-2-defaults)
  (let* ((file (binstore:store nil "hello world"))
         (c (hostile-restore-condition (subseq file 0 (1- (length file))))))
    (is (typep c 'binstore:truncated-input) "~a" (hostile-describe c))
    (when (typep c 'binstore:truncated-input)
      (is (integerp (binstore:restore-error-offset c))))))

(test (hostile-truncated-file-and-stream :fixture format-2-defaults)
  "Truncation seen through a file (stream source) is still INVALID-INPUT."
  (let* ((file (binstore:store nil (list "a long enough string" (hostile-nest 30) 12345)))
         (path (merge-pathnames (format nil "binstore-hostile-~d.bin" (random 1000000))
                                (uiop:temporary-directory))))
    (unwind-protect
         (progn
           (with-open-file (s path :direction :output :element-type '(unsigned-byte 8)
                                   :if-exists :supersede)
             (write-sequence file s :end (floor (length file) 2)))
           (let ((c (hostile-restore-condition path)))
             (is (typep c 'binstore:invalid-input) "~a" (hostile-describe c))))
      (when (probe-file path) (delete-file path)))))

;;; ------------------------------------------------------------------
;;; Malformed bytes

(test (hostile-undefined-references :fixture format-2-defaults)
  (dolist (bytes (list (hostile-octets binstore::+tag-ref+ 5) ; nothing has id 5
                       (hostile-octets #x45)          ; small back-reference to id 5
                       (hostile-octets #x02 #x01 #x40)
                       (hostile-octets #x02 #x02 #x12 #x01 #x61 #x41)
                       (hostile-octets binstore::+tag-ref+ (varint-octets (expt 2 40)))
                       (hostile-octets binstore::+tag-fill+ 0 #x71)
                       ;; the loops over runs of references, in a list and in
                       ;; a vector (id 0, its string id 1): undefined ids,
                       ;; small and in a varint, and a varint cut short
                       (hostile-octets #x14 #x02 #x12 #x01 #x61 #x42)
                       (hostile-octets #x02 #x03 #x12 #x01 #x61 #x40 binstore::+tag-ref+ #x01)
                       (hostile-octets #x14 #x03 #x12 #x01 #x61 #x41 binstore::+tag-ref+ #x02)
                       (hostile-octets #x02 #x03 #x12 #x01 #x61 #x40 binstore::+tag-ref+ #x80)
                       (hostile-octets #x14 #x03 #x12 #x01 #x61 #x41 binstore::+tag-ref+ #x80)
                       ;; cons references read from the window (conses
                       ;; tracked): undefined, in a list, a vector and a
                       ;; pair; cut short; and in a stream without cons ids
                       (hostile-octets #x23 #x03 #x02 #x02 #x00 binstore::+tag-cons-ref+ #x02)
                       (hostile-octets #x23 #x03 #x14 #x02 #x00 binstore::+tag-cons-ref+ #x00)
                       (hostile-octets #x23 #x03 #x02 #x02 #x00 #x04 binstore::+tag-cons-ref+ #x00
                                       binstore::+tag-cons-ref+ #x03)
                       (hostile-octets #x23 #x03 #x02 #x02 #x00 #x04 binstore::+tag-cons-ref+ #x05 #x00)
                       (hostile-octets #x23 #x03 #x02 #x02 #x00 binstore::+tag-cons-ref+ #x80)
                       (hostile-octets #x02 #x02 #x00 binstore::+tag-cons-ref+ #x00)
                       ;; a short list read from the window: an undefined
                       ;; reference, cut short, and of length 0
                       (hostile-octets #x02 #x02 #x00 #x02 #x02 #x61 #x45)
                       (hostile-octets #x02 #x02 #x00 #x02 #x03 #x61 #x62)
                       (hostile-octets #x02 #x02 #x00 #x02 #x00)
                       ;; a short vector read from the window: an undefined
                       ;; reference, and cut short
                       (hostile-octets #x02 #x02 #x00 #x14 #x02 #x61 #x45)
                       (hostile-octets #x02 #x02 #x00 #x14 #x03 #x61 #x62)
                       ;; two-byte references: to ids not given, alone, in a
                       ;; list and a vector's runs, and cut after the tag;
                       ;; to conses not made, alone, in a list and a pair
                       (hostile-octets binstore::+tag-short-ref+ #x00)
                       (hostile-octets (+ binstore::+tag-short-ref+ 7) #xFF)
                       (hostile-octets #x02 #x02 #x12 #x01 #x61 binstore::+tag-short-ref+ #x00)
                       (hostile-octets #x14 #x03 #x12 #x01 #x61 #x41 binstore::+tag-short-ref+ #x05)
                       (hostile-octets #x02 #x02 #x12 #x01 #x61 binstore::+tag-short-ref+)
                       (hostile-octets #x23 #x03 binstore::+tag-short-cons-ref+ #x00)
                       (hostile-octets #x23 #x03 #x02 #x02 #x00 binstore::+tag-short-cons-ref+ #x02)
                       (hostile-octets #x23 #x03 #x02 #x02 #x00 #x04 binstore::+tag-short-cons-ref+ #x00
                                       (+ binstore::+tag-short-cons-ref+ 7) #xFF)
                       (hostile-octets #x23 #x03 #x02 #x02 #x00 binstore::+tag-short-cons-ref+)
                       ;; next-refs: before any reference, alone, in a
                       ;; list's and a vector's runs, in a short list and a
                       ;; pair; and past the ids given
                       (hostile-octets binstore::+tag-next-ref+)
                       (hostile-octets #x02 #x02 #x12 #x01 #x61 binstore::+tag-next-ref+)
                       (hostile-octets #x14 #x02 #x12 #x01 #x61 binstore::+tag-next-ref+)
                       (hostile-octets #x02 #x02 #x12 #x01 #x61 #x02 #x02 #x71 binstore::+tag-next-ref+)
                       (hostile-octets #x02 #x02 #x12 #x01 #x61 #x04 #x71 binstore::+tag-next-ref+)
                       (hostile-octets #x02 #x03 #x12 #x01 #x61 #x40 binstore::+tag-next-ref+)
                       (hostile-octets #x14 #x03 #x12 #x01 #x61 #x41 binstore::+tag-next-ref+)
                       (hostile-octets #x02 #x02 #x12 #x01 #x61 #x02 #x02 #x40 binstore::+tag-next-ref+)
                       (hostile-octets #x02 #x02 #x12 #x01 #x61 #x04 #x40 binstore::+tag-next-ref+)))
    (let ((c (hostile-restore-condition bytes)))
      (is (typep c 'binstore:invalid-input) "~s: ~a" bytes (hostile-describe c))))
  ;; the controls: a list whose second element is its first cons, and
  ;; ones whose second is a pair of references to its conses
  (let ((back (binstore:restore (hostile-octets #x23 #x03 #x02 #x02 #x00
                                                binstore::+tag-cons-ref+ #x00))))
    (is (null (first back)))
    (is (eq back (second back))))
  (let ((back (binstore:restore (hostile-octets #x23 #x03 #x02 #x02 #x00 #x04
                                                binstore::+tag-cons-ref+ #x01
                                                binstore::+tag-cons-ref+ #x00))))
    (is (eq (cdr back) (car (second back))))
    (is (eq back (cdr (second back)))))
  (let ((back (binstore:restore (hostile-octets #x23 #x03 #x02 #x02 #x00 #x04
                                                binstore::+tag-cons-ref+ #x00
                                                binstore::+tag-cons-ref+ #x00))))
    (is (eq back (car (second back))))
    (is (eq back (cdr (second back)))))
  ;; a short list whose second element is its own second cons: refused by
  ;; the window, which has not given the list its ids, and read by the
  ;; general path, which has
  (let* ((back (binstore:restore (hostile-octets #x23 #x03 #x02 #x02 #x00 #x02 #x02 #x61
                                                 binstore::+tag-cons-ref+ #x03)))
         (inner (second back)))
    (is (eql -15 (first inner)))           ; #x61, an integer in its tag
    (is (eq (cdr inner) (second inner))))
  ;; a short vector in a vector, whose element is itself: refused by the
  ;; window, which has not given it its id, and read by the general path
  (let* ((back (binstore:restore (hostile-octets #x14 #x02 #x00 #x14 #x01 #x41)))
         (inner (aref back 1)))
    (is (eq inner (aref inner 0))))
  ;; the string is id 0, so #x40 is the same string
  (let ((back (binstore:restore (hostile-octets #x02 #x02 #x12 #x01 #x61 #x40))))
    (is (equal '("a" "a") back))
    (is (eq (first back) (second back))))
  (let ((back (binstore:restore (hostile-octets #x14 #x04 #x12 #x01 #x61 #x41
                                                binstore::+tag-ref+ #x01 #x40))))
    (is (equal "a" (aref back 0)))
    (is (eq (aref back 0) (aref back 1)))
    (is (eq (aref back 0) (aref back 2)))
    (is (eq back (aref back 3)))))

(test (hostile-runs-of-references :fixture format-2-defaults)
  "A list or a simple vector whose elements are a long run of references
(FILL-REF-CARS and FILL-REF-ELEMENTS read them in loops of their own): an
undefined id, small or in a varint, is refused at the reference's offset
and a varint in a redundant form at its own, from a vector and from a
stream whose window ends inside the run; valid ones name their objects."
  ;; the container's tag, and the id of the string "a", its first element
  ;; (a simple vector takes id 0 itself; a list's conses take none)
  (loop for (tag id) in (list (list binstore::+tag-list+ 0) (list binstore::+tag-simple-vector+ 1))
        do (let ((head (append (list tag) (varint-octets 602) (list #x12 #x01 #x61)))
                 (refs (loop for i below 600
                             append (if (evenp i) (list (+ #x40 id)) (list binstore::+tag-ref+ id)))))
             ;; each bad reference, what it is, and where it is refused from its start
             (loop for (bad why at) in (list (list (list (+ #x41 id)) "a small id, undefined" 0)
                                             (list (list binstore::+tag-ref+ (1+ id))
                                                   "an id in a varint, undefined" 0)
                                             (list (list* binstore::+tag-ref+ (varint-octets (expt 2 40)))
                                                   "a huge id" 0)
                                             ;; the varint itself is what is wrong
                                             (list (list binstore::+tag-ref+ #x80 #x00)
                                                   "a redundant varint" 1))
                   do (let ((octets (hostile-octets head refs bad #x40))
                            (offset (+ (length head) (length refs) at)))
                        (dolist (source (list octets (make-instance 'octet-input-stream :octets octets)))
                          (let ((c (hostile-restore-condition source)))
                            (is (typep c 'binstore:invalid-input) "tag ~d, ~a: ~a" tag why
                                (hostile-describe c))
                            (when (typep c 'binstore:invalid-input)
                              (is (eql offset (binstore:restore-error-offset c))
                                  "tag ~d, ~a: offset ~s, not ~d"
                                  tag why (binstore:restore-error-offset c) offset))))))
             ;; the control: the same run with a valid reference where the bad one was
             (let ((octets (hostile-octets head refs (+ #x40 id) (+ #x40 id))))
               (dolist (source (list octets (make-instance 'octet-input-stream :octets octets)))
                 (let ((back (coerce (binstore:restore source) 'list)))
                   (is (= 602 (length back)))
                   (is (equal "a" (first back)))
                   (is (every (lambda (x) (eq x (first back))) back)))))))
  ;; an undefined cons reference, long or short, refused at its tag too
  (dolist (tag (list binstore::+tag-cons-ref+ binstore::+tag-short-cons-ref+))
    (let ((c (hostile-restore-condition
              (hostile-octets #x23 #x03 #x02 #x03 #x00 #x01 tag #x03))))
      (is (typep c 'binstore:invalid-input) "~a" (hostile-describe c))
      (when (typep c 'binstore:invalid-input)
        (is (eql 6 (binstore:restore-error-offset c))))))
  ;; a short-ref to an id not given, after a run of valid ones, refused at
  ;; its tag; the control, the same with a valid one
  (let* ((strings (loop for i below 40 append (list #x12 #x01 (+ #x30 (mod i 10)))))
         (head (append (list binstore::+tag-simple-vector+ 42) strings))
         (bad (hostile-octets head binstore::+tag-short-ref+ #x08 binstore::+tag-short-ref+ #x09))
         (good (hostile-octets head binstore::+tag-short-ref+ #x08 binstore::+tag-short-ref+ #x07)))
    ;; the vector is id 0, its strings ids 1 to 40: #x30 #x08 is id 40
    (let ((c (hostile-restore-condition bad)))
      (is (typep c 'binstore:invalid-input) "~a" (hostile-describe c))
      (when (typep c 'binstore:invalid-input)
        (is (eql (+ (length head) 2) (binstore:restore-error-offset c)))))
    (let ((back (binstore:restore good)))
      (is (eq (aref back 39) (aref back 40)))
      (is (eq (aref back 38) (aref back 41)))))
  ;; a next-ref past the ids given, after a run of valid references (the
  ;; last of them a next-ref), refused at its tag; the control, one fewer
  (let* ((strings (loop for i below 40 append (list #x12 #x01 (+ #x30 (mod i 10)))))
         (next binstore::+tag-next-ref+)
         (bad (hostile-octets binstore::+tag-simple-vector+ 43 strings
                              binstore::+tag-short-ref+ #x07 next next))
         (good (hostile-octets binstore::+tag-simple-vector+ 43 strings
                               binstore::+tag-short-ref+ #x06 next next)))
    ;; ids: the vector 0, its strings 1 to 40; #x30 #x07 is id 39
    (let ((c (hostile-restore-condition bad)))
      (is (typep c 'binstore:invalid-input) "~a" (hostile-describe c))
      (when (typep c 'binstore:invalid-input)
        (is (eql (+ 2 (length strings) 3) (binstore:restore-error-offset c)))))
    (let ((back (binstore:restore good)))
      (is (eq (aref back 37) (aref back 40)))
      (is (eq (aref back 38) (aref back 41)))
      (is (eq (aref back 39) (aref back 42))))))

(test (hostile-unknown-tags :fixture format-2-defaults)
  "Every type tag that src/format/tags.lisp leaves undefined (reserved)."
  (loop for tag from 0 below #x40
        unless (svref binstore::+tag-names+ tag)
          do (let ((c (hostile-restore-condition (hostile-octets tag))))
               (is (typep c 'binstore:invalid-input)
                   "tag #x~2,'0x: ~a" tag (hostile-describe c)))))

(test (hostile-unknown-tag-offset :fixture format-2-defaults)
  "The offset names the offending byte."
  (let ((c (hostile-restore-condition (hostile-octets #x02 #x02 #x71 #x2F))))
    (is (typep c 'binstore:invalid-input) "~a" (hostile-describe c))
    (when (typep c 'binstore:invalid-input)
      (is (eql 3 (binstore:restore-error-offset c)) "offset ~s" (binstore:restore-error-offset c)))))

(test (hostile-tagged-word-payloads :fixture format-2-defaults)
  "Fixnum and (unsigned-byte 62) vectors are read a block of words at a
time, four a step: a word outside the element type is refused at its own
offset, wherever it falls in a step or a block, from a vector and from a
stream whose window holds one word at a time."
  (flet ((le64 (n) (loop for i below 8 collect (ldb (byte 8 (* 8 i)) n))))
    (loop for (code bad) in (list (list binstore::+element-type-fixnum+ (expt 2 62))
                                  (list binstore::+element-type-fixnum+ (- -1 (expt 2 62)))
                                  (list binstore::+element-type-ub62+ (expt 2 62))
                                  (list binstore::+element-type-ub62+ -1))
          ;; the bad word at each place in a step of four words, and in
          ;; the words after the last step, in the first block and the second
          do (loop for (before after) in '((0 5) (1 5) (2 5) (3 5) (0 0) (2 0)
                                           (600 0) (600 5) (601 5) (602 5) (603 5))
                   do (let* ((count (+ before 1 after))
                             (octets (hostile-octets binstore::+tag-specialized-vector+ code
                                                     (varint-octets count)
                                                     (loop repeat before append (le64 7))
                                                     (le64 (ldb (byte 64 0) bad))
                                                     (loop repeat after append (le64 7)))))
                        (dolist (source (list octets
                                              (make-instance 'octet-input-stream :octets octets)))
                          (let ((c (hostile-restore-condition source)))
                            (is (typep c 'binstore:invalid-input) "~d in code ~d after ~d: ~a"
                                bad code before (hostile-describe c))
                            (when (typep c 'binstore:invalid-input)
                              (is (eql (+ 2 (length (varint-octets count)) (* 8 before))
                                       (binstore:restore-error-offset c))
                                  "~d after ~d: offset ~s" bad before
                                  (binstore:restore-error-offset c))))))))
    ;; and the good words themselves, across blocks, both ways, the ends
    ;; of each type's range among them
    (let ((v (make-array 1500 :element-type 'fixnum))
          (u (make-array 1500 :element-type '(unsigned-byte 62))))
      (dotimes (i 1500)
        (setf (aref v i) (* (- i 700) (floor most-positive-fixnum 800))
              (aref u i) (* i (floor (expt 2 62) 1500))))
      (setf (aref v 3) most-negative-fixnum (aref v 1499) most-positive-fixnum
            (aref u 5) (1- (expt 2 62)) (aref u 1498) (1- (expt 2 62)))
      (dolist (vector (list v u))
        (let ((octets (binstore:store nil vector)))
          (is (equalp vector (binstore:restore octets)))
          (is (equalp vector (binstore:restore (make-instance 'octet-input-stream
                                                              :octets octets)))))))))

(test (hostile-copied-payloads :fixture format-2-defaults)
  "Payloads copied in one block (READ-SPECIALIZED-VECTOR's path for a payload
whole in the window, and the general one): an element outside
(unsigned-byte 7, 15, 31 or 63) is refused at its own offset; a bit
vector's unused bits are cleared whatever the input holds there; a short
payload or a length in a redundant form is refused."
  (loop for (code width) in '((4 1) (6 2) (8 4) (11 8))
        do (let* ((top (loop for i below width collect (if (= i (1- width)) #x80 0)))
                  (octets (hostile-octets binstore::+tag-specialized-vector+ code
                                          (varint-octets 101)
                                          (loop repeat (* 100 width) collect 1)
                                          top)))
             (dolist (source (list octets (make-instance 'octet-input-stream :octets octets)))
               (let ((c (hostile-restore-condition source)))
                 (is (typep c 'binstore:invalid-input) "code ~d: ~a" code (hostile-describe c))
                 (when (typep c 'binstore:invalid-input)
                   (is (eql (+ 3 (* 100 width)) (binstore:restore-error-offset c))
                       "code ~d: offset ~s" code (binstore:restore-error-offset c)))))))
  ;; 13 bits: the last byte's three high bits are set in the input
  (let ((octets (hostile-octets binstore::+tag-specialized-vector+ 1 13 #xFF #xFF)))
    (dolist (source (list octets (make-instance 'octet-input-stream :octets octets)))
      (let ((v (binstore:restore source)))
        (is (equal (make-array 13 :element-type 'bit :initial-element 1) v))
        #+sbcl ; the word holding the bits, unused ones included
        (is (= (1- (expt 2 13)) (sb-kernel:%vector-raw-bits v 0))))))
  (is (typep (hostile-restore-condition (hostile-octets binstore::+tag-specialized-vector+ 5 10
                                                        1 2 3 4 5 6 7 8 9))
             'binstore:truncated-input))
  (is (typep (hostile-restore-condition (hostile-octets binstore::+tag-specialized-vector+ 5 #x81 0
                                                        7))
             'binstore:invalid-input))
  ;; the same through the tags that say the element type
  (dolist (tag (list binstore::+tag-octet-vector+ binstore::+tag-double-vector+))
    (is (typep (hostile-restore-condition (hostile-octets tag 10 1 2 3 4 5 6 7 8 9))
               'binstore:truncated-input))
    (is (typep (hostile-restore-condition (hostile-octets tag #x81 0 7))
               'binstore:invalid-input))
    (is (typep (hostile-restore-condition (hostile-octets tag))
               'binstore:truncated-input))))

(defparameter *hostile-huge* (expt 2 60))

(defun hostile-huge-inputs ()
  "(description octets): containers and numbers claiming 2^60 elements (or
dimensions, or rank) with almost no bytes behind the claim."
  (let ((huge (varint-octets *hostile-huge*)))
    (list (list "list" (hostile-octets #x02 huge #x71))
          (list "dotted list" (hostile-octets #x03 huge #x71 #x72))
          (list "base string" (hostile-octets #x12 huge #x41))
          (list "string" (hostile-octets #x13 huge #x41))
          (list "simple vector" (hostile-octets #x14 huge #x71))
          (list "specialized vector ub8" (hostile-octets #x15 5 huge 1 2 3))
          (list "octet vector" (hostile-octets binstore::+tag-octet-vector+ huge 1 2 3))
          (list "double vector" (hostile-octets binstore::+tag-double-vector+ huge 1 2 3))
          (list "specialized vector bit" (hostile-octets #x15 1 huge 1))
          (list "specialized vector of nil" (hostile-octets #x15 24 huge))
          (list "array dimension" (hostile-octets #x16 0 5 1 huge 1 2))
          (list "array dimensions product" (hostile-octets #x16 0 5 3 (varint-octets (expt 2 25))
                                                           (varint-octets (expt 2 25))
                                                           (varint-octets (expt 2 25)) 1))
          (list "array of nil" (hostile-octets #x16 0 24 2 huge huge))
          (list "array rank" (hostile-octets #x16 0 5 huge 1 1 1))
          (list "hash table size" (hostile-octets #x1B 0 huge #x72 #x71 0))
          (list "hash table count" (hostile-octets #x1B 0 4 #x72 #x71 huge #x71 #x71))
          (list "bignum" (hostile-octets #x0A (varint-octets (* 2 *hostile-huge*)) 1 2 3))
          (list "character" (hostile-octets #x11 huge))
          (list "reference" (hostile-octets binstore::+tag-ref+ huge))
          (list "fill id" (hostile-octets binstore::+tag-fill+ huge #x71))
          (list "format version" (hostile-octets binstore::+tag-header+ #x42 #x53 #x54 huge #x71))
          (list "class descriptor slots" (hostile-octets #x1D #x1E 1 #x00 huge #x00))
          (list "varint of 11 bytes" (hostile-octets #x02 (make-list 10 :initial-element #xFF) 1 #x71)))))

(test (hostile-huge-lengths :fixture format-2-defaults)
  "A huge claimed size signals INVALID-INPUT or LIMIT-EXCEEDED at once:
within the few bytes given (the offset it names), without allocating for
the claim, and without hanging (HOSTILE-CONDITION's guard)."
  (dolist (entry (hostile-huge-inputs))
    (destructuring-bind (what bytes) entry
      (multiple-value-bind (c consed offset)
          (hostile-cost (lambda () (binstore:restore bytes)))
        (is (typep c '(or binstore:invalid-input binstore:limit-exceeded))
            "~a: ~a" what (hostile-describe c))
        (is (and offset (<= offset (length bytes)))
            "~a: at offset ~s of ~d bytes" what offset (length bytes))
        (is (< consed (* 16 1024 1024)) "~a allocated ~:d bytes" what consed)))))

(test (hostile-huge-lengths-from-a-stream :fixture format-2-defaults)
  "Through a stream the input size is unknown: max-to-read must bound it."
  (let ((path (merge-pathnames (format nil "binstore-hostile-~d.bin" (random 1000000))
                               (uiop:temporary-directory))))
    (unwind-protect
         (dolist (entry (hostile-huge-inputs))
           (destructuring-bind (what bytes) entry
             (with-open-file (s path :direction :output :element-type '(unsigned-byte 8)
                                     :if-exists :supersede)
               (write-sequence bytes s))
             (multiple-value-bind (c consed offset)
                 (hostile-cost (lambda () (binstore:restore path)))
               (is (typep c '(or binstore:invalid-input binstore:limit-exceeded))
                   "~a: ~a" what (hostile-describe c))
               (is (and offset (<= offset (length bytes)))
                   "~a: at offset ~s of ~d bytes" what offset (length bytes))
               (is (< consed (* 16 1024 1024)) "~a allocated ~:d bytes" what consed))))
      (when (probe-file path) (delete-file path)))))

(test (hostile-invalid-utf-8 :fixture format-2-defaults)
  (dolist (entry `(("overlong 2-byte NUL" ,(hostile-octets #x13 1 #xC0 #x80))
                   ("overlong 3-byte" ,(hostile-octets #x13 1 #xE0 #x80 #xAF))
                   ("overlong 4-byte" ,(hostile-octets #x13 1 #xF0 #x80 #x80 #xAF))
                   ("lone continuation byte" ,(hostile-octets #x13 1 #x80))
                   ("ASCII inside a sequence" ,(hostile-octets #x13 2 #xE2 #x41 #x41))
                   ("sequence cut by the end" ,(hostile-octets #x13 1 #xE2 #x82))
                   ("code point #x110000" ,(hostile-octets #x13 1 #xF4 #x90 #x80 #x80))
                   ("5-byte form" ,(hostile-octets #x13 1 #xF8 #x88 #x80 #x80 #x80))
                   ("#xFF" ,(hostile-octets #x13 1 #xFF))
                   ("symbol name" ,(hostile-octets #x18 1 #xC0 #x80))
                   ;; uninterned names are read from the window when ASCII:
                   ;; a byte above 127 among them, padded to a whole word
                   ("uninterned symbol name" ,(hostile-octets #x19 3 #x41 #xFF #x41 0 0 0 0 0 0))
                   ("uninterned symbol name, cut" ,(hostile-octets #x19 3 #xE2 #x82))
                   ("base string byte above 127" ,(hostile-octets #x12 2 #x41 #xC3))
                   ("character #x110000" ,(hostile-octets #x11 (varint-octets #x110000)))))
    (destructuring-bind (what bytes) entry
      (let ((c (hostile-restore-condition bytes)))
        (is (typep c 'binstore:invalid-input) "~a: ~a" what (hostile-describe c))))))

(defun reference-utf-8 (octets start count)
  "Decode COUNT characters of OCTETS from START as the format defines UTF-8
(shortest forms, code points up to #x10FFFF, surrogates allowed), a byte at
a time.  Returns the string and the offset after it; or NIL and the offset
of the first bad sequence; or NIL and :CUT when the octets end inside one."
  (let ((string (make-string count)) (p start))
    (flet ((byte-at (k) (if (< (+ p k) (length octets)) (aref octets (+ p k)) :end)))
      (dotimes (i count (values string p))
        (let* ((b0 (byte-at 0))
               (width (cond ((eq b0 :end) (return (values nil :cut)))
                            ((< b0 #x80) 1) ((< b0 #xC2) nil) ((< b0 #xE0) 2)
                            ((< b0 #xF0) 3) ((< b0 #xF5) 4))))
          (unless width (return (values nil p)))
          (let ((code (if (= width 1) b0 (ldb (byte (- 7 width) 0) b0))))
            (loop for k from 1 below width
                  do (let ((b (byte-at k)))
                       (cond ((eq b :end) (return-from reference-utf-8 (values nil :cut)))
                             ((/= (logand b #xC0) #x80) (return-from reference-utf-8 (values nil p))))
                       (setf code (logior (ash code 6) (logand b #x3F)))))
            (unless (case width (3 (>= code #x800)) (4 (<= #x10000 code #x10FFFF)) (t t))
              (return (values nil p)))
            (setf (char string i) (code-char code))
            (incf p width)))))))

(defun utf-8-of (code)
  "The shortest UTF-8 of the code point CODE (a surrogate too), as a list."
  (flet ((continuation (shift) (logior #x80 (ldb (byte 6 shift) code))))
    (cond ((< code #x80) (list code))
          ((< code #x800) (list (logior #xC0 (ash code -6)) (continuation 0)))
          ((< code #x10000) (list (logior #xE0 (ash code -12)) (continuation 6) (continuation 0)))
          (t (list (logior #xF0 (ash code -18)) (continuation 12) (continuation 6)
                   (continuation 0))))))

(defparameter *bad-utf-8*
  '((#xC0 #x80) (#xC1 #xBF) (#xE0 #x80 #x80) (#xE0 #x9F #xBF) (#xF0 #x80 #x80 #x80)
    (#xF0 #x8F #xBF #xBF) (#xF4 #x90 #x80 #x80) (#xF7 #xBF #xBF #xBF) (#xF8 #x88 #x80 #x80)
    (#xFF) (#x80) (#xBF #x80) (#xC3 #x41) (#xE2 #x82 #x41) (#xF0 #x9F #x98 #x41))
  "Sequences the format refuses: overlong forms of each width, code points
past #x10FFFF, bytes that start nothing, sequences cut by an ASCII byte.")

(defun random-utf-8-octets (count random-state)
  "The UTF-8 of COUNT random characters of every width (surrogates among
them), one of them (one time in four) replaced by a sequence of
*BAD-UTF-8*; then (one time in two) one byte replaced by a random byte, or
(one in eight) the last bytes cut off."
  (let* ((bad (and (plusp count) (zerop (random 4 random-state)) (random count random-state)))
         (octets (loop for i below count
                       append (if (eql i bad)
                                  (elt *bad-utf-8* (random (length *bad-utf-8*) random-state))
                                  (utf-8-of (ecase (random 4 random-state)
                                              (0 (random #x80 random-state))
                                              (1 (+ #x80 (random #x780 random-state)))
                                              (2 (+ #x800 (random #xF800 random-state)))
                                              (3 (+ #x10000 (random #x100000 random-state)))))))))
    (when (and octets (zerop (random 2 random-state)))
      (setf (nth (random (length octets) random-state) octets) (random 256 random-state)))
    (when (and octets (zerop (random 8 random-state)))
      (setf octets (butlast octets (1+ (random 3 random-state)))))
    octets))

(test (utf-8-decoding-agrees-with-a-reference :fixture format-2-defaults)
  "Character strings of random characters of every width, some with a byte
replaced or their end cut, restored from a vector (one shorter than 64
characters read from the window as in a run, TAKE-WINDOW-STRING, the
others, and those it refuses, by the general decoder), from a file and from
a Gray stream (whose window holds only the bytes asked for, so every
sequence goes through READ-UTF8-CHAR): a valid one gives the string the
reference decoder gives, a bad one INVALID-INPUT at the offset of the sequence the
reference refuses, a cut one a RESTORE-ERROR."
  (let ((random-state (seeded-random-state 20261122)))
    (call-with-temporary-directory
     (lambda (directory)
       (let ((path (merge-pathnames "utf-8.bst" directory)))
         (dotimes (trial 400)
           (let* ((count (if (< trial 50) trial (random 3000 random-state)))
                  (payload (random-utf-8-octets count random-state))
                  (octets (hostile-octets binstore::+tag-string+ (varint-octets count) payload))
                  (start (- (length octets) (length payload))))
             (multiple-value-bind (expected end) (reference-utf-8 octets start count)
               (with-open-file (out path :direction :output :element-type '(unsigned-byte 8)
                                         :if-exists :supersede)
                 (write-sequence octets out))
               (flet ((outcome (restore)
                        (handler-case (funcall restore)
                          (binstore:restore-error (c) c))))
                 ;; twelve of it in a list, read by the loops over runs of
                 ;; strings: the same strings, or the same offset 2 bytes on
                 (let ((got (outcome (lambda ()
                                       (binstore:restore
                                        (hostile-octets binstore::+tag-list+ 12
                                                        (loop repeat 12 append (coerce octets 'list))))))))
                   (cond ((and expected (= end (length octets)))
                          (is (equal (make-list 12 :initial-element expected) got)
                              "trial ~d in a list: ~a" trial (hostile-describe got)))
                         ((integerp end)
                          (unless expected
                            (is (and (typep got 'binstore:invalid-input)
                                     (= (+ 2 end) (binstore:restore-error-offset got)))
                                "trial ~d in a list, bad at ~d: ~a" trial (+ 2 end)
                                (hostile-describe got))))))
                 (dolist (restore (list (lambda () (binstore:restore octets))
                                        (lambda () (binstore:restore path))
                                        (lambda () (binstore:restore
                                                    (make-instance 'octet-input-stream
                                                                   :octets octets)))))
                   (let ((got (outcome restore)))
                     (cond ((and expected (= end (length octets)))
                            (is (equal expected got) "trial ~d: ~a" trial (hostile-describe got)))
                           ((eq end :cut)
                            (is (typep got 'binstore:restore-error)
                                "trial ~d, cut: ~a" trial (hostile-describe got)))
                           ((integerp end)
                            (unless expected
                              (is (and (typep got 'binstore:invalid-input)
                                       (= end (binstore:restore-error-offset got)))
                                  "trial ~d, bad at ~d: ~a" trial end (hostile-describe got))))))))))))))))

(test (hostile-surrogates-are-valid :fixture format-2-defaults)
  "Surrogate code points are characters in SBCL and round-trip (the
contract), so their 3-byte form is not an error."
  (is (equal (string (code-char #xD800))
             (binstore:restore (hostile-octets #x13 1 #xED #xA0 #x80)))))

;;; ------------------------------------------------------------------
;;; Deep nesting

(test (hostile-ten-million-deep-input :fixture format-2-defaults)
  "Ten million nested one-element lists (or vectors) in the input
\(*DEEP-NESTING*: two million on ABCL and CLISP), with no deferral: LIMIT-EXCEEDED, never control stack exhaustion; met near the
depth limit, not after reading the 20 MB (a hundredth of them at most) nor
allocating for ten million levels (64 MiB at most, where their conses alone
would take 160 MB)."
  (dolist (pattern '((#x02 #x01) (#x14 #x01)))
    (let ((bytes (hostile-repeat pattern *deep-nesting* '(#x00))))
      (multiple-value-bind (c consed offset) (hostile-cost (lambda () (binstore:restore bytes)))
        (is (typep c 'binstore:limit-exceeded) "~s: ~a" pattern (hostile-describe c))
        (is (and offset (< offset (floor (length bytes) 100)))
            "~s: stopped at offset ~s of ~:d" pattern offset (length bytes))
        (is (< consed (* 64 1024 1024)) "~s allocated ~:d bytes" pattern consed)))))

(test (hostile-ten-million-deep-list :fixture format-2-defaults)
  "A list nested ten million levels (*DEEP-NESTING*: two million on ABCL
and CLISP):
the default max-depth refuses it on store and on restore; raised limits make
it round-trip."
  (let* ((depth *deep-nesting*)
         (nest (hostile-nest depth))
         (c (hostile-condition (lambda () (binstore:store nil nest)) :timeout 60)))
    (is (typep c 'binstore:limit-exceeded) "store: ~a" (hostile-describe c))
    (when (typep c 'binstore:limit-exceeded)
      (is (eq :max-depth (binstore:limit-exceeded-limit c))))
    (let ((bytes nil) (back nil))
      (setf c (hostile-condition
               (lambda () (setf bytes (binstore:store nil nest :max-depth 20000000)))
               :timeout 60))
      (is (null c) "store with :max-depth 20000000: ~a" (hostile-describe c))
      (when bytes
        (let ((c (hostile-restore-condition bytes)))
          (is (typep c 'binstore:limit-exceeded) "restore: ~a" (hostile-describe c)))
        (setf c (hostile-condition
                 (lambda () (setf back (binstore:restore bytes :max-depth 20000000)))
                 :timeout 60))
        (is (null c) "restore with :max-depth 20000000: ~a" (hostile-describe c))
        (is (= depth (hostile-depth back)))))))

;;; ------------------------------------------------------------------
;;; Limits

(test (hostile-max-to-read :fixture format-2-defaults)
  (let* ((file (binstore:store nil (make-list 1000 :initial-element "x")))
         (c (hostile-restore-condition file :max-to-read 100)))
    (is (typep c 'binstore:limit-exceeded) "~a" (hostile-describe c))
    (when (typep c 'binstore:limit-exceeded)
      (is (eq :max-to-read (binstore:limit-exceeded-limit c)))))
  ;; 30 bytes of input asking for a gigabyte of memory
  (let ((c (hostile-restore-condition (hostile-octets #x15 24 (varint-octets (expt 10 9)))
                                      :max-to-read (* 1024 1024))))
    (is (typep c '(or binstore:limit-exceeded binstore:invalid-input)) "~a" (hostile-describe c)))
  ;; within the limit, the same file restores
  (is (= 1000 (length (binstore:restore (binstore:store nil (make-list 1000 :initial-element "x"))
                                        :max-to-read 100000)))))

(test (hostile-max-to-write :fixture format-2-defaults)
  (let ((c (hostile-condition
            (lambda () (binstore:store nil (make-list 1000 :initial-element 1000)
                                       :max-to-write 100)))))
    (is (typep c 'binstore:limit-exceeded) "~a" (hostile-describe c))
    (when (typep c 'binstore:limit-exceeded)
      (is (eq :max-to-write (binstore:limit-exceeded-limit c))))))

(test (hostile-max-depth :fixture format-2-defaults)
  (let ((nest (hostile-nest 50)))
    (let ((c (hostile-condition (lambda () (binstore:store nil nest :max-depth 10)))))
      (is (typep c 'binstore:limit-exceeded) "store: ~a" (hostile-describe c))
      (when (typep c 'binstore:limit-exceeded)
        (is (eq :max-depth (binstore:limit-exceeded-limit c)))))
    (let* ((file (binstore:store nil nest :max-depth 100))
           (c (hostile-restore-condition file :max-depth 10)))
      (is (typep c 'binstore:limit-exceeded) "restore: ~a" (hostile-describe c))
      (when (typep c 'binstore:limit-exceeded)
        (is (eq :max-depth (binstore:limit-exceeded-limit c))))
      (is (= 50 (hostile-depth (binstore:restore file :max-depth 100)))))))

(test (hostile-unsupported-version :fixture format-2-defaults)
  (let ((file (binstore:store nil '(1 2) :output-magic-number t)))
    (is (equalp (vector binstore::+tag-header+ #x42 #x53 #x54 binstore:+format-version+)
                (subseq file 0 5)))
    (setf (aref file 4) 99)
    (let ((c (hostile-restore-condition file)))
      (is (typep c 'binstore:unsupported-version) "~a" (hostile-describe c))
      (when (typep c 'binstore:unsupported-version)
        (is (eql 99 (binstore:unsupported-version-version c)))))))

(test (hostile-tracking-tags :fixture format-2-defaults)
  "Tracking flags above 3, and a tracking tag anywhere but before the first
object, are invalid input."
  (dolist (case (list (list "flags 4" (hostile-octets #x23 #x04 #x70))
                      (list "flags #xFF" (hostile-octets #x23 #xFF #x70))
                      (list "two tracking tags" (hostile-octets binstore::+tag-no-tracking+
                                                                binstore::+tag-full-tracking+ #x70))
                      (list "in a list" (hostile-octets #x02 #x01 binstore::+tag-full-tracking+))))
    (destructuring-bind (what octets) case
      (let ((c (hostile-restore-condition octets)))
        (is (typep c 'binstore:invalid-input) "~a: ~a" what (hostile-describe c)))))
  ;; After a record, a tracking tag begins the next one, which RESTORE does
  ;; not read; a record of a tracking tag and no object is truncated.
  (is (eql 0 (binstore:restore (hostile-octets #x70 #x23 #x00 #x71))))
  (let ((all '()))
    (binstore:map-stored-objects (lambda (x) (push x all)) (hostile-octets #x70 #x23 #x00 #x71))
    (is (equal '(0 1) (nreverse all))))
  (signals binstore:truncated-input
    (binstore:map-stored-objects #'identity (hostile-octets #x70 binstore::+tag-no-tracking+))))

;;; ------------------------------------------------------------------
;;; Missing packages and symbols

(defun hostile-stored-symbol (package-name symbol-name)
  "Bytes of a symbol SYMBOL-NAME stored from a new package PACKAGE-NAME,
which is deleted again."
  (let ((package (make-package package-name :use '())))
    (prog1 (binstore:store nil (list (intern symbol-name package) 7))
      (delete-package package))))

(defun hostile-forget-package (name)
  (when (find-package name) (delete-package name)))

(test (hostile-missing-package-create :fixture format-2-defaults)
  (let ((name (hostile-fresh-name "PKG")) (seen nil))
    (unwind-protect
         (let* ((file (hostile-stored-symbol name "THING"))
                (back (handler-bind ((binstore:missing-package
                                       (lambda (c)
                                         (setf seen (binstore:missing-package-name c))
                                         (binstore:create-package c))))
                        (binstore:restore file))))
           (is (equal name seen))
           (is (find-package name))
           (is (eq (find-package name) (symbol-package (first back))))
           (is (string= "THING" (symbol-name (first back))))
           (is (eql 7 (second back))))
      (hostile-forget-package name))))

(test (hostile-missing-package-use-other :fixture format-2-defaults)
  (let* ((name (hostile-fresh-name "GONE"))
         (other-name (hostile-fresh-name "OTHER"))
         (other (make-package other-name :use '())))
    (unwind-protect
         (let* ((file (hostile-stored-symbol name "THING"))
                (back (handler-bind ((binstore:missing-package
                                       (lambda (c) (binstore:use-other-package other c))))
                        (binstore:restore file))))
           (is (eq other (symbol-package (first back))))
           (is (eq (first back) (find-symbol "THING" other)))
           (is (null (find-package name))))
      (hostile-forget-package name)
      (hostile-forget-package other-name))))

(test (hostile-missing-package-uninterned :fixture format-2-defaults)
  (let ((name (hostile-fresh-name "PKG")))
    (unwind-protect
         (let* ((file (hostile-stored-symbol name "THING"))
                (back (handler-bind ((binstore:missing-package #'binstore:make-uninterned))
                        (binstore:restore file))))
           (is (null (symbol-package (first back))))
           (is (string= "THING" (symbol-name (first back))))
           ;; as every uninterned symbol's name whose characters allow
           (is (typep (symbol-name (first back)) 'base-string))
           (is (null (find-package name))))
      (hostile-forget-package name))))

(test (hostile-missing-package-unhandled :fixture format-2-defaults)
  "Without a handler the error propagates and no package appears."
  (let ((name (hostile-fresh-name "PKG")))
    (unwind-protect
         (let* ((file (hostile-stored-symbol name "THING"))
                (count (length (list-all-packages)))
                (c (hostile-restore-condition file)))
           (is (typep c 'binstore:missing-package) "~a" (hostile-describe c))
           (when (typep c 'binstore:missing-package)
             (is (equal name (binstore:missing-package-name c))))
           (is (null (find-package name)))
           (is (= count (length (list-all-packages)))))
      (hostile-forget-package name))))

(defun hostile-call-with-lost-symbol (fn)
  "Call FN with the bytes of a stored symbol that has since been uninterned
from its (still existing) package, and that package."
  (let* ((name (hostile-fresh-name "SYMS"))
         (package (make-package name :use '())))
    (unwind-protect
         (let* ((symbol (intern "LOST" package))
                (file (binstore:store nil symbol)))
           (unintern symbol package)
           (funcall fn file package))
      (delete-package package))))

(test (hostile-missing-symbol :fixture format-2-defaults)
  (hostile-call-with-lost-symbol
   (lambda (file package)
     (let ((c (hostile-restore-condition file :intern-symbols nil)))
       (is (typep c 'binstore:missing-symbol) "~a" (hostile-describe c))
       (when (typep c 'binstore:missing-symbol)
         (is (equal "LOST" (binstore:missing-symbol-name c)))
         (is (eq package (binstore:missing-symbol-package c)))))
     (is (null (find-symbol "LOST" package)) "the unhandled restore interned LOST")
     ;; the default interns
     (let ((back (binstore:restore file)))
       (is (eq back (find-symbol "LOST" package)))))))

(test (hostile-missing-symbol-intern-anyway :fixture format-2-defaults)
  (hostile-call-with-lost-symbol
   (lambda (file package)
     (let ((back (handler-bind ((binstore:missing-symbol #'binstore:intern-anyway))
                   (binstore:restore file :intern-symbols nil))))
       (is (eq package (symbol-package back)))
       (is (eq back (find-symbol "LOST" package)))))))

(test (hostile-missing-symbol-uninterned :fixture format-2-defaults)
  (hostile-call-with-lost-symbol
   (lambda (file package)
     (let ((back (handler-bind ((binstore:missing-symbol #'binstore:make-uninterned))
                   (binstore:restore file :intern-symbols nil))))
       (is (null (symbol-package back)))
       (is (string= "LOST" (symbol-name back)))
       (is (typep (symbol-name back) 'base-string))
       (is (null (find-symbol "LOST" package)))))))

;;; ------------------------------------------------------------------
;;; Missing classes and slots.  The classes are made at run time, under
;;; fresh names, because the tests remove and redefine them.

(defclass hostile-other-class ()
  ((alpha :initarg :alpha)
   (beta :initarg :beta)))

(defun hostile-define-class (name slot-names)
  "Define (or redefine) the standard class NAME with SLOT-NAMES."
  (eval `(defclass ,name () ,(mapcar #'list slot-names))))

(defun hostile-class-name ()
  (intern (hostile-fresh-name "CLASS") '#:binstore-tests))

(defun hostile-stored-instance (name)
  "Define class NAME with slots ALPHA and BETA; store an instance (1 \"two\")."
  (hostile-define-class name '(alpha beta))
  (let ((object (make-instance name)))
    (setf (slot-value object 'alpha) 1
          (slot-value object 'beta) "two")
    (binstore:store nil object)))

(test (hostile-missing-class :fixture format-2-defaults)
  (let* ((name (hostile-class-name))
         (file (hostile-stored-instance name)))
    (unwind-protect
         (progn
           (setf (find-class name) nil)
           (let ((c (hostile-restore-condition file)))
             (is (typep c 'binstore:missing-class) "~a" (hostile-describe c))
             (when (typep c 'binstore:missing-class)
               (is (eq name (binstore:missing-class-name c)))))
           (let ((back (handler-bind ((binstore:missing-class
                                        (lambda (c) (binstore:use-other-class 'hostile-other-class c))))
                         (binstore:restore file))))
             (is (typep back 'hostile-other-class))
             (is (eql 1 (slot-value back 'alpha)))
             (is (equal "two" (slot-value back 'beta)))))
      (setf (find-class name) nil))))

(test (hostile-missing-slot :fixture format-2-defaults)
  (let* ((name (hostile-class-name))
         (file (hostile-stored-instance name)))
    (unwind-protect
         (progn
           (hostile-define-class name '(alpha))
           (let ((c (hostile-restore-condition file)))
             (is (typep c 'binstore:missing-slot) "~a" (hostile-describe c))
             (when (typep c 'binstore:missing-slot)
               (is (eq 'beta (binstore:missing-slot-name c)))))
           (let ((back (handler-bind ((binstore:missing-slot #'binstore:discard-slot))
                         (binstore:restore file))))
             (is (typep back name))
             (is (eql 1 (slot-value back 'alpha)))
             (is (not (slot-exists-p back 'beta))))
           (hostile-define-class name '(alpha gamma))
           (let ((back (handler-bind ((binstore:missing-slot
                                        (lambda (c) (binstore:use-other-slot 'gamma c))))
                         (binstore:restore file))))
             (is (eql 1 (slot-value back 'alpha)))
             (is (equal "two" (slot-value back 'gamma)))))
      (setf (find-class name) nil))))

(test (hostile-never-instantiated-class :fixture format-2-defaults)
  "Restoring into a class of the same name that was defined afresh and
never instantiated (so not finalized) works."
  (let* ((name (hostile-class-name))
         (file (hostile-stored-instance name)))
    (unwind-protect
         (progn
           (setf (find-class name) nil)
           (hostile-define-class name '(alpha beta))
           #+sbcl ; ECL finalizes a class when it is defined
           (is (not (class-finalized-p (find-class name)))
               "precondition: the fresh class is not finalized yet")
           (let ((back (binstore:restore file)))
             (is (eq (find-class name) (class-of back)))
             (is (eql 1 (slot-value back 'alpha)))
             (is (equal "two" (slot-value back 'beta)))))
      (setf (find-class name) nil))))

;;; ------------------------------------------------------------------
;;; Varints: every length decodes, wherever in the window it ends (the
;;; one- and two-group forms are read inline unless the window ends within
;;; them), and a redundant trailing zero group is refused.

(defun decode-varint-at-end (octets)
  "Decode the varint OCTETS placed at the very end of the input window."
  (binstore::with-octet-vector-address (address octets)
    (binstore::read-varint (binstore::make-fixed-ibuf address (length octets) nil))))

(test (varint-decoding :fixture format-2-defaults)
  (dolist (n (list 0 1 127 128 129 16383 16384 (1- (expt 2 21)) (expt 2 21)
                   (expt 2 35) (1- (expt 2 63)) (1- (expt 2 64))))
    (let ((octets (varint-octets n)))
      ;; at the end of the window, and followed by more input
      (is (= n (decode-varint-at-end (hostile-octets octets))))
      (is (= n (decode-varint-at-end (hostile-octets octets 0 0))))))
  (dolist (octets '((#x80 #x00) (#x81 #x00) (#xFF #x80 #x00)))
    (signals binstore:invalid-input (decode-varint-at-end (hostile-octets octets)))
    (signals binstore:invalid-input (decode-varint-at-end (hostile-octets octets 5))))
  (signals binstore:truncated-input (decode-varint-at-end (hostile-octets #x80)))
  (signals binstore:truncated-input (decode-varint-at-end (hostile-octets #xFF #xFF))))

;;; ------------------------------------------------------------------
;;; Instances whose slots restore straight into place (boxed slots of type
;;; T) and those restored through checked setters.  The value 143 is written
;;; as the single tag byte #xFF, which nothing else in these stores holds, so
;;; the tests can find it and put another tag in its place.

(defstruct hostile-typed (count 0 :type fixnum) (note nil))

(defun hostile-replace-143 (octets new-tag)
  "OCTETS with the one byte #xFF (the integer 143) replaced by NEW-TAG."
  (let ((copy (copy-seq octets)))
    (assert (= 1 (count #xFF copy)))
    (setf (aref copy (position #xFF copy)) new-tag)
    copy))

(test (hostile-structure-slot-of-the-wrong-type :fixture format-2-defaults)
  ;; COUNT is a fixnum slot: NIL in its place must be refused, not stored
  (let ((octets (binstore:store nil (make-hostile-typed :count 143 :note "n"))))
    (is (eql 143 (hostile-typed-count (binstore:restore octets))))
    (let ((c (hostile-restore-condition (hostile-replace-143 octets binstore::+tag-nil+))))
      (is (typep c 'binstore:invalid-input) "~a" (hostile-describe c)))))

(defstruct hostile-ranged (small 0 :type (unsigned-byte 8)) (name "" :type simple-string))

(test (hostile-typed-boxed-slots-are-checked :fixture format-2-defaults)
  ;; typed slots that are all boxed restore straight into place, each value
  ;; checked against the slot's type first: -1 or NIL in an (unsigned-byte
  ;; 8) slot is refused
  (let ((octets (binstore:store nil (make-hostile-ranged :small 143 :name "n"))))
    (let ((back (binstore:restore octets)))
      (is (eql 143 (hostile-ranged-small back)))
      (is (equal "n" (hostile-ranged-name back))))
    (dolist (tag (list (+ binstore::+small-int-bias+ -1) binstore::+tag-nil+ binstore::+tag-t+))
      (let ((c (hostile-restore-condition (hostile-replace-143 octets tag))))
        (is (typep c 'binstore:invalid-input) "~a" (hostile-describe c))))))

(test slot-type-checks-agree-with-typep
  ;; the inline checks of typed slots (keywords, fixnum ranges) and the
  ;; generic one give TYPEP's answer for every type and value
  (let ((types '(fixnum bit (unsigned-byte 8) (signed-byte 16) (mod 10) (integer -3 3)
                 (unsigned-byte 64) simple-string simple-base-string string list cons
                 symbol double-float single-float integer real number character
                 simple-vector hash-table (or null string) keyword (member :a :b)
                 (simple-array (unsigned-byte 8) (*)) (vector t) t))
        (values (list 0 1 -1 2 9 10 255 256 -3 4 32767 -32768 32768 most-positive-fixnum
                      (1+ most-positive-fixnum) (- (expt 2 64) 1) 1.5d0 1.5f0 1/2 #c(1 2)
                      #\a "abc" (coerce "abc" 'simple-base-string)
                      (make-array 3 :element-type 'character :adjustable t)
                      nil t :a :c 'foo '(1) (make-hash-table) #(1 2) (make-array 2 :adjustable t)
                      (make-array 2 :element-type '(unsigned-byte 8)))))
    (dolist (type types)
      (let ((check (binstore::type-check type)))
        (dolist (value values)
          (is (eq (not (typep value type)) (not (binstore::slot-value-fits-p value check)))
              "~s in ~s" value type))))))

(test (hostile-unbound-slot-in-structure :fixture format-2-defaults)
  ;; both kinds of structure: slots of type T (set in place) and typed ones
  (dolist (object (list (make-gen-point :x 143 :y 2) (make-hostile-typed :count 1 :note 143)))
    (let* ((octets (binstore:store nil object))
           (c (hostile-restore-condition
               (hostile-replace-143 octets binstore::+tag-unbound-slot+))))
      (is (typep c 'binstore:invalid-input) "~a" (hostile-describe c)))))

(defclass counted-allocation ()
  ((value :initarg :value :accessor counted-allocation-value)
   (allocated-by :initform nil :accessor counted-allocation-allocated-by)))

(defvar *counted-allocations* 0)

(defmethod allocate-instance ((class (eql (find-class 'counted-allocation))) &rest initargs)
  (declare (ignore initargs))
  (incf *counted-allocations*)
  (call-next-method))

(test (restore-honours-allocate-instance-methods :fixture format-2-defaults)
  ;; a user's ALLOCATE-INSTANCE method runs for every instance restored; a
  ;; class without one is made directly, with its unbound slots unbound
  (let* ((objects (loop for i below 3 collect (make-instance 'counted-allocation :value i)))
         (octets (binstore:store nil objects))
         (*counted-allocations* 0)
         (back (binstore:restore octets)))
    (is (= 3 *counted-allocations*))
    (is (equal '(0 1 2) (mapcar #'counted-allocation-value back))))
  (let ((back (binstore:restore (binstore:store nil (make-instance 'gen-node :left 1)))))
    (is (typep back 'gen-node))
    (is (eql 1 (gen-node-left back)))
    (is (not (slot-boundp back 'right)))))

(test (hostile-zero-with-an-id :fixture format-2-defaults)
  "The boxes of a lazy run (see LAZY-RUN) have entries 0 in the vector of
objects by id until a reference is met; input can also give an id to a 0
itself, in a form that takes one (a bignum of no bytes; a ratio that
reduces to 0), and a reference to it must return that 0, around lazy runs
or without any."
  (let ((list binstore::+tag-list+)
        (bignum binstore::+tag-bignum+)
        (ref0 binstore::+first-small-ref-tag+))
    ;; (0 0): a bignum of no bytes, then a reference to it
    (is (equal '(0 0) (binstore:restore (hostile-octets list 2 bignum 0 ref0))))
    ;; a run of 40 doubles (ids 1 to 40), then references to the 0 before
    ;; it and to a double in the run
    (let* ((doubles (binstore:store nil (loop for i below 40 collect (+ i 0.5d0))))
           (bytes (hostile-octets list 4 bignum 0 doubles ref0 (+ ref0 30))))
      (let ((restored (binstore:restore bytes)))
        (is (eql 0 (first restored)))
        (is (eql 0 (third restored)))
        (is (eq (nth 29 (second restored)) (fourth restored)))))))

(defstruct hostile-nan-slot
  (package nil :type (or null package)))

(test hostile-nan-in-a-typed-slot
  "A NaN where a slot typed (OR NULL PACKAGE) expects its value is refused
with a BINSTORE-ERROR by the decoder and by the reference decoder (SBCL's
type test compares a NaN with the floats of a MEMBER type, which traps),
and a symbol whose package is a NaN likewise."
  (let* ((octets (binstore:store nil (make-hostile-nan-slot) :output-magic-number nil))
         (n (length octets)))
    (is (= 0 (aref octets (1- n))))
    (dolist (nan '(#(#x0D 0 0 0 0 0 0 #xF8 #xFF) #(#x0C 0 0 #xC0 #xFF)))
      (let ((bad (concatenate '(simple-array (unsigned-byte 8) (*)) (subseq octets 0 (1- n)) nan)))
        (signals binstore:binstore-error (binstore:restore bad :require-header nil))
        (signals binstore:binstore-error
          (binstore::reference-restore bad :require-header nil :max-count 10)))))
  ;; symbol, its package a single-float NaN, its name "x" (on CLISP, which
  ;; has no NaN, refused as an unrepresentable float before)
  (let ((bad (coerce #(#x28 #x17 #x0C 0 0 #xC0 #xFF 1 #x78) '(simple-array (unsigned-byte 8) (*)))))
    (signals #-clisp binstore:invalid-input #+clisp binstore::unrepresentable-float
      (binstore:restore bad :require-header nil))
    (signals #-clisp binstore:invalid-input #+clisp binstore::unrepresentable-float
      (binstore::reference-restore bad :require-header nil :max-count 10))))
