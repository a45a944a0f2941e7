;;;; Strings.  Base strings are raw bytes (each below 128); character strings
;;;; are their character count followed by UTF-8.  Surrogate code points,
;;;; which are characters in SBCL, are encoded like any other 3-byte code
;;;; point so that every string round-trips.  Symbol and package names use
;;;; the same "string payload" (count + UTF-8) without a tag.  The UTF-8
;;;; kernels, shared with the exported codec, are in src/io/utf8.lisp.

(in-package #:binstore)

(defun write-utf8-char (ob code)
  (declare (type (integer 0 #x10FFFF) code))
  (with-reserved (sap p ob (code-utf8-length code)) ; RESERVE first: it may move the window
    (put-utf8-char sap p code)))

(defun write-utf8-chars (ob string start end)
  "Write the characters of STRING from START to END as UTF-8.  A base
string's bytes are already its UTF-8 (base characters are ASCII in SBCL):
they are copied.  Otherwise blocks of characters are encoded straight into
the window when it has room for their longest encoding, or character by
character."
  (declare (type string string) (type index start end) (optimize speed))
  (with-array-data ((data string) (start start) (end end))
    (when (typep data 'format-base-string) ; on SBCL SIMPLE-BASE-STRING
      (with-pinned-objects (data)
        (write-octets-from-address ob (+ (pointer-address (vector-pointer data)) start)
                                   (- end start)))
      (return-from write-utf8-chars))
    (if (typep data '(simple-array character (*)))
        (let ((i start))
          (declare (type index i))
          (loop while (< i end)
                do (let ((block (min (- end i) 4096)))
                     (if (>= (- (obuf-end ob) (obuf-pos ob)) (* 4 block))
                         (setf (obuf-pos ob)
                               (put-utf8-chars (obuf-sap ob) (obuf-pos ob) data i (+ i block)))
                         (loop for k from i below (+ i block)
                               do (write-utf8-char ob (char-code (schar data k)))))
                     (incf i block))))
        (loop for i from start below end
              do (write-utf8-char ob (char-code (char data i)))))))

(defun put-short-string-payload (ob string)
  "Write the payload of STRING, a simple string of under 128 characters,
straight into the window when it has room for the longest encoding; true
if it did."
  (declare (type simple-string string) (optimize speed))
  (let ((n (length string)) (p (obuf-pos ob)) (sap (obuf-sap ob)))
    (declare (type index p))
    (when (>= (- (obuf-end ob) p) (+ 1 (* 4 n)))
      (setf (mem-u8 sap p) n)
      (setf (obuf-pos ob)
            (if (typep string 'format-base-string) ; on SBCL SIMPLE-BASE-STRING
                (progn (dotimes (i n)
                         (setf (mem-u8 sap (+ p 1 i)) (char-code (schar string i))))
                       (+ p 1 n))
                (put-utf8-chars sap (+ p 1) string 0 n)))
      t)))

(defun write-string-payload (ob string)
  "Character count, then UTF-8: the body of a string, symbol or package name."
  (declare (type string string) (optimize speed))
  (let* ((string (format-string string)) ; on SBCL STRING itself
         (n (length string)))
    (unless (and (< n 128)
                 (typep string 'simple-string)
                 (put-short-string-payload ob string))
      (write-varint ob n)
      (write-utf8-chars ob string 0 n))))

(defun write-simple-base-string (ob s)
  (declare (type simple-base-string s) (optimize speed))
  (let ((n (length s)))
    (if (< n 128)
        ;; short: tag, one-byte length and characters in one reservation
        (let* ((p (reserve ob (+ n 2)))
               (sap (obuf-sap ob)))
          (setf (mem-u8 sap p) +tag-base-string+
                (mem-u8 sap (1+ p)) n)
          (dotimes (i n)
            (setf (mem-u8 sap (+ p 2 i)) (char-code (schar s i)))))
        (progn
          (write-u8 ob +tag-base-string+)
          (write-varint ob n)
          (with-pinned-objects (s)
            (write-octets-from-address ob (pointer-address (vector-pointer s)) n))))))

(defun write-character-string (ob s)
  (write-u8 ob +tag-string+)
  (write-string-payload ob s))

;;; Decoding -----------------------------------------------------------

(defun read-utf8-char (ib)
  "Decode one UTF-8 sequence; return its code point."
  (declare (type ibuf ib) (optimize speed))
  (let ((start (ibuf-offset ib))
        (b0 (read-u8 ib)))
    (flet ((continuation ()
             (let ((b (read-u8 ib)))
               (unless (= (logand b #xC0) #x80)
                 (invalid ib (format nil "byte #x~2,'0x inside a UTF-8 sequence" b)
                          "a UTF-8 continuation byte" start))
               (logand b #x3F)))
           (bad ()
             (invalid ib (format nil "byte #x~2,'0x cannot start a UTF-8 sequence" b0)
                      "UTF-8" start)))
      (cond ((< b0 #x80) b0)
            ((< b0 #xC2) (bad))
            ((< b0 #xE0) (logior (ash (logand b0 #x1F) 6) (continuation)))
            ((< b0 #xF0)
             (let* ((c1 (continuation))
                    (code (logior (ash (logand b0 #x0F) 12) (ash c1 6) (continuation))))
               (when (< code #x800)
                 (invalid ib "overlong UTF-8 sequence" "shortest-form UTF-8" start))
               code))
            ((< b0 #xF5)
             (let* ((c1 (continuation)) (c2 (continuation))
                    (code (logior (ash (logand b0 #x07) 18) (ash c1 12) (ash c2 6)
                                  (continuation))))
               (unless (<= #x10000 code #x10FFFF)
                 (invalid ib (format nil "UTF-8 sequence for code point #x~x" code)
                          "a code point between #x10000 and #x10FFFF" start))
               code))
            (t (bad))))))

(defun read-utf8-into (ib string count)
  "Decode COUNT characters into the character STRING: the window's bytes by
DECODE-UTF8-WINDOW, and each sequence it stops at (cut by the window's end,
or bad) by READ-UTF8-CHAR, which refills or signals."
  (declare (type (simple-array character (*)) string) (type index count)
           (optimize speed))
  (let ((i 0))
    (declare (type index i))
    (loop
      (multiple-value-bind (next pos)
          (decode-utf8-window string i count (ibuf-base ib) (ibuf-pos ib) (ibuf-end ib))
        (setf i next (ibuf-pos ib) pos))
      (when (>= i count) (return string))
      (setf (schar string i) (code-char (read-utf8-char ib)))
      (incf i))))

(defun read-string-payload (rs)
  "Read a character count and that many UTF-8 characters into a fresh string."
  (let* ((ib (rs-ibuf rs))
         (n (check-count ib (read-varint ib) 1 "a string")))
    (charge rs (* 4 n))
    (let ((string (make-string n)))
      ;; as for a simple vector: as far as the window can fill, a byte each
      (prefault-vector string (* 4 (min n (available ib))))
      (read-utf8-into ib string n))))

(defun read-name (rs)
  "Read a string payload into the state's scratch string, which grows as
needed; return it and the name's length.  Looking a name up needs no fresh
string: only a name that becomes a new symbol is copied."
  (let* ((ib (rs-ibuf rs))
         (n (check-count ib (read-varint ib) 1 "a name")))
    (when (> n (length (rs-scratch rs)))
      (charge rs (* 4 n))
      (setf (rs-scratch rs) (make-string (max n (* 2 (length (rs-scratch rs)))))))
    (values (read-utf8-into ib (rs-scratch rs) n) n)))

(defun read-base-chars-into (rs string start count)
  "Copy COUNT bytes into the base STRING at START, checking each is below 128."
  (declare (type simple-base-string string) (type index start count))
  (let ((ib (rs-ibuf rs))
        (offset (ibuf-offset (rs-ibuf rs))))
    (with-pinned-objects (string)
      (let ((address (pointer-address (vector-pointer string))))
        (read-octets-to-address ib (+ address start) count)
        (let ((bad (non-ascii-position address start (+ start count))))
          (when bad
            (invalid ib "a byte above 127 in a base string" "ASCII"
                     (+ offset (- bad start)))))))
    string))

(defun non-ascii-position (address start end)
  "Index of the first byte from START below END at ADDRESS (an integer, as
for WRITE-OCTETS-FROM-ADDRESS) that is not ASCII, or NIL (see ASCII-END)."
  (let ((at (ascii-end address start end)))
    (and (< at end) at)))

;;; Reading from the window: short strings, for the loops over runs of
;;; elements (src/codecs/runs.lisp) and for the readers of one string below.

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

(defun take-window-string (rs reader)
  "The string whose tag was just consumed (the tag, at the position before,
is still in the window), when READER (WINDOW-ASCII-STRING or
WINDOW-CHARACTER-STRING) reads it from the window: the new string (with an
id when READER gives one: WINDOW-CHARACTER-STRING does), the payload
consumed.  Otherwise NIL, having consumed nothing."
  (declare (type function reader) (optimize speed))
  (let* ((ib (rs-ibuf rs))
         (p (ibuf-pos ib)))
    (declare (type index p))
    (when (plusp p)
      (multiple-value-bind (s next) (funcall reader rs (1- p) (ibuf-end ib))
        (when next
          (setf (ibuf-pos ib) next)
          s)))))

(defun read-simple-base-string (rs)
  "Read a base string whose tag was just consumed: a short ASCII one the
window holds is made as in a run."
  (declare (optimize speed))
  (register rs (or (take-window-string rs #'window-ascii-string)
                   (let* ((ib (rs-ibuf rs))
                          (n (check-count ib (read-varint ib) 1 "a base string")))
                     (declare (type index n))
                     (charge rs n)
                     (read-base-chars-into rs (make-string n :element-type 'base-char) 0 n)))))

(defun read-character-string (rs)
  "Read a character string whose tag was just consumed: a short one the
window holds is made as in a run (a slot's, a hash table's key), in one
pass, where the general decoder's setup costs more than such a string's
characters."
  (or (take-window-string rs #'window-character-string)
      (register rs (read-string-payload rs))))
