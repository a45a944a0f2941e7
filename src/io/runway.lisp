;;;; The heap's runway: pages mapped ahead of SBCL's allocation points.
;;;;
;;;; Small objects do not get pages of their own: SBCL hands each thread a
;;;; region of a free page or more, one for conses and one for the rest, and
;;;; the next region opens on the free pages just above.  After a full
;;;; collection those pages are unmapped (see prefault.lisp), so a restore
;;;; that makes a thousand vectors of 10 KB takes its 2,500 faults one at a
;;;; time: 6 ms where the copies alone take 1.  The restore therefore keeps
;;;; a runway mapped ahead of each of the thread's two allocation points,
;;;; by PREFAULT.  It counts the bytes of the small objects it makes (those
;;;; under SBCL's large-object size, 128 KiB: SBCL makes them at the points)
;;;; and, from the first +PREFAULT-BYTES+ on (a small restore pays nothing),
;;;; looks at both points every +LOOK-BYTES+, before the object that passes
;;;; that count is made: a point that has moved and comes nearer the end of
;;;; its runway than that object and two looks gets the next stretch mapped
;;;; (an object of 80 KB made past the end would map its own pages first,
;;;; and the stretch after it could no longer be one huge page).  How far
;;;; is its kind's share of the reach (RUNWAY-SHARE: the reach split between
;;;; the two points in proportion to how far each has moved), at most
;;;; +RUNWAY-BYTES+, which bounds what a restore can map and not use (the
;;;; restore bounds the reach closer when the input is in memory: what the
;;;; rest of it promises, RUNWAY-REACH).
;;;;
;;;; The runway is there for huge pages most of all: a 2 MiB one maps in
;;;; for 70-240 µs here, its 512 small pages for 600.  A huge page only
;;;; pays, though, where the restore fills a good part of it: so a runway
;;;; ends at a 2 MiB boundary, that one or the one past its stretch, only
;;;; when its share goes +RUNWAY-BYTES+ into the chunk after the point's
;;;; (HUGE-PAGE-WORTH-P); then that chunk is mapped whole, as one huge page
;;;; (see prefault.lisp), though the restore may use only part of it:
;;;; SBCL's allocation goes on through it afterwards, up to the next
;;;; collection, and would fault its small pages in one by one.  What a
;;;; restore can map and not use itself thus grows by less than 2 MiB, and
;;;; only for a restore that fills a quarter of it at least.  (Until
;;;; 2026-11-27 any share past the boundary mapped the next chunk: a
;;;; restore of half a megabyte then took 0.2 or 0.5-0.7 ms after a full
;;;; collection, by where the point lay, and what allocated after it, a
;;;; peer in the benchmark, ran on the pages it had paid for.)  Short of
;;;; that, the runway maps small pages, as where there are no huge pages:
;;;; one call for a stretch maps them for less than their faults would
;;;; cost one by one (from 2026-11-24 until 2026-11-27 such a look mapped
;;;; nothing, on a measure of 1.1 against 1.2 µs a page; mapped ahead, the
;;;; 305 pages of a thousand bit vectors of 10,000 bits restore 12-15%
;;;; faster, min of 31 alternating calls after a full collection).
;;;;
;;;; A long list is consed on the runway too, a piece at a time
;;;; (MAKE-LONG-LIST): MAKE-LIST would make it one large object, on pages
;;;; of its own that no runway reaches.

(in-package #:binstore)

(defconstant +runway-bytes+ (* 512 1024)
  "The most a runway reaches beyond what the allocation about to be made needs.")

;;; The allocation points (ALLOCATION-POINT) and the end of the heap
;;; (HEAP-END) are the platform's: src/platform/runtime.lisp.

(defun huge-page-worth-p (point end)
  "Whether huge pages are to be had and the allocation from POINT on, up to
END, goes at least +RUNWAY-BYTES+ into the 2 MiB chunk after POINT's: then
mapping that chunk whole, as one huge page (70-240 µs where binstore is
measured), costs no more than the faults of the small pages the restore
itself is to fill there (1.1-1.6 µs each).  Short of that, the huge page
would be paid for by this restore and used by whatever allocates after it:
a restore of half a megabyte took 0.2 ms or 0.5-0.7 ms (once 5 ms) after
a full collection, by where SBCL's allocation point happened to lie."
  (declare (type word point end))
  (and (>= end (+ (boundary-above point) +runway-bytes+))
       (huge-pages-p)))

(defun extend-runway (point bytes start end reach limit)
  "Map in the pages from the one holding POINT (an ALLOCATION-POINT, not 0)
through BYTES about to be allocated there and min(REACH, +RUNWAY-BYTES+)
beyond, up to LIMIT at most, except those of the runway [START, END) mapped
before, where POINT still lies in it; nothing when that is under
+PREFAULT-BYTES+.  Where huge pages are to be had and the BYTES and REACH
go as far as the end of the point's 2 MiB chunk, up to the 2 MiB boundary
at or past that stretch instead, so that a chunk wholly ahead of the point
is mapped whole, as a huge page, though the restore may use only part of
it: SBCL's allocation goes on through it afterwards.
Return the new runway's start (POINT) and end.  It reaches +PREFAULT-BYTES+ past the
BYTES at least, mapped or not, so that the next call comes that much later,
and never ends before the old runway containing POINT."
  (declare (type word point start end limit) (type index bytes reach))
  (let* ((inside (and (<= start point) (< point end)))
         (to (min limit
                  (let ((to (+ point bytes (min reach +runway-bytes+))))
                    (if (huge-page-worth-p point (+ point bytes reach))
                        ;; on to a boundary, so that PREFAULT meets whole chunks
                        (boundary-at-or-above to)
                        to))))
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
  (point 0 :type word)
  (start 0 :type word)
  (end 0 :type word)
  (moved 0 :type index))

(defun runway-share (reach moved other-moved)
  "The part of REACH, what the rest of a restore is to allocate, that falls
to the kind whose point has MOVED so far, where the other kind's point has
moved OTHER-MOVED: in proportion (a restore of a few vectors in a list must
not map a runway for conses, nor one of a long list of small integers one
for other objects)."
  (declare (type index reach moved other-moved))
  (if (= other-moved 0)
      reach
      (values (floor (* (float reach 1d0)
                        (/ (float moved 1d0) (float (+ moved other-moved) 1d0)))))))

(defun look-at-runway (runway conses reach &optional (bytes 0) (other-moved 0))
  "Extend RUNWAY, the runway of the allocation point of conses (CONSES true)
or of other objects, when that point is less than two looks' allocation
and the BYTES about to be allocated there from its end (see EXTEND-RUNWAY):
by this kind's share of REACH at most, in proportion to what its point has
moved so far against the OTHER-MOVED of the other kind's (RUNWAY-SHARE).
Not when the point has not moved since the last look, nor at the first
look, which only notes it."
  (declare (type runway runway) (type index reach bytes other-moved))
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
        (let ((need (+ bytes (* 2 +look-bytes+))) ; until the look after next
              (share (runway-share reach (runway-moved runway) other-moved)))
          (unless (and (<= start point) (< point end) (>= (- end point) need))
            (setf (values (runway-start runway) (runway-end runway))
                  (extend-runway point need start end share (heap-end)))))))))
