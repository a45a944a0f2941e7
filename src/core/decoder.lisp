;;;; The decoder: one dense CASE on the tag byte (a jump table in SBCL),
;;;; containers read as header then contents, LATER / FILL records, and the
;;;; top-level loop with the optional header and end marker.

(in-package #:binstore)


;;; Headers hold objects too (a symbol's package, a ratio's parts, an
;;; instance's descriptor, a displaced array's target, a hash table's test):
;;; input can nest them without any container's contents, where NESTED
;;; checks the stack.  So the tags whose header or parts hold objects check
;;; it here; leaves (strings, numbers, raw vectors) need not.
(defmacro stack-checked ((rs &key (counted t)) &body body)
  "Run BODY, which reads objects inside the object being read, once the
control stack is known to have room (RESTORE-LIMIT-EXCEEDED otherwise).
COUNTED NIL for a container, whose contents NESTED counts as a level of
the recursion where the platform counts them (COUNTING-NESTING)."
  `(progn
     (when (stack-exhausted-p (rs-stack-limit ,rs))
       (restore-too-deep ,rs))
     ,(if counted
          `(counting-nesting ((restore-too-deep ,rs))
             ,@body)
          `(progn ,@body))))

(defun read-tagged (rs tag)
  "Read the object whose TAG (a type tag) was just consumed."
  (declare (type restore-state rs) (type (unsigned-byte 8) tag) (optimize speed))
  (let ((ib (rs-ibuf rs)))
    (case tag
      (#.+tag-nil+ nil)
      (#.+tag-t+ t)
      ;; the commonest containers take a path of their own
      (#.+tag-list+ (read-proper-list rs nil))
      (#.+tag-int64-list+ (read-proper-list rs t))
      (#.+tag-simple-vector+ (read-simple-vector rs))
      (#.+tag-instance+ (stack-checked (rs :counted nil) (read-instance rs)))
      (#.(set-difference +container-tags+
                         (list +tag-list+ +tag-int64-list+ +tag-simple-vector+ +tag-instance+))
       (stack-checked (rs :counted nil) (read-container rs tag)))
      (#.+tag-uint8+ (read-fixed-integer ib +tag-uint8+))
      (#.+tag-negint8+ (read-fixed-integer ib +tag-negint8+))
      (#.+tag-int16+ (read-fixed-integer ib +tag-int16+))
      (#.+tag-int32+ (read-fixed-integer ib +tag-int32+))
      (#.+tag-int64+ (read-fixed-integer ib +tag-int64+))
      (#.+tag-bignum+ (read-bignum rs))
      (#.+tag-ratio+ (stack-checked (rs) (read-ratio rs)))
      (#.+tag-single-float+ (read-fixed-float ib +tag-single-float+))
      (#.+tag-double-float+ (register rs (read-fixed-float ib +tag-double-float+)))
      (#.+tag-complex-single+ (read-complex-single rs))
      (#.+tag-complex-double+ (read-complex-double rs))
      (#.+tag-complex-rational+ (stack-checked (rs) (read-complex-rational rs)))
      (#.+tag-character+ (read-character rs))
      (#.+tag-base-string+ (read-simple-base-string rs))
      (#.+tag-string+ (read-character-string rs))
      (#.+tag-specialized-vector+ (read-specialized-vector rs nil))
      (#.+tag-octet-vector+ (read-specialized-vector rs +element-type-ub8+))
      (#.+tag-double-vector+ (read-specialized-vector rs +element-type-double-float+))
      (#.+tag-symbol+ (stack-checked (rs) (read-symbol rs)))
      (#.+tag-keyword+ (read-keyword rs))
      (#.+tag-uninterned-symbol+ (read-uninterned-symbol rs))
      (#.+tag-package+ (read-package rs))
      (#.+tag-pathname+ (stack-checked (rs) (read-pathname rs)))
      (#.+tag-class-descriptor+ (stack-checked (rs) (read-class-descriptor rs)))
      (#.+tag-codec-object+ (stack-checked (rs) (read-codec-object rs)))
      (#.+tag-ref+ (let ((id (read-varint ib)))
                     (object-by-id rs id (varint-reference-size id))))
      (#.(loop for k below +short-ref-tags+ collect (+ +tag-short-ref+ k))
       (object-by-id rs (short-ref-id tag (read-u8 ib)) 2))
      (#.+tag-next-ref+ (next-ref-object rs))
      (#.+tag-cons-ref+ (let ((id (read-varint ib)))
                          (cons-by-id rs id (varint-reference-size id))))
      (#.(loop for k below +short-cons-ref-tags+ collect (+ +tag-short-cons-ref+ k))
       (cons-by-id rs (short-cons-ref-id tag (read-u8 ib)) 2))
      (#.+tag-later+ (stack-checked (rs) (read-later rs)))
      (t (invalid ib (format nil "tag #x~2,'0x where an object should start~@[ (~a)~]"
                             tag (and (< tag 64) (svref +tag-names+ tag)))
                  "an object tag" (1- (ibuf-offset ib)))))))

;;; Containers ---------------------------------------------------------------

;;; The two dispatches are inline in READ-CONTAINER, the path of the
;;; containers without a reader of their own (arrays, hash tables, conses,
;;; dotted and packed lists): calls there cost more than a small container's
;;; own work.
(declaim (inline read-container-header fill-container))
(defun read-container-header (rs tag)
  "Read the header of the container announced by TAG; return the new
container and the information FILL-CONTAINER needs."
  (ecase tag
    ((#.+tag-list+ #.+tag-dotted-list+ #.+tag-cons+ #.+tag-int64-list+)
     (read-list-header rs tag))
    (#.+tag-simple-vector+ (values (read-simple-vector-header rs) nil))
    (#.+tag-array+ (read-array-header rs))
    (#.+tag-hash-table+ (read-hash-table-header rs))
    (#.+tag-instance+ (read-instance-header rs))))

(defun fill-container (rs tag object info)
  (ecase tag
    ((#.+tag-list+ #.+tag-dotted-list+ #.+tag-cons+ #.+tag-int64-list+)
     (fill-list rs object info))
    (#.+tag-simple-vector+ (fill-simple-vector rs object))
    (#.+tag-array+
     ;; a displaced array has no contents
     (unless (array-displacement object) (fill-array rs object info)))
    (#.+tag-hash-table+ (fill-hash-table rs object info))
    (#.+tag-instance+ (fill-instance rs object info)))
  object)

(defun read-container (rs tag)
  (declare (type restore-state rs) (type (unsigned-byte 8) tag) (optimize speed))
  (multiple-value-bind (object info) (read-container-header rs tag)
    ;; a run of conses took its ids in READ-LIST-HEADER
    (unless (list-tag-p tag)
      (register rs object))
    (nested (rs) (fill-container rs tag object info))))

(defun read-later (rs)
  "LATER: a container header whose contents come in a FILL record, which
names it by its rank among the LATER containers."
  (let ((tag (read-u8 (rs-ibuf rs))))
    (unless (member tag +container-tags+)
      (restore-invalid rs (format nil "LATER before tag #x~2,'0x" tag) "a container tag"))
    (multiple-value-bind (object info) (read-container-header rs tag)
      ;; ids as for any container; a run of conses took its own
      (unless (list-tag-p tag)
        (register rs object))
      (unless (rs-pending rs)
        (setf (rs-pending rs) (make-hash-table)))
      (setf (gethash (rs-next-later rs) (rs-pending rs))
            (make-pending-fill tag object info (+ (rs-depth rs) (rs-depth-base rs))))
      (incf (rs-next-later rs))
      object)))

(defun read-fill (rs)
  "FILL n contents: complete the Nth container announced by LATER."
  (let* ((n (read-varint (rs-ibuf rs)))
         (pending (and (rs-pending rs) (gethash n (rs-pending rs)))))
    (unless pending
      (restore-invalid rs (format nil "FILL for LATER container ~d, which awaits no contents" n)
                       "the rank of an unfilled LATER container"))
    (remhash n (rs-pending rs))
    (setf (rs-depth-base rs) (pending-fill-depth pending)
          (rs-depth rs) 1)
    (check-restore-depth rs)
    (fill-container rs (pending-fill-kind pending) (pending-fill-object pending)
                    (pending-fill-info pending))
    (setf (rs-depth-base rs) 0 (rs-depth rs) 0)))

;;; Records ------------------------------------------------------------------
;;;
;;; What one STORE writes is a record: [header] [tracking tag] [objects n]
;;; and one object (or n), each followed by its FILL records.  A record ends
;;; when its last object and the FILLs it announced are read, so a reader
;;; never looks past it: on a pipe or a socket it never waits for bytes of
;;; the next record.

(defun header-start-octets (ib)
  "Up to eight octets at the reader's position, without reading past the
window: what a NOT-BINSTORE-DATA message shows."
  (let ((n (min 8 (available ib))))
    (loop for i below n
          collect (mem-u8 (ibuf-sap ib) (+ (ibuf-pos ib) i)))))

(defun not-binstore-data (ib message)
  "Signal NOT-BINSTORE-DATA at IB's position, with MESSAGE saying what the
input begins with instead of binstore's header."
  (error 'not-binstore-data
         :offset (ibuf-offset ib) :message message
         :expected (format nil "binstore's header, #x24 \"BST\" and a version (data stored ~
                                with :output-magic-number nil restores with ~
                                :require-header nil)")))

(defun describe-octets (octets)
  "OCTETS as hex, with their ASCII text where they have some."
  (format nil "~{~2,'0x~^ ~}~@[ (~s)~]" octets
          (and (>= (length octets) 4) (every (lambda (o) (<= 32 o 126)) octets)
               (map 'string #'code-char octets))))

(defun read-header (rs)
  "Read binstore's header, the tag already seen at the reader's position;
return the version it names."
  (let ((ib (rs-ibuf rs)))
    (read-u8 ib)
    (loop for expected across +header-octets+
          do (when (at-end-p ib)
               (not-binstore-data ib "the input ends inside binstore's header"))
             (unless (= (peek-u8 ib) expected)
               (not-binstore-data ib (format nil "the input begins with #x24 but not with ~
                                                   binstore's magic number (then ~a)"
                                             (describe-octets (header-start-octets ib)))))
             (read-u8 ib))
    (when (at-end-p ib)
      (not-binstore-data ib "the input ends inside binstore's header"))
    (let* ((start (ibuf-offset ib))
           (version (read-varint ib)))
      (unless (<= 1 version +format-version+)
        (error 'unsupported-version
               :version version :offset start
               :message (format nil "format version ~d" version)
               :expected (format nil "a version from 1 to ~d" +format-version+)))
      version)))

(defun read-tracking-flags (rs)
  "Read the flags byte of +TAG-TRACKING+, the general form of the tracking
tags."
  (let ((flags (read-u8 (rs-ibuf rs))))
    (unless (< flags 4)
      (restore-invalid rs (format nil "tracking flags #x~2,'0x" flags) "flags below 4"))
    flags))

(defun read-tracking-tag (rs)
  "Read the tracking tag that may begin a record's contents, and set what
gets ids from it; without one, objects get ids and conses do not."
  (let* ((ib (rs-ibuf rs))
         (flags (case (peek-u8 ib)
                  (#.+tag-no-tracking+ (read-u8 ib) 0)
                  (#.+tag-full-tracking+ (read-u8 ib) (logior +track-objects+ +track-conses+))
                  (#.+tag-tracking+ (read-u8 ib) (read-tracking-flags rs))
                  (t nil))))
    (when flags
      (setf (rs-track rs) (logtest flags +track-objects+)
            (rs-track-conses rs) (logtest flags +track-conses+)))))

(defun skip-to-record (ib)
  "Skip the end markers that may close the record before; true when a
record follows, false at the end of the input."
  (loop (when (at-end-p ib) (return nil))
        (if (= (peek-u8 ib) +tag-end+)
            (read-u8 ib)
            (return t))))

(defun read-record-object (rs fn)
  "Read one top-level object and the FILL records it announced; call FN
with it."
  (let ((object (read-object rs)))
    (loop while (and (rs-pending rs) (plusp (hash-table-count (rs-pending rs))))
          do (let ((ib (rs-ibuf rs)))
               (unless (= (read-u8 ib) +tag-fill+)
                 (invalid ib (format nil "~d container~:p announced by LATER not filled"
                                     (hash-table-count (rs-pending rs)))
                          "a FILL record for each" (1- (ibuf-offset ib)))))
             (read-fill rs))
    (when (rs-postponed rs)
      (insert-postponed-pairs rs))
    (when (rs-finish rs)
      (run-finish-functions rs))
    (funcall fn object)))

(defun too-many-values (rs count max)
  (error 'restore-limit-exceeded
         :limit :values :value max :offset (ibuf-offset (rs-ibuf rs))
         :message (format nil "the record holds ~:d objects, more than RESTORE returns ~
                               as values; read them with MAP-STORED-OBJECTS or ~
                               DO-STORED-OBJECTS" count)))

(defun read-record (rs fn &key (require-header t) max-count)
  "Read the record at the reader's position (SKIP-TO-RECORD found one),
calling FN with each of its top-level objects in order; return their
number.  With REQUIRE-HEADER the record must begin with the header
\(NOT-BINSTORE-DATA).  A record holding more than MAX-COUNT objects (when
true) signals RESTORE-LIMIT-EXCEEDED, before any is read where the record
says its count."
  (let* ((ib (rs-ibuf rs))
         (version (cond ((= (peek-u8 ib) +tag-header+) (read-header rs))
                        (require-header
                         (not-binstore-data
                          ib (format nil "the input does not begin with binstore's header ~
                                          (it begins ~a)"
                                     (describe-octets (header-start-octets ib)))))
                        (t +format-version+))))
    (when (at-end-p ib)
      (error 'truncated-input :offset (ibuf-offset ib) :message "the record has no object"
                              :expected "an object"))
    (read-tracking-tag rs)
    (when (and (not (at-end-p ib)) (= (peek-u8 ib) +tag-dictionary+))
      (read-dictionary-tag rs))
    (if (< version 3)
        (read-version-2-objects rs fn max-count)
        (let ((count (if (and (not (at-end-p ib)) (= (peek-u8 ib) +tag-objects+))
                         (progn (read-u8 ib)
                                (check-count ib (read-varint ib) 1 "a record of objects"))
                         1)))
          (when (and max-count (> count max-count))
            (too-many-values rs count max-count))
          (dotimes (i count)
            (read-record-object rs fn))
          ;; an end marker the window already holds is this record's
          (when (and (plusp (available ib))
                     (= (mem-u8 (ibuf-sap ib) (ibuf-pos ib)) +tag-end+))
            (read-u8 ib))
          count))))

(defun read-version-2-objects (rs fn max-count)
  "The objects of a record whose header names version 1 or 2: they run to
the end of the input or to an end marker, FILL records after each."
  (let ((ib (rs-ibuf rs))
        (count 0))
    (declare (type index count))
    (loop
      (when (at-end-p ib) (return))
      (when (= (peek-u8 ib) +tag-end+)
        (read-u8 ib)
        (return))
      (when (and max-count (>= count max-count))
        (too-many-values rs (1+ count) max-count))
      (let ((object (read-object rs)))
        (loop until (or (at-end-p ib) (/= (peek-u8 ib) +tag-fill+))
              do (read-u8 ib)
                 (read-fill rs))
        (when (rs-postponed rs)
          (insert-postponed-pairs rs))
        (when (rs-finish rs)
          (run-finish-functions rs))
        (funcall fn object)
        (incf count)))
    (when (and (rs-pending rs) (plusp (hash-table-count (rs-pending rs))))
      (restore-invalid rs (format nil "~d container~:p announced by LATER never filled"
                                  (hash-table-count (rs-pending rs)))
                       "a FILL record for each"))
    (when (zerop count)
      (restore-invalid rs "no object before the end marker" "an object"))
    count))
