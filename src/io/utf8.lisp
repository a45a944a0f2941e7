;;;; UTF-8 straight from and to memory: the kernels under binstore's string
;;;; codec (src/codecs/strings.lisp) and under the exported UTF-8 codec and
;;;; line reader (src/text/).
;;;;
;;;; The format's UTF-8, and the exported codec's, is the shortest form of
;;;; each code point up to #x10FFFF, surrogates included: SBCL strings may
;;;; hold the code points #xD800-#xDFFF, and they are encoded as their
;;;; 3-byte forms (ED A0 80 .. ED BF BF) and decoded back, so that every
;;;; Lisp string round-trips.  Everything else that is not UTF-8 stops the
;;;; decoding kernels: overlong forms, truncated sequences, bytes that
;;;; cannot start a sequence, code points above #x10FFFF.  The kernels never
;;;; signal; their callers find out what is wrong and say so.
;;;;
;;;; Speed comes from doing ASCII a machine word at a time: SCAN-UTF8 counts
;;;; characters and tests for ASCII eight bytes a step, DECODE-UTF8-WINDOW
;;;; widens eight ASCII bytes into eight characters with four stores, and
;;;; PUT-UTF8-CHARS narrows eight ASCII characters into one word.  Between
;;;; ASCII runs, each 2-, 3- and 4-byte sequence is decoded by its own
;;;; branch, checked in one comparison of its continuation bits.
;;;;
;;;; Every kernel runs at (safety 0) and checks its bounds once at entry:
;;;; they read only [POS, END) of their input and write only the characters
;;;; or bytes the caller said it has room for (tests/utf8.lisp feeds them
;;;; hostile input).

