;;;; Compression (the system binstore/compression, src/compression/): STORE's
;;;; :compression on every place, RESTORE and MAP-STORED-OBJECTS of compressed
;;;; records, the filters themselves, the frames' agreement with the zstd and
;;;; lz4 tools, and what damaged, truncated, spliced or explosive compressed
;;;; input does.  Every loop over offsets is deterministic: no clock, no
;;;; random state but seeded ones.

(in-package #:binstore-tests)

(def-suite compression :in all
  :description "zstd and LZ4 compression of records, and damaged compressed input.")

(in-suite compression)

(defparameter *compressions*
  '(:zstd (:zstd :level 1) (:zstd :level 9) (:zstd :level -5) (:zstd :level 3 :workers 2)
    :lz4 (:lz4 :level 9) (:lz4 :level -3))
  "Values of :compression the round trips go through.")

(defun compression-of (spec)
  "The method of a :compression value."
  (if (consp spec) (first spec) spec))

(defun frame-magic (octets)
  "The method whose frame magic OCTETS begin with, or NIL."
  (let ((head (coerce (subseq octets 0 (min 4 (length octets))) 'list)))
    (cond ((equal head '(#x28 #xB5 #x2F #xFD)) :zstd)
          ((equal head '(#x04 #x22 #x4D #x18)) :lz4))))

(defun simple-octets (vector)
  (coerce vector '(simple-array (unsigned-byte 8) (*))))

(defun contexts-held ()
  (binstore::compression-contexts-held))

(defun big-compressible-datum ()
  "Data whose record spans many windows of every size binstore stages
through (64 KiB, 128 KiB, 1 MiB), compressible and not."
  (let ((state (seeded-random-state 77)))
    (list (let ((v (make-array 300000 :element-type '(unsigned-byte 8))))
            (dotimes (i (length v) v) (setf (aref v i) (mod (* i i) 251))))
          (let ((v (make-array 200000 :element-type '(unsigned-byte 8))))
            (dotimes (i (length v) v) (setf (aref v i) (random 256 state))))
          (loop for i below 20000 collect (format nil "string ~d" i))
          (let ((v (make-array 50000 :element-type 'double-float)))
            (dotimes (i (length v) v) (setf (aref v i) (* i 0.25d0))))
          (let ((table (make-hash-table :test 'equal)))
            (dotimes (i 1000 table) (setf (gethash (format nil "k~d" i) table) i)))
          "end")))

;;; Round trips --------------------------------------------------------------

(test compressed-random-data-round-trips
  "Generated data (sharing, cycles, every kind of object) through every
compression: a frame of the method, restored the same."
  (dolist (spec *compressions*)
    (let ((failures '()))
      (loop for seed from 500 below 530
            do (let* ((datum (random-datum (seeded-random-state seed)
                                           :sharing t :cycles t :conses t))
                      (octets (binstore:store nil datum :compression spec)))
                 (unless (and (typep octets '(simple-array (unsigned-byte 8) (*)))
                              (eq (frame-magic octets) (compression-of spec))
                              (same-data-p datum (binstore:restore octets) :conses t))
                   (push seed failures))))
      (is (null failures) "~s: seeds ~a do not round-trip" spec failures))))

(test compression-nil-is-the-plain-record
  "NIL, the default, writes exactly what binstore writes without the option;
*COMPRESSION* is the default of :COMPRESSION."
  (let ((datum (list 1 "two" #(3 4) (make-string 1000 :initial-element #\x))))
    (is (equalp (binstore:store nil datum) (binstore:store nil datum :compression nil)))
    (is (null (frame-magic (binstore:store nil datum))))
    (let ((binstore:*compression* :lz4))
      (is (eq :lz4 (frame-magic (binstore:store nil datum))))
      (is (null (frame-magic (binstore:store nil datum :compression nil)))))
    (let ((binstore:*compression* '(:zstd :level 19)))
      (is (equalp datum (binstore:restore (binstore:store nil datum)))))))

(test compression-through-every-place
  "A large record compressed to each place STORE takes, and back by RESTORE
and MAP-STORED-OBJECTS; nothing C is left held."
  (let ((datum (big-compressible-datum))
        (held (contexts-held)))
    (dolist (spec '(:zstd (:zstd :level 9 :workers 2) :lz4))
      (let ((method (compression-of spec))
            (octets (binstore:store nil datum :compression spec)))
        ;; a fresh vector
        (is (eq method (frame-magic octets)))
        (is (< (length octets) (length (binstore:store nil datum))))
        (is (same-data-p datum (binstore:restore octets)))
        ;; appended to a vector after a plain record
        (let ((vector (make-array 10 :element-type '(unsigned-byte 8) :adjustable t :fill-pointer 0)))
          (binstore:store vector :before)
          (let ((start (fill-pointer vector)))
            (is (eq vector (binstore:store vector datum :compression spec)))
            (binstore:store vector :after :compression spec)
            (is (eq method (frame-magic (subseq vector start))))
            (is (same-data-p datum (binstore:restore (subseq vector start)))))
          (let ((seen '()))
            (binstore:map-stored-objects (lambda (x) (push x seen)) vector)
            (is (= 3 (length seen)))
            (is (eq :before (third seen)))
            (is (eq :after (first seen)))
            (is (same-data-p datum (second seen)))))
        ;; a vector without a fill pointer: large enough, then too small
        (let* ((fixed (make-array (+ (length octets) 100) :element-type '(unsigned-byte 8)))
               (count (binstore:store fixed datum :compression spec)))
          (is (= (length octets) count))
          (is (same-data-p datum (binstore:restore fixed)))
          (signals binstore:out-of-space
            (binstore:store (make-array 100 :element-type '(unsigned-byte 8)) datum
                            :compression spec)))
        ;; raw memory
        #+sbcl
        (call-with-foreign-octets
         (+ (length octets) 100)
         (lambda (sap)
           (let ((count (binstore:store-to-sap sap (+ (length octets) 100) datum
                                               :compression spec)))
             (is (= (length octets) count))
             (is (same-data-p datum (binstore:restore-from-sap sap count))))))
        ;; a file and a stream
        (call-with-temporary-directory
         (lambda (directory)
           (let ((path (merge-pathnames "data.bin" directory)))
             (is (equal path (binstore:store path datum :compression spec)))
             (is (equalp octets (read-file-octets path)))
             (is (same-data-p datum (binstore:restore path)))
             (let ((seen '()))
               (binstore:map-stored-objects (lambda (x) (push x seen)) path)
               (is (= 1 (length seen)))))
           (let ((path (merge-pathnames "stream.bin" directory)))
             (with-open-file (out path :direction :output :element-type '(unsigned-byte 8))
               (is (eq out (binstore:store out datum :compression spec)))
               (binstore:store out 42 :compression spec))
             (with-open-file (in path :element-type '(unsigned-byte 8))
               (is (same-data-p datum (binstore:restore in)))
               ;; the frame was read to its end, and no further
               (is (= (length octets) (file-position in)))
               (is (eql 42 (binstore:restore in)))
               (is (eq :none (binstore:restore in :eof-error-p nil :eof-value :none)))))))
        ;; a byte sink
        (let ((vector (binstore:store (binstore:make-octets-sink) datum :compression spec)))
          (is (equalp octets vector)))))
    ;; a failing store, and one that finds no room, free their contexts
    (signals binstore:unstorable-object (binstore:store nil (list 1 #'car) :compression :zstd))
    (signals binstore:unstorable-object (binstore:store nil (list 1 #'car) :compression :lz4))
    (is (= held (contexts-held)))))

(defun read-file-octets (path)
  (with-open-file (in path :element-type '(unsigned-byte 8))
    (let ((octets (make-array (file-length in) :element-type '(unsigned-byte 8))))
      (read-sequence octets in)
      octets)))

(defun write-file-octets (path octets)
  (with-open-file (out path :direction :output :element-type '(unsigned-byte 8)
                            :if-exists :supersede)
    (write-sequence octets out))
  path)

(test max-to-write-bounds-the-compressed-bytes
  (let* ((datum (make-string 100000 :initial-element #\a))
         (size (length (binstore:store nil datum :compression :zstd))))
    (is (< size 1000))
    ;; the plain record would not fit, the compressed one does
    (is (equal datum (binstore:restore (binstore:store nil datum :compression :zstd
                                                                 :max-to-write 1000))))
    (signals binstore:store-limit-exceeded
      (binstore:store nil datum :compression :lz4 :max-to-write 10))))

;;; Several records, compressed or not, in one place -------------------------

(defstruct (exact-source (:include binstore:byte-source)
                         (:constructor make-exact-source (octets)))
  "A byte source that is not greedy (as a pipe or a socket): it gives what
it is asked for, no more, and counts what it gave."
  octets
  (position 0))

(defmethod binstore:source-read ((source exact-source) octets start end)
  (let* ((from (exact-source-position source))
         (n (min (- end start) (- (length (exact-source-octets source)) from))))
    (replace octets (exact-source-octets source) :start1 start :start2 from :end2 (+ from n))
    (incf (exact-source-position source) n)
    (+ start n)))

(defun mixed-records ()
  "Records compressed with each method and not, one after the other, and
the objects they hold, in order."
  (let ((vector (make-array 0 :element-type '(unsigned-byte 8) :adjustable t :fill-pointer 0))
        (objects (list (list 1 "one") :two (make-string 70000 :initial-element #\3) 4.0d0
                       (list 5 (make-array 5 :initial-element 5)) "six")))
    (loop for object in objects
          for compression in '(:zstd nil :lz4 (:zstd :level 19) :lz4 nil)
          do (binstore:store vector object :compression compression))
    ;; one record of several objects, in one frame
    (binstore:store vector (list 7 8 9) :as-separate-objects t :compression :zstd)
    (values (simple-octets vector) (append objects (list 7 8 9)))))

(test records-compressed-or-not-follow-each-other
  "MAP-STORED-OBJECTS reads every record of a place, whatever each is
compressed with, on every kind of place; RESTORE reads them in turn from a
stream and from a source that is not greedy, each consuming its frame
exactly."
  (multiple-value-bind (octets objects) (mixed-records)
    (flet ((mapped (place)
             (let ((seen '()))
               (binstore:map-stored-objects (lambda (x) (push x seen)) place)
               (nreverse seen))))
      (is (equalp objects (mapped octets)))
      (is (equalp objects (mapped (binstore:make-octets-source octets))))
      (is (equalp objects (mapped (make-exact-source octets))))
      (call-with-temporary-directory
       (lambda (directory)
         (let ((path (write-file-octets (merge-pathnames "mixed.bin" directory) octets)))
           (is (equalp objects (mapped path)))
           (with-open-file (in path :element-type '(unsigned-byte 8))
             (is (equalp objects (mapped in))))
           (with-open-file (in path :element-type '(unsigned-byte 8))
             (is (equalp (subseq objects 0 6)
                         (loop repeat 6 collect (binstore:restore in))))
             (is (equal '(7 8 9) (multiple-value-list (binstore:restore in))))
             (is (= (length octets) (file-position in)))))))
      (let ((source (make-exact-source octets)))
        (is (equalp (subseq objects 0 6) (loop repeat 6 collect (binstore:restore source))))
        (is (equal '(7 8 9) (multiple-value-list (binstore:restore source))))
        (is (= (length octets) (exact-source-position source)))
        (is (eq :none (binstore:restore source :eof-error-p nil :eof-value :none)))))))

(test restore-wants-one-record-per-frame
  "A frame holding two records (made with a filter, not by STORE) is read
by MAP-STORED-OBJECTS, refused by RESTORE; an empty frame holds no record."
  (let* ((plain (concatenate '(vector (unsigned-byte 8))
                             (binstore:store nil 1) (binstore:store nil 2)))
         (sink (binstore:make-zstd-sink (binstore:make-octets-sink))))
    (binstore:sink-write sink (simple-octets plain) 0 (length plain))
    (let ((frame (simple-octets (binstore:sink-finish sink)))
          (seen '()))
      (binstore:map-stored-objects (lambda (x) (push x seen)) frame)
      (is (equal '(2 1) seen))
      (signals binstore:invalid-input (binstore:restore frame))))
  (let ((sink (binstore:make-lz4-sink (binstore:make-octets-sink))))
    (signals binstore:invalid-input
      (binstore:restore (simple-octets (binstore:sink-finish sink))))))

;;; The filters themselves and the tools --------------------------------------

(test filters-as-places
  "ZSTD-SINK and LZ4-SINK as STORE's place; ZSTD-SOURCE and LZ4-SOURCE as
RESTORE's, over greedy and exact sources, across concatenated frames; a
frame made by a sink is what :compression makes."
  (let ((datum (big-compressible-datum))
        (held (contexts-held)))
    (loop for (make-sink make-source method)
            in (list (list #'binstore:make-zstd-sink #'binstore:make-zstd-source :zstd)
                     (list #'binstore:make-lz4-sink #'binstore:make-lz4-source :lz4))
          do (let ((frame (simple-octets (binstore:store (funcall make-sink (binstore:make-octets-sink))
                                                         datum))))
               ;; (the sinks do not shuffle unless asked: their frames hold the record)
               (is (equalp frame (binstore:store nil datum :compression (list method :shuffle nil))))
               ;; RESTORE leaves a source it was given as it is: its owner
               ;; releases it
               (dolist (inner (list (binstore:make-octets-source frame) (make-exact-source frame)))
                 (let ((source (funcall make-source inner)))
                   (is (same-data-p datum (binstore:restore source)))
                   (binstore:release-compression-context source)))
               ;; two frames, one after the other, are one stream of records
               (let ((two (simple-octets (concatenate '(vector (unsigned-byte 8))
                                                      (binstore:store nil :a :compression
                                                                      (list method :shuffle nil))
                                                      (binstore:store nil :b :compression
                                                                      (list method :shuffle nil)))))
                     (seen '()))
                 (dolist (source (list (binstore:make-octets-source two) (make-exact-source two)))
                   (setf seen '())
                   (binstore:map-stored-objects (lambda (x) (push x seen))
                                                (funcall make-source source))
                   (is (equal '(:b :a) seen))))
               ;; released early: no more bytes; abandoned: freed when collected
               (let ((source (funcall make-source (binstore:make-octets-source frame)))
                     (octets (make-array 100 :element-type '(unsigned-byte 8))))
                 (is (= 100 (binstore:source-read source octets 0 100)))
                 (is (= (1+ held) (contexts-held)))
                 (binstore:release-compression-context source)
                 (is (= held (contexts-held)))
                 (is (= 0 (binstore:source-read source octets 0 100))))
               (let ((sink (funcall make-sink (binstore:make-octets-sink))))
                 (binstore:sink-write sink (simple-octets #(1 2 3)) 0 3)
                 (binstore:sink-abort sink)
                 (is (= held (contexts-held)))
                 (signals binstore:store-error (binstore:sink-write sink (simple-octets #(1)) 0 1)))))
    (is (= held (contexts-held)))))

#+sbcl ; a conservative collector (ECL's) may keep any object
(test abandoned-filters-are-freed-when-collected
  (let ((held (contexts-held)))
    (dotimes (i 10)
      (binstore:sink-write (binstore:make-zstd-sink (binstore:make-octets-sink))
                           (simple-octets #(1 2 3)) 0 3))
    (is (= (+ held 10) (contexts-held)))
    (loop repeat 100
          until (= held (contexts-held))
          do (gc :full t)
             (sb-impl::run-pending-finalizers)
             (sleep 0.01))
    (is (= held (contexts-held)))))

(test kept-contexts-start-each-frame-afresh
  "A C context and a buffer given back are kept for the next store or
restore, which finds them as a new one would be: after stores at other
levels, after a store that failed in the middle of its frame, and after a
restore that failed in the middle of one, the frames written are byte for
byte those of fresh contexts, and restores are right.  A zstd context
that ran workers is never kept (stores with workers that fail in the middle
of their frame, again and again, between others).  Kept contexts are not
counted as held, and saving the image lets them go."
  (let* ((datum (big-compressible-datum))
         (bad (list datum #'car))
         (held (contexts-held)))
    (dolist (method '(:zstd :lz4))
      (flet ((fresh (options)
               (binstore::let-spares-go)
               (binstore:store nil datum :compression options)))
        (let ((at-1 (fresh (list method :level 1)))
              (at-9 (fresh (list method :level 9))))
          (is (not (equalp at-1 at-9)))
          (binstore:store nil datum :compression (list method :level 9))
          (is (equalp at-1 (binstore:store nil datum :compression (list method :level 1))))
          (signals binstore:unstorable-object
            (binstore:store nil bad :compression (list method :level 9)))
          (is (equalp at-1 (binstore:store nil datum :compression (list method :level 1))))
          (is (equalp at-9 (binstore:store nil datum :compression (list method :level 9))))
          (signals binstore:truncated-input
            (binstore:restore (subseq at-9 0 (floor (length at-9) 2))))
          (is (same-data-p datum (binstore:restore at-1)))
          (is (= held (contexts-held))))))
    ;; a zstd context that ran workers is not kept: a frame abandoned with
    ;; its jobs under way, then a reset, corrupts zstd's memory
    (let ((at-3 (progn (binstore::let-spares-go)
                       (binstore:store nil datum :compression '(:zstd :level 3)))))
      (dotimes (i 20)
        (signals binstore:unstorable-object
          (binstore:store nil bad :compression '(:zstd :level 3 :workers 2)))
        (is (equalp at-3 (binstore:store nil datum :compression '(:zstd :level 3))))
        (is (same-data-p datum (binstore:restore
                                (binstore:store nil datum
                                                :compression '(:zstd :level 3 :workers 2)))))))
    (is (= held (contexts-held)))
    (binstore::let-spares-go)
    (is (every (lambda (kind) (null (car (binstore::context-kind-spare kind))))
               binstore::**context-kinds**))
    (is (= 4 (length binstore::**context-kinds**)))))

(defun run-tool (command)
  "Run COMMAND with sh; true when it exits 0."
  (zerop (nth-value 2 (uiop:run-program command :ignore-error-status t
                                                 :error-output nil :output nil))))

(defun call-with-plain-record-file (datum function)
  "Call FUNCTION with FILE, a function of a name returning the namestring
of that file in a fresh temporary directory, where DATUM's plain record
was written as \"plain.bin\"."
  (call-with-temporary-directory
   (lambda (directory)
     (flet ((file (name) (namestring (merge-pathnames name directory))))
       (write-file-octets (file "plain.bin") (binstore:store nil datum))
       (funcall function #'file)))))

(test frames-are-the-tools-frames
  "The zstd and lz4 command-line tools decompress binstore's frames to the
plain record, and binstore restores the frames the tools make, several
concatenated in one file too."
  (let* ((datum (big-compressible-datum))
         (plain (binstore:store nil datum)))
    (call-with-plain-record-file
     datum
     (lambda (file)
       (flet ((file (name) (funcall file name)))
         (loop for (method tool-compress tool-decompress)
                 in '((:zstd "zstd -q -f -3 ~a -o ~a" "zstd -q -f -d ~a -o ~a")
                      (:lz4 "lz4 -q -f -9 ~a ~a" "lz4 -q -f -d ~a ~a"))
               do ;; a frame shuffled holds a shuffle container, not the record
                  (binstore:store (file "ours") datum :compression (list method :shuffle nil))
                  (is-true (run-tool (format nil tool-decompress (file "ours") (file "ours.out"))))
                  (is (equalp plain (read-file-octets (file "ours.out"))))
                  (is-true (run-tool (format nil tool-compress (file "plain.bin") (file "theirs"))))
                  (is (same-data-p datum (binstore:restore (file "theirs"))))
                  (binstore:store (file "small") '(small record))
                  (is-true (run-tool (format nil tool-compress (file "small") (file "small.c"))))
                  (is-true (run-tool (format nil "cat ~a ~a > ~a" (file "theirs") (file "small.c")
                                             (file "two"))))
                  (let ((seen '()))
                    (binstore:map-stored-objects (lambda (x) (push x seen)) (file "two"))
                    (is (= 2 (length seen)))
                    (is (equal '(small record) (first seen)))
                    (is (same-data-p datum (second seen))))))))))

(defun flip-bit (octets position)
  "A copy of OCTETS with the low bit of the byte at POSITION changed."
  (let ((copy (copy-seq octets)))
    (setf (aref copy position) (logxor #x01 (aref copy position)))
    copy))

(defun restore-failure (octets)
  "The INVALID-INPUT RESTORE signals on OCTETS, or NIL."
  (handler-case (progn (binstore:restore octets) nil)
    (binstore:invalid-input (c) c)))

(test lz4-frames-check-their-content
  "binstore's LZ4 frames have linked 64 KiB blocks and a checksum of their
content (XXH32, computed by binstore, not liblz4), as the lz4 tool writes by
default: the header is exactly 04 22 4D 18, FLG #x44, BD #x40 and the header
checksum #x5E; the frame ends with the end mark and the XXH32 of the record.
A byte changed in a later block's data is refused at the frame's end, where
the checksum is; so is a changed checksum."
  (let* ((datum (make-array 300000 :element-type '(unsigned-byte 8)))
         (random (make-random-state t)))
    (dotimes (i (length datum))
      (setf (aref datum i) (random 256 random)))
    (let* ((octets (binstore:store nil datum :compression :lz4))
           (plain (binstore:store nil datum))
           (end (length octets))
           (checksum (cffi:with-pointer-to-vector-data (pointer plain)
                       (binstore::%xxh32 pointer (length plain) 0))))
      (is (equalp #(#x04 #x22 #x4D #x18 #x44 #x40 #x5E) (subseq octets 0 7)))
      (is (equalp (concatenate 'vector #(0 0 0 0)
                               (loop for i below 4 collect (ldb (byte 8 (* 8 i)) checksum)))
                  (subseq octets (- end 8))))
      (is (equalp datum (binstore:restore octets)))
      ;; random bytes do not compress: the blocks are stored, 64 KiB each
      ;; with a 4-byte size before
      (dolist (position (list (+ 7 (* 2 (+ 4 65536)) 4 1000) (- end 1)))
        (let ((condition (restore-failure (flip-bit octets position))))
          (is (typep condition 'binstore:invalid-input))
          (is (typep (and condition (binstore:restore-error-offset condition))
                     `(integer ,(- end 8) ,end))
              "~s at ~d: offset ~s" condition position
              (and condition (binstore:restore-error-offset condition))))))))

(test lz4-frames-of-every-kind-are-checked
  "The frames of the lz4 tool are restored, and a byte changed in their data
refused, whichever checksums they carry: its default (a checksum of the
content, independent blocks), a checksum of each block alone (as binstore
wrote its frames until 2026-11-27), both, and none (then the damage reaches
the decoder, which may take it for other bytes: only the three others are
checked for it)."
  (let ((datum (big-compressible-datum)))
    (call-with-plain-record-file
     datum
     (lambda (file)
       (flet ((file (name) (funcall file name)))
         (loop for (options checked) in '(("" t) ("-BX --no-frame-crc" t) ("-BX -BD" t)
                                          ("--no-frame-crc" nil))
               do (is-true (run-tool (format nil "lz4 -q -f ~a ~a ~a" options (file "plain.bin")
                                             (file "theirs"))))
                  (let ((octets (read-file-octets (file "theirs"))))
                    (is (same-data-p datum (binstore:restore octets)) "lz4 ~a" options)
                    (when checked
                      (is (typep (restore-failure (flip-bit octets (floor (length octets) 2)))
                                 'binstore:invalid-input)
                          "lz4 ~a, a byte changed" options)))))))))

;;; The option ----------------------------------------------------------------

(test malformed-compression-options-are-refused
  "Every malformed :compression is a STORE-ERROR, before a file is made."
  (let ((held (contexts-held)))
    (call-with-temporary-directory
     (lambda (directory)
       (let ((path (merge-pathnames "never.bin" directory)))
         (dolist (spec '(:gzip t 3 (:zstd :level) (:zstd . 3) (:zstd :level 99) (:zstd :level "3")
                         (:zstd :level 3.0) (:zstd :workers -1) (:zstd :workers 1000)
                         (:lz4 :workers 2) (:lz4 :level 13) (:zstd :speed 1) (:brotli :level 3)
                         (:lz4 :shuffle t :shuffle)))
           (signals binstore:store-error (binstore:store nil 1 :compression spec))
           (signals binstore:store-error (binstore:store path 1 :compression spec))
           (is (null (probe-file path)) "~s made the file" spec)))))
    (is (= held (contexts-held)))))

(test compression-unavailable-without-the-system
  "With the hook unset, as when binstore/compression is not loaded: STORE
with :compression and RESTORE of a compressed record, on any place, signal
COMPRESSION-UNAVAILABLE naming the method and the system; plain records
are untouched."
  (let ((zstd (binstore:store nil '(1 2) :compression :zstd))
        (lz4 (binstore:store nil '(1 2) :compression :lz4))
        (plain (binstore:store nil '(1 2))))
    (let ((binstore::*compression-hook* nil))
      (is (equal '(1 2) (binstore:restore plain)))
      (is (equalp plain (binstore:store nil '(1 2))))
      (loop for (octets method) in (list (list zstd :zstd) (list lz4 :lz4))
            do (handler-case (progn (binstore:restore octets) (fail "no condition"))
                 (binstore:compression-unavailable (c)
                   (is (eq method (binstore:compression-unavailable-method c)))
                   (is (search "binstore/compression" (princ-to-string c)))))
               (signals binstore:compression-unavailable
                 (binstore:map-stored-objects #'identity octets))
               (signals binstore:compression-unavailable
                 (binstore:restore (binstore:make-octets-source octets)))
               (handler-case (progn (binstore:store nil 1 :compression method) (fail "no condition"))
                 (binstore:compression-unavailable (c)
                   (is (eq method (binstore:compression-unavailable-method c)))
                   (is (search "binstore/compression" (princ-to-string c))))))
      (call-with-temporary-directory
       (lambda (directory)
         (let ((path (merge-pathnames "z.bin" directory)))
           (signals binstore:compression-unavailable (binstore:store path 1 :compression :zstd))
           (is (null (probe-file path)))
           (write-file-octets path zstd)
           (signals binstore:compression-unavailable (binstore:restore path))
           (with-open-file (in path :element-type '(unsigned-byte 8))
             (signals binstore:compression-unavailable (binstore:restore in)))))))
    (is (equal '(1 2) (binstore:restore zstd)))))

;;; Damaged input ---------------------------------------------------------------

(defparameter *damage-datum*
  (list "a string of some length, repeated: a string of some length" 12345 -7 3.25d0
        (expt 3 90) (make-array 300 :element-type '(unsigned-byte 8) :initial-element 9)
        (loop for i below 60 collect (format nil "item ~d" i))
        (vector 1 2.5 "three" (list 4 5)))
  "Data without symbols (a damaged symbol name would be interned, or missing),
compressing to a few hundred bytes.")

(defun restore-outcome (octets)
  "What restoring OCTETS (:max-to-read 1 MiB, no interning) does: :SAME when
it returns *DAMAGE-DATUM*, :OTHER-DATA when it returns something else, or
the condition signalled."
  (handler-case (let ((value (binstore:restore octets :max-to-read (* 1024 1024)
                                                      :intern-symbols nil)))
                  (if (same-data-p *damage-datum* value) :same :other-data))
    (error (c) c)))

(defun outcome-acceptable-p (outcome method &key (same-ok t) (length most-positive-fixnum))
  "True when OUTCOME, of damaged METHOD input of LENGTH bytes, is what
binstore promises: INVALID-INPUT or RESTORE-LIMIT-EXCEEDED, with an offset
in the input, or (SAME-OK) the
very data, when the damage hit nothing that matters (a bit of the frame
header that only sizes a window).  As the frames of both methods are
checked by one checksum at their end, the damage may also reach the
decoder before, which then refuses it with the RESTORE-ERROR that data
calls for (MISSING-PACKAGE, MISSING-SYMBOL): still a BINSTORE-ERROR with an
offset."
  (flet ((in-input-p (offset) (typep offset `(integer 0 ,length))))
    (typecase outcome
      (binstore:invalid-input (in-input-p (binstore:restore-error-offset outcome)))
      (binstore:restore-limit-exceeded (in-input-p (binstore:limit-exceeded-offset outcome)))
      ((or binstore:missing-package binstore:missing-symbol)
       (and (member method '(:zstd :lz4)) (in-input-p (binstore:restore-error-offset outcome))))
      (t (and same-ok (eq outcome :same))))))

(defun check-damage (method label variants &key (same-ok t))
  "One check: every octet vector of VARIANTS, a list of (position octets),
restores acceptably; failures are shown by position."
  (let ((bad '()) (kinds (make-hash-table)))
    (loop for (position octets) in variants
          do (let ((outcome (restore-outcome octets)))
               (incf (gethash (if (typep outcome 'condition) (type-of outcome) outcome) kinds 0))
               (unless (outcome-acceptable-p outcome method :same-ok same-ok
                                                            :length (length octets))
                 (push (list position (if (typep outcome 'condition)
                                          (format nil "~s: ~a" (type-of outcome) outcome)
                                          outcome))
                       bad))))
    (is (null bad) "~a ~s: ~d of ~d unacceptable, first ~s; outcomes ~s"
        label method (length bad) (length variants) (last bad)
        (loop for k being the hash-keys of kinds using (hash-value n) collect (list k n)))))

(test truncated-compressed-input-is-invalid
  "A compressed record cut at any length is INVALID-INPUT (TRUNCATED-INPUT,
or NOT-BINSTORE-DATA for the first three bytes), in a vector, a file and a
stream."
  (dolist (method '(:zstd :lz4))
    (let ((octets (binstore:store nil *damage-datum* :compression method)))
      (check-damage method "truncated"
                    (loop for end from 1 below (length octets)
                          collect (list end (subseq octets 0 end)))
                    :same-ok nil)
      (call-with-temporary-directory
       (lambda (directory)
         (let ((path (merge-pathnames "cut.bin" directory))
               (bad '()))
           (loop for end from 1 below (length octets) by 7
                 do (write-file-octets path (subseq octets 0 end))
                    (unless (and (outcome-acceptable-p
                                  (handler-case (binstore:restore path) (error (c) c)) method
                                  :same-ok nil)
                                 (outcome-acceptable-p
                                  (handler-case (with-open-file (in path :element-type '(unsigned-byte 8))
                                                  (binstore:restore in))
                                    (error (c) c))
                                  method :same-ok nil))
                      (push end bad)))
           (is (null bad) "~s cut at ~a: not INVALID-INPUT from a file or stream" method bad)))))))

(test corrupted-compressed-input-is-refused
  "A compressed record with one byte changed, at every offset, in three
ways (one bit, the top bit, every bit): refused as invalid, or (when the
change touched nothing that matters) the same data, never other data."
  (dolist (method '(:zstd :lz4))
    (let ((octets (binstore:store nil *damage-datum* :compression method)))
      (check-damage method "corrupted"
                    (loop for i below (length octets)
                          append (loop for mask in (list (ash 1 (mod i 7)) #x80 #xFF)
                                       collect (let ((copy (copy-seq octets)))
                                                 (setf (aref copy i) (logxor mask (aref copy i)))
                                                 (list (list i mask) copy))))))))

(test spliced-compressed-input-is-refused
  "The head of one frame with the tail of another (the same method, other
data), and a truncated frame followed by a whole one: refused, or, where
the splice gives back one of the frames whole, that frame's data."
  (dolist (method '(:zstd :lz4))
    (let* ((a (binstore:store nil *damage-datum* :compression method))
           (b (binstore:store nil (reverse *damage-datum*) :compression method))
           (bad '()))
      (flet ((check (label octets)
               (let ((outcome (handler-case
                                  (let ((value (binstore:restore octets :max-to-read (* 1024 1024)
                                                                        :intern-symbols nil)))
                                    (if (or (same-data-p *damage-datum* value)
                                            (same-data-p (reverse *damage-datum*) value))
                                        :same
                                        :other-data))
                                (error (c) c))))
                 (unless (outcome-acceptable-p outcome method :length (length octets))
                   (push (list label outcome) bad)))))
        (loop for cut from 1 below (min (length a) (length b))
              do (check (list :head-tail cut) (concatenate '(vector (unsigned-byte 8))
                                                            (subseq a 0 cut) (subseq b cut)))
                 (check (list :cut-then-whole cut) (concatenate '(vector (unsigned-byte 8))
                                                                (subseq a 0 cut) b))))
      (is (null bad) "~s: ~d splices unacceptable, first ~s" method (length bad) (last bad)))))

(defun bomb (make-sink octet-count)
  "A record of an octet vector of OCTET-COUNT zeros, compressed by the sink
MAKE-SINK makes, built without that vector: the header and the vector's tag
and length, then the zeros a mebibyte at a time."
  (let* ((head (binstore:store nil (make-array 0 :element-type '(unsigned-byte 8))))
         ;; the empty vector's record ends with its length, one zero byte
         (head (concatenate '(vector (unsigned-byte 8)) (subseq head 0 (1- (length head)))
                            (varint-octets octet-count)))
         (zeros (make-array (* 1024 1024) :element-type '(unsigned-byte 8) :initial-element 0))
         (sink (funcall make-sink (binstore:make-octets-sink))))
    (binstore:sink-write sink (simple-octets head) 0 (length head))
    (loop for left = octet-count then (- left n)
          for n = (min left (length zeros))
          while (plusp n)
          do (binstore:sink-write sink zeros 0 n))
    (simple-octets (binstore:sink-finish sink))))

(test decompression-bombs-hit-max-to-read
  "A small frame holding a record of 100 million zero bytes: with a
:max-to-read of 1 MiB, RESTORE-LIMIT-EXCEEDED on :max-to-read, before
anything near that is decompressed or allocated; within the limit the
record is restored."
  (let ((held (contexts-held)))
    (dolist (make-sink (list #'binstore:make-zstd-sink #'binstore:make-lz4-sink))
      (let ((bomb (bomb make-sink 100000000)))
        (is (< (length bomb) 1000000))
        (handler-case (progn (binstore:restore bomb :max-to-read (* 1024 1024))
                             (fail "a bomb was restored"))
          (binstore:restore-limit-exceeded (c)
            (is (eq :max-to-read (binstore:limit-exceeded-limit c)))))
        (signals binstore:restore-limit-exceeded
          (binstore:map-stored-objects #'identity bomb :max-to-read (* 1024 1024)))
        (let ((small (bomb make-sink 3000000)))
          (is (equalp (make-array 3000000 :element-type '(unsigned-byte 8) :initial-element 0)
                      (binstore:restore small :max-to-read (* 4 1024 1024)))))))
    (is (= held (contexts-held)))))

(defun large-payload-datum ()
  "Numeric arrays whose payloads are long enough (300 KB, 200 KB) to be
read straight from a decompressor into the array, between small objects."
  (let ((state (seeded-random-state 91)))
    (list "before"
          (let ((v (make-array 37500 :element-type 'double-float)))
            (dotimes (i (length v) v) (setf (aref v i) (+ (sin (* i 0.01d0)) (random 0.01d0 state)))))
          :between
          (let ((v (make-array 200000 :element-type '(unsigned-byte 8))))
            (dotimes (i (length v) v) (setf (aref v i) (random 256 state))))
          "after")))

(test large-payloads-are-read-straight-from-the-decompressor
  "A decompressor puts bytes in raw memory (SOURCE-READ-TO-ADDRESS), and a
restore reads large array payloads that way, past its window: the data
come back from a vector, a stream and a source that is not greedy, for
both methods, shuffled and not; cut inside a payload, the frame is
INVALID-INPUT; a byte changed there is refused by the checksum; and
:MAX-TO-READ below the record's size is a RESTORE-LIMIT-EXCEEDED."
  (let ((datum (large-payload-datum))
        (held (contexts-held)))
    (dolist (spec '((:zstd :shuffle t) (:zstd :shuffle nil) (:lz4 :shuffle t) (:lz4 :shuffle nil)))
      (let* ((octets (simple-octets (binstore:store nil datum :compression spec)))
             (plain-length (length (binstore:store nil datum)))
             (end (length octets)))
        (is (same-data-p datum (binstore:restore octets)) "~s from a vector" spec)
        (call-with-temporary-directory
         (lambda (directory)
           (let ((path (merge-pathnames "large.bin" directory)))
             (write-file-octets path octets)
             (is (same-data-p datum (with-open-file (in path :element-type '(unsigned-byte 8))
                                      (binstore:restore in)))
                 "~s from a stream" spec)
             (is (same-data-p datum (binstore:restore path)) "~s from a file" spec))))
        (is (same-data-p datum (binstore:restore (make-exact-source octets)))
            "~s from a source that is not greedy" spec)
        (dolist (cut (list (floor end 3) (floor end 2) (- end 9)))
          (is (typep (handler-case (progn (binstore:restore (subseq octets 0 cut)) nil)
                       (error (c) c))
                     'binstore:invalid-input)
              "~s cut at ~d of ~d" spec cut end))
        (is (typep (restore-failure (flip-bit octets (floor end 2))) 'binstore:invalid-input)
            "~s with a byte changed" spec)
        (is (typep (handler-case (progn (binstore:restore octets :max-to-read (- plain-length 100))
                                        nil)
                     (error (c) c))
                   'binstore:restore-limit-exceeded)
            "~s with max-to-read below the record" spec)))
    ;; the decompressing source itself, to raw memory
    (let* ((plain (binstore:store nil datum))
           (frame (simple-octets (binstore:store nil datum :compression '(:lz4 :shuffle nil))))
           (source (binstore:make-lz4-source (binstore:make-octets-source frame)))
           (into (make-array (+ (length plain) 10) :element-type '(unsigned-byte 8))))
      (is (= (length plain)
             (binstore::with-pinned-objects (into)
               (binstore::source-read-to-address
                source (binstore::pointer-address (binstore::vector-pointer into))
                (length into)))))
      (is (equalp plain (subseq into 0 (length plain))))
      (binstore:release-compression-context source))
    (is (= held (contexts-held)))))

(test damaged-input-leaves-no-context
  "Every refused restore above freed its decompressor: none is held after
a sweep of corrupted frames."
  (let ((held (contexts-held)))
    (dolist (method '(:zstd :lz4))
      (let ((octets (binstore:store nil *damage-datum* :compression method)))
        (dotimes (i (length octets))
          (let ((copy (copy-seq octets)))
            (setf (aref copy i) (logxor #x55 (aref copy i)))
            (restore-outcome copy)
            (restore-outcome (subseq octets 0 i))))))
    (is (= held (contexts-held)))))

(test offsets-inside-frames-count-bytes-of-the-place
  "What is wrong with the record a frame holds is reported at the offset in
the place where the frame was being read, the decompressed offset in the
message."
  (let ((bad (simple-octets (append (coerce (binstore:store nil 1) 'list) '(#x2F)))))
    (dolist (make-sink (list #'binstore:make-zstd-sink #'binstore:make-lz4-sink))
      (let* ((sink (funcall make-sink (binstore:make-octets-sink)))
             (frame (progn (binstore:sink-write sink bad 0 (length bad))
                           (simple-octets (binstore:sink-finish sink))))
             (place (concatenate '(vector (unsigned-byte 8)) (binstore:store nil :first) frame)))
        ;; one record, then a frame whose record is followed by a stray byte
        (signals binstore:invalid-input (binstore:restore frame))
        (handler-case (progn (binstore:map-stored-objects #'identity place)
                             (fail "no condition"))
          (binstore:invalid-input (c)
            (is (<= (- (length place) (length frame)) (binstore:restore-error-offset c)
                    (length place)))
            (is (search "decompresses to" (princ-to-string c)))))))))

(test explain-names-a-frame
  "EXPLAIN does not decompress: it explains the plain records before a
frame, then says what the frame is and stops, without a condition."
  (dolist (method '(:zstd :lz4))
    (let* ((octets (concatenate '(vector (unsigned-byte 8))
                                (binstore:store nil 1) (binstore:store nil 2 :compression method)))
           (text (make-string-output-stream)))
      (multiple-value-bind (records condition) (binstore:explain octets :stream text)
        (is (= 1 records))
        (is (null condition))
        (is (search (if (eq method :zstd) "a zstd frame" "an LZ4 frame")
                    (get-output-stream-string text)))))))

(test ibuf-source-reads-what-follows
  "The source a restore gives a decompressor reads the rest of the place."
  (let ((octets (simple-octets (loop for i below 200000 collect (mod i 256))))
        (out (make-array 150000 :element-type '(unsigned-byte 8))))
    (binstore::call-with-byte-source-ibuf
     (make-exact-source octets) nil
     (lambda (ib)
       (binstore::refill ib 10)
       (incf (binstore::ibuf-pos ib) 10)
       (let ((source (binstore::make-ibuf-source ib)))
         (is (= 150000 (binstore:source-read source out 0 150000)))
         (is (equalp (subseq octets 10 150010) out))
         (is (= 49990 (binstore:source-read source out 0 150000)))
         (is (equalp (subseq octets 150010) (subseq out 0 49990)))
         (is (= 0 (binstore:source-read source out 0 150000))))))))

;;; The shuffle filter ----------------------------------------------------------

(defun numeric-arrays-datum ()
  "A specialized vector or array of every numeric element type the shuffle
takes (2, 4 and 8 bytes; complexes), of lengths below, at and far past a
window, at odd offsets in the record (strings of odd lengths between), and
some too short to be shuffled."
  (let ((state (seeded-random-state 91)))
    (flet ((fill-vector (type n make)
             (let ((v (make-array n :element-type type)))
               (dotimes (i n v) (setf (aref v i) (funcall make i))))))
      (list (fill-vector 'double-float 100000 (lambda (i) (+ (sin (* i 0.01d0)) (random 1d-3 state))))
            "odd"
            (fill-vector 'single-float 33333 (lambda (i) (* i 0.5f0)))
            "odder"
            (fill-vector '(unsigned-byte 16) 40001 (lambda (i) (mod (* i 7) 65536)))
            (fill-vector '(signed-byte 32) 20000 (lambda (i) (- i 10000)))
            (fill-vector '(unsigned-byte 64) 9000 (lambda (i) (* i (expt 2 40))))
            (fill-vector '(signed-byte 64) 9000 (lambda (i) (- (* i 1000003))))
            (fill-vector 'fixnum 12345 (lambda (i) (- i 6000)))
            (fill-vector '(unsigned-byte 62) 7000 (lambda (i) (* i 3)))
            (fill-vector '(complex double-float) 5000 (lambda (i) (complex (* i 1d0) (- i 0.5d0))))
            (fill-vector '(complex single-float) 5000 (lambda (i) (complex (* i 1f0) 2f0)))
            (fill-vector 'double-float 3 (lambda (i) (* i 1d0)))
            (let ((m (make-array '(300 301) :element-type 'double-float)))
              (dotimes (i (array-total-size m) m)
                (setf (row-major-aref m i) (cos (* i 0.001d0)))))
            (make-array 70000 :element-type 'single-float :initial-element 1.5f0
                              :fill-pointer 69999)
            (fill-vector '(unsigned-byte 8) 1000 (lambda (i) (mod i 256)))))))

(defun frame-content (octets method)
  "The bytes the one METHOD frame OCTETS holds, decompressed."
  (let* ((source (funcall (ecase method (:zstd #'binstore:make-zstd-source)
                                        (:lz4 #'binstore:make-lz4-source))
                          (binstore:make-octets-source octets)))
         (out (make-array 0 :element-type '(unsigned-byte 8) :adjustable t :fill-pointer 0))
         (buffer (make-array 65536 :element-type '(unsigned-byte 8))))
    (loop for end = (binstore:source-read source buffer 0 (length buffer))
          do (loop for i below end do (vector-push-extend (aref buffer i) out))
          while (= end (length buffer)))
    (simple-octets out)))

(test shuffled-numeric-arrays-round-trip
  "With :shuffle, every numeric array comes back the same, through every
place, and the frame holds a shuffle container (first bytes #x5F #x01);
without, the frame holds the plain record."
  (let ((datum (numeric-arrays-datum))
        (plain (binstore:store nil (numeric-arrays-datum))))
    (dolist (method '(:zstd :lz4))
      (let ((shuffled (binstore:store nil datum :compression (list method :shuffle t)))
            (unshuffled (binstore:store nil datum :compression (list method :shuffle nil))))
        (is (same-data-p datum (binstore:restore shuffled)))
        (is (same-data-p datum (binstore:restore unshuffled)))
        (is (equalp '(#x5F #x01) (coerce (subseq (frame-content shuffled method) 0 2) 'list)))
        (is (equalp plain (frame-content unshuffled method)))
        (call-with-temporary-directory
         (lambda (directory)
           (let ((path (merge-pathnames "shuffled.bin" directory)))
             (binstore:store path datum :compression (list method :shuffle t :level 1))
             (is (same-data-p datum (binstore:restore path)))
             (with-open-file (in path :element-type '(unsigned-byte 8))
               (is (same-data-p datum (binstore:restore in)))))))))))

(defun container-chunks (content)
  "The chunks of the shuffle container CONTENT (a frame's content, #x5F #x01
first): a list of (kind bytes), in order."
  (let ((i 2) (chunks '()))
    (loop while (< i (length content))
          do (let ((kind (aref content i)) (n 0) (shift 0))
               (incf i)
               (loop for byte = (aref content i)
                     do (incf i)
                        (setf n (logior n (ash (ldb (byte 7 0) byte) shift)))
                        (incf shift 7)
                     while (logbitp 7 byte))
               (push (list kind n) chunks)
               (incf i n)))
    (nreverse chunks)))

(test shuffle-runs-span-neighbouring-payloads
  "Payloads of one width a few bytes apart are shuffled as one run, as blosc
shuffles a block: fifty vectors of 100 doubles in a list make one shuffled
chunk of whole elements, not fifty; payloads of another width, or farther
apart than +MAX-SHUFFLE-GAP+, begin a run of their own; a run longer than
+MAX-SHUFFLE-CHUNK+ is cut into chunks of that size.  Every case restores
to the data."
  (flet ((chunks (datum method)
           (let ((octets (binstore:store nil datum :compression (list method :shuffle t))))
             (is (same-data-p datum (binstore:restore octets)))
             (container-chunks (frame-content octets method))))
         (doubles (n seed)
           (let ((v (make-array n :element-type 'double-float)))
             (dotimes (i n v) (setf (aref v i) (+ seed (* i 0.5d0))))))
         (singles (n)
           (let ((v (make-array n :element-type 'single-float)))
             (dotimes (i n v) (setf (aref v i) (* i 0.25f0))))))
    (dolist (method '(:zstd :lz4))
      (let ((shuffled (remove 0 (chunks (loop for k below 50 collect (doubles 100 k)) method)
                              :key #'first)))
        (is (= 1 (length shuffled)) "~s: ~s" method shuffled)
        (is (= 8 (first (first shuffled))))
        (is (< (* 50 800) (second (first shuffled)) (* 50 816))))
      (let ((kinds (mapcar #'first (remove 0 (chunks (list (doubles 100 1) (doubles 100 2)
                                                           (singles 100) (singles 100))
                                                     method)
                                           :key #'first))))
        (is (equal '(8 4) kinds) "~s: ~s" method kinds))
      (let ((kinds (mapcar #'first (remove 0 (chunks (list (doubles 100 1)
                                                           (make-string 200 :initial-element #\a)
                                                           (doubles 100 2))
                                                     method)
                                           :key #'first))))
        (is (equal '(8 8) kinds) "~s: ~s" method kinds))
      (let ((sizes (mapcar #'second (remove 0 (chunks (doubles 300000 0) method) :key #'first))))
        (is (equal (list binstore::+max-shuffle-chunk+ binstore::+max-shuffle-chunk+
                         (- (* 8 300000) (* 2 binstore::+max-shuffle-chunk+)))
                   sizes)
            "~s: ~s" method sizes)))))

(test shuffle-puts-byte-j-of-element-i-at-j-m-plus-i
  "The layout doc/FORMAT.md gives, for every width, and its inverse, on
lengths that are and are not multiples of eight elements."
  (dolist (width '(2 4 8))
    (dolist (m '(1 7 8 9 64 1001))
      (let* ((n (* width m))
             (from (make-array n :element-type '(unsigned-byte 8)))
             (to (make-array n :element-type '(unsigned-byte 8)))
             (back (make-array n :element-type '(unsigned-byte 8))))
        (dotimes (k n) (setf (aref from k) (mod (* 31 (1+ k)) 251)))
        (binstore::shuffle-octets from 0 to 0 n width)
        (is (loop for i below m
                  always (loop for j below width
                               always (= (aref from (+ (* i width) j)) (aref to (+ (* j m) i)))))
            "width ~d, ~d elements: not the layout" width m)
        (binstore::shuffle-octets to 0 back 0 n width :unshuffle t)
        (is (equalp from back) "width ~d, ~d elements: no inverse" width m)))))

(test shuffle-shrinks-a-smooth-signal
  "A noisy sine compresses smaller shuffled than not, with either method."
  (let ((signal (make-array 100000 :element-type 'double-float))
        (state (seeded-random-state 5)))
    (dotimes (i (length signal))
      (setf (aref signal i) (+ (sin (* i 0.001d0)) (* 0.01d0 (random 1d0 state)))))
    (dolist (method '(:zstd :lz4))
      (let ((with (length (binstore:store nil signal :compression (list method :shuffle t))))
            (without (length (binstore:store nil signal :compression (list method :shuffle nil)))))
        (is (< with (* 0.95 without)) "~s: ~d bytes shuffled, ~d not" method with without)))))

(defun container-frame (method &rest parts)
  "A METHOD frame (not shuffled by binstore) whose content is PARTS, octet
vectors or lists of octets, one after the other: hand-made containers."
  (let ((sink (funcall (ecase method (:zstd #'binstore:make-zstd-sink)
                                     (:lz4 #'binstore:make-lz4-sink))
                       (binstore:make-octets-sink))))
    (dolist (part parts)
      (let ((octets (simple-octets (coerce part 'vector))))
        (binstore:sink-write sink octets 0 (length octets))))
    (simple-octets (binstore:sink-finish sink))))

(defun varint-list (n)
  (loop collect (logior (ldb (byte 7 0) n) (if (< n 128) 0 128))
        do (setf n (ash n -7))
        until (zerop n)))

(test hostile-shuffle-containers-are-invalid-input
  "A well-formed hand-made container restores; every malformed one (a bad
version, kind, width, length, or content cut inside a chunk) is
INVALID-INPUT with an offset inside the input, never another error, and
no C context is left behind."
  (let* ((datum (make-array 64 :element-type 'double-float :initial-element 2.5d0))
         (record (binstore:store nil datum))
         (payload-start (- (length record) 512))
         (payload (subseq record payload-start))
         (shuffled (make-array 512 :element-type '(unsigned-byte 8)))
         (held (contexts-held)))
    (binstore::shuffle-octets payload 0 shuffled 0 512 8)
    ;; the premise of the marker: no record begins with #x5F
    (dolist (tail '(() (#x01) (#x01 #x00 #x05 #x41)))
      (signals binstore:invalid-input
        (binstore:restore (simple-octets (cons #x5F tail)) :require-header nil)))
    (dolist (method '(:zstd :lz4))
      (flet ((good (&rest parts) (apply #'container-frame method parts)))
        (is (equalp datum
                    (binstore:restore
                     (good '(#x5F 1) (list* 0 (varint-list payload-start))
                           (subseq record 0 payload-start)
                           (list* 8 (varint-list 512)) shuffled))))
        (dolist (bad (list (list '(#x5F))                 ; no version
                           (list '(#x5F 2 0 1 0))         ; version 2
                           (list '(#x5F 1 3 4 1 2 3 4))   ; kind 3
                           (list '(#x5F 1 16 16) (make-list 16 :initial-element 0)) ; width 16
                           (list '(#x5F 1 8 12) (make-list 12 :initial-element 0)) ; not a multiple
                           (list '(#x5F 1 8 0))           ; empty shuffled chunk
                           (list '(#x5F 1 8 #x80 #x80 #x80 1)) ; past the largest chunk
                           (list '(#x5F 1 8 #xFF #xFF #xFF #xFF #xFF #xFF #xFF #xFF #xFF #x01))
                           (list '(#x5F 1 0))             ; header cut
                           (list '(#x5F 1 0 #x80))        ; varint cut
                           (list '(#x5F 1 0 10 1 2))      ; plain chunk cut
                           (list '(#x5F 1 8 16) (make-list 8 :initial-element 0)) ; shuffled cut
                           (list '(#x5F 1) (list* 0 (varint-list payload-start))
                                 (subseq record 0 payload-start)
                                 (list* 8 (varint-list 512)) (subseq shuffled 0 300))))
          (let ((outcome (handler-case (binstore:restore (apply #'good bad)) (error (c) c)))
                (length (length (apply #'good bad))))
            (is (and (typep outcome 'binstore:invalid-input)
                     (typep (binstore:restore-error-offset outcome) `(integer 0 ,length)))
                "~s ~s: ~a" method bad
                (if (typep outcome 'condition) (format nil "~s: ~a" (type-of outcome) outcome)
                    outcome))))))
    (is (= held (contexts-held)))))

(test damaged-shuffled-frames-are-refused
  "Shuffled frames cut at every length, or with a byte changed, are
refused as other compressed input is."
  (let ((datum (list (let ((v (make-array 300 :element-type 'double-float)))
                       (dotimes (i 300 v) (setf (aref v i) (* i 0.125d0))))
                     "tail")))
    (dolist (method '(:zstd :lz4))
      (let ((octets (binstore:store nil datum :compression (list method :shuffle t))))
        (let ((bad '()))
          (loop for end from 1 below (length octets)
                do (let ((outcome (handler-case (binstore:restore (subseq octets 0 end))
                                    (error (c) c))))
                     (unless (typep outcome 'binstore:invalid-input)
                       (push end bad))))
          (is (null bad) "~s cut at ~a: not INVALID-INPUT" method bad))
        (let ((bad '()))
          (loop for at from 4 below (length octets)
                do (let ((copy (copy-seq octets)))
                     (setf (aref copy at) (logxor (aref copy at) #x5A))
                     (let ((outcome (handler-case (binstore:restore copy) (error (c) c))))
                       (unless (or (typep outcome 'binstore:binstore-error)
                                   (and (listp outcome) (same-data-p datum outcome)))
                         (push (list at outcome) bad)))))
          (is (null bad) "~s changed at ~s" method bad))))))
