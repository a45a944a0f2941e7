;;;; The exported UTF-8 codec (src/text/utf8-codec.lisp), its kernels
;;;; (src/io/utf8.lisp) and the line readers (src/text/lines.lisp): round
;;;; trips against SBCL's own codec, every class of ill-formed input at its
;;;; exact offset, the replacement restart, bounds, hostile calls of every
;;;; unchecked loop, and text files cut every way a line can be.

(in-package #:binstore-tests)

(def-suite utf8 :in all :description "UTF8-DECODE, UTF8-ENCODE, READ-LINES and their kernels.")
(in-suite utf8)

(defun utf8-octets (&rest parts)
  "An octet vector of PARTS: integers (bytes) and strings (their UTF-8 by
SBCL's encoder)."
  (coerce (loop for part in parts
                append (if (stringp part)
                           (coerce (sb-ext:string-to-octets part :external-format :utf-8) 'list)
                           (list part)))
          '(simple-array (unsigned-byte 8) (*))))

(defparameter *code-ranges*
  '((#x0 . #x7F) (#x80 . #x7FF) (#x800 . #xD7FF) (#xE000 . #xFFFF) (#x10000 . #x10FFFF))
  "Code points by length of encoding, without the surrogates (which SBCL's
own encoder refuses, and binstore encodes: tested on their own).")

(defun random-code (state &optional (ranges *code-ranges*))
  (destructuring-bind (low . high) (elt ranges (random (length ranges) state))
    (+ low (random (1+ (- high low)) state))))

(defun random-text (state length &optional (ranges *code-ranges*))
  "A character string of LENGTH random characters from RANGES; runs of
ASCII now and then, for the word-at-a-time paths."
  (let ((s (make-string length)))
    (loop with i = 0
          while (< i length)
          do (if (zerop (random 3 state))
                 (loop repeat (random 20 state) while (< i length)
                       do (setf (char s i) (code-char (random 128 state))) (incf i))
                 (progn (setf (char s i) (code-char (random-code state ranges))) (incf i))))
    s))

(defun sbcl-octets (string)
  (sb-ext:string-to-octets string :external-format :utf-8))

(test round-trip-against-sbcl
  "Random strings of every code-point range, and of each range alone, of
lengths around the 8-byte steps: encoded as SBCL encodes them, decoded back,
UTF8-LENGTH the encoding's length."
  (let ((state (seeded-random-state 3401)))
    (dolist (ranges (cons *code-ranges* (mapcar #'list *code-ranges*)))
      (dotimes (k 150)
        (let* ((length (if (< k 100) k (random 3000 state)))
               (string (random-text state length ranges))
               (expected (sbcl-octets string))
               (encoded (binstore:utf8-encode string)))
          (is (equalp expected encoded))
          (is (typep encoded '(simple-array (unsigned-byte 8) (*))))
          (is (= (length expected) (binstore:utf8-length string)))
          (let ((decoded (binstore:utf8-decode expected)))
            (is (string= string decoded))
            (is (typep decoded '(simple-array character (*)))))
          (is (string= (sb-ext:octets-to-string expected :external-format :utf-8)
                       (binstore:utf8-decode expected :base-string-if-ascii t))))))))

(test ascii-and-base-strings
  "ASCII decodes to a base string only when asked; a base string encodes
to its bytes; a string with one non-ASCII character stays a character
string whatever is asked."
  (let* ((text (format nil "~{~a~}" (loop for i below 50 collect "line of ASCII text ")))
         (bytes (sbcl-octets text)))
    (is (typep (binstore:utf8-decode bytes :base-string-if-ascii t) 'simple-base-string))
    (is (typep (binstore:utf8-decode bytes) '(simple-array character (*))))
    (is (string= text (binstore:utf8-decode bytes :base-string-if-ascii t)))
    (let ((base (coerce text 'simple-base-string)))
      (is (equalp bytes (binstore:utf8-encode base)))
      (is (= (length bytes) (binstore:utf8-length base)))
      (is (equalp (subseq bytes 3 17) (binstore:utf8-encode base :start 3 :end 17))))
    (let ((mixed (utf8-octets text "é" text)))
      (is (typep (binstore:utf8-decode mixed :base-string-if-ascii t)
                 '(simple-array character (*))))
      (is (string= (concatenate 'string text "é" text) (binstore:utf8-decode mixed))))
    (is (string= "" (binstore:utf8-decode (octets))))
    (is (typep (binstore:utf8-decode (octets) :base-string-if-ascii t) 'simple-base-string))
    (is (equalp (octets) (binstore:utf8-encode "")))))

(test surrogates
  "Surrogate code points are encoded in their 3-byte forms and decoded
back: every SBCL string round-trips."
  (let ((string (coerce (list #\a (code-char #xD800) (code-char #xDBFF) (code-char #xDC00)
                              (code-char #xDFFF) #\b)
                        'string)))
    (is (equalp (utf8-octets "a" #xED #xA0 #x80 #xED #xAF #xBF #xED #xB0 #x80 #xED #xBF #xBF "b")
                (binstore:utf8-encode string)))
    (is (= 14 (binstore:utf8-length string)))
    (is (string= string (binstore:utf8-decode (binstore:utf8-encode string))))))

(defparameter *ill-formed*
  ;; bytes after the prefix, offset of the error within them, the bytes the
  ;; condition names, a word of its message
  '(((#x80) 0 (#x80) "continuation")
    ((#xBF #x41) 0 (#xBF) "continuation")
    ((#xC0 #x80) 0 (#xC0) "overlong")
    ((#xC1 #xBF) 0 (#xC1) "overlong")
    ((#xE0 #x80 #x80) 0 (#xE0) "overlong")
    ((#xE0 #x9F #xBF) 0 (#xE0) "overlong")
    ((#xF0 #x80 #x80 #x80) 0 (#xF0) "overlong")
    ((#xF0 #x8F #xBF #xBF) 0 (#xF0) "overlong")
    ((#xF4 #x90 #x80 #x80) 0 (#xF4) "above")
    ((#xF5 #x80 #x80 #x80) 0 (#xF5) "above")
    ((#xF7 #xBF #xBF #xBF) 0 (#xF7) "above")
    ((#xF8 #x88 #x80 #x80 #x80) 0 (#xF8) "cannot start")
    ((#xFE) 0 (#xFE) "cannot start")
    ((#xFF #x41) 0 (#xFF) "cannot start")
    ((#xC3) 0 (#xC3) "end of the input")
    ((#xE2 #x82) 0 (#xE2 #x82) "end of the input")
    ((#xF0 #x9F #x98) 0 (#xF0 #x9F #x98) "end of the input")
    ((#xC3 #x41) 0 (#xC3) "cut short")
    ((#xE2 #x82 #x41) 0 (#xE2 #x82) "cut short")
    ((#xE2 #xC3 #xA9) 0 (#xE2) "cut short")
    ((#xF0 #x9F #x98 #xF0) 0 (#xF0 #x9F #x98) "cut short")
    ((#x41 #xC3 #xA9 #x80) 3 (#x80) "continuation"))
  "Each class of ill-formed input.")

(defun first-invalid (octets &rest arguments)
  "The INVALID-UTF8 UTF8-DECODE of OCTETS (with ARGUMENTS) signals, or NIL."
  (handler-case (progn (apply #'binstore:utf8-decode octets arguments) nil)
    (binstore:invalid-utf8 (c) c)))

(test ill-formed-input-at-its-offset
  "Each class of ill-formed input signals INVALID-UTF8 at the exact offset
of its first byte, naming its bytes, after prefixes that end on and off
the word-at-a-time steps, and behind START (the offset is in the vector)."
  (dolist (prefix-length '(0 1 7 8 9 31 32 33 100))
    (dolist (case *ill-formed*)
      (destructuring-bind (bytes at named word) case
        (let* ((prefix (make-string prefix-length :initial-element #\x))
               (input (apply #'utf8-octets prefix bytes))
               (c (first-invalid input)))
          (is (typep c 'binstore:invalid-utf8) "~s after ~d: no condition" bytes prefix-length)
          (when c
            (is (= (+ prefix-length at) (binstore:invalid-utf8-offset c)))
            (is (equal named (binstore:invalid-utf8-octets c)))
            (is (search word (princ-to-string c)) "~s: ~a" bytes c)
            (is (typep c 'binstore:binstore-error)))
          ;; the same bytes after 5 others START skips
          (let ((c (first-invalid (apply #'utf8-octets "skip!" prefix bytes) :start 5)))
            (is (and c (= (+ 5 prefix-length at) (binstore:invalid-utf8-offset c))))))))))

(test ill-formed-after-multibyte
  "An error after characters of 2, 3 and 4 bytes is found at its offset."
  (let* ((good (utf8-octets "é€😀é€😀"))
         (c (first-invalid (utf8-octets "é€😀é€😀" #xC0 #x80))))
    (is (= (length good) (binstore:invalid-utf8-offset c)))))

(defun decode-replacing (octets &rest arguments)
  "UTF8-DECODE of OCTETS with every INVALID-UTF8 replaced; the string and
the offsets signalled."
  (let ((offsets '()))
    (values (handler-bind ((binstore:invalid-utf8
                             (lambda (c)
                               (push (binstore:invalid-utf8-offset c) offsets)
                               (binstore:use-replacement-character c))))
              (apply #'binstore:utf8-decode octets arguments))
            (nreverse offsets))))

(test replacement-restart
  "USE-REPLACEMENT-CHARACTER puts one U+FFFD for each maximal ill-formed
part and carries on after it."
  (let ((r (string (code-char #xFFFD))))
    (multiple-value-bind (string offsets)
        (decode-replacing (utf8-octets "a" #xC0 #x80 "b" #xE2 #x82 "c" #xF4 #x90 #x80 #x80 "d" #xF0 #x9F #x98))
      (is (string= (concatenate 'string "a" r r "b" r "c" r r r r "d" r) string))
      (is (equal '(1 2 4 7 8 9 10 12) offsets)))
    (multiple-value-bind (string offsets) (decode-replacing (utf8-octets #xFF "é" #xFF) :base-string-if-ascii t)
      (is (string= (concatenate 'string r "é" r) string))
      (is (equal '(0 3) offsets)))
    ;; the restart is there, with a report
    (block found
      (handler-bind ((binstore:invalid-utf8
                       (lambda (c)
                         (let ((restart (find-restart 'binstore:use-replacement-character c)))
                           (is (not (null restart)))
                           (is (search "U+FFFD" (princ-to-string restart))))
                         (return-from found))))
        (binstore:utf8-decode (utf8-octets #x80))
        (fail "no INVALID-UTF8")))))

(defun reference-decode (octets)
  "OCTETS decoded by the rules written out plainly, one U+FFFD for each
maximal ill-formed part: the oracle for random bytes."
  (let ((out '()) (i 0) (n (length octets)))
    (flet ((byte-at (k) (if (< k n) (aref octets k) -1)))
      (loop while (< i n)
            do (let* ((b0 (byte-at i))
                      (spec (cond ((< b0 #x80) nil)
                                  ((<= #xC2 b0 #xDF) (list 1 #x80 #xBF))
                                  ((= b0 #xE0) (list 2 #xA0 #xBF))
                                  ((<= #xE1 b0 #xEF) (list 2 #x80 #xBF))
                                  ((= b0 #xF0) (list 3 #x90 #xBF))
                                  ((<= #xF1 b0 #xF3) (list 3 #x80 #xBF))
                                  ((= b0 #xF4) (list 3 #x80 #x8F))
                                  (t :bad))))
                 (cond ((null spec) (push (code-char b0) out) (incf i))
                       ((eq spec :bad) (push (code-char #xFFFD) out) (incf i))
                       (t (destructuring-bind (more low high) spec
                            (let ((code (ldb (byte (- 6 more) 0) b0)) (k 1))
                              (loop while (<= k more)
                                    do (let ((b (byte-at (+ i k))))
                                         (unless (if (= k 1) (<= low b high) (<= #x80 b #xBF))
                                           (return))
                                         (setf code (logior (ash code 6) (logand b #x3F)))
                                         (incf k)))
                              (if (> k more)
                                  (progn (push (code-char code) out) (incf i k))
                                  (progn (push (code-char #xFFFD) out) (incf i k))))))))))
    (coerce (nreverse out) 'string)))

(test random-bytes-against-reference
  "Random bytes, mostly valid UTF-8 with damage here and there, decode (with
replacement) as the plain reference decodes them, and signal once per
replacement."
  (let ((state (seeded-random-state 3402)))
    (dotimes (k 3000)
      (let* ((valid (coerce (binstore:utf8-encode
                             (random-text state (random 60 state)
                                          (append *code-ranges* '((#xD800 . #xDFFF)))))
                            'list))
             (damaged (loop for b in valid
                            collect (if (zerop (random 25 state)) (random 256 state) b)))
             (octets (coerce (if (zerop (random 4 state))
                                 (loop repeat (random 40 state) collect (random 256 state))
                                 damaged)
                             '(simple-array (unsigned-byte 8) (*))))
             (expected (reference-decode octets)))
        (multiple-value-bind (string offsets) (decode-replacing octets)
          (is (string= expected string) "~s" octets)
          (is (= (count (code-char #xFFFD) expected) (length offsets)) "~s" octets))))))

(test four-characters-a-step-against-one-by-one
  "Text of 1- to 3-byte characters (surrogates too), damaged now and then
the ways the four-at-a-time decoder must refuse (a stray continuation
byte, a lead byte of another width, C0/C1, an overlong E0 form, F0 and
over, a cut sequence), decodes with the vector instructions to the same
string, with the same INVALID-UTF8 offsets, as one character at a time
without them, and as the plain reference."
  (let ((state (seeded-random-state 4404))
        (ranges '((#x0 . #x7F) (#x80 . #x7FF) (#x800 . #xFFFF))))
    (flet ((damage (byte)
             (case (random 8 state)
               (0 (+ #x80 (random 64 state)))             ; a continuation byte
               (1 (+ #xC2 (random 30 state)))             ; a 2-byte lead
               (2 (+ #xE0 (random 16 state)))             ; a 3-byte lead
               (3 (+ #xC0 (random 2 state)))              ; never valid
               (4 (+ #xF0 (random 16 state)))             ; 4-byte leads and worse
               (5 (random 128 state))                     ; ASCII
               (t (if (< byte #x80) #xE0 (logxor byte #x40))))))
      (dotimes (round 3000)
        (let* ((text (random-text state (+ 4 (random 80 state)) ranges))
               (valid (coerce (binstore:utf8-encode text) 'list))
               (octets (coerce (loop for b in valid
                                     collect (if (zerop (random 30 state)) (damage b) b))
                               '(simple-array (unsigned-byte 8) (*)))))
          (multiple-value-bind (string offsets) (decode-replacing octets)
            (multiple-value-bind (plain plain-offsets)
                (call-without-avx2 (lambda () (decode-replacing octets)))
              (is (string= plain string) "~s" octets)
              (is (equal plain-offsets offsets) "~s" octets)
              (is (string= (reference-decode octets) string) "~s" octets))))))))

(test bounds
  "START and END: bytes outside them are never read, a sequence END cuts is
ill-formed, empty ranges give empty strings, bad bounds signal TYPE-ERROR."
  (let ((bytes (utf8-octets "0123456789abcdefghijé€😀")))
    (is (string= "3456" (binstore:utf8-decode bytes :start 3 :end 7)))
    (is (string= "" (binstore:utf8-decode bytes :start 5 :end 5)))
    (is (string= "789abcdefghij" (binstore:utf8-decode bytes :start 7 :end 20)))
    (is (typep (binstore:utf8-decode bytes :start 7 :end 20 :base-string-if-ascii t)
               'simple-base-string))
    ;; é is bytes 20 and 21: END between them cuts it
    (let ((c (first-invalid bytes :end 21)))
      (is (and c (= 20 (binstore:invalid-utf8-offset c)))))
    ;; 😀 is the last four: each cut is at its first byte
    (dolist (cut '(1 2 3))
      (let ((c (first-invalid bytes :end (- (length bytes) cut))))
        (is (and c (= (- (length bytes) 4) (binstore:invalid-utf8-offset c))))))
    ;; a START inside a sequence: a continuation byte
    (let ((c (first-invalid bytes :start 21)))
      (is (and c (= 21 (binstore:invalid-utf8-offset c)))))
    (signals type-error (binstore:utf8-decode bytes :start 3 :end 2))
    (signals type-error (binstore:utf8-decode bytes :end (1+ (length bytes))))
    (signals type-error (binstore:utf8-decode bytes :start -1))
    (signals type-error (binstore:utf8-decode "not octets"))
    (signals type-error (binstore:utf8-encode "abc" :end 4))
    (signals type-error (binstore:utf8-length "abc" :start 4))
    (is (equalp (utf8-octets "é€") (binstore:utf8-encode "xé€y" :start 1 :end 3)))
    (is (= 5 (binstore:utf8-length "xé€y" :start 1 :end 3)))))

(test non-simple-vectors
  "Displaced and adjustable octet vectors and strings work, and offsets are
in the vector given."
  (let* ((store (utf8-octets "xxxx" "héllo" #xC0 "yy"))
         (displaced (make-array (- (length store) 4) :element-type '(unsigned-byte 8)
                                                     :displaced-to store :displaced-index-offset 4)))
    (is (string= "héllo" (binstore:utf8-decode displaced :end 6)))
    (let ((c (first-invalid displaced)))
      (is (and c (= 6 (binstore:invalid-utf8-offset c)))))
    (let ((c (first-invalid displaced :start 1)))
      (is (and c (= 6 (binstore:invalid-utf8-offset c))))))
  (let ((string (make-array 5 :element-type 'character :adjustable t :fill-pointer 3
                              :initial-contents "aé€xx")))
    (is (equalp (utf8-octets "aé€") (binstore:utf8-encode string)))
    (is (= 6 (binstore:utf8-length string)))))

(test decode-into
  "UTF8-DECODE-INTO fills the string's range, stops before a sequence END
cuts, and returns where it stopped in both."
  (let ((string (make-string 10 :initial-element #\-))
        (bytes (utf8-octets "ab€😀cdefghijklmnop")))
    ;; room for 4 characters from index 2
    (multiple-value-bind (i pos) (binstore:utf8-decode-into bytes string :string-start 2 :string-end 6)
      (is (= 6 i))
      (is (= 9 pos))
      (is (string= "--ab€😀----" string)))
    ;; END inside the euro sign: stops at it
    (multiple-value-bind (i pos) (binstore:utf8-decode-into bytes string :end 4)
      (is (= 2 i))
      (is (= 2 pos)))
    ;; ill-formed in the middle: signals, and the restart carries on
    (let ((bad (utf8-octets "ab" #xFF "cd")))
      (signals binstore:invalid-utf8 (binstore:utf8-decode-into bad string))
      (handler-bind ((binstore:invalid-utf8 #'binstore:use-replacement-character))
        (multiple-value-bind (i pos) (binstore:utf8-decode-into bad string)
          (is (= 5 i))
          (is (= 5 pos))
          (is (string= (coerce (list #\a #\b (code-char #xFFFD) #\c #\d) 'string)
                       (subseq string 0 5))))))
    ;; long ASCII into a short room: nothing written past it
    (let ((target (make-string 20 :initial-element #\-)))
      (multiple-value-bind (i pos)
          (binstore:utf8-decode-into (utf8-octets (make-string 100 :initial-element #\z)) target
                                     :string-start 3 :string-end 12)
        (is (= 12 i))
        (is (= 9 pos))
        (is (string= "---zzzzzzzzz--------" target))))
    (signals type-error (binstore:utf8-decode-into bytes (make-string 3 :element-type 'base-char)))))

(test encode-into
  "UTF8-ENCODE-INTO writes whole characters while they fit, nothing past
OCTET-END, and returns where it stopped in both."
  (let ((string (concatenate 'string (make-string 20 :initial-element #\a) "é€😀z")))
    (dolist (room '(0 1 19 20 21 22 23 24 25 26 27 28 29 30 40))
      (let ((out (make-array 50 :element-type '(unsigned-byte 8) :initial-element 7))
            (full (binstore:utf8-encode string)))
        (multiple-value-bind (p k) (binstore:utf8-encode-into string out :octet-start 3
                                                                           :octet-end (+ 3 room))
          (is (= p (+ 3 (binstore:utf8-length string :end k))))
          (is (<= (- p 3) room))
          (is-true (or (= k (length string))
                       (> (binstore:utf8-length string :end (1+ k)) room)))
          (is (equalp (subseq full 0 (- p 3)) (subseq out 3 p)))
          (is (every (lambda (b) (= b 7)) (subseq out p)))
          (is (every (lambda (b) (= b 7)) (subseq out 0 3))))))
    (let ((out (make-array 8 :element-type '(unsigned-byte 8) :initial-element 0)))
      (multiple-value-bind (p k) (binstore:utf8-encode-into (coerce "abcdefghij" 'base-string) out)
        (is (= 8 p))
        (is (= 8 k))
        (is (equalp (utf8-octets "abcdefgh") out))))))

;;; Hostile calls of the unchecked kernels: each checks its bounds at entry.

(defun call-without-avx2 (function)
  "Call FUNCTION with the processor's AVX2 taken for absent, so that the
UTF-8 kernels keep to their word loops."
  (let ((known binstore::**avx2-instructions**))
    (setf binstore::**avx2-instructions** nil)
    (unwind-protect (funcall function)
      (setf binstore::**avx2-instructions** known))))

(test one-character-in-every-lane
  "A string of ASCII with one other character at each position of the
16- and 32-character steps (around them too, and at the end): code points
on each side of every boundary of the vector paths (127/128, 255/256,
#x7FFF/#x8000, #xFFFF/#x10000, the last) encode as SBCL encodes them and
decode back, and END cuts where it says, with the vector instructions (where
the processor has them) and without."
  (flet ((check ()
           (dolist (code '(#x7F #x80 #xFF #x100 #x7FF #x800 #x7FFF #x8000 #xFFFF
                           #x10000 #x10FFFF))
             (dolist (length '(16 17 31 32 33 47 48 64 70))
               (dotimes (at length)
                 (let ((string (make-string length :initial-element #\q)))
                   (setf (char string at) (code-char code))
                   (let ((expected (sbcl-octets string)))
                     (is (equalp expected (binstore:utf8-encode string))
                         "~x at ~d of ~d" code at length)
                     (is (string= string (binstore:utf8-decode expected))
                         "~x at ~d of ~d" code at length)
                     (is (string= (subseq string 0 at)
                                  (binstore:utf8-decode expected :end at))))))))))
    (check)
    (call-without-avx2 #'check)))

(test length-counts-every-threshold-in-every-lane
  "UTF8-LENGTH of random stretches of a string of code points on each side
of every length threshold (and the surrogates), against the sum of each
character's encoding length: the word-at-a-time count adds the three
thresholds of two characters a word, for either lane."
  (let ((edges '(0 #x7F #x80 #x7FF #x800 #xD7FF #xD800 #xDFFF #xE000 #xFFFF #x10000 #x10FFFF))
        (state (seeded-random-state 3407))
        (string (make-string 300)))
    (flet ((bytes (code) (cond ((< code #x80) 1) ((< code #x800) 2) ((< code #x10000) 3) (t 4))))
      (flet ((check ()
               (dotimes (round 150)
                 (dotimes (i (length string))
                   (setf (char string i) (code-char (elt edges (random (length edges) state)))))
                 (let* ((a (random 300 state)) (b (+ a (random (- 301 a) state))))
                   (is (= (loop for i from a below b sum (bytes (char-code (char string i))))
                          (binstore:utf8-length string :start a :end b))
                       "~d to ~d" a b)))))
        (check)
        (call-without-avx2 #'check)))))

(test narrow-blocks-of-every-mask
  "Blocks of eight characters below #x10000 in every pattern of ASCII and
2-byte characters, and in random patterns of 1-, 2- and 3-byte ones (at
the edges #x7F, #x80, #x7FF, #x800, #xD800, #xFFFF), at every alignment,
then a 4-byte character and 40 ASCII ones (the vector path only takes a
block when the characters after it bound its writes): encoded as SBCL encodes them (binstore's own
3-byte forms for surrogates), with the vector instructions and without;
and UTF8-ENCODE-INTO, given room for only the first bytes, writes nothing
past it (a block is written 16 or 32 bytes at a time, so the room must
bound it)."
  (let ((state (seeded-random-state 808)))
    (flet ((block-string (widths shift)
             (let ((string (make-string (+ shift 8 1 40) :initial-element #\x)))
               (loop for width in widths
                     for i from shift
                     do (setf (char string i)
                              (code-char (let ((choices (ecase width
                                                          (1 '(0 #x41 #x7F))
                                                          (2 '(#x80 #x3B1 #x7FF))
                                                          (3 '(#x800 #x4E2D #xD800 #xFFFF)))))
                                           (elt choices (random (length choices) state))))))
               (setf (char string (+ shift 8)) (code-char #x1F600))
               string))
           (encoding (string)
             (let ((octets '()))
               (loop for c across string
                     for code = (char-code c)
                     do (if (<= #xD800 code #xDFFF) ; SBCL's encoder refuses these
                            (push (list (logior #xE0 (ash code -12))
                                        (logior #x80 (ldb (byte 6 6) code))
                                        (logior #x80 (ldb (byte 6 0) code)))
                                  octets)
                            (push (coerce (sbcl-octets (string c)) 'list) octets)))
               (coerce (apply #'append (nreverse octets)) '(simple-array (unsigned-byte 8) (*))))))
      (flet ((check ()
               (dotimes (round 1256)
                 (let* ((widths (if (< round 256)
                                    (loop for lane below 8 collect (if (logbitp lane round) 1 2))
                                    (loop repeat 8 collect (1+ (random 3 state)))))
                        (string (block-string widths (random 8 state)))
                        (expected (encoding string)))
                   (is (equalp expected (binstore:utf8-encode string)) "widths ~a" widths)
                   (let* ((room (random (1+ (length expected)) state))
                          (out (make-array (+ room 40) :element-type '(unsigned-byte 8)
                                                       :initial-element 7)))
                     (multiple-value-bind (p k) (binstore:utf8-encode-into string out :octet-end room)
                       (is (= p (binstore:utf8-length string :end k)))
                       (is (equalp (subseq expected 0 p) (subseq out 0 p)))
                       (is-true (every (lambda (b) (= b 7)) (subseq out room))
                                "widths ~a, room ~d" widths room)))))))
        (check)
        (call-without-avx2 #'check)))))

(test kernels-check-their-bounds
  "Every kernel that runs unchecked refuses bounds outside its memory."
  (let* ((bytes (utf8-octets "abcdefgh"))
         (string (make-string 4)))
    (sb-sys:with-pinned-objects (bytes)
      (let ((address (sb-sys:sap-int (sb-sys:vector-sap bytes))))
        (signals error (binstore::decode-utf8-window string 0 5 address 0 8))
        (signals error (binstore::decode-utf8-window string 3 2 address 0 8))
        (signals error (binstore::decode-utf8-window string 0 4 address 9 8))
        (signals error (binstore::scan-utf8 address 9 8))
        (signals error (binstore::ascii-end address 9 8))
        (signals error (binstore::newline-end address 9 8))
        ;; within bounds, they stop there: four characters, not eight
        (is (equal '(4 4) (multiple-value-list
                           (binstore::decode-utf8-window string 0 4 address 0 8))))))
    (signals error (binstore::utf8-chars-length string 0 5))
    (signals error (binstore::utf8-chars-length string 3 2))
    (let ((out (make-array 64 :element-type '(unsigned-byte 8))))
      (sb-sys:with-pinned-objects (out)
        (signals error (binstore::put-utf8-chars (sb-sys:vector-sap out) 0 string 0 5))
        (signals error (binstore::put-utf8-chars (sb-sys:vector-sap out) 0 (make-string 10) 0 11))
        (signals error (binstore::put-utf8-words (sb-sys:sap-int (sb-sys:vector-sap out)) 0
                                                 (make-string 10) 3 11))
        (signals error (binstore::put-utf8-words (sb-sys:sap-int (sb-sys:vector-sap out)) 0
                                                 (make-string 10) 5 4))))))

(test kernels-stop-at-end
  "Bytes past END are never taken, on any path: a word of ASCII, the last
bytes of a sequence, a newline."
  (let ((bytes (utf8-octets "abcdefghijklmnopqrstuvwxyz" "é€😀" (string #\Newline))))
    (loop for end from 0 to 26
          do (is (string= (subseq "abcdefghijklmnopqrstuvwxyz" 0 end)
                          (binstore:utf8-decode bytes :end end))))
    (sb-sys:with-pinned-objects (bytes)
      (let ((address (sb-sys:sap-int (sb-sys:vector-sap bytes))))
        (loop for end from 0 below (length bytes)
              do (is (= end (binstore::newline-end address 0 end)))
                 (is (= (min end 26) (binstore::ascii-end address 0 end))))
        ;; the LF, and whether what comes before it is ASCII
        (is (equal (list (1- (length bytes)) nil)
                   (multiple-value-list (binstore::newline-end address 0 (length bytes)))))
        (is (equal '(26 t) (multiple-value-list (binstore::newline-end address 0 26))))
        (is (equal '(27 nil) (multiple-value-list (binstore::newline-end address 0 27))))
        ;; 26 ASCII, three characters in 9 bytes, a newline
        (is (equal '(30 nil) (multiple-value-list
                              (binstore::scan-utf8 address 0 (length bytes)))))
        (is (equal '(26 t) (multiple-value-list (binstore::scan-utf8 address 0 26)))))))
  ;; whether what comes before the LF is ASCII, whatever follows it
  (dolist (case '(("abc~%é" 3 t) ("abcdefghij~%é" 10 t) ("aé~%" 3 nil) ("abcdefgé" 9 nil)
                  ("abcdefghijklmnop~%" 16 t) ("~%é" 0 t) ("abcdefgé~%" 9 nil)))
    (let ((bytes (utf8-octets (format nil (first case)))))
      (sb-sys:with-pinned-objects (bytes)
        (is (equal (rest case)
                   (multiple-value-list
                    (binstore::newline-end (sb-sys:sap-int (sb-sys:vector-sap bytes))
                                           0 (length bytes)))))))))

;;; Text files.

(defun random-line (state length)
  "RANDOM-TEXT without line ends: one line's characters."
  (substitute-if #\x (lambda (c) (member c '(#\Newline #\Return))) (random-text state length)))

(defun utf8-write-file (pathname octets)
  (with-open-file (out pathname :direction :output :element-type '(unsigned-byte 8)
                                :if-exists :supersede)
    (write-sequence octets out))
  pathname)

(defun lines-of (pathname &rest arguments)
  (coerce (apply #'binstore:read-lines pathname arguments) 'list))

(test read-lines-line-ends
  "LF and CR LF end lines; a lone CR does not; a last line without a
newline is a line; an empty file has none."
  (call-with-temporary-directory
   (lambda (directory)
     (flet ((lines (&rest parts)
              (lines-of (utf8-write-file (merge-pathnames "t.txt" directory)
                                           (apply #'utf8-octets parts)))))
       (is (equal '() (lines)))
       (is (equal '("") (lines 10)))
       (is (equal '("" "") (lines 10 10)))
       (is (equal '("a") (lines "a")))
       (is (equal '("a") (lines "a" 10)))
       (is (equal '("a" "b") (lines "a" 10 "b")))
       (is (equal '("a" "b") (lines "a" 13 10 "b" 13 10)))
       (is (equal '("a" "") (lines "a" 13 10 13 10)))
       (is (equal (list (coerce (list #\a #\Return #\b) 'string)) (lines "a" 13 "b")))
       (is (equal (list (string #\Return)) (lines 13)))
       (is (equal '("é€" "😀") (lines "é€" 10 "😀")))
       (let ((file (utf8-write-file (merge-pathnames "u.txt" directory) (utf8-octets "ascii" 10 "é" 10))))
         (destructuring-bind (a e) (lines-of file :base-string-if-ascii t)
           (is (typep a 'simple-base-string))
           (is (typep e '(simple-array character (*)))))
         (destructuring-bind (a e) (lines-of file)
           (is (typep a '(simple-array character (*))))
           (is (string= "é" e))))))))

(test read-lines-across-blocks
  "Lines longer than the read block, and characters of every length cut by
the block boundary, read whole; MAP-LINES sees the same lines in order."
  (call-with-temporary-directory
   (lambda (directory)
     (let* ((block binstore::+line-block-bytes+)
            (state (seeded-random-state 3403))
            (long (random-line state (+ (* 3 block) 17)))
            (lines (list "first" long "after the long one"))
            (file (merge-pathnames "long.txt" directory)))
       (utf8-write-file file (apply #'utf8-octets (loop for l in lines append (list l 10))))
       (is (equal lines (lines-of file)))
       ;; each multi-byte character straddling the first block boundary
       ;; at every cut
       (dolist (char '("é" "€" "😀"))
         (dotimes (shift 4)
           (let* ((pad (make-string (- block shift 1) :initial-element #\p))
                  (expected (list (concatenate 'string pad char "tail") "next")))
             (utf8-write-file file (utf8-octets pad char "tail" 13 10 "next" 13 10))
             (is (equal expected (lines-of file)) "~a shifted ~d" char shift))))
       ;; CR LF with the boundary between CR and LF
       (let ((pad (make-string (1- block) :initial-element #\q)))
         (utf8-write-file file (utf8-octets pad 13 10 "z"))
         (is (equal (list pad "z") (lines-of file))))
       ;; many lines, through MAP-LINES
       (let ((many (loop for i below 20000 collect (random-line state (random 40 state)))))
         (utf8-write-file file (apply #'utf8-octets (loop for l in many append (list l 10))))
         (let ((seen '()))
           (is (null (binstore:map-lines (lambda (line) (push line seen)) file)))
           (is (equal many (nreverse seen))))
         (is (equal many (lines-of file))))))))

(test read-lines-invalid-and-errors
  "Ill-formed bytes signal INVALID-UTF8 at their offset in the file, with
the restart; a missing file is a BINSTORE-FILE-ERROR; another external
format is refused."
  (call-with-temporary-directory
   (lambda (directory)
     (let* ((block binstore::+line-block-bytes+)
            (file (merge-pathnames "bad.txt" directory))
            (pad (make-string (+ block 100) :initial-element #\a)))
       (utf8-write-file file (utf8-octets "one" 10 pad 10 "two" #xC0 #xAF "three" 10))
       (let ((c (handler-case (progn (binstore:read-lines file) nil)
                  (binstore:invalid-utf8 (c) c))))
         (is (and c (= (+ 4 (length pad) 1 3) (binstore:invalid-utf8-offset c)))))
       (let ((lines (handler-bind ((binstore:invalid-utf8 #'binstore:use-replacement-character))
                      (lines-of file))))
         (is (= 3 (length lines)))
         (is (string= (coerce (list #\t #\w #\o (code-char #xFFFD) (code-char #xFFFD)
                                    #\t #\h #\r #\e #\e)
                              'string)
                      (third lines)))))
     (signals binstore:binstore-file-error
       (binstore:read-lines (merge-pathnames "missing.txt" directory)))
     (signals binstore:binstore-file-error (binstore:read-lines directory))
     (signals error (binstore:read-lines (merge-pathnames "bad.txt" directory)
                                         :external-format :latin-1)))))
