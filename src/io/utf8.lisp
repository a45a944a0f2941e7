;;;; UTF-8 decoded straight from memory: the loop that fills a character
;;;; string from the bytes of an input window, for the string readers and
;;;; for the loops that read runs of short strings.  The format's UTF-8 is
;;;; the shortest form of each code point up to #x10FFFF, surrogates
;;;; included (they are characters in SBCL, and round trip).

(in-package #:binstore)

(defun decode-utf8-window (string i count address pos end)
  "Decode the UTF-8 at ADDRESS + POS, up to the window's END, into the
character STRING from index I, until COUNT characters are in or the next
sequence is not one to decode here: bad, or cut by END.  Returns the next
index and the next offset.  It accepts exactly the sequences READ-UTF8-CHAR
accepts, with the same code points (surrogates included), and leaves the
rest to it: READ-UTF8-CHAR refills the window for a sequence cut by END,
and signals at the right offset for a bad one."
  (declare (type (simple-array character (*)) string) (type index i count pos end)
           (type word address) (optimize speed))
  ;; The unchecked accesses below stay within [POS, END), the window's valid
  ;; bytes (the caller's invariant), and below COUNT in STRING:
  (unless (and (<= count (length string)) (<= pos end))
    (error "decode-utf8-window: ~d characters into a string of ~d, or window ~d past ~d"
           count (length string) pos end))
  (let ((sap (address-pointer address)))
    (flet ((at (k) (mem-u8 sap (+ pos k)))
           (continuation-p (byte) (= (logand byte #xC0) #x80)))
      (declare (inline at continuation-p))
      (locally (declare (optimize (safety 0)))
        (loop while (and (< i count) (< pos end))
              do (let ((b0 (at 0))
                       (room (- end pos)))
                   (multiple-value-bind (code width)
                       (cond ((< b0 #x80) (values b0 1))
                             ((< b0 #xC2) (return))
                             ((< b0 #xE0)
                              (unless (and (>= room 2) (continuation-p (at 1)))
                                (return))
                              (values (logior (ash (logand b0 #x1F) 6) (logand (at 1) #x3F)) 2))
                             ((< b0 #xF0)
                              (unless (and (>= room 3) (continuation-p (at 1)) (continuation-p (at 2)))
                                (return))
                              (let ((code (logior (ash (logand b0 #x0F) 12) (ash (logand (at 1) #x3F) 6)
                                                  (logand (at 2) #x3F))))
                                (when (< code #x800) (return))
                                (values code 3)))
                             ((< b0 #xF5)
                              (unless (and (>= room 4) (continuation-p (at 1)) (continuation-p (at 2))
                                           (continuation-p (at 3)))
                                (return))
                              (let ((code (logior (ash (logand b0 #x07) 18) (ash (logand (at 1) #x3F) 12)
                                                  (ash (logand (at 2) #x3F) 6) (logand (at 3) #x3F))))
                                (unless (<= #x10000 code #x10FFFF) (return))
                                (values code 4)))
                             (t (return)))
                     (declare (type (integer 0 #x10FFFF) code) (type (integer 1 4) width))
                     (setf (schar string i) (code-char code))
                     (setf i (+ i 1) pos (+ pos width)))))))
    (values i pos)))
