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
