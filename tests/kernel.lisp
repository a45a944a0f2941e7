;;;; What PREFAULT and the heap's runway ask of the kernel, checked against a
;;;; simulated kernel bound as *MEMORY-KERNEL* (src/io/prefault.lisp).
;;;;
;;;; The real kernel decides for itself what to do with those requests: it
;;;; may make huge pages of its own accord (transparent huge pages set to
;;;; always, khugepaged), leave a collapse undone or make it take
;;;; milliseconds on a loaded machine, take pages back.  So these tests
;;;; assert binstore's decisions, which depend only on the answers it gets:
;;;; which ranges it looks at (mincore), which it populates, which chunks it
;;;; asks to collapse, and how it paces collapses after slow or failed ones
;;;; by the clock it is given.  The fake kernel below maps pages when asked,
;;;; answers mincore from that, records every request, and collapses as its
;;;; script says: succeeding or failing, taking so many microseconds of its
;;;; clock.  No memory is touched: the addresses are numbers.  What must hold
;;;; whatever the real kernel does (every byte keeps its value, round trips
;;;; with huge pages and without) is tested on real memory in places.lisp.

(in-package #:binstore-tests)

(def-suite memory-kernel :in places
  :description "PREFAULT's and the runway's requests, against a simulated kernel.")
(in-suite memory-kernel)

;;; The simulated kernel

(defstruct (fake-kernel (:constructor make-fake-kernel
                            (&key collapses (collapse-default '(0 100))
                                  (populate-errno 0) mincore-refuses)))
  "A kernel for PREFAULT to talk to: which pages are mapped (a bit vector of
its pages by chunk number), the requests made (newest first), a clock in
microseconds that only collapses advance, and the script of the collapses
to come: a list of (ERRNO MICROSECONDS), then COLLAPSE-DEFAULT for every
one after.  POPULATE-ERRNO is what every POPULATE returns (0: it maps the
pages), MINCORE-REFUSES makes mincore answer NIL."
  (chunks (make-hash-table) :type hash-table)
  (huge '() :type list)
  (requests '() :type list)
  (now 0 :type integer)
  (collapses '() :type list)
  (collapse-default '(0 100) :type list)
  (populate-errno 0 :type integer)
  (mincore-refuses nil))

(defparameter *fake-base* (* 4096 binstore::+huge-page-bytes+)
  "The 2 MiB-aligned address the tests' simulated memory starts at: any
number will do, as nothing is read or written there.")

(defun fake-page (n)
  "The address of page N from *FAKE-BASE*."
  (+ *fake-base* (* n binstore::+page-bytes+)))

(defun fake-chunk-pages (fake address)
  "The mapped bits of the pages of the chunk holding ADDRESS, and the index
of ADDRESS's page among them."
  (multiple-value-bind (chunk offset) (floor address binstore::+huge-page-bytes+)
    (values (or (gethash chunk (fake-kernel-chunks fake))
                (setf (gethash chunk (fake-kernel-chunks fake))
                      (make-array binstore::+prefault-chunk-pages+ :element-type 'bit
                                                                   :initial-element 0)))
            (floor offset binstore::+page-bytes+))))

(defun fake-map (fake address pages)
  "Mark the PAGES pages from the page address ADDRESS mapped, as if written."
  (dotimes (i pages)
    (multiple-value-bind (bits index)
        (fake-chunk-pages fake (+ address (* i binstore::+page-bytes+)))
      (setf (sbit bits index) 1))))

(defun fake-check (ok request)
  "Signal an error unless the REQUEST binstore made keeps the contract of
MEMORY-KERNEL (OK true)."
  (unless ok
    (error "A request outside the contract of MEMORY-KERNEL: ~s" request)))

(defun within-one-chunk-p (start bytes)
  (and (zerop (mod start binstore::+page-bytes+))
       (plusp bytes)
       (zerop (mod bytes binstore::+page-bytes+))
       (= (floor start binstore::+huge-page-bytes+)
          (floor (+ start bytes -1) binstore::+huge-page-bytes+))))

(defun fake-unmapped-pages (fake start pages)
  (let ((request (list :mincore start pages)))
    (push request (fake-kernel-requests fake))
    (fake-check (and (<= 1 pages binstore::+prefault-chunk-pages+)
                     (within-one-chunk-p start (* pages binstore::+page-bytes+)))
                request)
    (unless (fake-kernel-mincore-refuses fake)
      (multiple-value-bind (bits index) (fake-chunk-pages fake start)
        (count 0 bits :start index :end (+ index pages))))))

(defun fake-populate (fake start bytes)
  (let ((request (list :populate start bytes)))
    (push request (fake-kernel-requests fake))
    (fake-check (within-one-chunk-p start bytes) request)
    (let ((errno (fake-kernel-populate-errno fake)))
      (when (= errno 0)
        (fake-map fake start (floor bytes binstore::+page-bytes+)))
      errno)))

(defun fake-collapse (fake start bytes)
  (let ((request (list :collapse start bytes)))
    (push request (fake-kernel-requests fake))
    (fake-check (and (zerop (mod start binstore::+huge-page-bytes+))
                     (= bytes binstore::+huge-page-bytes+)
                     ;; a collapse needs a page table: its first page mapped
                     (= 1 (sbit (fake-chunk-pages fake start) 0)))
                request)
    (destructuring-bind (errno microseconds)
        (or (pop (fake-kernel-collapses fake)) (fake-kernel-collapse-default fake))
      (incf (fake-kernel-now fake) microseconds)
      (when (= errno 0)
        (fake-map fake start binstore::+prefault-chunk-pages+)
        (push start (fake-kernel-huge fake)))
      errno)))

(defun fake-memory-kernel (fake)
  "A MEMORY-KERNEL whose calls FAKE answers."
  (binstore::make-memory-kernel
   :unmapped-pages (lambda (start pages) (fake-unmapped-pages fake start pages))
   :populate (lambda (start bytes) (fake-populate fake start bytes))
   :collapse (lambda (start bytes) (fake-collapse fake start bytes))
   :microseconds (lambda () (fake-kernel-now fake))))

(defun call-with-fake-kernel (fake function)
  "Call FUNCTION with FAKE as the kernel, *HUGE-PAGES* true, huge pages
known to work (no probe), POPULATE_WRITE too, and no pause in the
collapses; what PREFAULT keeps between calls is put back afterwards."
  (call-with-saved-prefault-state
   (lambda ()
     (setf binstore::**small-chunks-to-go** 0
           binstore::**next-huge-page-pause** binstore::+shortest-huge-page-pause+
           binstore::**huge-pages-work** t
           binstore::**populate-write-works** t)
     (let ((binstore::*memory-kernel* (fake-memory-kernel fake))
           (binstore:*huge-pages* t))
       (funcall function)))))

(defmacro with-fake-kernel ((var &rest options) &body body)
  "Run BODY with VAR a fresh FAKE-KERNEL made with OPTIONS, bound as the
kernel (CALL-WITH-FAKE-KERNEL)."
  `(let ((,var (make-fake-kernel ,@options)))
     (call-with-fake-kernel ,var (lambda () ,@body))))

(defun fake-requests (fake &key (kinds '(:mincore :populate :collapse)) (keep nil))
  "The requests made of FAKE since they were last taken, oldest first, of
the KINDS given, each as (KIND PAGE PAGES): the page number from
*FAKE-BASE* and the number of pages.  They are taken (forgotten) unless
KEEP."
  (prog1 (loop for (kind start size) in (reverse (fake-kernel-requests fake))
               when (member kind kinds)
                 collect (list kind
                               (/ (- start *fake-base*) binstore::+page-bytes+)
                               (if (eq kind :mincore) size (/ size binstore::+page-bytes+))))
    (unless keep (setf (fake-kernel-requests fake) '()))))

(defun fake-calls (fake)
  "The populate and collapse requests made of FAKE since last taken."
  (fake-requests fake :kinds '(:populate :collapse)))

(defun collapsed-chunks (requests)
  "The chunk numbers of the collapses among REQUESTS (from FAKE-REQUESTS)."
  (loop for (kind page) in requests
        when (eq kind :collapse) collect (/ page binstore::+prefault-chunk-pages+)))

(defun whole-chunks-populated (requests)
  "The chunk numbers populated whole (not a collapse's first page) among
REQUESTS (from FAKE-REQUESTS)."
  (loop for (kind page pages) in requests
        when (and (eq kind :populate) (= pages binstore::+prefault-chunk-pages+))
          collect (/ page binstore::+prefault-chunk-pages+)))

;;; PREFAULT in small pages

(test (prefault-maps-fresh-pages :fixture format-2-defaults)
  "With small pages only, PREFAULT looks at the whole pages of its range in
chunks that end at 2 MiB boundaries (one mincore each), and populates a
chunk when at least a quarter of its pages are not mapped: of a whole
chunk, 128 of 512; of a partial one, a quarter of its pages.  The partial
pages at unaligned ends are left out; a range under +PREFAULT-BYTES+ costs
no call at all."
  (let ((c binstore::+prefault-chunk-pages+)
        (chunk-bytes binstore::+huge-page-bytes+)
        (page-bytes binstore::+page-bytes+))
    (with-fake-kernel (fake)
      (let ((binstore:*huge-pages* nil))
        (fake-map fake (fake-page 0) 150)           ; 362 of 512 left
        (fake-map fake (fake-page (* 2 c)) 400)     ; 112 of 512 left
        (binstore::prefault (fake-page 0) (1- binstore::+prefault-bytes+))
        (is (null (fake-requests fake)) "a short range: no call")
        ;; the first chunk and the second, each unaligned at both ends
        ;; (their whole pages: 1 to c-2, c+1 to 2c-2), then the third
        (binstore::prefault (+ (fake-page 0) 5) (- chunk-bytes 10))
        (is (equal `((:mincore 1 ,(- c 2)) (:populate 1 ,(- c 2))) (fake-requests fake))
            "the whole pages but the first and last")
        (binstore::prefault (+ (fake-page c) 1) (- chunk-bytes 2))
        (is (equal `((:mincore ,(1+ c) ,(- c 2)) (:populate ,(1+ c) ,(- c 2))) (fake-requests fake)))
        (binstore::prefault (fake-page (* 2 c)) chunk-bytes)
        (is (equal `((:mincore ,(* 2 c) ,c)) (fake-requests fake))
            "fewer than a quarter unmapped: looked at, left to fault")
        ;; the thresholds, on whole chunks: 128 unmapped, 127
        (fake-map fake (fake-page (* 4 c)) 384)
        (fake-map fake (fake-page (* 5 c)) 385)
        (binstore::prefault (fake-page (* 4 c)) (* 2 chunk-bytes))
        (is (equal `((:mincore ,(* 4 c) ,c) (:populate ,(* 4 c) ,c) (:mincore ,(* 5 c) ,c))
                   (fake-requests fake))
            "a quarter unmapped: populated; one page less: not")
        ;; and on partial ones: 25 of 100 unmapped, 24 of 100
        (fake-map fake (fake-page (* 6 c)) 75)
        (fake-map fake (fake-page (* 7 c)) 76)
        (binstore::prefault (fake-page (* 6 c)) (* 100 page-bytes))
        (binstore::prefault (fake-page (* 7 c)) (* 100 page-bytes))
        (is (equal `((:mincore ,(* 6 c) 100) (:populate ,(* 6 c) 100) (:mincore ,(* 7 c) 100))
                   (fake-requests fake)))
        ;; a range over three chunks, from the middle of the first: the
        ;; pieces end at the boundaries
        (binstore::prefault (fake-page (+ (* 8 c) 100)) (* 1000 page-bytes))
        (is (equal `((:mincore ,(+ (* 8 c) 100) ,(- c 100)) (:populate ,(+ (* 8 c) 100) ,(- c 100))
                     (:mincore ,(* 9 c) ,c) (:populate ,(* 9 c) ,c)
                     (:mincore ,(* 10 c) 76) (:populate ,(* 10 c) 76))
                   (fake-requests fake)))
        ;; mincore refusing: nothing populated
        (setf (fake-kernel-mincore-refuses fake) t)
        (binstore::prefault (fake-page (* 11 c)) chunk-bytes)
        (is (equal `((:mincore ,(* 11 c) ,c)) (fake-requests fake)))
        (is (null (fake-kernel-huge fake)) "no collapse without huge pages")))))

(test (prefault-without-populate-write :fixture format-2-defaults)
  "A POPULATE refused as unknown (EINVAL: a kernel before 5.14) turns
prefaulting off at once: no more calls in this range nor in later ones.
Any other failure only leaves that chunk to fault in."
  (let ((c binstore::+prefault-chunk-pages+)
        (chunk-bytes binstore::+huge-page-bytes+))
    (with-fake-kernel (fake :populate-errno sb-posix:eagain)
      (let ((binstore:*huge-pages* nil))
        (binstore::prefault (fake-page 0) (* 3 chunk-bytes))
        (is (equal `((:mincore 0 ,c) (:populate 0 ,c) (:mincore ,c ,c) (:populate ,c ,c)
                     (:mincore ,(* 2 c) ,c) (:populate ,(* 2 c) ,c))
                   (fake-requests fake)))
        (is (eq t binstore::**populate-write-works**))))
    (with-fake-kernel (fake :populate-errno sb-posix:einval)
      (let ((binstore:*huge-pages* nil))
        (binstore::prefault (fake-page 0) (* 3 chunk-bytes))
        (is (equal `((:mincore 0 ,c) (:populate 0 ,c)) (fake-requests fake)))
        (is (null binstore::**populate-write-works**))
        (binstore::prefault (fake-page (* 4 c)) (* 3 chunk-bytes))
        (is (null (fake-requests fake)) "turned off: no call")))))

;;; A restore's vectors

(test (restore-maps-a-vector-s-pages-before-copying :fixture format-2-defaults)
  "A specialized vector of +PREFAULT-BYTES+ or more restored from memory,
its payload whole in the window (READ-SPECIALIZED-VECTOR's one-copy path),
has the whole pages of its payload mapped by PREFAULT, as one read through
the general path (READ-PAYLOAD) has: the runway ahead of the point need not
reach that far yet."
  (let* ((n 100000)
         (octets (binstore:store nil (make-array n :element-type '(unsigned-byte 8)
                                                   :initial-element 7))))
    (dolist (huge '(nil t))
      (with-fake-kernel (fake)
        (let ((binstore:*huge-pages* huge))
          ;; no collection between the restore and the address taken
          (sb-sys:without-gcing
            (let* ((v (binstore:restore octets))
                   (address (binstore::array-data-address v))
                   (from (* binstore::+page-bytes+ (ceiling address binstore::+page-bytes+)))
                   (to (* binstore::+page-bytes+ (floor (+ address n) binstore::+page-bytes+))))
              (is (equal (list n 7) (list (length v) (aref v (1- n)))))
              (is (= 0 (loop for page from from below to by binstore::+page-bytes+
                             count (eql 1 (fake-unmapped-pages fake page 1))))
                  "every whole page of the payload populated (huge pages ~:[off~;on~])"
                  huge))))))))

;;; Huge pages

(test (prefault-makes-huge-pages-of-whole-unmapped-chunks :fixture format-2-defaults)
  "Where huge pages work, PREFAULT asks for a collapse of each whole aligned
2 MiB chunk of the range at most a quarter of whose pages are mapped, after
populating its first page; the other chunks, and the range's partial ends,
it populates in small pages.  A range shorter than 2 MiB, or not covering
an aligned chunk whole, gets no collapse; nor any range with *HUGE-PAGES*
false or where the probe found no huge pages."
  (let ((c binstore::+prefault-chunk-pages+)
        (chunk-bytes binstore::+huge-page-bytes+)
        (page-bytes binstore::+page-bytes+))
    (with-fake-kernel (fake)
      (fake-map fake (+ (fake-page c) 12288) 1)     ; chunk 1 has a page
      (fake-map fake (fake-page (* 2 c)) 200)       ; chunk 2 more than a quarter
      ;; from 3 pages below chunk 1 to 5 pages into chunk 3
      (binstore::prefault (fake-page (- c 3)) (+ (* 2 chunk-bytes) (* 8 page-bytes)))
      (is (equal `((:populate ,(- c 3) 3)
                   (:populate ,c 1) (:collapse ,c ,c)
                   (:populate ,(* 2 c) ,c)
                   (:populate ,(* 3 c) 5))
                 (fake-calls fake)))
      (is (equal (list (fake-page c)) (fake-kernel-huge fake)))
      ;; the threshold: 128 of 512 mapped, 129
      (fake-map fake (fake-page (+ (* 5 c) 300)) 128)
      (fake-map fake (fake-page (+ (* 6 c) 300)) 129)
      (binstore::prefault (fake-page (* 5 c)) (* 2 chunk-bytes))
      (is (equal `((:populate ,(* 5 c) 1) (:collapse ,(* 5 c) ,c) (:populate ,(* 6 c) ,c))
                 (fake-calls fake))
          "a quarter mapped: collapsed; a page more: small pages")
      ;; 2 MiB across a boundary; 2 MiB less a page within a chunk; a chunk
      (binstore::prefault (fake-page (1+ (* 8 c))) chunk-bytes)
      (binstore::prefault (fake-page (* 10 c)) (- chunk-bytes page-bytes))
      (binstore::prefault (fake-page (* 11 c)) chunk-bytes)
      (is (equal `((:populate ,(1+ (* 8 c)) ,(1- c)) (:populate ,(* 9 c) 1)
                   (:populate ,(* 10 c) ,(1- c))
                   (:populate ,(* 11 c) 1) (:collapse ,(* 11 c) ,c))
                 (fake-calls fake))
          "only a whole aligned chunk is collapsed"))
    (with-fake-kernel (fake)
      (let ((binstore:*huge-pages* nil))
        (binstore::prefault (fake-page 0) (* 2 chunk-bytes))
        (is (equal `((:populate 0 ,c) (:populate ,c ,c)) (fake-calls fake))
            "*HUGE-PAGES* false: small pages")))
    (with-fake-kernel (fake)
      (setf binstore::**huge-pages-work** nil)
      (binstore::prefault (fake-page 0) (* 2 chunk-bytes))
      (is (equal `((:populate 0 ,c) (:populate ,c ,c)) (fake-calls fake))
          "the probe found none: small pages"))
    ;; a collapse that fails leaves the chunk to small pages
    (with-fake-kernel (fake :collapses `((,sb-posix:eagain 30)))
      (binstore::prefault (fake-page 0) chunk-bytes)
      (is (equal `((:populate 0 1) (:collapse 0 ,c) (:populate 0 ,c)) (fake-calls fake)))
      (is (null (fake-kernel-huge fake))))))

(test (huge-pages-are-probed-once :fixture format-2-defaults)
  "HUGE-PAGES-P probes the kernel (a collapse on a mapping of its own) once,
when *HUGE-PAGES* is true and nothing is known yet, and keeps the answer:
no huge pages where the collapse fails; where it works, huge pages unless
the administrator has turned them off."
  (with-fake-kernel (fake :collapses `((,sb-posix:einval 10)))
    (setf binstore::**huge-pages-work** :unknown)
    (let ((binstore:*huge-pages* nil))
      (is (null (binstore::huge-pages-p)))
      (is (eq :unknown binstore::**huge-pages-work**) "not probed when turned off"))
    (is (null (binstore::huge-pages-p)))
    (is (null binstore::**huge-pages-work**))
    ;; one collapse asked, unless huge pages are set to never here
    (is (= (if (binstore::thp-never-p) 0 1)
           (count :collapse (fake-requests fake) :key #'first)))
    (is (null (binstore::huge-pages-p)))
    (is (null (fake-requests fake)) "the answer kept: not probed again"))
  (with-fake-kernel (fake)
    (setf binstore::**huge-pages-work** :unknown)
    (is (eq (not (binstore::thp-never-p)) (binstore::huge-pages-p)))))

;;; Pacing: slow and failed collapses

(test (slow-collapses-hold-huge-pages-off :fixture format-2-defaults)
  "TRY-HUGE-PAGE after a collapse slower than +SLOW-COLLAPSE-MICROSECONDS+
(by the kernel's clock) maps the next 2 chunks in small pages, after a
second slow one 4, and so on up to +LONGEST-HUGE-PAGE-PAUSE+; a fast one
brings the pause back to 2."
  (with-fake-kernel (fake :collapse-default '(0 2000))
    (flet ((try () (binstore::try-huge-page *fake-base*)))
      (is (eq t (try)))
      (is (= 2 binstore::**small-chunks-to-go**))
      (is (= 4 binstore::**next-huge-page-pause**))
      (is (equal '(nil nil t) (list (try) (try) (try))) "two skipped, then tried")
      (is (= 4 binstore::**small-chunks-to-go**))
      (is (= 8 binstore::**next-huge-page-pause**))
      (loop repeat 10 do (loop until (try)))
      (is (= binstore::+longest-huge-page-pause+ binstore::**next-huge-page-pause**))
      (is (= binstore::+longest-huge-page-pause+ binstore::**small-chunks-to-go**))
      (setf (fake-kernel-collapse-default fake) '(0 100))
      (loop until (try))
      (is (= 2 binstore::**next-huge-page-pause**))
      (is (= 0 binstore::**small-chunks-to-go**))
      (is (= 13 (count :collapse (fake-requests fake) :key #'first)))
      (is (= (+ (* 12 2000) 100) (fake-kernel-now fake))))))

(test (prefault-paces-collapses :fixture format-2-defaults)
  "Over many fresh chunks, PREFAULT asks for collapses at the chunks the
pacing leaves: after each slow one 2, 4, 8 ... 64 chunks in small pages,
64 at most; a collapse of exactly +SLOW-COLLAPSE-MICROSECONDS+ is not slow;
a failed one, however fast, paces as a slow one; a fast one brings the
pause back to 2."
  (let ((chunk-bytes binstore::+huge-page-bytes+))
    ;; every collapse slow
    (with-fake-kernel (fake :collapse-default (list 0 (1+ binstore::+slow-collapse-microseconds+)))
      (binstore::prefault (fake-page 0) (* 200 chunk-bytes))
      (let ((requests (fake-requests fake)))
        (is (equal '(0 3 8 17 34 67 132 197) (collapsed-chunks requests)))
        (is (equal (loop for i below 200
                         unless (member i '(0 3 8 17 34 67 132 197)) collect i)
                   (whole-chunks-populated requests))
            "the others in small pages"))
      (is (= 64 binstore::**next-huge-page-pause**))
      (is (= 62 binstore::**small-chunks-to-go**) "two of the 64 gone by the end"))
    ;; every collapse just fast enough
    (with-fake-kernel (fake :collapse-default (list 0 binstore::+slow-collapse-microseconds+))
      (binstore::prefault (fake-page 0) (* 5 chunk-bytes))
      (is (equal '(0 1 2 3 4) (collapsed-chunks (fake-requests fake))))
      (is (= 2 binstore::**next-huge-page-pause**))
      (is (= 0 binstore::**small-chunks-to-go**)))
    ;; slow, fast, slow, slow, fast, then fast ones
    (with-fake-kernel (fake :collapses '((0 5000) (0 100) (0 5000) (0 5000) (0 100)))
      (binstore::prefault (fake-page 0) (* 15 chunk-bytes))
      (is (equal '(0 3 4 7 12 13 14) (collapsed-chunks (fake-requests fake))))
      (is (= 2 binstore::**next-huge-page-pause**))
      (is (= 0 binstore::**small-chunks-to-go**)))
    ;; two fast failures, then fast successes
    (with-fake-kernel (fake :collapses `((,sb-posix:eagain 10) (,sb-posix:eagain 10)))
      (binstore::prefault (fake-page 0) (* 10 chunk-bytes))
      (let ((requests (fake-requests fake)))
        (is (equal '(0 3 8 9) (collapsed-chunks requests)))
        (is (equal '(0 1 2 3 4 5 6 7) (whole-chunks-populated requests))
            "the failed chunks and the paused ones in small pages"))
      (is (= 2 binstore::**next-huge-page-pause**)))
    ;; a first page that cannot be populated: no collapse asked, paced as a failure
    (with-fake-kernel (fake :populate-errno sb-posix:enomem)
      (binstore::prefault (fake-page 0) (* 4 chunk-bytes))
      (let ((requests (fake-requests fake)))
        (is (null (collapsed-chunks requests)))
        (is (equal `((:populate 0 1) (:populate 0 ,binstore::+prefault-chunk-pages+))
                   (subseq (remove :mincore requests :key #'first) 0 2))))
      ;; failures at chunks 0 and 3: 2 chunks paused, then 4
      (is (= 8 binstore::**next-huge-page-pause**))
      (is (= 4 binstore::**small-chunks-to-go**)))))

;;; The heap's runway (EXTEND-RUNWAY, HUGE-PAGE-WORTH-P, LOOK-AT-RUNWAY)

(test (runway-maps-ahead-of-the-point :fixture format-2-defaults)
  "EXTEND-RUNWAY asks for the whole pages from the point through the bytes
asked for and as much again as the reach, at most +RUNWAY-BYTES+ and never
past its limit; only the new part when the point lies in the runway before;
and nothing when the new part is shorter than +PREFAULT-BYTES+, though the
runway it returns reaches that far."
  (with-fake-kernel (fake)
    (let* ((binstore:*huge-pages* nil)
           (kb 1024)
           (base *fake-base*)
           (limit (fake-page 1024))                ; 4 MB on
           (short binstore::+prefault-bytes+))
      (flet ((runway (&rest arguments)
               (multiple-value-list (apply #'binstore::extend-runway
                                           (append arguments (list limit)))))
             (page (address) (floor (- address base) binstore::+page-bytes+)))
        ;; a short reach: nothing asked, the runway as long as the minimum
        (is (equal (list (+ base 100) (+ base 100 1000 short))
                   (runway (+ base 100) 1000 0 0 (* 10 kb))))
        (is (null (fake-requests fake)))
        ;; reaching 300 KB: the point's page, then 1000 + 300 KB
        (destructuring-bind (start end) (runway (+ base 100) 1000 0 0 (* 300 kb))
          (is (= start (+ base 100)))
          (is (= end (+ base 100 1000 (* 300 kb))))
          (is (equal `((:mincore 0 ,(page end)) (:populate 0 ,(page end))) (fake-requests fake))
              "every whole page up to the end, nothing past it")
          ;; further on in the runway: from its end only, and the reach
          ;; is capped at +RUNWAY-BYTES+
          (let ((point (+ start (* 200 kb))))
            (destructuring-bind (start2 end2) (runway point 5000 start end (* 100 1024 kb))
              (is (= start2 point))
              (is (= end2 (+ point 5000 binstore::+runway-bytes+)))
              (is (equal `((:mincore ,(page end) ,(- (page end2) (page end)))
                           (:populate ,(page end) ,(- (page end2) (page end))))
                         (fake-requests fake))
                  "from the page holding the old end")
              ;; within the runway with a short reach: it keeps its end
              (is (equal (list (+ point 10) end2)
                         (runway (+ point 10) 16 start2 end2 (* 40 kb))))
              (is (null (fake-requests fake)))
              ;; past the limit: stops at it
              (destructuring-bind (start3 end3)
                  (runway (- limit (* 100 kb)) 16 start2 end2 (* 100 1024 kb))
                (is (= start3 (- limit (* 100 kb))))
                (is (= end3 limit))
                (is (equal '((:mincore 999 25) (:populate 999 25)) (fake-requests fake)))))))))))

(test (runway-reaches-huge-page-boundaries :fixture format-2-defaults)
  "Where huge pages work, EXTEND-RUNWAY ends at a 2 MiB boundary when its
bytes and reach go +RUNWAY-BYTES+ into the chunk after the point's (or
further): the end of the point's chunk, or the boundary past its stretch,
so that PREFAULT meets the chunk after the point's whole and asks for its
collapse.  It stops at point, bytes and +RUNWAY-BYTES+ when they do not go
that far, at its limit always, and without huge pages."
  (let ((c binstore::+prefault-chunk-pages+)
        (chunk-bytes binstore::+huge-page-bytes+)
        (base *fake-base*)
        (kb 1024)
        (far (* 100 1024 1024)))
    (flet ((runway (limit &rest arguments)
             (multiple-value-list (apply #'binstore::extend-runway (append arguments (list limit))))))
      ;; a reach short of the boundary: as without huge pages
      (with-fake-kernel (fake)
        (is (equal (list (+ base 100) (+ base 100 1000 binstore::+runway-bytes+))
                   (runway (fake-page (* 4 c)) (+ base 100) 1000 0 0 (* 600 kb))))
        (is (equal '((:populate 0 128)) (fake-calls fake))))
      ;; a long reach: on to the boundary, and the point's chunk collapsed
      (with-fake-kernel (fake)
        (destructuring-bind (start end) (runway (fake-page (* 4 c)) (+ base 100) 1000 0 0 far)
          (is (= start (+ base 100)))
          (is (= end (+ base chunk-bytes)))
          (is (equal `((:populate 0 1) (:collapse 0 ,c)) (fake-calls fake)))
          ;; near that end: the next chunk, whole, as a huge page
          (let ((point (- end (* 10 kb))))
            (is (equal (list point (+ base (* 2 chunk-bytes)))
                       (runway (fake-page (* 4 c)) point 1000 start end far)))
            (is (equal `((:populate ,c 1) (:collapse ,c ,c)) (fake-calls fake))
                "from the old end: the chunk after it, whole"))))
      ;; from 10 KB below a boundary, a reach +RUNWAY-BYTES+ into the chunk
      ;; after it maps that chunk whole, as a huge page; a reach of less than
      ;; +PREFAULT-BYTES+, past the boundary or short of it, asks for nothing
      (with-fake-kernel (fake)
        (let ((point (- (+ base chunk-bytes) (* 10 kb))))
          (is (equal (list point (+ base (* 2 chunk-bytes)))
                     (runway (fake-page (* 2 c)) point 1000 0 0
                             (+ (* 10 kb) binstore::+runway-bytes+))))
          (is (equal `((:populate ,(- c 3) 3) (:populate ,c 1) (:collapse ,c ,c)) (fake-calls fake)))
          (dolist (reach (list (* 18 kb) (* 4 kb)))
            (is (equal (list point (+ point 1000 binstore::+prefault-bytes+))
                       (runway (fake-page (* 2 c)) point 1000 0 0 reach))
                "reach ~d" reach)
            (is (null (fake-requests fake)) "reach ~d" reach))))
      ;; the limit comes first: no boundary, no collapse
      (with-fake-kernel (fake)
        (let ((point (- (+ base chunk-bytes) (* 10 kb)))
              (limit (+ base chunk-bytes (* 1024 kb))))
          (is (equal (list point limit) (runway limit point 1000 0 0 far)))
          (is (equal `((:populate ,(- c 3) 3) (:populate ,c 256)) (fake-calls fake)))))
      ;; without huge pages, or where the probe found none: no boundary
      (dolist (how '(:turned-off :not-here))
        (with-fake-kernel (fake)
          (let ((binstore:*huge-pages* (eq how :not-here)))
            (when (eq how :not-here)
              (setf binstore::**huge-pages-work** nil))
            (is (equal (list (+ base 100) (+ base 100 1000 binstore::+runway-bytes+))
                       (runway (fake-page (* 4 c)) (+ base 100) 1000 0 0 far))
                "~a" how)
            (is (equal '((:populate 0 128)) (fake-calls fake)) "~a" how)))))))

(test (huge-page-worth-it-past-the-chunk-end :fixture format-2-defaults)
  "HUGE-PAGE-WORTH-P: where huge pages are to be had, whether the allocation
from the point goes +RUNWAY-BYTES+ or more into the 2 MiB chunk after the
point's; never without them."
  (let ((boundary (+ *fake-base* binstore::+huge-page-bytes+))
        (into binstore::+runway-bytes+))
    (with-fake-kernel (fake)
      (flet ((worth (point bytes) (binstore::huge-page-worth-p point (+ point bytes))))
        (is (not (worth (- boundary 10240) 10239)) "short of the boundary")
        (is (not (worth (- boundary 10240) (+ 10240 into -1))) "not far enough past it")
        (is (worth (- boundary 10240) (+ 10240 into)))
        (is (not (worth boundary (+ binstore::+huge-page-bytes+ into -1)))
            "at a boundary: the chunk above, then the next")
        (is (worth boundary (+ binstore::+huge-page-bytes+ into)))
        (let ((binstore:*huge-pages* nil))
          (is (not (worth (- boundary 10240) (+ 10240 into))))))
      (is (null (fake-requests fake)) "a question about numbers: no call"))))

(test (runways-end-at-huge-pages-only-where-worth-it :fixture format-2-defaults)
  "Where huge pages are to be had, a look whose reach goes +RUNWAY-BYTES+
past the next 2 MiB boundary extends the runway to a boundary, so that the
chunk after it comes whole; one whose reach stops short of the boundary, or
goes past it by less, extends it in small pages as far as the reach, as a
look does without huge pages.  (Real allocation points; the simulated
kernel says huge pages work, whatever this machine has.)"
  (let ((kb 1024)
        (need (* 2 binstore::+look-bytes+)) ; a look's own: until the look after next
        (keep (make-array 60)))
    (flet ((move-point (from to)
             (loop for i from from below to
                   do (setf (svref keep i) (make-array 1000 :element-type '(unsigned-byte 8))))))
      (with-fake-kernel (fake)
        (dolist (huge '(t nil))
          (let ((binstore:*huge-pages* huge))
            (dolist (past (list (* -8 kb) (* 8 kb) (+ binstore::+runway-bytes+ (* 8 kb))))
              ;; the case needs the point well short of the next boundary:
              ;; set up again, past it, until it is, at most 20 times
              (let ((found nil) (passed '()))
                (loop repeat 20
                      until found
                      do (let ((runway (binstore::make-runway)))
                           (binstore::look-at-runway runway nil (sb-ext:dynamic-space-size))
                           (move-point 0 30)
                           (let* ((point (binstore::allocation-point nil))
                                  (room (- (binstore::boundary-above point) point))
                                  ;; the reach ends PAST bytes after the boundary
                                  (reach (max 0 (+ (- room need) past))))
                             (binstore::look-at-runway runway nil reach)
                             (if (and (plusp point) (> room (* 40 kb))
                                      (= point (binstore::runway-point runway)))
                                 (setf found (list point reach (binstore::runway-end runway)))
                                 ;; past the boundary for the next try
                                 (push (make-array (+ room (* 8 kb)) :element-type '(unsigned-byte 8))
                                       passed)))))
                (is-true found "huge ~a, ~d past: the point was near a boundary in each of 20 tries"
                         huge past)
                (is (every #'vectorp passed))
                (when found
                  (destructuring-bind (point reach end) found
                    (if (and huge (>= past binstore::+runway-bytes+))
                        (is (= 0 (mod end binstore::+huge-page-bytes+))
                            "~d past the boundary: on to a boundary" past)
                        (is (= end (+ point need (max (min reach binstore::+runway-bytes+)
                                                      binstore::+prefault-bytes+)))
                            "huge ~a, ~d past the boundary: as far as the reach" huge past)))))))))
      (is (every #'vectorp (subseq keep 0 30))))))
