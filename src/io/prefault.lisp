;;;; Mapping fresh memory in before a large copy into it.
;;;;
;;;; A vector allocated after a full collection usually lies on pages the
;;;; kernel has not mapped: SBCL's collector hands free pages back to the
;;;; system (madvise MADV_DONTNEED) after collecting an old generation, and
;;;; memory a process never used is unmapped too.  Copying into such a
;;;; vector takes a page fault every 4 KiB, about 1.5 µs each on the machines
;;;; binstore is measured on: more than the copy itself.  One
;;;; madvise(MADV_POPULATE_WRITE) call maps all the pages of a range at once,
;;;; which costs about a third less than taking their faults one by one
;;;; (10 MB in pieces of 80 KB after a full GC: 5.3 ms of faults and copies
;;;; against 3.7).
;;;;
;;;; On pages already mapped, the usual case between full collections,
;;;; POPULATE_WRITE still walks every page (about 0.17 µs each, against the
;;;; 0.6 µs it saves on a page not mapped).  So each megabyte of the range
;;;; is first looked at with one mincore call (about 1 µs), and populated
;;;; only when at least a quarter of its pages are not mapped: a vector can
;;;; straddle pages used before and pages never used.  The calls are only
;;;; worth their microseconds on ranges of +PREFAULT-BYTES+ or more.
;;;;
;;;; Mapping a page in never changes what it holds, so this is safe on any
;;;; memory the caller owns.  It needs Linux 5.14; on an older kernel the
;;;; first refusal (EINVAL) turns it off.  Any other failure only leaves
;;;; the faults to the copy, as without it.  On other systems it does
;;;; nothing.

