;;;; Input buffer and sources.
;;;;
;;;; An IBUF is a window [base, base+end) of raw memory the decoder reads with
;;;; sap-ref; POS is the next unread byte.  Every read first checks that the
;;;; bytes it needs lie inside the window (one comparison); when they do not,
;;;; REFILL asks the source for more, or signals TRUNCATED-INPUT /
;;;; LIMIT-EXCEEDED.  Nothing past END is ever touched.
;;;;
;;;; Sources: a fixed region (an octet vector pinned by the caller, or raw
;;;; memory), here; any byte source, through a staging vector (sources.lisp).

(in-package #:binstore)

;;; Inline, so that the callers that make an IBUF for the length of one call
;;; keep it on their stack (DYNAMIC-EXTENT): see store-state.lisp.
(declaim (inline %make-ibuf))
(defstruct (ibuf (:constructor %make-ibuf))
  (base 0 :type word)          ; address of the window
  (pos 0 :type index)                 ; next byte to read, relative to BASE
  (end 0 :type index)                 ; bytes valid in the window
  (consumed 0 :type index)            ; input bytes before BASE
  (size 0 :type index)                ; a region in memory: its bytes, END or more
  (limit nil :type (or null index))   ; max-to-read
  (cut-by-limit nil)                  ; true when END stops at the limit, not the data
  (refill-fn nil :type (or null function))
  ;; (ib address count): read up to COUNT bytes past an empty window
  ;; straight to ADDRESS; the number read, or NIL when it cannot (then it
  ;; may set itself to NIL, never to be asked again)
  (direct-fn nil :type (or null function))
  (source nil))

(declaim (inline ibuf-sap ibuf-offset))
(defun ibuf-sap (ib) (address-pointer (ibuf-base ib)))
(defun ibuf-offset (ib)
  "Absolute offset in the input of the next byte to read."
  (+ (ibuf-consumed ib) (ibuf-pos ib)))

(defun invalid (ib message &optional expected (offset (ibuf-offset ib)))
  "Signal INVALID-INPUT at the current (or given) offset."
  (error 'invalid-input :offset offset :message message :expected expected))

(defun refill (ib n)
  "Make at least N bytes available at POS, or signal why they cannot be."
  (declare (type ibuf ib) (type index n))
  (let ((fn (ibuf-refill-fn ib)))
    (when fn (funcall fn ib n))
    (when (> (+ (ibuf-pos ib) n) (ibuf-end ib))
      (if (ibuf-cut-by-limit ib)
          (error 'restore-limit-exceeded :limit :max-to-read :value (ibuf-limit ib)
                                 :offset (ibuf-offset ib)
                                 :message "the input is longer than max-to-read allows")
          (error 'truncated-input :offset (ibuf-offset ib)
                                  :message (format nil "the input ends ~d byte~:p short"
                                                   (- (+ (ibuf-pos ib) n) (ibuf-end ib)))
                                  :expected (format nil "~d more byte~:p" n)))))
  ib)

(declaim (inline need))
(defun need (ib n)
  "Ensure N (small) bytes can be read at POS; return POS."
  (declare (type ibuf ib) (type (integer 0 64) n) (optimize speed))
  (when (> (+ (ibuf-pos ib) n) (ibuf-end ib))
    (refill ib n))
  (ibuf-pos ib))

(declaim (inline available at-end-p))
(defun available (ib)
  "Bytes readable without refilling."
  (- (ibuf-end ib) (ibuf-pos ib)))

(defun at-end-p (ib)
  "True when no byte is left in the input."
  (and (= (ibuf-pos ib) (ibuf-end ib))
       (or (null (ibuf-refill-fn ib))
           (progn (funcall (ibuf-refill-fn ib) ib 1)
                  (= (ibuf-pos ib) (ibuf-end ib))))))

(defmacro define-reader (name size accessor)
  "Define an inline reader of a SIZE-byte little-endian value via ACCESSOR."
  ;; PROCLAIM in an EVAL-WHEN, not DECLAIM: ECL inlines the function in
  ;; other files only so, when a macro gives the two forms in a PROGN
  `(progn
     (eval-when (:compile-toplevel :load-toplevel :execute)
       (proclaim '(inline ,name)))
     (defun ,name (ib)
       (declare (type ibuf ib) (optimize speed))
       (let ((p (need ib ,size)))
         (setf (ibuf-pos ib) (+ p ,size))
         (,accessor (ibuf-sap ib) p)))))

(define-reader read-u8 1 mem-u8)
(define-reader read-s16 2 mem-s16)
(define-reader read-s32 4 mem-s32)
(define-reader read-s64 8 mem-s64)
(define-reader read-u64 8 mem-u64)
(define-reader read-single 4 mem-single)
(define-reader read-double 8 mem-double)

(declaim (inline peek-u8))
(defun peek-u8 (ib)
  "The next byte, not consumed."
  (let ((p (need ib 1)))
    (mem-u8 (ibuf-sap ib) p)))

(declaim (inline read-varint))
(defun read-varint (ib)
  "Read an unsigned LEB128 varint of at most 64 bits."
  (declare (type ibuf ib) (optimize speed))
  (let ((p (ibuf-pos ib)))
    (if (< (1+ p) (ibuf-end ib))
        ;; one or two groups inline; longer ones, and a varint ending the
        ;; window, take the general path
        (let ((byte (mem-u8 (ibuf-sap ib) p)))
          (if (< byte 128)
              (progn (setf (ibuf-pos ib) (1+ p)) byte)
              (let ((next (mem-u8 (ibuf-sap ib) (1+ p))))
                (if (< 0 next 128)
                    (progn (setf (ibuf-pos ib) (+ p 2))
                           (logior (logand byte #x7F) (ash next 7)))
                    (read-long-varint ib)))))
        (read-long-varint ib))))

(declaim (inline window-varint))
(defun window-varint (sap p end)
  "The varint at SAP+P when it has at most three groups, all below END, in
its shortest form: its value and the offset after it.  Otherwise NIL and
NIL, having read nothing past END: READ-VARINT reads the longer ones and
refuses the malformed.  For the decoder's loops over the window."
  (declare (type index p end))
  (if (>= p end)
      (values nil nil)
      (let ((b0 (mem-u8 sap p)))
        (cond ((< b0 128) (values b0 (+ p 1)))
              ((>= (+ p 1) end) (values nil nil))
              (t (let ((b1 (mem-u8 sap (+ p 1))))
                   (cond ((< 0 b1 128)
                          (values (logior (logand b0 127) (ash b1 7)) (+ p 2)))
                         ((or (= b1 0) (>= (+ p 2) end)) (values nil nil))
                         (t (let ((b2 (mem-u8 sap (+ p 2))))
                              (if (< 0 b2 128)
                                  (values (logior (logand b0 127) (ash (logand b1 127) 7)
                                                  (ash b2 14))
                                          (+ p 3))
                                  (values nil nil)))))))))))

(defun read-long-varint (ib)
  "READ-VARINT beyond its one-byte fast path."
  (declare (type ibuf ib) (optimize speed))
  (let ((start (ibuf-offset ib))
        (result 0) (shift 0))
    ;; SHIFT stays within 63 (the tenth group, at 63, ends the varint or is
    ;; refused), so the shifts below are machine shifts, not generic ASH
    (declare (type (unsigned-byte 64) result) (type (integer 0 63) shift))
    (loop
      (let ((byte (read-u8 ib)))
        (when (and (= shift 63) (> byte 1))
          (invalid ib "varint does not fit in 64 bits" "a length or count" start))
        (setf result (logior result (ldb (byte 64 0) (ash (logand byte #x7F) shift))))
        (when (< byte 128)
          (when (and (zerop byte) (> shift 0))
            (invalid ib "varint has a redundant trailing zero group"
                     "a minimal varint" start))
          (return result))
        (setf shift (+ shift 7))))))

(declaim (inline copy-window-bytes))
(defun copy-window-bytes (sap from to count)
  "Copy COUNT bytes from SAP+FROM, in the window, to the address TO (an
object's memory the caller pins, or raw memory).  Inline, so that neither
address is boxed."
  (declare (type index from count))
  (copy-memory (pointer+ sap from) to count))

(defconstant +direct-read-bytes+ (* 64 1024)
  "The fewest bytes READ-OCTETS-TO-ADDRESS asks an IBUF's source to put
straight where they go, past an empty window, rather than through it.")

(defun read-octets-directly (ib address count)
  "When IB's window is empty, COUNT is +DIRECT-READ-BYTES+ or more and IB's
source can, read up to COUNT bytes straight to ADDRESS (PREFAULTed first):
return how many (0 at the end of the data), or NIL having read none."
  (declare (type ibuf ib) (type word address) (type index count))
  (let ((fn (ibuf-direct-fn ib)))
    (when (and fn (zerop (available ib)) (>= count +direct-read-bytes+))
      (funcall fn ib address count))))

(defun read-octets-to-address (ib address count)
  "Copy COUNT input bytes to ADDRESS (memory the caller pins and has just
allocated, see PREFAULT), an integer as for WRITE-OCTETS-FROM-ADDRESS.
A long run is read straight there when the source can (a file's
descriptor, a decompressor), saving a pass through the window."
  (declare (type ibuf ib) (type word address) (type index count))
  (loop while (> count 0)
        do (let ((direct (read-octets-directly ib address count)))
             (cond ((and direct (plusp direct))
                    (incf address direct)
                    (decf count direct))
                   (t
                    (when (zerop (available ib))
                      (refill ib 1))
                    (let ((n (min count (available ib))))
                      ;; only what the window holds: a stream may end short of COUNT
                      (prefault address n)
                      (copy-window-bytes (ibuf-sap ib) (ibuf-pos ib) (address-pointer address) n)
                      (incf (ibuf-pos ib) n)
                      (incf address n)
                      (decf count n)))))))

(defun bytes-left-bound (ib)
  "An upper bound on the input bytes left: exact for a fixed region,
the max-to-read allowance for a stream.  Used to refuse counts that could
not possibly be backed by input before anything is allocated for them."
  (if (ibuf-refill-fn ib)
      (let ((limit (ibuf-limit ib)))
        (if limit (- limit (ibuf-offset ib)) most-positive-fixnum))
      (available ib)))

(defun check-count-slow (ib count min-bytes-each what)
  (declare (type (unsigned-byte 64) count) (type (rational 0) min-bytes-each))
  (when (> (* count min-bytes-each) (bytes-left-bound ib))
    (if (or (ibuf-cut-by-limit ib) (and (ibuf-refill-fn ib) (ibuf-limit ib)))
        (error 'restore-limit-exceeded :limit :max-to-read :value (ibuf-limit ib)
                               :offset (ibuf-offset ib)
                               :message (format nil "~a of ~d would need more input than allowed"
                                                what count))
        (error 'truncated-input
               :offset (ibuf-offset ib)
               :message (format nil "~a of ~d cannot fit in the ~d byte~:p left"
                                what count (bytes-left-bound ib))
               :expected "a count the input can hold")))
  count)

(declaim (inline check-count))
(defun check-count (ib count min-bytes-each what)
  "Signal unless COUNT items of at least MIN-BYTES-EACH bytes could follow.
The common case, a count whose bytes are already in the window, is decided
inline in fixnum arithmetic."
  (declare (type (unsigned-byte 64) count) (type (rational 0) min-bytes-each))
  (if (and (typep min-bytes-each '(integer 0 16))
           (<= count (available ib))
           (<= (* count min-bytes-each) (available ib)))
      count
      (check-count-slow ib count min-bytes-each what)))

;;; ------------------------------------------------------------------
;;; Source: a fixed region of memory.

(declaim (inline make-fixed-ibuf))
(defun make-fixed-ibuf (address size limit)
  "An IBUF over SIZE bytes at ADDRESS (pinned by the caller).  Inline: its
caller may keep it on the stack."
  (let ((cut (and limit (> size limit))))
    (%make-ibuf :base address :end (if cut limit size) :size size
                :limit limit :cut-by-limit cut)))
