;;;; Text files a line at a time: READ-LINES and MAP-LINES.
;;;;
;;;; The file is read by read(2) on its descriptor in large blocks
;;;; (+LINE-BLOCK-BYTES+) into one octet buffer, never through a Lisp
;;;; character stream.  Newlines are found a word at a time (NEWLINE-END),
;;;; and each line is decoded from the buffer by the UTF-8 codec
;;;; (src/text/utf8-codec.lisp): an ASCII line is a memory copy into a base
;;;; string, or a word-at-a-time widening into a character string.  A line
;;;; that does not end in the buffer is moved to its front and the rest read
;;;; after it; a line longer than the buffer doubles it.  As they are made,
;;;; the lines get a runway (src/io/runway.lisp), as a restore's objects do.
;;;;
;;;; Lines end at LF or CR LF (neither is part of the line); a lone CR is a
;;;; character of its line; a last line without a newline is a line; an
;;;; empty file has no lines.

(in-package #:binstore)

(defconstant +line-block-bytes+ (* 256 1024)
  "The size of the buffer a file's lines are read through, and of the
read(2) calls that fill it (a line longer than it doubles it).")

(defun newline-end (address pos end)
  "The offset of the first LF (byte 10) from POS below END at ADDRESS (an
integer, the address of pinned memory), or END; and true when every byte
before it from POS is ASCII.  A word at a time: the word XOR ten times #x01
has a zero byte where the word has an LF, and (x - #x01..01) AND NOT x AND
#x80..80 marks the lowest zero byte exactly; the words' high bits are
gathered on the way."
  (declare (type word address) (type index pos end) (optimize speed))
  (unless (<= pos end) (kernel-bounds-error 'newline-end pos end))
  (let ((sap (address-pointer address))
        (high 0)
        (i pos))
    (declare (type index i) (type word high))
    (locally (declare (optimize (safety 0)))
      (loop while (<= (+ i 8) end)
            do (let* ((w (mem-u64 sap i))
                      (x (logxor w #x0A0A0A0A0A0A0A0A))
                      (zeros (logand (logand (- x #x0101010101010101) #xFFFFFFFFFFFFFFFF)
                                     (lognot x) +high-bits+)))
                 (declare (type word w x zeros))
                 (unless (zerop zeros)
                   ;; the lowest marked byte, K bytes in: its bit 7 is the
                   ;; lowest bit set
                   (let ((k (ash (integer-length (logand zeros (- zeros))) -3)))
                     (declare (type (integer 1 8) k))
                     (return-from newline-end
                       (values (+ i k -1)
                               (ascii-word-p (logior high (ldb (byte (* 8 (- k 1)) 0) w)))))))
                 (setf high (logior high w))
                 (incf i 8)))
      (loop while (< i end)
            do (let ((b (mem-u8 sap i)))
                 (when (= b 10) (return))
                 (setf high (logior high b))
                 (incf i))))
    (values i (ascii-word-p high))))

(defun check-text-external-format (external-format)
  "Signal an ERROR unless EXTERNAL-FORMAT names UTF-8, the one the line
readers read."
  (unless (member external-format '(:utf-8 :utf8))
    (error "binstore's line readers read UTF-8 only (:external-format :utf-8), not ~s"
           external-format)))

(defun fill-line-buffer (fd buffer fill place)
  "read(2) from FD into BUFFER from FILL to its end, once (again on EINTR):
the bytes read, 0 at the end of the file.  A failed read signals
BINSTORE-FILE-ERROR about PLACE."
  (declare (type (simple-array (unsigned-byte 8) (*)) buffer) (type index fill))
  (loop
    (multiple-value-bind (n errno)
        (with-pinned-objects (buffer)
          (system-read fd (pointer+ (vector-pointer buffer) fill) (- (length buffer) fill)))
      (cond (n (return n))
            ((eql errno +eintr+))
            (t (errno-fail place errno "cannot read"))))))

(defun call-with-file-lines (function place base-string-if-ascii)
  "Call FUNCTION with each line of the file PLACE, a new string (see
MAP-LINES)."
  (call-with-file-input
   place
   (lambda (fd size)
     (let ((buffer (make-array +line-block-bytes+ :element-type '(unsigned-byte 8)))
           ;; pages mapped ahead of where the lines are made (see
           ;; src/io/runway.lisp): after a full GC the heap's free pages
           ;; are unmapped, and faulting them in one at a time costs about
           ;; what the decoding does
           (runway (make-runway))
           (made 0)             ; bytes of lines made since the last look
           (per-byte (if base-string-if-ascii 1 4))
           (fill 0)             ; the bytes of BUFFER read
           (line 0)             ; where the current line starts in BUFFER
           (scan 0)             ; where the search for its end resumes
           (origin 0)           ; the offset in the file of BUFFER's first byte
           (ascii nil))         ; true when the line was found ASCII
       (declare (type (simple-array (unsigned-byte 8) (*)) buffer)
                (type index fill line scan origin made size))
       (flet ((emit (end lf)
                ;; the line from LINE to END, an LF when LF is true (and
                ;; then a CR before it is no part of the line), else the
                ;; end of the file
                (let ((stop (if (and lf (> end line) (= (aref buffer (1- end)) 13)) (1- end) end)))
                  (when (>= made +look-bytes+)
                    (setf made 0)
                    (look-at-runway runway nil
                                    (* per-byte (max 0 (- size (+ origin end))))
                                    (* per-byte (- stop line))))
                  (incf made (+ 16 (* per-byte (- stop line))))
                  (funcall function
                           (decode-utf8-octets buffer line stop base-string-if-ascii origin
                                               ascii)))))
         (loop
           (multiple-value-bind (lf ascii-before)
               (with-pinned-objects (buffer)
                 (newline-end (pointer-address (vector-pointer buffer)) scan fill))
             (declare (type index lf))
             ;; what NEWLINE-END saw is the whole line when it began there
             (setf ascii (and ascii-before (= scan line)))
             (if (< lf fill)
                 (progn (emit lf t)
                        (setf line (+ lf 1) scan line))
                 ;; no LF in what was read: keep the line, read more after it
                 (let ((partial (- fill line)))
                   (when (plusp line)
                     (replace buffer buffer :start2 line :end2 fill)
                     (setf origin (+ origin line) line 0 fill partial))
                   (when (= fill (length buffer))
                     (let ((larger (make-array (* 2 (length buffer))
                                               :element-type '(unsigned-byte 8))))
                       (replace larger buffer)
                       (setf buffer larger)))
                   (setf scan fill)
                   (let ((n (fill-line-buffer fd buffer fill place)))
                     (declare (type index n))
                     (when (zerop n)
                       (when (plusp fill) (emit fill nil))
                       (return))
                     (incf fill n)))))))))))

(defun map-lines (function path &key (external-format :utf-8) base-string-if-ascii)
  "Call FUNCTION with each line of the UTF-8 text file PATH (a string or
pathname), in order, and return NIL.  Each line is a new string FUNCTION
may keep: a (SIMPLE-ARRAY CHARACTER (*)), or a SIMPLE-BASE-STRING when
BASE-STRING-IF-ASCII is true and the line is ASCII.  Lines end at LF or
CR LF, which are not part of them; a lone CR stays in its line; a last line
without a newline is a line; an empty file has none.  Only the line being
read is kept, in a buffer read by read(2) in blocks of 256 KiB.

EXTERNAL-FORMAT must be :UTF-8 (an ERROR otherwise).  Bytes that are not
UTF-8 (as UTF8-DECODE) signal INVALID-UTF8 whose OFFSET is the byte offset
in the file, with the restart USE-REPLACEMENT-CHARACTER.  A file that
cannot be opened or read, or a directory, signals BINSTORE-FILE-ERROR."
  (check-text-external-format external-format)
  (call-with-file-lines function path base-string-if-ascii)
  nil)

(defun read-lines (path &key (external-format :utf-8) base-string-if-ascii)
  "The lines of the UTF-8 text file PATH (a string or pathname), a new
SIMPLE-VECTOR of new strings, as MAP-LINES passes them: each a
\(SIMPLE-ARRAY CHARACTER (*)), or a SIMPLE-BASE-STRING when
BASE-STRING-IF-ASCII is true and the line is ASCII; lines end at LF or
CR LF, not included; a last line without a newline counts; an empty file
gives #().  EXTERNAL-FORMAT must be :UTF-8.  Conditions and restarts as
MAP-LINES: INVALID-UTF8 (offset in the file; USE-REPLACEMENT-CHARACTER),
BINSTORE-FILE-ERROR."
  (check-text-external-format external-format)
  (let ((lines (make-array 1024 :adjustable t :fill-pointer 0)))
    (call-with-file-lines (lambda (line) (vector-push-extend line lines))
                          path base-string-if-ascii)
    (coerce lines 'simple-vector)))
