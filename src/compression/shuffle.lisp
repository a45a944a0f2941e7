;;;; The shuffle filter: the payloads of numeric arrays byte-shuffled inside
;;;; a compressed frame, as blosc does, so that the compressor sees the
;;;; first bytes of every element together, then the second bytes, and so
;;;; on.  Doubles of similar magnitude share their sign and exponent bytes;
;;;; integers of small magnitude their high bytes: runs the compressor
;;;; finds, which the interleaved elements hide.
;;;;
;;;; Where it sits.  The compressor sees only bytes; the shuffle needs to
;;;; know which of them are array payloads and how wide their elements are.
;;;; The encoder says so (SINK-NOTE-PAYLOAD, src/io/sinks.lisp) to a sink
;;;; that asks, before it writes each payload; the record's bytes are the
;;;; same as ever.  The compressing sink then frames what it compresses as
;;;; a "shuffle container" (doc/FORMAT.md, Compressed records):
;;;;
;;;;   #x5F #x01, then chunks until the end of the frame's content, each
;;;;   a kind byte K, a varint N, and N bytes:
;;;;     K = 0        N bytes of the record as they are
;;;;     K = 2, 4, 8  N bytes of the record, N a multiple of K from K to
;;;;                  +MAX-SHUFFLE-CHUNK+, byte-shuffled with elements of
;;;;                  K bytes: byte j of element i is at j*(N/K) + i
;;;;
;;;; #x5F is a back-reference to object 31, which no record can begin with,
;;;; so a frame's content is a container or a record, told by its first
;;;; byte.  The decompressing side (UNSHUFFLING-SOURCE) undoes it and gives
;;;; the decoder the record's bytes, so the decoder knows nothing of it
;;;; either; it reads frames with and without a container alike.
;;;;
;;;; The record comes in pieces, one of the encoder's windows at a time; a
;;;; shuffle run (COMPRESS-CONTAINER-PIECE) gathers the bytes of a payload
;;;; and of the payloads of its width just after it across pieces, and is
;;;; shuffled in chunks of whole elements, the bytes of a last partial one
;;;; going out plain.

