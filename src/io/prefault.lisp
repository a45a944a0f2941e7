;;;; Mapping fresh memory in before a large copy into it.
;;;;
;;;; A vector allocated after a full collection usually lies on pages the
;;;; kernel has not mapped: SBCL's collector hands free pages back to the
;;;; system (madvise MADV_DONTNEED) after collecting an old generation, and
;;;; memory a process never used is unmapped too.  Copying into such a
;;;; vector takes a page fault every 4 KiB, about 1.5 µs each on the machines
;;;; binstore is measured on: more than the copy itself.  One
;;;; madvise(MADV_POPULATE_WRITE) call maps all the pages of a range at once,
;;;; which costs less than taking their faults one by one: a third less on
;;;; one machine (10 MB in pieces of 80 KB after a full GC: 5.3 ms of faults
;;;; and copies against 3.7), a tenth on another (1.1 against 1.2 µs a page).
;;;;
;;;; Cheaper still is one 2 MiB huge page: mapping it costs what zeroing it
;;;; does, 70–240 µs here, against 600–840 µs for its 512 small pages.  So
;;;; a stretch of the range that is a whole aligned 2 MiB, at most a quarter
;;;; of it mapped, gets its first page mapped and is then collapsed into a
;;;; huge page (MADV_COLLAPSE, Linux 6.1), which copies the pages mapped
;;;; before: after a collection most chunks of the heap keep a few pages of
;;;; objects that live on, and would otherwise never be one.  That is a
;;;; one-time act on memory the caller is about to fill: unlike
;;;; MADV_HUGEPAGE it sets nothing on the mapping, so the rest of the heap
;;;; and the kernel's background collapsing are left as they were.  It is
;;;; only tried when a probe on memory of its own succeeded (the kernel
;;;; has it and huge pages are not set to never), and *HUGE-PAGES* turns
;;;; it off.  A collapse can cost milliseconds (the kernel compacting
;;;; memory, or, in a virtual machine, the host faulting in a block it had
;;;; taken back): one that fails or takes longer than the small pages would
;;;; holds collapses off for the next chunks, more after each such one in a
;;;; row (TRY-HUGE-PAGE).
;;;;
;;;; On pages already mapped, the usual case between full collections,
;;;; POPULATE_WRITE still walks every page (about 0.17 µs each, against the
;;;; 0.6 µs it saves on a page not mapped).  So each 2 MiB of the range is
;;;; first looked at with one mincore call (about 1 µs), and populated
;;;; only when at least a quarter of its pages are not mapped: a vector can
;;;; straddle pages used before and pages never used.  The calls are only
;;;; worth their microseconds on ranges of +PREFAULT-BYTES+ or more.
;;;;
;;;; Mapping a page in never changes what it holds, nor does collapsing
;;;; pages into a huge one, so this is safe on any memory the caller owns.
;;;; It needs Linux 5.14; on an older kernel the first refusal (EINVAL)
;;;; turns it off.  Any other failure only leaves the faults to the copy, as
;;;; without it.  On other systems it does nothing.
;;;;
;;;; Those calls (mincore, the two madvise, and the clock that times a
;;;; collapse) go through one structure, *MEMORY-KERNEL*, whose functions
;;;; are the system calls: what the kernel does with them is its own choice
;;;; (it may make huge pages of its own accord, take pages back, collapse
;;;; slowly on a loaded machine), so the tests check what binstore asks of
;;;; it against a simulated kernel bound there (tests/kernel.lisp).

