;;;; Golden bytes: the exact encoding of a handful of small values, so that an
;;;; accidental change of the format fails here.  Each line is also an
;;;; example in doc/FORMAT.md.

(in-package #:binstore-tests)

(def-suite golden :in all :description "Exact bytes of small values.")
(in-suite golden)

(defun octets (&rest bytes)
  (coerce bytes '(simple-array (unsigned-byte 8) (*))))

(defun stored-octets (data &rest options)
  "The bytes of DATA stored with OPTIONS, by default without the header and
tracking objects but not conses, the record form without a tracking tag:
the bytes of the object itself, which these tests spell out."
  (coerce (apply #'binstore:store nil data
                 (append options '(:output-magic-number nil
                                   :support-shared-list-structures nil)))
          'list))

(defparameter *golden*
  ;; (value bytes [element type this Lisp must specialize, see above])
  `((0 (#x70))
    (-1 (#x6F))
    (-16 (#x60))
    (143 (#xFF))
    (200 (#x05 #xC8))
    (-17 (#x06 #x10))
    (1000 (#x07 #xE8 #x03))
    (-70000 (#x08 #x90 #xEE #xFE #xFF))
    (,(expt 2 40) (#x09 0 0 0 0 0 1 0 0))
    (,(expt 2 64) (#x0A #x12 0 0 0 0 0 0 0 0 1))
    (,(- (expt 2 64)) (#x0A #x13 0 0 0 0 0 0 0 0 1))
    (1/3 (#x0B #x71 #x73))
    (1.5 (#x0C 0 0 #xC0 #x3F))
    (1.5d0 (#x0D 0 0 0 0 0 0 #xF8 #x3F))
    ;; CLISP has no negative zero: its -0d0 is 0d0
    #-clisp (-0d0 (#x0D 0 0 0 0 0 0 0 #x80))
    (#c(1 2) (#x10 #x71 #x72))
    (#c(1d0 -2d0) (#x0F 0 0 0 0 0 0 #xF0 #x3F 0 0 0 0 0 0 0 #xC0))
    (#\a (#x11 #x61))
    (,(code-char #x3B1) (#x11 #xB1 #x07))
    (nil (#x00))
    (t (#x01))
    ((1 2) (#x02 #x02 #x71 #x72))
    ((1 . 2) (#x04 #x71 #x72))
    ((1 2 . 3) (#x03 #x02 #x71 #x72 #x73))
    (,(list (expt 2 40) (expt 2 41)) (#x27 #x02 0 0 0 0 0 1 0 0 0 0 0 0 0 2 0 0))
    (,(list (expt 2 40) 1) (#x02 #x02 #x09 0 0 0 0 0 1 0 0 #x71))
    (,(coerce "hi" 'simple-base-string) (#x12 #x02 #x68 #x69))
    (,(coerce "aα" '(simple-array character (*))) (#x13 #x02 #x61 #xCE #xB1))
    (:foo (#x18 #x03 #x46 #x4F #x4F))
    (#(1 #(2)) (#x14 #x02 #x71 #x14 #x01 #x72))
    (,(make-array 10 :element-type 'bit :initial-element 1) (#x15 #x01 #x0A #xFF #x03))
    (,(make-array 2 :element-type '(signed-byte 16) :initial-element -2)
     (#x15 #x0E #x02 #xFE #xFF #xFE #xFF)
     (signed-byte 16))
    (,(make-array 3 :element-type '(unsigned-byte 8) :initial-contents '(1 2 255))
     (#x2A #x03 #x01 #x02 #xFF))
    (,(make-array 1 :element-type 'double-float :initial-element 1.5d0)
     (#x2B #x01 0 0 0 0 0 0 #xF8 #x3F)
     double-float)
    (,(make-array '(2 2) :element-type '(unsigned-byte 8) :initial-element 9)
     (#x16 #x00 #x05 #x02 #x02 #x02 9 9 9 9))
    (,(make-array 3 :element-type 'base-char :initial-element #\x :fill-pointer 1)
     (#x16 #x03 #x17 #x01 #x03 #x01 #x78 #x78 #x78)
     base-char)))

(test (golden-bytes :fixture headerless)
  "Each value encodes to exactly the documented bytes, and decodes back."
  (loop for (value bytes needs) in *golden*
        when (or (null needs) (specialized-here-p needs))
        do (is (equal bytes (stored-octets value))
               "~s encodes to ~s, not ~s" value (stored-octets value) bytes)
           (is (equalp value (binstore:restore (apply #'octets bytes))))))

(test (golden-shared-string :fixture headerless)
  "Two references to one string: the string takes id 0 when written, the
second occurrence is a one-byte reference.  Without tracking it is written
twice, after the tracking tag that says so."
  (let ((s (coerce "ab" 'simple-base-string)))
    (is (equal '(#x02 #x02 #x12 #x02 #x61 #x62 #x40)
               (stored-octets (list s s))))
    (is (equal '(#x28 #x02 #x02 #x12 #x02 #x61 #x62 #x12 #x02 #x61 #x62)
               (stored-octets (list s s) :track-references nil)))))

(test (golden-symbols-in-short-lists :fixture headerless)
  "A short list or pair whose symbols were written before has them as
references, in each mode, with the bytes the general writer gives: :FOO
takes id 0 where it is first written (#x18 ...) and is #x40 after; a
short list whose symbol is new writes it in full."
  (dolist (options '(() (:track-references nil)))
    (let ((prefix (if (getf options :track-references t) '() '(#x28))))
      (is (equal (append prefix '(#x02 #x03 #x18 #x03 #x46 #x4F #x4F
                                  #x04 #x40 #x71
                                  #x02 #x03 #x72 #x40 #x01))
                 (apply #'stored-octets (list :foo (cons :foo 1) (list 2 :foo t)) options)))
      (is (equal (append prefix '(#x04 #x18 #x03 #x46 #x4F #x4F #x71))
                 (apply #'stored-octets (cons :foo 1) options)))))
  (let* ((g (make-symbol "G"))
         (data (list g (list g g 3) (cons 4 g)))
         (copy (binstore:restore (binstore:store nil data))))
    (is (eq (first copy) (first (second copy))))
    (is (eq (first copy) (cdr (third copy))))))

(test (golden-shared-conses :fixture headerless)
  "With shared list structures a circular list's cdr refers to its first
cons, with a short-cons-ref; version 3 wrote a cons-ref, which still reads."
  (let ((l (list 1 2)))
    (setf (cddr l) l)
    (is (equal '(#x29 #x03 #x02 #x71 #x72 #x38 #x00)
               (stored-octets l :support-shared-list-structures t))))
  (let ((circle (binstore:restore (octets #x29 #x03 #x02 #x71 #x72 #x26 #x00))))
    ;; (not SUBSEQ: ECL's takes the length of the list first)
    (is (equal '(1 2) (loop for x in circle repeat 2 collect x)))
    (is (eq circle (cddr circle)))))

(test (golden-short-references :fixture headerless)
  "References to ids 32 to 2079 take two bytes (short-ref: the tag's low
three bits and a byte), and to cons ids below 2048 (short-cons-ref); past
those, a ref or cons-ref and a varint.  Each form reads back."
  (flet ((strings (n) (loop for i below n collect (format nil "~d" i))))
    ;; N strings, then the last again: a reference (the strings take ids 0
    ;; to N-1; without cons tracking the list takes none), the record's
    ;; first, so never a next-ref
    (dolist (n '(32 33 300 2080 2081))
      (let* ((strings (strings n))
             (octets (stored-octets (append strings (last strings))
                                    :support-shared-list-structures nil))
             (restored (binstore:restore (coerce octets '(vector (unsigned-byte 8))))))
        (is (= (length restored) (1+ n)))
        (is (eq (nth (1- n) restored) (nth n restored)))
        (let ((expected (let ((id (1- n)))
                          (cond ((< id 32) (list (+ #x40 id)))
                                ((< id 2080) (let ((k (- id 32)))
                                               (list (+ #x30 (ash k -8)) (ldb (byte 8 0) k))))
                                (t (list* #x20 (varint-octets id)))))))
          (is (equal expected (last octets (length expected)))
              "a reference to id ~d: ~s" (1- n) (last octets 4))))))
  ;; the same in the forms version 3 wrote: a ref and a varint
  (is (equal '("a" "a") (binstore:restore (octets #x29 #x02 #x02 #x12 #x01 #x61 #x20 #x00))))
  ;; short-ref #x37 #xFF names id 2079 (the vector is id 0, its strings
  ;; 1 on); short-cons-ref #x3F #xFF cons id 2047 (the outer list's two
  ;; conses are 0 and 1)
  (let ((v (make-array 2100)))
    (dotimes (i 2100) (setf (svref v i) (format nil "~d" i)))
    (let ((octets (stored-octets (list v (svref v 2078)))))
      (is (equal '(#x37 #xFF) (last octets 2)))))
  (let* ((l (make-list 2049 :initial-element 0))
         (octets (stored-octets (list l (nthcdr 2045 l)) :support-shared-list-structures t)))
    (is (equal '(#x3F #xFF) (last octets 2)))
    (let ((restored (binstore:restore (coerce octets '(vector (unsigned-byte 8))))))
      (is (eq (second restored) (nthcdr 2045 (first restored)))))))

(test (golden-next-references :fixture headerless)
  "A reference to the id one above the one the last reference named is a
next-ref, one byte, from id 32 on (below, the one-byte small reference
stays); any other id takes its usual form.  Each reads back."
  (let* ((strings (loop for i below 40 collect (format nil "~d" i)))
         (octets (stored-octets (append strings strings) :support-shared-list-structures nil))
         (restored (binstore:restore (coerce octets '(vector (unsigned-byte 8))))))
    ;; the second half: ids 0-31 small references, 32-39 next-refs
    (is (equal (append (loop for id below 32 collect (+ #x40 id))
                       (make-list 8 :initial-element #x2F))
               (last octets 40)))
    (is (every #'eq (subseq restored 0 40) (subseq restored 40))))
  ;; ids 35, 36, 34, 35, 0, 1: short-ref, next-ref, short-ref, next-ref,
  ;; small, small (the small form wins under 32)
  (let* ((strings (loop for i below 40 collect (format nil "~d" i)))
         (picks (mapcar (lambda (i) (nth i strings)) '(35 36 34 35 0 1)))
         (octets (stored-octets (append strings picks) :support-shared-list-structures nil))
         (restored (binstore:restore (coerce octets '(vector (unsigned-byte 8))))))
    (is (equal '(#x30 #x03 #x2F #x30 #x02 #x2F #x40 #x41) (last octets 8)))
    (is (equal '(35 36 34 35 0 1)
               (mapcar (lambda (x) (position x restored)) (subseq restored 40)))))
  ;; written by hand: a small reference to id 0, then next-ref names id 1
  (let ((restored (binstore:restore (octets #x02 #x04 #x12 #x01 #x61 #x12 #x01 #x62 #x40 #x2F))))
    (is (equal '("a" "b" "a" "b") restored))
    (is (eq (first restored) (third restored)))
    (is (eq (second restored) (fourth restored)))))

(test (golden-version-1-vectors :fixture headerless)
  "Version 1 wrote octet and double-float vectors as any specialized
vector, with their element type's code; they still read."
  (let ((v (binstore:restore (octets #x15 #x05 #x03 #x01 #x02 #xFF))))
    (is (typep v '(simple-array (unsigned-byte 8) (3))))
    (is (equalp #(1 2 255) v)))
  (let ((v (binstore:restore (octets #x15 #x13 #x01 0 0 0 0 0 0 #xF8 #x3F))))
    (is (typep v '(simple-array double-float (1))))
    (is (equalp #(1.5d0) v))))

(test (golden-version-1-tracking :fixture headerless)
  "Streams of format version 1 say the tracking flags in two bytes, #x23
then the flags; they still read, with the meaning of the one-byte tags."
  (let ((twice (binstore:restore (octets #x24 #x42 #x53 #x54 #x01
                                         #x23 #x00 #x02 #x02 #x12 #x02 #x61 #x62 #x12 #x02 #x61 #x62))))
    (is (equal '("ab" "ab") twice))
    (is (not (eq (first twice) (second twice)))))
  ;; Flags 0: a reference to id 0 names the first symbol, not the string.
  (is (equal '("ab" :a :a)
             (binstore:restore (octets #x23 #x00 #x02 #x03 #x12 #x02 #x61 #x62
                                       #x18 #x01 #x41 #x40))))
  (let ((circle (binstore:restore (octets #x23 #x03 #x03 #x02 #x71 #x72 #x26 #x00))))
    (is (eql 1 (first circle)))
    (is (eq circle (cddr circle))))
  ;; Flags 2, which no writer uses: conses get ids, other objects none.
  (let ((circle (binstore:restore (octets #x23 #x02 #x03 #x03 #x12 #x02 #x61 #x62
                                          #x18 #x01 #x41 #x40 #x26 #x00))))
    (is (equal '("ab" :a :a) (loop for x in circle repeat 3 collect x)))
    (is (eq circle (cdddr circle)))))

(test (golden-header-and-end :fixture headerless)
  (is (equal '(#x24 #x42 #x53 #x54 #x05 #x70 #x25)
             (stored-octets 0 :output-magic-number t :output-end-marker t))))

(test golden-defaults
  "STORE's defaults: the header (version 5) and full tracking, then the
object; several objects after OBJECTS and their count."
  (is (equal '(#x24 #x42 #x53 #x54 #x05 #x29 #x71)
             (coerce (binstore:store nil 1) 'list)))
  (is (equal '(#x29 #x2C #x02 #x71 #x72)
             (coerce (binstore:store nil '(1 2) :as-separate-objects t
                                                :output-magic-number nil)
                     'list)))
  (is (equal '(1 2) (multiple-value-list
                     (binstore:restore (octets #x29 #x2C #x02 #x71 #x72)
                                       :require-header nil)))))

(test (golden-version-2-records :fixture headerless)
  "A record whose header names version 2 holds objects up to the end of the
input or an end marker, as version 2 wrote them."
  (is (equal '(1 2 3)
             (multiple-value-list
              (binstore:restore (octets #x24 #x42 #x53 #x54 #x02 #x71 #x72 #x73)))))
  (is (equal '(1 2)
             (multiple-value-list
              (binstore:restore (octets #x24 #x42 #x53 #x54 #x02 #x71 #x72 #x25 #x73)))))
  ;; without a header, the version 3 rule: one object
  (is (equal '(1) (multiple-value-list (binstore:restore (octets #x71 #x72 #x73))))))

(test (golden-deferred-contents :fixture headerless)
  "A list nested 1001 deep: the innermost container is written LATER and
filled after the top-level object."
  (let ((deep nil))
    (dotimes (i 1001) (setf deep (list deep)))
    (let ((bytes (stored-octets deep)))
      (is (= (+ (* 2 1000) 3 2 1) (length bytes)))
      (is (equal '(#x21 #x02 #x01 #x22 #x00 #x00) (last bytes 6))))))

(test (golden-shared-instances :fixture headerless)
  "A structure whose slot holds itself, and one holding a string and the
first, each met twice: the first instance writes its class descriptor (id
5, after the package, the class name and the two slot names) and takes id
6, the second refers to the descriptor (#x45) and takes id 7 before its
string takes 8; after them both are one-byte references.  The instance's
own reference inside it is #x46."
  (let* ((a (make-gen-point :x 1))
         (b (make-gen-point :x (coerce "s" 'simple-base-string) :y a)))
    (setf (gen-point-y a) a)
    (is (equal (append '(#x14 #x04 #x1D #x1E #x00 #x17 #x1A #x0E)
                       (map 'list #'char-code "BINSTORE-TESTS")
                       '(#x09) (map 'list #'char-code "GEN-POINT")
                       '(#x02 #x17 #x41 #x01 #x58 #x17 #x41 #x01 #x59
                         #x71 #x46
                         #x1D #x45 #x12 #x01 #x73 #x46
                         #x46 #x47))
               (stored-octets (vector a b a b))))
    (let ((copy (binstore:restore (binstore:store nil (vector a b a b)))))
      (is (eq (svref copy 0) (svref copy 2)))
      (is (eq (svref copy 1) (svref copy 3)))
      (is (eq (svref copy 0) (gen-point-y (svref copy 0))))
      (is (eq (svref copy 0) (gen-point-y (svref copy 1))))
      (is (equal '(1 "s") (map 'list #'gen-point-x (subseq copy 0 2)))))))
