;;;; Output buffer, and the sink of raw memory.
;;;;
;;;; An OBUF is a window of raw memory [base, base+end) that the encoder writes
;;;; into with sap-ref; POS is the next free byte.  The fast path of every write
;;;; is one comparison against END.  When the window is full, MAKE-ROOM calls
;;;; the sink's ROOM-FN, which hands the filled bytes to their destination and
;;;; opens a new window (or grows, or signals OUT-OF-SPACE).  Sinks know nothing
;;;; of Lisp types.  The sinks of memory places are here (raw memory),
;;;; region.lisp (the output region) and api.lisp (octet vectors); any other
;;;; destination is a byte sink (sinks.lisp).
;;;;
;;;; MAX-TO-WRITE is enforced without a per-write check: END never extends past
;;;; the limit, so only MAKE-ROOM has to test it.

(in-package #:binstore)

;;; Inline, so that the callers that make an OBUF for the length of one call
;;; keep it on their stack (DYNAMIC-EXTENT): see store-state.lisp.
(declaim (inline %make-obuf))
(defstruct (obuf (:constructor %make-obuf))
  (base 0 :type word)          ; address of the current window
  (pos 0 :type index)                 ; next byte to write, relative to BASE
  (end 0 :type index)                 ; usable size of the window
  (capacity 0 :type index)            ; real size of the window
  (flushed 0 :type index)             ; bytes handed on before this window
  (limit nil :type (or null index))   ; max-to-write
  (room-fn nil :type function)        ; (lambda (obuf needed)) opens a new window
  (sink nil)                          ; the sink's own state
  ;; Bytes from absolute offset HOLD on must stay in the window, to be
  ;; rewritten: a sink whose HOLDABLE is true carries them into each new
  ;; window.  Only in-memory sinks are holdable (a stream's staging buffer
  ;; would have to grow with the held bytes).
  (hold nil :type (or null index))
  (holdable nil :type boolean)
  ;; A byte sink told of each numeric array payload before its bytes
  ;; (SINK-NOTE-PAYLOAD, sinks.lisp), or NIL: only a compressing sink that
  ;; shuffles them wants to be (see src/compression/shuffle.lisp).
  (payload-sink nil))

(declaim (inline obuf-sap obuf-total))
(defun obuf-sap (ob) (address-pointer (obuf-base ob)))
(defun obuf-total (ob)
  "Bytes written so far through OB."
  (+ (obuf-flushed ob) (obuf-pos ob)))

(declaim (inline first-window-end))
(defun first-window-end (capacity limit)
  "END of a first window of CAPACITY bytes, nothing written: what
CLIP-WINDOW sets, for a constructor."
  (if limit (min capacity limit) capacity))

(defun clip-window (ob)
  "Set END from CAPACITY so that the window never crosses the limit."
  (let ((limit (obuf-limit ob)))
    (setf (obuf-end ob)
          (if limit
              (max (obuf-pos ob)
                   (min (obuf-capacity ob) (- limit (obuf-flushed ob))))
              (obuf-capacity ob)))))

(defun make-room (ob n)
  "Make at least N contiguous bytes available at POS."
  (declare (type obuf ob) (type index n))
  (let ((limit (obuf-limit ob)))
    (when (and limit (> (+ (obuf-total ob) n) limit))
      (error 'store-limit-exceeded :limit :max-to-write :value limit
                             :message (format nil "storing needs more than ~d bytes" limit))))
  (when (> (+ (obuf-pos ob) n) (obuf-capacity ob))
    (funcall (obuf-room-fn ob) ob n))
  (clip-window ob)
  ob)

(defun open-window-carrying (ob address capacity)
  "Make the CAPACITY bytes at ADDRESS the new window of OB: bytes from the
hold on (none without a hold) are copied to its start, the rest count as
handed on.  Return the end of the old window's part that was handed on."
  (let* ((pos (obuf-pos ob))
         (keep-from (if (obuf-hold ob)
                        (- (obuf-hold ob) (obuf-flushed ob))
                        pos))
         (carried (- pos keep-from)))
    (when (plusp carried)
      (copy-memory (pointer+ (obuf-sap ob) keep-from) (address-pointer address) carried))
    (incf (obuf-flushed ob) keep-from)
    (setf (obuf-base ob) address
          (obuf-pos ob) carried
          (obuf-capacity ob) capacity)
    keep-from))

(defun held-bytes (ob)
  "Bytes of the window a new window would have to carry."
  (if (obuf-hold ob)
      (- (obuf-total ob) (obuf-hold ob))
      0))

(declaim (inline make-room-for))
(defun make-room-for (ob n)
  "Ensure N bytes can be written at POS (N may exceed what RESERVE takes)."
  (declare (type obuf ob) (type index n))
  (when (> (+ (obuf-pos ob) n) (obuf-end ob))
    (make-room ob n)))

(declaim (inline reserve))
(defun reserve (ob n)
  "Claim N bytes at the current position; return their offset from BASE."
  (declare (type obuf ob) (type (integer 0 256) n) (optimize speed))
  (let* ((p (obuf-pos ob)) (np (+ p n)))
    ;; (SBCL derives these; ECL open-codes the sum and the comparison only
    ;; when told)
    (declare (type index p) (type (integer 0 #.(+ +largest-index+ 256)) np))
    (when (> np (obuf-end ob))
      (make-room ob n)
      (setf p (obuf-pos ob) np (+ p n)))
    (setf (obuf-pos ob) np)
    p))

(defmacro with-reserved ((sap offset ob n) &body body)
  "Reserve N bytes in OB and run BODY with SAP and OFFSET addressing them:
one bounds check for a tag and its payload together."
  `(let* ((,offset (reserve ,ob ,n))
          (,sap (obuf-sap ,ob)))
     ,@body))

(defmacro define-writer (name size type accessor)
  "Define an inline writer of a SIZE-byte little-endian value via ACCESSOR.
RESERVE runs before the window's address is taken, since it may move it."
  ;; PROCLAIM in an EVAL-WHEN, not DECLAIM: ECL inlines the function in
  ;; other files only so, when a macro gives the two forms in a PROGN
  `(progn
     (eval-when (:compile-toplevel :load-toplevel :execute)
       (proclaim '(inline ,name)))
     (defun ,name (ob v)
       (declare (type ,type v))
       (let ((p (reserve ob ,size)))
         (setf (,accessor (obuf-sap ob) p) v)))))

(define-writer write-u8 1 (unsigned-byte 8) mem-u8)
(define-writer write-u64 8 (unsigned-byte 64) mem-u64)
(define-writer write-s64 8 (signed-byte 64) mem-s64)
(define-writer write-single 4 single-float mem-single)
(define-writer write-double 8 double-float mem-double)

(declaim (inline write-tag+u8))
(defun write-tag+u8 (ob tag byte)
  "Write a tag byte and one payload byte with a single reservation."
  (declare (type (unsigned-byte 8) tag byte))
  (let ((p (reserve ob 2)) (sap (obuf-sap ob)))
    (setf (mem-u8 sap p) tag
          (mem-u8 sap (1+ p)) byte)))

(declaim (inline varint-length))
(defun varint-length (n)
  "Bytes the varint encoding of N takes."
  (declare (type (unsigned-byte 64) n))
  (max 1 (ceiling (integer-length n) 7)))

;;; Inline, as every function taking a SAP should be that is called per
;;; object: a SAP passed in a full call is boxed, 16 bytes of garbage a call.
(declaim (inline put-varint))
(defun put-varint (sap p n)
  "Store N as an unsigned LEB128 varint at SAP+P (room checked by the
caller); return the offset after it."
  (declare (type index p) (type (unsigned-byte 64) n) (optimize speed))
  (loop while (>= n 128)
        do (setf (mem-u8 sap p) (logior #x80 (logand n #x7F)))
           (setf n (ash n -7))
           (incf p))
  (setf (mem-u8 sap p) n)
  (1+ p))

(defun write-varint (ob n)
  "Write the non-negative integer N as an unsigned LEB128 varint."
  (declare (type obuf ob) (type (unsigned-byte 64) n) (optimize speed))
  (if (< n 128)
      (write-u8 ob n)
      (let ((p (reserve ob (varint-length n))))
        (put-varint (obuf-sap ob) p n))))

(defun move-window-bytes (ob from to count)
  "Move COUNT bytes of the window from offset FROM to offset TO (the ranges
may overlap; both lie within the window's capacity).  MOVE-MEMORY, as in
COPY-MEMORY: memmove goes backwards where the ranges overlap that way."
  (declare (type obuf ob) (type index from to count))
  (assert (<= (+ (max from to) count) (obuf-capacity ob)))
  (move-memory (pointer+ (obuf-sap ob) to) (pointer+ (obuf-sap ob) from) count))

(defun write-octets-from-address (ob address count)
  "Copy COUNT bytes from ADDRESS (memory the caller pins) to the output.
The address comes as an integer, a fixnum: a SAP passed to a function not
inline is boxed, 16 bytes of garbage for every payload written."
  (declare (type obuf ob) (type word address) (type index count))
  (loop while (> count 0)
        do (let ((room (- (obuf-end ob) (obuf-pos ob))))
             (when (zerop room)
               (make-room ob (min count (max 1 (obuf-capacity ob))))
               (setf room (- (obuf-end ob) (obuf-pos ob))))
             (let ((n (min room count)))
               (copy-memory (address-pointer address)
                            (pointer+ (obuf-sap ob) (obuf-pos ob)) n)
               (incf (obuf-pos ob) n)
               (incf address n)
               (decf count n)))))

;;; ------------------------------------------------------------------
;;; Sink: a fixed region of memory (store-to-sap, or a pinned octet vector).
;;; When it is full: OUT-OF-SPACE, with USE-LARGER-SPACE for raw memory.

(defun fixed-room (ob n)
  (let ((needed (+ (obuf-total ob) n)))
    (restart-case
        (error 'out-of-space :needed needed
                             :message (format nil "the destination holds ~d bytes"
                                              (obuf-capacity ob)))
      (use-larger-space (sap size)
        :report "Copy what was written to a larger region and carry on there."
        :test (lambda (c) (declare (ignore c)) (eq (obuf-sink ob) :sap))
        (unless (>= size needed)
          (error 'out-of-space :needed needed
                               :message (format nil "the new region holds only ~d bytes" size)))
        (copy-memory (obuf-sap ob) sap (obuf-pos ob))
        (setf (obuf-base ob) (pointer-address sap)
              (obuf-capacity ob) size)))))

(declaim (inline make-fixed-obuf))
(defun make-fixed-obuf (address size limit &key (kind :sap))
  "An OBUF writing straight into SIZE bytes at ADDRESS.  KIND :sap offers
the USE-LARGER-SPACE restart when it is full; :vector does not.  Inline:
its caller may keep it on the stack."
  (%make-obuf :base address :capacity size :end (first-window-end size limit) :limit limit
              :room-fn #'fixed-room :sink kind :holdable t))