(in-package #:binstore)

(defconstant +prefault-bytes+ (* 64 1024)
  "Ranges shorter than this are left to fault in as they are written: the
system calls would cost more than they save.")

(declaim (inline boundary-above boundary-at-or-above))
(defun boundary-above (address)
  "The first 2 MiB boundary above ADDRESS: the end of the chunk holding it."
  (declare (type word address))
  (logandc2 (+ address +huge-page-bytes+) (1- +huge-page-bytes+)))

(defun boundary-at-or-above (address)
  "ADDRESS rounded up to a 2 MiB boundary."
  (declare (type word address))
  (logandc2 (+ address (1- +huge-page-bytes+)) (1- +huge-page-bytes+)))

(defconstant +prefault-chunk-pages+ (/ +huge-page-bytes+ +page-bytes+)
  "Pages looked at by one mincore call, and populated together or not: those
of one huge page, so that a chunk aligned to one can become one.")

(defvar *huge-pages* t
  "Whether binstore may map fresh memory it is about to fill (a large vector
it restores or returns, the heap's runway ahead of a large restore) as 2 MiB
transparent huge pages, on Linux 6.1 or later where huge pages are not set
to never.  It only does so for whole aligned 2 MiB none of which is mapped
yet, and sets nothing on the mapping; NIL keeps to 4 KiB pages.")

(define-global **populate-write-works** (memory-population-supported-p)
  "NIL once madvise has refused MADV_POPULATE_WRITE (a kernel before 5.14),
or from the start where the system has no such call.")

(define-global **huge-pages-work** :unknown
  "Whether MADV_COLLAPSE makes huge pages here: :UNKNOWN until
HUGE-PAGES-P has probed it, then T or NIL.")

(defun forget-memory-facts ()
  "Make prefaulting learn again what the kernel does, as in a fresh
process: called when the image is saved, as the process it next starts
may run on another kernel."
  (setf **populate-write-works** (memory-population-supported-p)
        **huge-pages-work** :unknown))

(call-before-image-save 'forget-memory-facts)

;;; The system calls themselves are the platform's (src/platform/os.lisp):
;;; SYSTEM-UNMAPPED-PAGES, SYSTEM-POPULATE, SYSTEM-COLLAPSE and
;;; SYSTEM-MICROSECONDS.  Nothing calls them but through *MEMORY-KERNEL*,
;;; below.  Where the system lacks them (not Linux) they refuse, and
;;; prefaulting is off from the start.

;;; The seam (see the top of this file).

(defstruct (memory-kernel (:copier nil) (:predicate nil))
  "The calls PREFAULT makes to the kernel for memory it is about to fill, as
functions; each slot defaults to the real system call.  Addresses are
integers; binstore calls them a few times per 2 MiB chunk of a range, never
per page or per object.
  UNMAPPED-PAGES (START PAGES): START a page address, PAGES from 1 to
+PREFAULT-CHUNK-PAGES+, all in one aligned 2 MiB chunk.  Returns how many
of those pages are not mapped in (0 to PAGES), or NIL when the kernel does
not tell (mincore).
  POPULATE (START BYTES): START a page address, BYTES a whole number of
pages, all in one aligned 2 MiB chunk.  Maps those pages in, writable,
keeping what they hold (MADV_POPULATE_WRITE).  Returns 0, or the errno of
a failure: EINVAL says the kernel lacks it, and turns prefaulting off.
  COLLAPSE (START BYTES): START 2 MiB-aligned, BYTES +HUGE-PAGE-BYTES+, its
first page just populated.  Makes the chunk one huge page, keeping what its
pages hold (MADV_COLLAPSE).  Returns 0, or the errno of a failure.
  MICROSECONDS (): an integer count of microseconds on a monotonic clock;
read before and after each COLLAPSE to tell a slow one (TRY-HUGE-PAGE)."
  (unmapped-pages #'system-unmapped-pages :type function :read-only t)
  (populate #'system-populate :type function :read-only t)
  (collapse #'system-collapse :type function :read-only t)
  (microseconds #'system-microseconds :type function :read-only t))

(declaim (type memory-kernel *memory-kernel*))
(defvar *memory-kernel* (make-memory-kernel)
  "The MEMORY-KERNEL every call of PREFAULT (and of the probe behind
HUGE-PAGES-P) goes through: the real system calls.  Bound to another only
by tests, to a simulated kernel; a binding holds in its own thread only.")

(defun unmapped-pages (start pages)
  "How many of the PAGES pages (at most +PREFAULT-CHUNK-PAGES+, in one
aligned 2 MiB chunk) from the page address START are not mapped in; NIL if
the kernel does not tell (*MEMORY-KERNEL*)."
  (declare (type word start) (type (integer 1 #.+prefault-chunk-pages+) pages))
  (funcall (memory-kernel-unmapped-pages *memory-kernel*) start pages))

(defun populate (start bytes)
  "Map in the pages of the BYTES bytes from the page address START
(MADV_POPULATE_WRITE, through *MEMORY-KERNEL*); true if it did.  A refusal
as unknown turns it off."
  (declare (type word start bytes))
  (let ((errno (funcall (memory-kernel-populate *memory-kernel*) start bytes)))
    (when (eql errno +einval+)
      (setf **populate-write-works** nil))
    (eql errno 0)))

(defun make-huge-page (start)
  "Make the unmapped 2 MiB at the aligned address START one huge page:
populate its first page (a collapse needs a page table there), then
collapse it (through *MEMORY-KERNEL*); true if that worked.  The memory
reads as before (zeros)."
  (declare (type word start))
  (and (populate start +page-bytes+)
       (eql 0 (funcall (memory-kernel-collapse *memory-kernel*) start +huge-page-bytes+))))

(defun probe-huge-pages ()
  "Try MADV_COLLAPSE on an aligned 2 MiB of a private mapping of its own:
whether the kernel has it and makes huge pages here."
  (unless (thp-never-p)
    (let* ((size (* 2 +huge-page-bytes+))
           (address (map-memory size)))
      (when address
        (unwind-protect
             (let ((start (boundary-at-or-above address)))
               (and **populate-write-works**
                    (make-huge-page start)
                    (= 0 (unmapped-pages start +prefault-chunk-pages+))))
          (unmap-memory address size))))))

(defun huge-pages-p ()
  "Whether PREFAULT may make huge pages now: *HUGE-PAGES* and the probe,
made once, agree."
  (and *huge-pages*
       (let ((known **huge-pages-work**))
         (if (eq known :unknown)
             (setf **huge-pages-work** (and (probe-huge-pages) t))
             known))))

(defconstant +slow-collapse-microseconds+ 1000
  "A collapse taking longer than this cost more than mapping its 512 small
pages would have (740–840 µs): the kernel had to compact memory, or the
host to fault the block in, and the next ones are likely to cost as much.")

(declaim (inline monotonic-microseconds))
(defun monotonic-microseconds ()
  "Microseconds on a monotonic clock (CLOCK_MONOTONIC, through
*MEMORY-KERNEL*), to time a collapse."
  (funcall (memory-kernel-microseconds *memory-kernel*)))

(defconstant +shortest-huge-page-pause+ 2
  "The whole chunks mapped in small pages after a slow or failed collapse
that follows a fast one.")

(defconstant +longest-huge-page-pause+ 64
  "The most whole chunks mapped in small pages between two tries of a
collapse, after slow ones: 128 MiB.")

(define-global **small-chunks-to-go** 0
  "Whole chunks still to map in small pages before the next collapse is
tried (threads may race on this and the next: they only pace the tries).")

(define-global **next-huge-page-pause** +shortest-huge-page-pause+
  "The chunks to map in small pages after the next slow or failed collapse:
+SHORTEST-HUGE-PAGE-PAUSE+ after a fast one, doubling with each slow one up
to +LONGEST-HUGE-PAGE-PAUSE+.")

(defun try-huge-page (start)
  "MAKE-HUGE-PAGE at START, unless chunks are still to go in small pages
after a collapse that failed or was slow; true if it made one.  A collapse
is slow when the kernel must compact memory, or in a virtual machine when
the host has taken the free 2 MiB block back: each of its 512 pages then
takes a host fault (3-7 ms seen here, against 0.1-0.2 for a block still
backed).  That happens once now and then, and in streaks where the process
first grows into memory: so a slow one holds collapses off for the next 2
chunks, and each slow one after it for twice as many as the one before."
  (declare (type word start))
  (let ((to-go **small-chunks-to-go**))
    (if (> to-go 0)
        (progn (setf **small-chunks-to-go** (1- to-go))
               nil)
        (let* ((begun (monotonic-microseconds))
               (made (make-huge-page start)))
          (if (and made (<= (- (monotonic-microseconds) begun) +slow-collapse-microseconds+))
              (setf **next-huge-page-pause** +shortest-huge-page-pause+)
              (let ((pause **next-huge-page-pause**))
                (setf **small-chunks-to-go** pause
                      **next-huge-page-pause** (min +longest-huge-page-pause+ (* 2 pause)))))
          made))))

(defun populate-chunk (start pages huge)
  "Populate the PAGES pages from the page address START when at least a
quarter of them are not mapped; when HUGE (they are a whole aligned huge
page's) and at most a quarter are mapped, try making them a huge page first
(TRY-HUGE-PAGE), which keeps what those hold."
  (declare (type word start) (type (integer 1 #.+prefault-chunk-pages+) pages))
  (let ((unmapped (unmapped-pages start pages)))
    (when (and unmapped
               (>= (* 4 unmapped) pages)
               (not (and huge (>= (* 4 unmapped) (* 3 pages)) (try-huge-page start))))
      (populate start (* pages +page-bytes+)))))

(defun prefault (address count)
  "Map in the whole pages of the COUNT bytes at ADDRESS (an integer: memory
the caller owns and is about to fill), in chunks that end at 2 MiB
boundaries, each where at least a quarter of its pages are not mapped yet,
a whole aligned 2 MiB at most a quarter mapped as a huge page where
HUGE-PAGES-P; nothing for a range shorter than +PREFAULT-BYTES+.  Returns
nothing."
  (declare (type word address) (type index count))
  (when (and (>= count +prefault-bytes+) **populate-write-works**)
    (let ((page (logandc2 (+ address (1- +page-bytes+)) (1- +page-bytes+)))
          (end (logandc2 (+ address count) (1- +page-bytes+)))
          (huge (and (>= count +huge-page-bytes+) (huge-pages-p))))
      (loop while (and (< page end) **populate-write-works**)
            do (let* ((next (min end (boundary-above page)))
                      (pages (floor (- next page) +page-bytes+)))
                 (populate-chunk page pages (and huge (= pages +prefault-chunk-pages+)))
                 (setf page next)))))
  (values))

(declaim (inline prefault-vector))
(defun prefault-vector (vector bytes)
  "PREFAULT the first BYTES bytes of the data of VECTOR, a fresh simple
vector of any element type (no header: the data start two words in).
Inline: for the many small vectors the first test is all it costs."
  (declare (type simple-array vector) (type index bytes))
  (when (>= bytes +prefault-bytes+)
    (with-pinned-objects (vector)
      (prefault (array-data-address vector) bytes)))
  (values))