(in-package #:binstore)

(defconstant +shuffle-marker+ #x5F
  "The first byte of a frame content that is a shuffle container: a
back-reference to object 31, which cannot begin a record.")

(defconstant +shuffle-version+ 1
  "The byte after +SHUFFLE-MARKER+: the container's version.")

(defconstant +max-shuffle-chunk+ (* 1024 1024)
  "The most bytes a shuffled chunk holds: a reader's buffer for one.")

(defconstant +min-shuffled-payload+ 64
  "Payloads shorter than this many bytes are not shuffled: a chunk's header
would cost more than the shuffle gains.")

;;; ------------------------------------------------------------------
;;; Shuffling bytes
;;;
;;; Eight elements of WIDTH bytes are a matrix of 8 rows and WIDTH columns,
;;; and their shuffled bytes the same matrix transposed: WIDTH lanes of
;;; eight bytes, one 64-bit word each.  The kernels transpose it in
;;; registers, as the WIDTH words it is stored in, by three rounds of the
;;; swap SHUFFLE-STEP-FORM writes, of blocks of 4, then 2, then 1 bytes
;;; between two words (the recursive block transpose): 24 steps of 6 word
;;; operations for 64 bytes, where gathering each lane's bytes one at a
;;; time took about three operations per byte: 6.1-6.5 GB/s here in cache,
;;; against 3.2-3.6 (doc/COMPRESSION.md, The shuffle).

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun shuffle-step-form (a b bits)
    "A form that swaps, between the (UNSIGNED-BYTE 64) variables A and B,
the odd blocks of BITS bits (32, 16 or 8) of A with the even blocks of B.
Its own inverse.  (A form, not an inline function of two values: ECL
compiled that into code that crashed.)"
    (let* ((even (ecase bits
                   (32 #x00000000FFFFFFFF)
                   (16 #x0000FFFF0000FFFF)
                   (8 #x00FF00FF00FF00FF)))
           (odd (logxor even #xFFFFFFFFFFFFFFFF)))
      `(let ((a ,a) (b ,b))
         (declare (type (unsigned-byte 64) a b))
         (setf ,a (logior (logand a ,even) (logand (ash b ,bits) ,odd))
               ,b (logior (logand (ash a ,(- bits)) ,even) (logand b ,odd)))))))

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defparameter *shuffle-plans*
    '((8 :rounds ((32 (0 4) (1 5) (2 6) (3 7)) (16 (0 2) (1 3) (4 6) (5 7)) (8 (0 1) (2 3) (4 5) (6 7)))
         :lanes (0 1 2 3 4 5 6 7))
      (4 :rounds ((32 (0 2) (1 3)) (16 (0 1) (2 3)) (8 (0 2) (1 3)))
         :lanes (0 2 1 3))
      (2 :rounds ((32 (0 1)) (16 (0 1)) (8 (0 1)))
         :lanes (0 1)))
    "For each element width, how SHUFFLE-STEP-FORM transposes the WIDTH words
holding eight elements: its rounds, each the step's BITS and the pairs of
words it is applied to, in order; and LANES, which word holds lane j at
the end (lane j: byte j of the eight elements).  Unshuffling loads lane j
into that word and applies the rounds in reverse order.  Checked by the
test shuffle-puts-byte-j-of-element-i-at-j-m-plus-i."))

(defmacro define-shuffler (name (width) &key unshuffle)
  "Define NAME, a function (FROM FROM-START TO TO-START COUNT) that
shuffles (or with UNSHUFFLE, unshuffles) the COUNT bytes of the octet
vector FROM at FROM-START into TO at TO-START, elements of WIDTH bytes;
COUNT is a multiple of WIDTH, both ranges within their vectors (checked by
the caller) and distinct.  Eight elements at a time through the words of
*SHUFFLE-PLANS*; the elements after the last eight one byte at a time."
  (destructuring-bind (&key rounds lanes) (cdr (assoc width *shuffle-plans*))
    (let* ((words (loop for k below width collect (gensym "WORD")))
           (rounds (if unshuffle (reverse rounds) rounds))
           (steps (loop for (bits . pairs) in rounds
                        append (loop for (i j) in pairs
                                     collect (shuffle-step-form (nth i words) (nth j words) bits))))
           (lane-offsets (loop for j below width collect (gensym "LANE"))))
      (flet ((lane-word (j) (nth (nth j lanes) words)))
        `(defun ,name (from from-start to to-start count)
           (declare (type (simple-array (unsigned-byte 8) (*)) from to)
                    (type index from-start to-start count)
                    (optimize speed (safety 0)))
           (let* ((m (floor count ,width))
                  (blocks (* 8 (floor m 8)))
                  ,@(loop for j below width for lane in lane-offsets
                          collect `(,lane (* ,j m))))
             (declare (type index m blocks ,@lane-offsets))
             (with-pinned-objects (from to)
               (let (,@(if unshuffle
                           '((lanes (pointer+ (vector-pointer from) from-start))
                             (elements (pointer+ (vector-pointer to) to-start)))
                           '((elements (pointer+ (vector-pointer from) from-start))
                             (lanes (pointer+ (vector-pointer to) to-start)))))
                 (loop for i of-type index from 0 below blocks by 8
                       do (let ,(if unshuffle
                                    (loop for j below width for lane in lane-offsets
                                          collect `(,(lane-word j) (mem-u64 lanes (+ ,lane i))))
                                    (loop for k below width for word in words
                                          collect `(,word (mem-u64 elements (+ (* i ,width) ,(* 8 k))))))
                            (declare (type (unsigned-byte 64) ,@words))
                            ,@steps
                            ,@(if unshuffle
                                  (loop for k below width for word in words
                                        collect `(setf (mem-u64 elements (+ (* i ,width) ,(* 8 k))) ,word))
                                  (loop for j below width for lane in lane-offsets
                                        collect `(setf (mem-u64 lanes (+ ,lane i)) ,(lane-word j))))))
                 (loop for i of-type index from blocks below m
                       do ,@(loop for j below width for lane in lane-offsets
                                  collect (if unshuffle
                                              `(setf (mem-u8 elements (+ (* i ,width) ,j))
                                                     (mem-u8 lanes (+ ,lane i)))
                                              `(setf (mem-u8 lanes (+ ,lane i))
                                                     (mem-u8 elements (+ (* i ,width) ,j)))))))))
           nil)))))

(define-shuffler shuffle-2 (2))
(define-shuffler shuffle-4 (4))
(define-shuffler shuffle-8 (8))
(define-shuffler unshuffle-2 (2) :unshuffle t)
(define-shuffler unshuffle-4 (4) :unshuffle t)
(define-shuffler unshuffle-8 (8) :unshuffle t)

(defun shuffle-octets (from from-start to to-start count width &key unshuffle)
  "Byte-shuffle (with UNSHUFFLE, unshuffle) the COUNT bytes of the octet
vector FROM at FROM-START into TO at TO-START, elements of WIDTH (2, 4 or
8) bytes.  Byte j of element i goes to j*(COUNT/WIDTH) + i.  Both ranges
are checked here, once."
  (declare (type (simple-array (unsigned-byte 8) (*)) from to) (type index from-start to-start count))
  (assert (and (member width '(2 4 8)) (zerop (mod count width))
               (<= (+ from-start count) (length from)) (<= (+ to-start count) (length to))
               (not (eq from to))))
  (funcall (if unshuffle
               (ecase width (2 #'unshuffle-2) (4 #'unshuffle-4) (8 #'unshuffle-8))
               (ecase width (2 #'shuffle-2) (4 #'shuffle-4) (8 #'shuffle-8)))
           from from-start to to-start count))

;;; ------------------------------------------------------------------
;;; Compressing: the container

(defmethod sink-notes-payloads-p ((sink compressing-sink))
  (compressing-sink-shuffle sink))

(defmethod sink-note-payload ((sink compressing-sink) offset count width)
  (when (and (compressing-sink-shuffle sink) (>= count +min-shuffled-payload+))
    (vector-push-extend (list offset (+ offset count) width)
                        (or (compressing-sink-ranges sink)
                            (setf (compressing-sink-ranges sink)
                                  (make-array 16 :adjustable t :fill-pointer 0))))))

(defun compress-chunk-header (sink kind count)
  "Compress the header of a chunk of KIND and COUNT bytes."
  (let ((header (make-array 11 :element-type '(unsigned-byte 8))))
    (declare (dynamic-extent header))
    (setf (aref header 0) kind)
    (let ((end (loop for i from 1
                     do (setf (aref header i) (logior (ldb (byte 7 0) count)
                                                      (if (< count 128) 0 128)))
                        (setf count (ash count -7))
                     when (zerop count) return (1+ i))))
      (compress-octets sink header 0 end))))

(defun compress-plain-chunk (sink octets start end)
  (when (< start end)
    (compress-chunk-header sink 0 (- end start))
    (compress-octets sink octets start end)))

(defun compress-shuffled-chunk (sink octets count width)
  "The first COUNT bytes of OCTETS, whole elements of WIDTH bytes and at most
+MAX-SHUFFLE-CHUNK+ of them (a shuffle run's, which never holds more),
shuffled, as one chunk; nothing when COUNT is 0."
  (when (plusp count)
    (let ((scratch (compressing-sink-scratch sink)))
      (when (< (length scratch) count)
        (setf scratch (make-array (max count +filter-buffer-bytes+)
                                  :element-type '(unsigned-byte 8))
              (compressing-sink-scratch sink) scratch))
      (shuffle-octets octets 0 scratch 0 count width)
      (compress-chunk-header sink width count)
      (compress-octets sink scratch 0 count))))

(defconstant +max-shuffle-gap+ 64
  "The most bytes between two payloads of one width that a shuffle run
takes in with them (the next one's header, a few tags): farther apart, the
run ends at the first.")

(defun next-range (sink at)
  "The first payload noted in SINK, (start end width), that ends after the
record offset AT, or NIL; those that end before are passed over for good."
  (let ((ranges (compressing-sink-ranges sink)))
    (when ranges
      (loop while (and (< (compressing-sink-range-head sink) (fill-pointer ranges))
                       (<= (second (aref ranges (compressing-sink-range-head sink))) at))
            do (incf (compressing-sink-range-head sink)))
      (and (< (compressing-sink-range-head sink) (fill-pointer ranges))
           (aref ranges (compressing-sink-range-head sink))))))

(defun emit-run (sink)
  "Compress what SINK's shuffle run holds: its whole elements as one
shuffled chunk, the bytes of a partial one after them as a plain chunk;
the run is then empty (and still open)."
  (let* ((run (compressing-sink-run sink))
         (fill (compressing-sink-run-fill sink))
         (width (compressing-sink-run-width sink))
         (whole (* width (floor fill width))))
    (compress-shuffled-chunk sink run whole width)
    (compress-plain-chunk sink run whole fill)
    (setf (compressing-sink-run-fill sink) 0)))

(defun add-to-run (sink octets start end)
  "Put the bytes of OCTETS from START below END in SINK's open shuffle run,
compressing it as one shuffled chunk each time it holds +MAX-SHUFFLE-CHUNK+
bytes (a multiple of every width, so the elements after stay whole)."
  (loop while (< start end)
        do (let ((run (compressing-sink-run sink))
                 (fill (compressing-sink-run-fill sink)))
             (when (= fill (length run))
               (if (= fill +max-shuffle-chunk+)
                   (progn (emit-run sink)
                          (setf fill 0))
                   ;; grown as the run does, so that a short run costs little
                   (let ((new (make-array (min +max-shuffle-chunk+
                                               (max +filter-buffer-bytes+ (* 2 (length run))))
                                          :element-type '(unsigned-byte 8))))
                     (replace new run :end2 fill)
                     (setf (compressing-sink-run sink) new
                           run new))))
             (let ((n (min (- end start) (- (length run) fill))))
               (replace run octets :start1 fill :start2 start :end2 (+ start n))
               (setf (compressing-sink-run-fill sink) (+ fill n))
               (incf start n)))))

(defun close-run (sink)
  "End SINK's shuffle run, if one is open, compressing what it holds."
  (when (plusp (compressing-sink-run-width sink))
    (emit-run sink)
    (setf (compressing-sink-run-width sink) 0)))

(defun compress-container-piece (sink octets start end)
  "Compress the bytes of OCTETS from START below END, the next of the
record, as chunks of the container.  A payload the encoder noted opens a
shuffle run: its bytes, and those of the payloads of the same width that
follow within +MAX-SHUFFLE-GAP+ bytes (with the bytes between), are
shuffled together, in chunks of up to +MAX-SHUFFLE-CHUNK+, as blosc
shuffles a whole block: a thousand vectors of a thousand doubles make
eight chunks, not two thousand, and each byte of the elements lies in one
stretch of 128 KiB for the compressor, not in a thousand stretches of
1,000 bytes (at zstd level 9, 0.15% smaller).  The elements of a payload
after a gap may not begin at an element of the run; each of their bytes
still goes with the same byte of the others.  Other bytes go in plain
chunks.  A run stays open from one piece to the next: whether it goes on
is decided when the bytes after its last payload arrive, by which time
the encoder has noted the payload that follows them, if any."
  (let ((base (- (compressing-sink-offset sink) start))) ; offset of OCTETS[0]
    (loop while (< start end)
          do (let ((at (+ base start)))
               (cond ((zerop (compressing-sink-run-width sink))
                      (let ((next (next-range sink at)))
                        (cond ((or (null next) (>= (first next) (+ base end)))
                               (compress-plain-chunk sink octets start end)
                               (setf start end))
                              ((> (first next) at)
                               (let ((stop (- (first next) base)))
                                 (compress-plain-chunk sink octets start stop)
                                 (setf start stop)))
                              (t
                               (setf (compressing-sink-run-width sink) (third next)
                                     (compressing-sink-run-until sink) (second next)
                                     (compressing-sink-run-fill sink) 0)))))
                     ((< at (compressing-sink-run-until sink))
                      (let ((stop (min end (- (compressing-sink-run-until sink) base))))
                        (add-to-run sink octets start stop)
                        (setf start stop)))
                     (t
                      ;; past the run's last payload: on, through a short gap,
                      ;; into the next payload of the same width, or the end
                      (let ((next (next-range sink at)))
                        (if (and next
                                 (= (third next) (compressing-sink-run-width sink))
                                 (<= at (first next) (+ at +max-shuffle-gap+)))
                            (setf (compressing-sink-run-until sink) (second next))
                            (close-run sink))))))))
  (let ((ranges (compressing-sink-ranges sink))
        (head (compressing-sink-range-head sink)))
    (when (and ranges (plusp head))
      ;; forget the ranges done with: those noted and not yet reached stay
      (replace ranges ranges :start2 head)
      (setf (fill-pointer ranges) (- (fill-pointer ranges) head)
            (compressing-sink-range-head sink) 0))))

(defmethod sink-finish :before ((sink compressing-sink))
  ;; the last run's bytes go into the frame before it ends
  (when (compressing-sink-shuffle sink)
    (close-run sink)))

(defmethod sink-write ((sink compressing-sink) octets start end)
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (assert (<= start end (length octets)))
  (cond ((not (compressing-sink-shuffle sink))
         (compress-octets sink octets start end))
        (t
         (when (and (zerop (compressing-sink-offset sink)) (< start end))
           (let ((marker (make-array 2 :element-type '(unsigned-byte 8)
                                       :initial-contents (list +shuffle-marker+
                                                               +shuffle-version+))))
             (compress-octets sink marker 0 2)))
         (compress-container-piece sink octets start end)))
  (incf (compressing-sink-offset sink) (- end start)))

;;; ------------------------------------------------------------------
;;; Decompressing: undoing the container

(defstruct (unshuffling-source (:include filter-source)
                               (:constructor make-unshuffling-source (inner)))
  "A byte source giving the record a compressed frame holds, whether the
frame's content is the record itself or a shuffle container: INNER is the
frame's decompressing source.  MODE is :START (nothing read yet), :PLAIN
\(the content is the record: read through), or :CONTAINER.  In a container,
KIND and LEFT are the current chunk's kind and the bytes of it not yet
read; the bytes of a shuffled chunk, unshuffled, wait in PENDING from
PENDING-POS below PENDING-END; SCRATCH holds a shuffled chunk as read.
CONTENT counts the content's bytes read, for messages."
  (mode :start)
  (kind 0 :type (unsigned-byte 8))
  (left 0 :type index)
  (pending nil)
  (pending-pos 0 :type index)
  (pending-end 0 :type index)
  (scratch nil)
  (content 0 :type index))

(defmethod source-greedy-p ((source unshuffling-source))
  (source-greedy-p (filter-source-inner source)))

(defmethod release-compression-context ((source unshuffling-source))
  (setf (unshuffling-source-pending source) nil
        (unshuffling-source-scratch source) nil)
  (release-compression-context (filter-source-inner source)))

(defun container-invalid (source message)
  "INVALID-INPUT for a malformed shuffle container, at the offset of the
compressed bytes the decompressor was reading."
  (let ((inner (filter-source-inner source)))
    (error 'invalid-input
           :offset (+ (decompressing-source-base-offset inner)
                      (decompressing-source-consumed inner))
           :message (format nil "~a (at byte ~d of the ~a frame's content)"
                            message (unshuffling-source-content source) (method-name inner))
           :expected "a well-formed shuffle container (doc/FORMAT.md, Compressed records)")))

(defun read-content (source octets start end)
  "Read content bytes from SOURCE's inner source into OCTETS from START
below END; return the index after the last one (below END at the end of
the content)."
  (let ((after (source-read (filter-source-inner source) octets start end)))
    (incf (unshuffling-source-content source) (- after start))
    after))

(defun read-content-byte (source)
  "The next byte of the content, or NIL at its end."
  (let ((one (make-array 1 :element-type '(unsigned-byte 8))))
    (declare (dynamic-extent one))
    (and (= 1 (read-content source one 0 1)) (aref one 0))))

(defun read-chunk-header (source)
  "Read the next chunk's header into SOURCE; false at the end of the
content.  A bad kind, a length that is not a positive multiple of the
width, or one past +MAX-SHUFFLE-CHUNK+ for a shuffled chunk, or a header
cut short, is INVALID-INPUT."
  (let ((kind (read-content-byte source)))
    (when kind
      (unless (member kind '(0 2 4 8))
        (container-invalid source (format nil "chunk kind ~d in a shuffle container" kind)))
      (let ((count (loop for shift from 0 by 7
                         for byte = (read-content-byte source)
                         sum (ash (logand (or byte 0) 127) shift) into count
                         do (cond ((null byte)
                                   (container-invalid source "a shuffle container ends inside a chunk's header"))
                                  ((>= shift 56)
                                   (container-invalid source "a chunk length of more than 8 bytes"))
                                  ((< byte 128) (return count))))))
        (unless (or (zerop kind)
                    (and (plusp count) (<= count +max-shuffle-chunk+) (zerop (mod count kind))))
          (container-invalid source (format nil "a shuffled chunk of ~d bytes of width ~d: ~
                                                 the length must be a multiple of the width ~
                                                 from it to ~d"
                                            count kind +max-shuffle-chunk+)))
        (setf (unshuffling-source-kind source) kind
              (unshuffling-source-left source) count)
        t))))

(defun load-shuffled-chunk (source)
  "Read the whole shuffled chunk whose header was read and unshuffle it
into PENDING."
  (let* ((count (unshuffling-source-left source))
         (scratch (unshuffling-source-scratch source))
         (pending (unshuffling-source-pending source)))
    (when (< (length (or scratch #())) count)
      (setf scratch (make-array (max count +filter-buffer-bytes+) :element-type '(unsigned-byte 8))
            pending (make-array (length scratch) :element-type '(unsigned-byte 8))
            (unshuffling-source-scratch source) scratch
            (unshuffling-source-pending source) pending))
    (unless (= count (read-content source scratch 0 count))
      (container-invalid source "a shuffle container ends inside a chunk"))
    (shuffle-octets scratch 0 pending 0 count (unshuffling-source-kind source) :unshuffle t)
    (setf (unshuffling-source-pending-pos source) 0
          (unshuffling-source-pending-end source) count
          (unshuffling-source-left source) 0)))

(defmethod source-read ((source unshuffling-source) octets start end)
  (declare (type (simple-array (unsigned-byte 8) (*)) octets) (type index start end))
  (when (eq (unshuffling-source-mode source) :start)
    (when (>= start end)
      (return-from source-read start))
    ;; the first byte says which
    (let ((after (read-content source octets start (1+ start))))
      (cond ((= after start)            ; empty content
             (setf (unshuffling-source-mode source) :plain)
             (return-from source-read start))
            ((/= (aref octets start) +shuffle-marker+)
             (setf (unshuffling-source-mode source) :plain)
             (return-from source-read (read-content source octets after end)))
            (t
             (let ((version (read-content-byte source)))
               (unless (eql version +shuffle-version+)
                 (container-invalid source (format nil "shuffle container version ~a"
                                                   (or version "missing")))))
             (setf (unshuffling-source-mode source) :container)))))
  (if (eq (unshuffling-source-mode source) :plain)
      (read-content source octets start end)
      (read-shuffle-container source octets start end)))

(defmethod source-read-to-address ((source unshuffling-source) address count)
  (case (unshuffling-source-mode source)
    (:plain (read-content-to-address source address count))
    (:container (read-shuffle-container source address 0 count))
    ;; the first byte, which says which, is read through SOURCE-READ
    (t nil)))

(defun read-shuffle-container (source destination start end)
  "Read the record's bytes from SOURCE's shuffle container to DESTINATION,
an octet vector or an address (an integer: memory the caller keeps in
place), from START until END or the end of the content; return the offset
after the last byte."
  (declare (type index start end))
  (let ((pos start))
    (declare (type index pos))
    (loop while (< pos end)
          do (cond ((< (unshuffling-source-pending-pos source)
                       (unshuffling-source-pending-end source))
                    (let ((n (min (- end pos) (- (unshuffling-source-pending-end source)
                                                 (unshuffling-source-pending-pos source)))))
                      (put-pending source destination pos n)
                      (incf (unshuffling-source-pending-pos source) n)
                      (incf pos n)))
                   ((plusp (unshuffling-source-left source))
                    (if (zerop (unshuffling-source-kind source))
                        (let* ((want (min (- end pos) (unshuffling-source-left source)))
                               (after (if (integerp destination)
                                          (+ pos (read-content-to-address
                                                  source (+ destination pos) want))
                                          (read-content source destination pos (+ pos want)))))
                          (unless (= after (+ pos want))
                            (container-invalid source "a shuffle container ends inside a chunk"))
                          (decf (unshuffling-source-left source) want)
                          (setf pos after))
                        (load-shuffled-chunk source)))
                   ((not (read-chunk-header source))
                    (return))))
    pos))

(defun put-pending (source destination pos count)
  "Copy the next COUNT unshuffled bytes of SOURCE's PENDING to DESTINATION
\(an octet vector or an address) at POS."
  (declare (type index pos count))
  (let ((pending (unshuffling-source-pending source))
        (from (unshuffling-source-pending-pos source)))
    (declare (type (simple-array (unsigned-byte 8) (*)) pending) (type index from))
    (assert (<= (+ from count) (length pending)))
    (if (integerp destination)
        (with-pinned-objects (pending)
          (copy-memory (pointer+ (vector-pointer pending) from)
                       (address-pointer (+ destination pos)) count))
        (replace destination pending :start1 pos :end1 (+ pos count) :start2 from))))

(defun read-content-to-address (source address count)
  "Read up to COUNT content bytes from SOURCE's inner source to ADDRESS;
return how many (below COUNT at the end of the content)."
  (let ((n (source-read-to-address (filter-source-inner source) address count)))
    ;; the inner source is a decompressor, which always can
    (assert n)
    (incf (unshuffling-source-content source) n)
    n))