(in-package #:binstore)

(defconstant +high-bits+ #x8080808080808080
  "The top bit of each byte of a word: a word of ASCII has none set.")

(declaim (inline ascii-word-p))
(defun ascii-word-p (word)
  (declare (type word word))
  (zerop (logand word +high-bits+)))

(defun kernel-bounds-error (kernel &rest bounds)
  "Signal the ERROR of a kernel called outside its bounds: a bug in binstore,
never a problem with the data."
  (error "binstore internal error: ~(~a~) called with bounds ~{~d~^ ~}" kernel bounds))

;;; Scanning ---------------------------------------------------------------

(defun scan-utf8 (address pos end)
  "Count the characters of the UTF-8 at ADDRESS (an integer, the address of
memory the caller has pinned) from POS below END, as the bytes that are not
continuation bytes (#x80-#xBF): exact for valid UTF-8, which is all that is
decoded with it (the decoder checks).  Returns the count, and true when
every byte is ASCII.  Eight bytes a step, runs of ASCII 32 where the
processor has AVX2."
  (declare (type word address) (type index pos end) (optimize speed))
  (unless (<= pos end) (kernel-bounds-error 'scan-utf8 pos end))
  (let ((sap (address-pointer address))
        (continuations 0)
        (high 0)
        (i pos)
        (wide (avx2-instructions-p)))
    (declare (type index continuations i) (type word high))
    ;; reads stay below END: each word at I with I + 8 <= END, each block
    ;; of 32 at I with I + 32 <= END
    (locally (declare (optimize (safety 0)))
      (loop while (<= (+ i 8) end)
            do (let* ((w (mem-u64 sap i))
                      ;; bit 7 of a byte set and bit 6 clear: a continuation
                      (c (logand w (lognot (logand (ash w 1) #xFFFFFFFFFFFFFFFF))
                                 +high-bits+)))
                 (declare (type word w c))
                 (setf high (logior high w))
                 (incf continuations (logcount c))
                 (incf i 8)
                 ;; after a word of ASCII, a run of it 32 bytes a step
                 (when (and wide (ascii-word-p w))
                   (loop while (and (<= (+ i 32) end) (zerop (ascii-mask-32 (+ address i))))
                         do (incf i 32)))))
      (loop while (< i end)
            do (let ((b (mem-u8 sap i)))
                 (setf high (logior high b))
                 (when (= (logand b #xC0) #x80) (incf continuations))
                 (incf i))))
    (values (- end pos continuations) (zerop (logand high +high-bits+)))))

(defun ascii-end (address pos end)
  "The offset of the first byte from POS below END at ADDRESS (an integer,
as for SCAN-UTF8) that is not ASCII, or END.  Thirty-two bytes a step, then
eight, then one."
  (declare (type word address) (type index pos end) (optimize speed))
  (unless (<= pos end) (kernel-bounds-error 'ascii-end pos end))
  (let ((sap (address-pointer address))
        (i pos))
    (declare (type index i))
    (locally (declare (optimize (safety 0)))
      (loop while (and (<= (+ i 32) end)
                       (ascii-word-p (logior (mem-u64 sap i) (mem-u64 sap (+ i 8))
                                             (mem-u64 sap (+ i 16)) (mem-u64 sap (+ i 24)))))
            do (incf i 32))
      (loop while (and (<= (+ i 8) end) (ascii-word-p (mem-u64 sap i)))
            do (incf i 8))
      (loop while (and (< i end) (< (mem-u8 sap i) #x80))
            do (incf i)))
    i))

;;; Decoding ---------------------------------------------------------------

(defun decode-utf8-window (string i count address pos end)
  "Decode the UTF-8 at ADDRESS + POS, up to END, into the character STRING
from index I, until COUNT characters are in or the next sequence is not one
to decode here: bad, or cut by END.  Returns the next index and the next
offset.  It accepts exactly the sequences READ-UTF8-CHAR and the exported
UTF-8-DECODE accept, with the same code points (surrogates included), and
leaves the rest to them: READ-UTF8-CHAR refills the window for a sequence
cut by END, and signals at the right offset for a bad one.  ASCII goes
thirty-two bytes a step where the processor has AVX2 (ASCII-MASK-32 and
WIDEN-32), else eight, each word widened into eight characters by four
stores; a word whose first bytes only are ASCII is widened too, and
those bytes taken.  Other characters go four at a time where they are of
1 to 3 bytes and AVX2 is there (DECODE-UTF8-BLOCKS), else one by one."
  (declare (type (simple-array character (*)) string) (type index i count pos end)
           (type word address) (optimize speed))
  ;; The unchecked accesses below stay within [POS, END), the window's valid
  ;; bytes (the caller's invariant), and below COUNT in STRING:
  (unless (and (<= count (length string)) (<= i count) (<= pos end))
    (kernel-bounds-error 'decode-utf8-window i count (length string) pos end))
  (with-pinned-objects (string **utf8-decoding-table**)
    (let* ((sap (address-pointer address))
           (out (character-string-pointer string)) ; on SBCL VECTOR-POINTER
           (wide (avx2-instructions-p))
           (table (if wide (pointer-address (vector-pointer **utf8-decoding-table**)) 0)))
      (declare (type word table))
      (flet ((at (k) (mem-u8 sap (+ pos k)))
             (put (code) (setf (mem-u32 out (* 4 i)) code)))
        (declare (inline at put))
        (locally (declare (optimize (safety 0)))
          (loop while (and (< i count) (< pos end))
                do (let ((b0 (at 0))
                         (room (- end pos)))
                     (declare (type (unsigned-byte 8) b0) (type index room))
                     (cond ((< b0 #x80)
                            (if (and (>= room 8) (<= (+ i 8) count))
                                (let* ((w (mem-u64 sap pos))
                                       (high (logand w +high-bits+)))
                                  (declare (type word w high))
                                  (if (and (zerop high) wide (>= room 32) (<= (+ i 32) count)
                                           (zerop (ascii-mask-32 (+ address pos))))
                                      ;; a run of ASCII, 32 characters a step:
                                      ;; reads below END, writes below COUNT
                                      (let ((to (pointer-address out)))
                                        (loop do (widen-32 (+ address pos) (+ to (* 4 i)))
                                                 (setf i (+ i 32) pos (+ pos 32))
                                              while (and (<= (+ pos 32) end) (<= (+ i 32) count)
                                                         (zerop (ascii-mask-32 (+ address pos))))))
                                      ;; the eight bytes widened into eight
                                      ;; characters, two to a store; only
                                      ;; those before the first byte that is
                                      ;; not ASCII are taken, the others
                                      ;; written again by what follows (all
                                      ;; below COUNT)
                                      (let ((o (* 4 i))
                                            (ascii (if (zerop high)
                                                       8
                                                       ;; the lowest high bit is
                                                       ;; bit 7 of byte ASCII
                                                       (ash (1- (integer-length
                                                                 (logand high (ldb (byte 64 0) (- high)))))
                                                            -3))))
                                        (declare (type (integer 1 8) ascii))
                                        (setf (mem-u64 out o)
                                              (logior (ldb (byte 8 0) w) (ash (ldb (byte 8 8) w) 32))
                                              (mem-u64 out (+ o 8))
                                              (logior (ldb (byte 8 16) w) (ash (ldb (byte 8 24) w) 32))
                                              (mem-u64 out (+ o 16))
                                              (logior (ldb (byte 8 32) w) (ash (ldb (byte 8 40) w) 32))
                                              (mem-u64 out (+ o 24))
                                              (logior (ldb (byte 8 48) w) (ash (ldb (byte 8 56) w) 32)))
                                        (setf i (+ i ascii) pos (+ pos ascii)))))
                                (progn (put b0)
                                       (setf i (+ i 1) pos (+ pos 1)))))
                           ((and wide (>= room 16) (<= (+ i 4) count)
                                 ;; four characters of 1 to 3 bytes a step,
                                 ;; while they are valid; true when it took
                                 ;; some: reads below END, writes below COUNT
                                 (let ((from (+ address pos)) (to (+ (pointer-address out) (* 4 i))))
                                   (multiple-value-bind (after-bytes after-chars)
                                       (decode-utf8-blocks from (+ address end) to
                                                           (+ (pointer-address out) (* 4 count))
                                                           table)
                                     (declare (type word after-bytes after-chars))
                                     (when (> after-bytes from)
                                       (setf pos (+ pos (- after-bytes from))
                                             i (+ i (ash (- after-chars to) -2)))
                                       t)))))
                           ((< b0 #xC2) (return))
                           ((< b0 #xE0)
                            (unless (and (>= room 2) (= (logand (at 1) #xC0) #x80))
                              (return))
                            (put (logior (ash (logand b0 #x1F) 6) (logand (at 1) #x3F)))
                            (setf i (+ i 1) pos (+ pos 2)))
                           ((< b0 #xF0)
                            (unless (>= room 3) (return))
                            (let ((b1 (at 1)) (b2 (at 2)))
                              (unless (= (logand (logior (ash b1 8) b2) #xC0C0) #x8080)
                                (return))
                              (let ((code (logior (ash (logand b0 #x0F) 12) (ash (logand b1 #x3F) 6)
                                                  (logand b2 #x3F))))
                                (when (< code #x800) (return))
                                (put code)
                                (setf i (+ i 1) pos (+ pos 3)))))
                           ((< b0 #xF5)
                            (unless (>= room 4) (return))
                            (let ((b1 (at 1)) (b2 (at 2)) (b3 (at 3)))
                              (unless (= (logand (logior (ash b1 16) (ash b2 8) b3) #xC0C0C0)
                                         #x808080)
                                (return))
                              (let ((code (logior (ash (logand b0 #x07) 18) (ash (logand b1 #x3F) 12)
                                                  (ash (logand b2 #x3F) 6) (logand b3 #x3F))))
                                (unless (<= #x10000 code #x10FFFF) (return))
                                (put code)
                                (setf i (+ i 1) pos (+ pos 4)))))
                           (t (return))))))))
    (values i pos)))

;;; Encoding ---------------------------------------------------------------

(declaim (inline code-utf8-length))
(defun code-utf8-length (code)
  "Bytes of the UTF-8 encoding of the code point CODE."
  (cond ((< code #x80) 1) ((< code #x800) 2) ((< code #x10000) 3) (t 4)))

(declaim (inline put-utf8-char))
(defun put-utf8-char (sap p code)
  "Store the UTF-8 encoding of CODE at SAP+P; return the offset after it."
  (declare (type index p) (type (integer 0 #x10FFFF) code))
  (cond ((< code #x80)
         (setf (mem-u8 sap p) code)
         (+ p 1))
        ((< code #x800)
         (setf (mem-u8 sap p) (logior #xC0 (ash code -6))
               (mem-u8 sap (+ p 1)) (logior #x80 (logand code #x3F)))
         (+ p 2))
        ((< code #x10000)
         (setf (mem-u8 sap p) (logior #xE0 (ash code -12))
               (mem-u8 sap (+ p 1)) (logior #x80 (logand (ash code -6) #x3F))
               (mem-u8 sap (+ p 2)) (logior #x80 (logand code #x3F)))
         (+ p 3))
        (t
         (setf (mem-u8 sap p) (logior #xF0 (ash code -18))
               (mem-u8 sap (+ p 1)) (logior #x80 (logand (ash code -12) #x3F))
               (mem-u8 sap (+ p 2)) (logior #x80 (logand (ash code -6) #x3F))
               (mem-u8 sap (+ p 3)) (logior #x80 (logand code #x3F)))
         (+ p 4))))

(defconstant +narrow-mask+ #xFFFFFF80FFFFFF80
  "In a word holding two characters of a character string, the bits that
are zero when both are ASCII.")

(declaim (inline put-utf8-words))
(defun put-utf8-words (address p string start end)
  "Store the UTF-8 encoding of the characters of the character STRING from
START to END at ADDRESS+P (ADDRESS an integer: memory the caller has pinned
and made room in, 4 bytes per character or their UTF8-CHARS-LENGTH); return
the offset after them.  Sixteen ASCII characters are narrowed into sixteen
bytes a step where the processor has AVX2 (NARROW-16), else eight into one
word; with AVX2, blocks of eight characters below #x10000 are encoded
together (PUT-UTF8-NARROW-BLOCKS); the others are encoded one by one."
  (declare (type (simple-array character (*)) string) (type index p start end)
           (type word address) (optimize speed))
  (unless (<= start end (length string))
    (kernel-bounds-error 'put-utf8-words start end (length string)))
  (with-pinned-objects (string **narrow-utf8-table**)
    (let* ((sap (address-pointer address))
           (in (character-string-pointer string)) ; on SBCL VECTOR-POINTER
           (k start)
           (wide (avx2-instructions-p))
           (table (if wide (pointer-address (vector-pointer **narrow-utf8-table**)) 0)))
      (declare (type index k) (type word table))
      (locally (declare (optimize (safety 0)))
        (loop while (< k end)
              do (let ((o (* 4 k)))
                   (when wide
                     ;; sixteen ASCII characters a step.  Reads below END;
                     ;; writes 16 bytes at P, within the room made for the
                     ;; 16 characters however they encode (at least one
                     ;; byte each), and written again below when they are
                     ;; not all ASCII
                     (let ((from (pointer-address in)))
                       (loop while (and (<= (+ k 16) end)
                                        (= #xFFFF (narrow-16 (+ from o) (+ address p))))
                             do (setf k (+ k 16) p (+ p 16) o (* 4 k))))
                     (when (>= k end) (return)))
                   (if (and (<= (+ k 8) end)
                            (zerop (logand (logior (mem-u64 in o) (mem-u64 in (+ o 8))
                                                   (mem-u64 in (+ o 16)) (mem-u64 in (+ o 24)))
                                           +narrow-mask+)))
                       (flet ((pair (x) ; two ASCII characters, two bytes
                                (declare (type word x))
                                (logior (ldb (byte 8 0) x) (ash (ldb (byte 8 32) x) 8))))
                         (declare (inline pair))
                         (setf (mem-u64 sap p)
                               (logior (pair (mem-u64 in o)) (ash (pair (mem-u64 in (+ o 8))) 16)
                                       (ash (pair (mem-u64 in (+ o 16))) 32)
                                       (ash (pair (mem-u64 in (+ o 24))) 48)))
                         (setf p (+ p 8) k (+ k 8)))
                       (progn
                         (when wide
                           ;; blocks of eight below #x10000 (Latin, Greek,
                           ;; Cyrillic, CJK, and spaces).  The caller's room
                           ;; from P holds the rest at a byte or more each:
                           ;; P + (END - K) bounds the writes, and stays a
                           ;; bound as each block takes 8 bytes or more
                           (let ((from (+ (pointer-address in) o)))
                             (multiple-value-bind (after-chars after-bytes)
                                 (put-utf8-narrow-blocks from (+ (pointer-address in) (* 4 end))
                                                         (+ address p) (+ address p (- end k))
                                                         table)
                               (declare (type word after-chars after-bytes))
                               (setf k (+ k (ash (- after-chars from) -2))
                                     p (- after-bytes address)))))
                         ;; then up to eight one by one
                         (let ((stop (min end (+ k 8))))
                           (loop while (< k stop)
                                 do (setf p (put-utf8-char sap p (char-code (schar string k)))
                                          k (+ k 1))))))))))
    p))

(declaim (inline put-utf8-chars))   ; not to box SAP (see PUT-VARINT)
(defun put-utf8-chars (sap p string start end)
  "Store the UTF-8 encoding of the characters of the character STRING from
START to END at SAP+P; return the offset after them.  The caller has made
room for them: 4 bytes per character, or their UTF8-CHARS-LENGTH.  Fewer
than eight characters one by one, here; more by PUT-UTF8-WORDS (most
strings stored are short, and the word loop inline would cost them a
tenth)."
  (declare (type (simple-array character (*)) string) (type index p start end))
  (if (< (- end start) 8)
      (progn
        (loop for k of-type index from start below end
              do (setf p (put-utf8-char sap p (char-code (schar string k)))))
        p)
      (put-utf8-words (pointer-address sap) p string start end)))

(declaim (notinline put-utf8-words))

(defconstant +lane-top-bits+ #x8000000080000000
  "Bit 31 of each of the two characters (32-bit lanes) a word holds.")

(declaim (inline pair-extra-bytes))
(defun pair-extra-bytes (x)
  "For the two characters of the word X, the bytes their UTF-8 encodings
take beyond one each (a code at or above #x80, #x800, #x10000 adds one
for each), as a word with each lane's count in bits 0-1 and 32-33."
  (declare (type word x))
  ;; ADDEND holds 2^31 - T in each lane: the sum sets a lane's bit 31 exactly
  ;; when its code reaches T; a code is below 2^21, so no lane carries over
  (flet ((reached (addend)
           (ash (logand (ldb (byte 64 0) (+ x addend)) +lane-top-bits+) -31)))
    (declare (inline reached))
    (+ (reached #x7FFFFF807FFFFF80)     ; T = #x80
       (reached #x7FFFF8007FFFF800)     ; T = #x800
       (reached #x7FFF00007FFF0000))))  ; T = #x10000

(defun utf8-chars-length (string start end)
  "The bytes of the UTF-8 encoding of the characters of the character STRING
from START to END.  Eight characters a step: all ASCII, eight bytes;
otherwise each word of two characters adds, without a branch, one byte per
threshold (#x80, #x800, #x10000) each character reaches (PAIR-EXTRA-BYTES).
The last characters one by one."
  (declare (type (simple-array character (*)) string) (type index start end)
           (optimize speed))
  (unless (<= start end (length string))
    (kernel-bounds-error 'utf8-chars-length start end (length string)))
  (let ((bytes (- end start))
        (k start))
    (declare (type index bytes k))
    (with-pinned-objects (string)
      (let ((in (character-string-pointer string))) ; on SBCL VECTOR-POINTER
        (when (and (avx2-instructions-p) (<= (+ k 8) end))
          ;; eight characters a step in one 256-bit register: a third of
          ;; the time of the word loop below on mixed-script text
          (let ((lanes (make-array 8 :element-type '(unsigned-byte 32))))
            (declare (dynamic-extent lanes))
            (with-pinned-objects (lanes)
              (loop while (<= (+ k 8) end)
                    do (let ((blocks (min (floor (- end k) 8) +count-blocks-limit+)))
                         (setf (aref lanes 0) #x7F (aref lanes 1) #x7FF (aref lanes 2) #xFFFF)
                         (count-utf8-thresholds (+ (pointer-address in) (* 4 k)) blocks
                                                (pointer-address (vector-pointer lanes)))
                         (incf bytes (loop for i below 8 sum (aref lanes i) of-type word))
                         (incf k (* 8 blocks)))))))
        (locally (declare (optimize (safety 0)))
          (loop while (<= (+ k 8) end)
                do (let* ((o (* 4 k))
                          (a (mem-u64 in o)) (b (mem-u64 in (+ o 8)))
                          (c (mem-u64 in (+ o 16))) (d (mem-u64 in (+ o 24))))
                     (declare (type word a b c d))
                     (unless (zerop (logand (logior a b c d) +narrow-mask+))
                       ;; each lane of the sum at most 12: no carry between them
                       (let ((extra (+ (pair-extra-bytes a) (pair-extra-bytes b)
                                       (pair-extra-bytes c) (pair-extra-bytes d))))
                         (declare (type word extra))
                         (incf bytes (+ (ldb (byte 32 0) extra) (ash extra -32)))))
                     (incf k 8)))
          (loop while (< k end)
                do (incf bytes (1- (code-utf8-length (char-code (schar string k)))))
                   (incf k)))))
    bytes))