(in-package #:binstore)

(defconstant +prefault-bytes+ (* 64 1024)
  "Ranges shorter than this are left to fault in as they are written: the
system calls would cost more than they save.")

(defconstant +page-bytes+ 4096
  "The page size assumed: x86-64's.  Where pages are larger, mincore refuses
the unaligned addresses and nothing is done.")

#+linux
(sb-ext:defglobal **populate-write-works** t
  "NIL once madvise has refused MADV_POPULATE_WRITE (a kernel before 5.14).")

(defconstant +prefault-chunk-pages+ 256
  "Pages looked at by one mincore call, and populated together or not.")

#+linux
(defun unmapped-pages (start pages)
  "How many of the PAGES pages (at most +PREFAULT-CHUNK-PAGES+) from the page
address START are not mapped in, according to mincore; NIL if it refuses."
  (declare (type sb-ext:word start) (type (integer 1 #.+prefault-chunk-pages+) pages))
  (sb-alien:with-alien ((flags (array (sb-alien:unsigned 8) #.+prefault-chunk-pages+)))
    (when (zerop (sb-alien:alien-funcall
                  (sb-alien:extern-alien "mincore"
                                         (function sb-alien:int sb-alien:unsigned-long
                                                   sb-alien:unsigned-long
                                                   (* (array (sb-alien:unsigned 8)
                                                             #.+prefault-chunk-pages+))))
                  start (* pages +page-bytes+) (sb-alien:addr flags)))
      (loop for i below pages
            count (not (logbitp 0 (sb-alien:deref flags i)))))))

#+linux
(defun populate-chunk (start pages)
  "Populate the PAGES pages from the page address START when at least a
quarter of them are not mapped."
  (declare (type sb-ext:word start) (type (integer 1 #.+prefault-chunk-pages+) pages))
  (let ((unmapped (unmapped-pages start pages)))
    (when (and unmapped
               (>= (* 4 unmapped) pages)
               (/= 0 (sb-alien:alien-funcall
                      (sb-alien:extern-alien "madvise"
                                             (function sb-alien:int sb-alien:unsigned-long
                                                       sb-alien:unsigned-long sb-alien:int))
                      start (* pages +page-bytes+) 23)) ; MADV_POPULATE_WRITE
               (= (sb-alien:get-errno) sb-posix:einval))
      (setf **populate-write-works** nil))))

(defun prefault (address count)
  "Map in the whole pages of the COUNT bytes at ADDRESS (an integer: memory
the caller owns and is about to fill), a megabyte at a time, where most of
them are not mapped yet; nothing for a range shorter than +PREFAULT-BYTES+.
Returns nothing."
  (declare (type sb-ext:word address) (type index count))
  #+linux
  (when (and (>= count +prefault-bytes+) **populate-write-works**)
    (let ((page (logandc2 (+ address (1- +page-bytes+)) (1- +page-bytes+)))
          (end (logandc2 (+ address count) (1- +page-bytes+))))
      (loop while (and (< page end) **populate-write-works**)
            do (let ((pages (min +prefault-chunk-pages+ (floor (- end page) +page-bytes+))))
                 (populate-chunk page pages)
                 (incf page (* pages +page-bytes+))))))
  #-linux (declare (ignore address count))
  (values))

(declaim (inline prefault-vector))
(defun prefault-vector (vector bytes)
  "PREFAULT the first BYTES bytes of the data of VECTOR, a fresh simple
vector of any element type (no header: the data start two words in).
Inline: for the many small vectors the first test is all it costs."
  (declare (type simple-array vector) (type index bytes))
  (when (>= bytes +prefault-bytes+)
    (sb-sys:with-pinned-objects (vector)
      (prefault (+ (logandc2 (sb-kernel:get-lisp-obj-address vector) sb-vm:lowtag-mask)
                   (* sb-vm:vector-data-offset sb-vm:n-word-bytes))
                bytes)))
  (values))

;;; The heap's runway.
;;;
;;; Small objects do not get pages of their own: SBCL hands each thread a
;;; region of a free page or more, one for conses and one for the rest, and
;;; the next region opens on the free pages just above.  After a full
;;; collection those pages are unmapped too (see above), so a restore that
;;; makes a thousand vectors of 10 KB takes its 2,500 faults one at a time:
;;; 6 ms where the copies alone take 1.  The restore therefore keeps a
;;; runway mapped ahead of each of the thread's two allocation points.  It
;;; counts the bytes of the small objects it makes and, from the first
;;; +PREFAULT-BYTES+ on (a small restore pays nothing), looks at both
;;; points every +LOOK-BYTES+: a point that has moved and nears the end of
;;; its runway gets the next stretch mapped, as long as what the restore
;;; has allocated so far and at most +RUNWAY-BYTES+, which bounds what a
;;; restore can map and not use (see RUNWAY-REACH for a closer bound).

(defconstant +runway-bytes+ (* 512 1024)
  "The most a runway reaches beyond what the allocation about to be made needs.")

;;; The allocation points live in the thread structure, in slots SBCL's
;;; own allocation sequence reads; without them (another SBCL) there is no
;;; runway.
(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun allocation-points-known-p ()
    "Whether this SBCL has the thread slots ALLOCATION-POINT reads."
    (if (and (find-symbol "THREAD-CONS-TLAB-SLOT" "SB-VM")
             (find-symbol "THREAD-MIXED-TLAB-SLOT" "SB-VM")
             (find-symbol "CURRENT-THREAD-OFFSET-SAP" "SB-VM"))
        '(:and)
        '(:or))))

(declaim (inline allocation-point))
(defun allocation-point (conses)
  "The address at which this thread allocates its next cons (CONSES true) or
its next other small object; 0 when that is not known: the region is closed
(just after a collection) or this SBCL does not tell."
  #+#.(binstore::allocation-points-known-p)
  (let ((point (ldb (byte 62 0)           ; a fixnum: user addresses are shorter
                    (sb-sys:sap-int
                     (if conses
                         (sb-vm::current-thread-offset-sap sb-vm::thread-cons-tlab-slot)
                         (sb-vm::current-thread-offset-sap sb-vm::thread-mixed-tlab-slot))))))
    ;; a closed region points below the heap
    (if (< point sb-vm:dynamic-space-start) 0 point))
  #-#.(binstore::allocation-points-known-p)
  (progn conses 0))

(defun heap-end ()
  "The address just past SBCL's dynamic space, where runways stop."
  (+ sb-vm:dynamic-space-start (sb-ext:dynamic-space-size)))

(defun extend-runway (point bytes start end reach limit)
  "Map in the pages from POINT's (an ALLOCATION-POINT, not 0) through BYTES about
to be allocated there and min(REACH, +RUNWAY-BYTES+) beyond, up to LIMIT
at most, except those of the runway [START, END) mapped before, where POINT
still lies in it; nothing when that is under +PREFAULT-BYTES+.  Return the
new runway's start (POINT) and end.  It reaches +PREFAULT-BYTES+ past the
BYTES at least, mapped or not, so that the next call comes that much later,
and never ends before the old runway containing POINT."
  (declare (type sb-ext:word point start end limit) (type index bytes reach))
  (let* ((inside (and (<= start point) (< point end)))
         (to (min limit (+ point bytes (min reach +runway-bytes+))))
         ;; from the start of the page holding the old end (left out as it
         ;; was only partly in the runway), or the point's
         (from (logandc2 (if inside end point) (1- +page-bytes+))))
    (when (< (+ from +prefault-bytes+) to)
      (prefault from (- to from)))
    (values point (max to
                       (min limit (+ point bytes +prefault-bytes+))
                       (if inside end 0)))))

(defconstant +look-bytes+ (* 16 1024)
  "Small objects allocated between two looks at the runways.")

(defstruct (runway (:constructor make-runway ()))
  "The pages mapped ahead of one allocation point: the range [START, END),
the POINT when last looked at (0 before the first look), and how far it has
MOVED forward since the first look."
  (point 0 :type sb-ext:word)
  (start 0 :type sb-ext:word)
  (end 0 :type sb-ext:word)
  (moved 0 :type index))

(defun look-at-runway (runway conses reach)
  "Extend RUNWAY, the runway of the allocation point of conses (CONSES true)
or of other objects, when that point is less than two looks' allocation
from its end (see EXTEND-RUNWAY): by REACH at most, and no more than the
point has moved so far, which is what this kind has allocated (a restore of
a few vectors in a list must not map a runway for conses).  Not when the
point has not moved since the last look, nor at the first look, which only
notes it."
  (declare (type runway runway) (type index reach))
  (let ((point (allocation-point conses))
        (last (runway-point runway))
        (start (runway-start runway))
        (end (runway-end runway)))
    (unless (or (= point 0) (= point last))
      (setf (runway-point runway) point)
      (unless (= last 0)
        (when (> point last)
          (setf (runway-moved runway)
                (min most-positive-fixnum (+ (runway-moved runway) (- point last)))))
        (unless (and (<= start point) (< point end)
                     (>= (- end point) (* 2 +look-bytes+)))
          (setf (values (runway-start runway) (runway-end runway))
                (extend-runway point (* 2 +look-bytes+) start end
                               (min reach (runway-moved runway)) (heap-end))))))))
