;;;; The exported UTF-8 codec: UTF8-DECODE, UTF8-DECODE-INTO, UTF8-ENCODE,
;;;; UTF8-ENCODE-INTO, UTF8-LENGTH, over octet vectors and strings, on the
;;;; kernels of src/io/utf8.lisp (which binstore's string codec shares).
;;;;
;;;; The UTF-8 is binstore's own (doc/UTF8.md): the shortest form of each
;;;; code point up to #x10FFFF, surrogate code points #xD800-#xDFFF
;;;; included as their 3-byte forms, both ways, so that every Lisp string
;;;; round-trips.  Anything else signals INVALID-UTF8 with the offset of the
;;;; ill-formed sequence, and a USE-REPLACEMENT-CHARACTER restart that puts
;;;; one U+FFFD for its maximal ill-formed part (Unicode's recommended
;;;; practice, as CPython's "replace" does) and carries on.
;;;;
;;;; Decoding is two passes over valid input: SCAN-UTF8 counts the
;;;; characters and says whether all are ASCII (a word at a time), then the
;;;; string is made to size and filled: ASCII into a base string by one
;;;; memory copy, anything into a character string by DECODE-UTF8-WINDOW.
;;;; When the kernel stops short, the input is not valid UTF-8 and the slow
;;;; path takes over, from UTF8-SEQUENCE-AT, which says what is wrong.

(in-package #:binstore)

(defconstant +replacement-character-code+ #xFFFD
  "U+FFFD REPLACEMENT CHARACTER, what USE-REPLACEMENT-CHARACTER puts.")

(declaim (inline resolve-bounds))
(defun resolve-bounds (sequence start end)
  "The end of the bounds START and END (NIL: the length) of SEQUENCE, after
checking that 0 <= START <= END <= its length; a TYPE-ERROR otherwise."
  (declare (type vector sequence))
  (let* ((length (length sequence))
         (end (or end length)))
    (unless (and (typep end 'index) (<= end length))
      (error 'type-error :datum end :expected-type `(integer 0 ,length)))
    (unless (and (typep start 'index) (<= start end))
      (error 'type-error :datum start :expected-type `(integer 0 ,end)))
    end))

;;; What is at an offset ------------------------------------------------------

(defun utf8-sequence-at (octets pos end)
  "The UTF-8 sequence of OCTETS (a simple octet vector) at POS, below END.
When it is valid: its code point and its length.  Otherwise NIL, the length
of its maximal ill-formed part (the bytes one U+FFFD replaces), a phrase
saying what is wrong, and true when the sequence is only cut by END (more
bytes could complete it)."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index pos end))
  (let ((b0 (aref octets pos)))
    (flet ((ill (width at-end control &rest arguments)
             (return-from utf8-sequence-at
               (values nil width (apply #'format nil control arguments) at-end))))
      (multiple-value-bind (more low high)
          ;; continuation bytes to come, and the range of the first of them
          ;; (narrower after E0, F0, F4: overlong forms, above #x10FFFF)
          (cond ((< b0 #x80) (return-from utf8-sequence-at (values b0 1)))
                ((< b0 #xC0) (ill 1 nil "a continuation byte cannot start a sequence"))
                ((< b0 #xC2) (ill 1 nil "an overlong form (lead byte #x~2,'0x)" b0))
                ((< b0 #xE0) (values 1 #x80 #xBF))
                ((= b0 #xE0) (values 2 #xA0 #xBF))
                ((< b0 #xF0) (values 2 #x80 #xBF))
                ((= b0 #xF0) (values 3 #x90 #xBF))
                ((< b0 #xF4) (values 3 #x80 #xBF))
                ((= b0 #xF4) (values 3 #x80 #x8F))
                ((< b0 #xF8) (ill 1 nil "a code point above #x10FFFF (lead byte #x~2,'0x)" b0))
                (t (ill 1 nil "byte #x~2,'0x cannot start a sequence" b0)))
        (let ((code (logand b0 (if (= more 1) #x1F (if (= more 2) #x0F #x07)))))
          (loop for k from 1 to more
                do (when (>= (+ pos k) end)
                     (ill k t "a sequence cut by the end of the input"))
                   (let ((b (aref octets (+ pos k))))
                     (cond ((and (= k 1) (<= #x80 b #xBF) (not (<= low b high)))
                            (if (or (= b0 #xE0) (= b0 #xF0))
                                (ill 1 nil "an overlong form")
                                (ill 1 nil "a code point above #x10FFFF")))
                           ((/= (logand b #xC0) #x80)
                            (ill k nil "a sequence cut short by byte #x~2,'0x" b)))
                     (setf code (logior (ash code 6) (logand b #x3F)))))
          (values code (+ more 1)))))))

(defun signal-invalid-utf8 (octets pos width message origin)
  "Signal INVALID-UTF8 for the WIDTH bytes of OCTETS at POS (ORIGIN + POS in
the caller's terms) with a USE-REPLACEMENT-CHARACTER restart; return the
replacement character's code when it is taken."
  (restart-case
      (error 'invalid-utf8 :offset (+ origin pos) :message message
                           :octets (coerce (subseq octets pos (+ pos width)) 'list))
    (use-replacement-character ()
      :report "Put one U+FFFD for the ill-formed bytes and carry on after them."
      +replacement-character-code+)))

(defun decode-utf8-replacing (octets pos end string i count origin final)
  "Decode OCTETS from POS below END into the character STRING from I below
COUNT, with DECODE-UTF8-WINDOW, and at each sequence it stops at, signal
INVALID-UTF8 (offsets ORIGIN + index) and on USE-REPLACEMENT-CHARACTER put
U+FFFD and carry on.  A sequence only cut by END stops decoding unless
FINAL, when it is ill-formed too.  Returns the next index and offset."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets)
           (type (simple-array character (*)) string) (type index pos end i count))
  (with-pinned-objects (octets)
    (let ((address (pointer-address (vector-pointer octets))))
      (loop
        (multiple-value-setq (i pos) (decode-utf8-window string i count address pos end))
        (when (or (>= i count) (>= pos end))
          (return (values i pos)))
        (multiple-value-bind (code width message at-end) (utf8-sequence-at octets pos end)
          (when code                    ; the kernel decodes every valid one
            (kernel-bounds-error 'decode-utf8-replacing pos end))
          (when (and at-end (not final))
            (return (values i pos)))
          (setf (schar string i)
                (code-char (signal-invalid-utf8 octets pos width message origin)))
          (setf i (+ i 1) pos (+ pos width)))))))

;;; Decoding ------------------------------------------------------------------

(defun decode-utf8-quickly (octets start end base-string-if-ascii ascii)
  "The string OCTETS hold from START below END, when they are valid UTF-8
(a base string when they are ASCII and BASE-STRING-IF-ASCII); otherwise
NIL.  ASCII true says the caller has seen that they are all ASCII."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end)
           (optimize speed))
  (with-pinned-objects (octets)
    (let* ((address (pointer-address (vector-pointer octets)))
           (ascii-end (if ascii end (ascii-end address start end))))
      (declare (type index ascii-end))
      (multiple-value-bind (count ascii)
          (if (= ascii-end end)
              (values (- end start) t)
              (values (+ (- ascii-end start) (the index (scan-utf8 address ascii-end end)))
                      nil))
        (declare (type index count))
        (if (and ascii base-string-if-ascii)
            (let ((string (make-string count :element-type 'base-char)))
              (prefault-vector string count)
              (with-pinned-objects (string)
                (copy-memory (pointer+ (vector-pointer octets) start) (vector-pointer string)
                             count))
              string)
            (let ((string (make-string count)))
              (prefault-vector string (* 4 count))
              (multiple-value-bind (i pos) (decode-utf8-window string 0 count address start end)
                (declare (type index i pos))
                (and (= i count) (= pos end) string))))))))

(defun decode-utf8-octets (octets start end base-string-if-ascii origin &optional ascii)
  "The string the simple octet vector OCTETS holds from START below END;
the offsets of INVALID-UTF8 are ORIGIN + the index in OCTETS.  ASCII true
says the caller has seen that the octets are all ASCII."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (or (decode-utf8-quickly octets start end base-string-if-ascii ascii)
      ;; not valid UTF-8: at most a character per byte, one U+FFFD for each
      ;; ill-formed part, which signals first
      (let ((string (make-string (the index (- end start)))))
        (let ((i (decode-utf8-replacing octets start end string 0 (- end start) origin t)))
          (if (= i (length string)) string (subseq string 0 i))))))

(defun utf8-decode (octets &key (start 0) end base-string-if-ascii)
  "Decode the UTF-8 in the octet vector OCTETS (any (VECTOR (UNSIGNED-BYTE
8))) from START below END (NIL: its length) into a new string, and return
it: a (SIMPLE-ARRAY CHARACTER (*)), or, when BASE-STRING-IF-ASCII is true and
every byte is ASCII, a SIMPLE-BASE-STRING (one byte per character, made by
one memory copy).

Accepted: the shortest UTF-8 form of every code point up to #x10FFFF,
surrogate code points #xD800-#xDFFF included (as UTF8-ENCODE writes them,
see doc/UTF8.md).  Anything else signals INVALID-UTF8, whose OFFSET is the
index in OCTETS of the first byte of the ill-formed sequence: an overlong
form, a sequence cut short (by END, or by a byte that is not a continuation
byte), a byte that cannot start a sequence, a code point above #x10FFFF.
Restart USE-REPLACEMENT-CHARACTER: one U+FFFD for the ill-formed bytes, and
decoding carries on after them.  Bounds outside OCTETS signal a
TYPE-ERROR."
  (check-type octets (vector (unsigned-byte 8)))
  (let ((end (resolve-bounds octets start end)))
    (with-array-data ((data octets) (from start) (to end))
      (decode-utf8-octets data from to base-string-if-ascii (- start from)))))

(defun utf8-decode-into (octets string &key (start 0) end (string-start 0) string-end)
  "Decode the UTF-8 in the octet vector OCTETS from START below END (NIL:
its length) into STRING, a string of element type CHARACTER (not a base
string), from STRING-START below STRING-END (NIL: its length), until the
octets or the room run out.  Returns two values: the index in STRING after
the last character stored, and the index in OCTETS of the first byte not
decoded.

A sequence that END cuts, but that more bytes could complete, is not
decoded: the second value points at it, so that a caller reading a stream
keeps those bytes for the next call (and decodes them with UTF8-DECODE,
which signals, when no more come).  Any other ill-formed sequence signals
INVALID-UTF8 with its offset in OCTETS, with the restart
USE-REPLACEMENT-CHARACTER, as UTF8-DECODE.  Bounds outside either vector,
or a STRING that cannot hold every character, signal a TYPE-ERROR."
  (check-type octets (vector (unsigned-byte 8)))
  (unless (and (stringp string) (subtypep (array-element-type string) 'character)
               (not (subtypep (array-element-type string) 'base-char)))
    (error 'type-error :datum string :expected-type '(vector character)))
  (let ((end (resolve-bounds octets start end))
        (string-end (resolve-bounds string string-start string-end)))
    (with-array-data ((data octets) (from start) (to end))
      (with-array-data ((chars string) (s-from string-start) (s-to string-end))
        (multiple-value-bind (i pos)
            (decode-utf8-replacing data from to chars s-from s-to (- start from) nil)
          (values (+ string-start (- i s-from)) (+ start (- pos from))))))))

;;; Encoding ------------------------------------------------------------------

(defun utf8-length (string &key (start 0) end)
  "The number of octets of the UTF-8 encoding of the characters of STRING
from START below END (NIL: its length), as UTF8-ENCODE writes them.  Bounds
outside STRING signal a TYPE-ERROR."
  (check-type string string)
  (let ((end (resolve-bounds string start end)))
    (with-array-data ((data (format-string string)) (from start) (to end)) ; on SBCL STRING
      (if (typep data '(simple-array character (*)))
          (utf8-chars-length data from to)
          (- to from)))))               ; base characters are ASCII, a byte each

(defun utf8-encode (string &key (start 0) end)
  "Encode the characters of STRING from START below END (NIL: its length)
as UTF-8 into a new (SIMPLE-ARRAY (UNSIGNED-BYTE 8) (*)), and return it.
Every character has an encoding: surrogate code points #xD800-#xDFFF get
their 3-byte forms (doc/UTF8.md), which UTF8-DECODE reads back.  A base
string's characters are ASCII, their own encoding: they are copied.  Bounds
outside STRING signal a TYPE-ERROR."
  (check-type string string)
  (let ((end (resolve-bounds string start end)))
    (with-array-data ((data (format-string string)) (from start) (to end)) ; on SBCL STRING
      (if (typep data '(simple-array character (*)))
          (let ((octets (make-array (the index (utf8-chars-length data from to))
                                    :element-type '(unsigned-byte 8))))
            (prefault-vector octets (length octets))
            (with-pinned-objects (octets)
              (put-utf8-chars (vector-pointer octets) 0 data from to))
            octets)
          (let ((octets (make-array (the index (- to from)) :element-type '(unsigned-byte 8))))
            (prefault-vector octets (length octets))
            (if (typep data 'simple-base-string)
                (with-pinned-objects (data octets)
                  (copy-memory (pointer+ (vector-pointer data) from) (vector-pointer octets)
                               (- to from)))
                (loop for k from from below to  ; a (SIMPLE-ARRAY NIL (*)): empty
                      for p from 0
                      do (setf (aref octets p) (char-code (char data k)))))
            octets)))))

(defun utf8-encode-into (string octets &key (start 0) end (octet-start 0) octet-end)
  "Encode the characters of STRING from START below END (NIL: its length)
as UTF-8 into the octet vector OCTETS (any (VECTOR (UNSIGNED-BYTE 8))) from
OCTET-START below OCTET-END (NIL: its length), whole characters only, as
many as fit.  Returns two values: the index in OCTETS after the last byte
written, and the index in STRING of the first character not encoded (END
when all were).  Encodings as UTF8-ENCODE.  Bounds outside either vector
signal a TYPE-ERROR."
  (check-type string string)
  (check-type octets (vector (unsigned-byte 8)))
  (let ((end (resolve-bounds string start end))
        (octet-end (resolve-bounds octets octet-start octet-end)))
    (with-array-data ((data (format-string string)) (from start) (to end)) ; on SBCL STRING
      (with-array-data ((out octets) (o-from octet-start) (o-to octet-end))
        (declare (type (simple-array (unsigned-byte 8) (*)) out))
        (let ((k from) (p o-from))
          (declare (type index k p))
          (with-pinned-objects (out)
            (let ((sap (vector-pointer out)))
              (if (typep data '(simple-array character (*)))
                  (loop while (< k to)
                        do (let ((block (min (- to k) (floor (- o-to p) 4))))
                             (cond ((plusp block) ; room for the longest encodings
                                    (setf p (put-utf8-chars sap p data k (+ k block))
                                          k (+ k block)))
                                   (t (let ((code (char-code (schar data k))))
                                        (when (> (code-utf8-length code) (- o-to p))
                                          (return))
                                        (setf p (put-utf8-char sap p code)
                                              k (+ k 1)))))))
                  (let ((n (min (- to from) (- o-to p))))
                    (if (typep data 'simple-base-string)
                        (with-pinned-objects (data)
                          (copy-memory (pointer+ (vector-pointer data) k) (pointer+ sap p) n))
                        (loop for j from 0 below n
                              do (setf (aref out (+ p j)) (char-code (char data (+ k j))))))
                    (setf p (+ p n) k (+ k n))))))
          (values (+ octet-start (- p o-from)) (+ start (- k from))))))))
