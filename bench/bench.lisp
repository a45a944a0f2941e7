;;;; The binstore benchmark on the standard data sets.
;;;;
;;;; Run everything (all data sets x modes none, refs, lists):
;;;;   make bench
;;;; Run a subset (space-separated names; empty means all):
;;;;   make bench DATASETS="tiny-integers people" MODES="refs"
;;;; or from a REPL with binstore loaded:
;;;;   (asdf:load-system "binstore/bench")
;;;;   (binstore-bench:main :datasets '("people") :modes '("refs" "lists"))
;;;;
;;;; For each data set x mode it measures, each as the minimum of 5 runs, every
;;;; run after a full GC: the output size, (store nil data), store into a
;;;; preallocated vector with a fill pointer (allocation not timed), (restore
;;;; vec), the bytes consed by one restore (after a first one: binstore
;;;; keeps its working vectors between calls); and, once per data set, the Lisp
;;;; printer/reader as a baseline (print readably with :circle t, read back);
;;;; and per data set x mode two references: memcpy (REPLACE between octet
;;;; vectors of the output's size) and the allocation floor (fresh pages of
;;;; as many bytes as a restore conses).  Very short operations are repeated
;;;; within a run (the run's time divided by the repetitions) so the clock's
;;;; resolution does not matter.  The runs of a data set's modes, operations
;;;; and references are interleaved, in rounds that run each once in turn,
;;;; so that a slower phase of the machine falls on all of them alike and
;;;; the ratios between them hold.
;;;; Each round trip is checked once (a wrong one is marked WRONG); a data
;;;; set x mode taking over *CELL-TIMEOUT* seconds is marked TIMEOUT.  The
;;;; best peer figures and targets (bench/peers.lisp) are compared with.
;;;; Results go to stdout and to bench/results/latest.md and latest.tsv, and
;;;; a plot of the refs-mode throughput to bench/results/throughput.png
;;;; (needs gnuplot; skipped with a note without it).  Progress goes to
;;;; *error-output*.  A full run takes about 3-4 minutes on 2 cores.

(in-package #:binstore-bench)

(defparameter *runs* 5
  "Runs per measurement; the minimum is reported.")

(defparameter *min-run-seconds* 0.005d0
  "Operations faster than this are repeated within a run to reach it.")

(defparameter *measure-budget* 10
  "Seconds after which a measurement stops adding runs (at least one is done).")

(defparameter *cell-timeout* 90
  "Seconds after which one data set x mode is abandoned (marked TIMEOUT).")

(defparameter *baseline-runs* 2
  "Runs of the printer/reader baseline; the minimum is reported.")

(defparameter *baseline-single-run-seconds* 3
  "A printer or reader run longer than this is not repeated.")

(defparameter *baseline-timeout* 60
  "Seconds after which one data set's printer/reader baseline is abandoned.")

(defparameter *baseline-total-budget* 240
  "Seconds of printer/reader baseline per benchmark; later sets get n/a.")

;;; Clock and measurement.

(defconstant +clock-monotonic+ 1
  "Linux's CLOCK_MONOTONIC.  GET-INTERNAL-REAL-TIME is not used: in this SBCL
it reads the coarse clock, which only advances every few milliseconds.")

(defun now ()
  "Nanoseconds on the monotonic clock."
  (multiple-value-bind (seconds nanoseconds) (sb-unix::clock-gettime +clock-monotonic+)
    (+ (* seconds 1000000000) nanoseconds)))

(defun seconds-since (start)
  (/ (- (now) start) 1d9))

(defun full-gc () (sb-ext:gc :full t))

(defun time-reps (fn reps)
  "Seconds per call of FN, timing REPS calls after a full GC."
  (full-gc)
  (let ((start (now)))
    (dotimes (i reps) (funcall fn))
    (/ (seconds-since start) reps)))

(defstruct (timer (:constructor %make-timer (fn reps best)))
  "Runs of one operation: FN called REPS times a run, each run after a full
GC; BEST is the fewest seconds a call took in a run, DONE the runs made."
  fn reps best (done 1))

(defun make-timer (fn)
  "A timer for FN, calibrated: the calls per run grow (at most tenfold a
step, so a clock that reads 0 cannot make them explode) until a run lasts
*MIN-RUN-SECONDS*; the run made with the final count is its first."
  (let ((reps 1))
    (loop for seconds = (time-reps fn reps)
          do (when (or (>= (* seconds reps) *min-run-seconds*) (>= reps 1000000))
               (return (%make-timer fn reps seconds)))
             (setf reps (* reps (min 10 (ceiling *min-run-seconds*
                                                 (max (* seconds reps) 1d-9))))))))

(defun run-timer (timer)
  "One more run of TIMER."
  (setf (timer-best timer) (min (timer-best timer) (time-reps (timer-fn timer) (timer-reps timer))))
  (incf (timer-done timer)))

(defun measure (fn &key (runs *runs*) (budget *measure-budget*))
  "Minimum over RUNS runs of the seconds one call of FN takes.  Returns the
seconds, the number of runs and the calls per run."
  (let ((start (now))
        (timer (make-timer fn)))
    (loop while (and (< (timer-done timer) runs) (< (seconds-since start) budget))
          do (run-timer timer))
    (values (timer-best timer) (timer-done timer) (timer-reps timer))))

(defun run-rounds (timers &key (runs *runs*) (budget *measure-budget*))
  "Bring each of TIMERS (calibrated, one run made) to RUNS runs, in rounds
that run each once in turn, for as long as BUDGET seconds per timer allow:
the modes of a data set are then timed in the same minutes, so a slower
phase of the machine falls on all of them, and their ratios hold."
  (let ((start (now))
        (allowed (* budget (max 1 (length timers)))))
    (loop repeat (1- runs)
          while (< (seconds-since start) allowed)
          do (dolist (timer timers)
               (run-timer timer)))))

(defun bytes-consed-by (fn)
  "FN's value and the bytes one call of it conses.  The counter only moves
when an allocation region fills, so a call consing little is repeated until
several megabytes have been consed and the total is averaged."
  (full-gc)
  (let* ((before (sb-ext:get-bytes-consed))
         (value (funcall fn))
         (consed (- (sb-ext:get-bytes-consed) before)))
    (if (>= consed (* 8 1024 1024))
        (values value consed)
        (let ((reps (min 1000 (ceiling (* 8 1024 1024) (max consed 8192)))))
          (full-gc)
          (let ((before (sb-ext:get-bytes-consed)))
            (dotimes (i reps) (funcall fn))
            (values value (round (- (sb-ext:get-bytes-consed) before) reps)))))))

(defun progress (format &rest args)
  (apply #'format *error-output* format args)
  (force-output *error-output*))

;;; memcpy reference.

(defun copy-octets (to from)
  (declare (type (simple-array (unsigned-byte 8) (*)) to from)
           (optimize speed))
  (replace to from))

(defun memcpy-timer (size)
  "A timer copying SIZE bytes between two octet vectors with REPLACE."
  (let ((from (make-array size :element-type '(unsigned-byte 8) :initial-element 7))
        (to (make-array size :element-type '(unsigned-byte 8) :initial-element 0)))
    (make-timer (lambda () (copy-octets to from)))))

(defun touch-fresh-memory (bytes)
  "Allocate BYTES of octet vectors and write one byte in every 4 KiB page:
the cost of fresh memory itself (after a full GC the kernel faults every page
in again), which any restore allocating BYTES pays whatever it does."
  (let ((kept '()))
    (loop while (> bytes 0)
          do (let* ((n (min bytes (* 1024 1024)))
                    (v (make-array n :element-type '(unsigned-byte 8))))
               (loop for i of-type fixnum from 0 below n by 4096
                     do (setf (aref v i) 1))
               (push v kept)
               (decf bytes n)))
    kept))

(defun alloc-floor-timer (bytes)
  "A timer of TOUCH-FRESH-MEMORY for BYTES."
  (make-timer (lambda () (touch-fresh-memory (max 1 (round bytes))))))

(defun element-bits (array)
  "Bits per element of ARRAY's data as laid out in memory."
  (let ((type (array-element-type array)))
    (cond ((eq type 'bit) 1)
          ((eq type 'single-float) 32)
          ((member type '(double-float fixnum)) 64)
          ((equal type '(complex single-float)) 64)
          ((equal type '(complex double-float)) 128)
          ((and (consp type) (member (first type) '(unsigned-byte signed-byte)))
           (second type))
          (t 64))))

(defun array-payload-bytes (array)
  "Raw element bytes of ARRAY."
  (ceiling (* (array-total-size array) (element-bits array)) 8))

(defun payload-bytes (data)
  "Raw element bytes of the arrays making up a specialized-array data set."
  (let ((total 0))
    (map nil (lambda (array) (incf total (array-payload-bytes array))) data)
    total))

;;; Printer/reader baseline.

(defun call-with-io-syntax (fn)
  (with-standard-io-syntax
    (let ((*package* (find-package '#:binstore-bench))
          (*read-eval* nil))
      (funcall fn))))

(defun print-readably (data)
  (call-with-io-syntax
   (lambda ()
     (with-output-to-string (s)
       (write data :stream s :readably t :circle t)))))

(defun read-back (text)
  (call-with-io-syntax (lambda () (read-from-string text))))

(defstruct baseline
  "Printer/reader figures for one data set (mode-independent)."
  print-s read-s note)

(defvar *baseline-spent* 0
  "Seconds spent on printer/reader baselines in this benchmark.")

(defun time-baseline-op (fn)
  "Minimum seconds of up to *BASELINE-RUNS* calls of FN and the last value."
  (let ((best most-positive-double-float) (value nil))
    (dotimes (i *baseline-runs*)
      (full-gc)
      (let ((start (now)))
        (setf value (funcall fn))
        (let ((s (seconds-since start)))
          (setf best (min best s))
          (when (> s *baseline-single-run-seconds*) (return)))))
    (values best value)))

(defun measure-baseline (data)
  "Time printing DATA readably and reading it back; n/a with a reason when
that is impossible, wrong, or over the time allowances."
  (when (> *baseline-spent* *baseline-total-budget*)
    (return-from measure-baseline (make-baseline :note "n/a (time cap)")))
  (let ((start (now)))
    (unwind-protect
         (handler-case
             (sb-ext:with-timeout *baseline-timeout*
               (multiple-value-bind (print-s text)
                   (time-baseline-op (lambda () (print-readably data)))
                 (multiple-value-bind (read-s back)
                     (time-baseline-op (lambda () (read-back text)))
                   ;; The printer shares conses, strings and the like, not numbers.
                   (let ((problem (check-roundtrip data back :track-conses t)))
                     (make-baseline :print-s print-s :read-s read-s
                                    :note (and problem "n/a (reads back wrong)"))))))
           (print-not-readable ()
             (make-baseline :note "n/a (not printable readably)"))
           (reader-error ()
             (make-baseline :note "n/a (not readable)"))
           (sb-ext:timeout ()
             (make-baseline :note "n/a (timeout)"))
           (serious-condition (c)
             (make-baseline :note (format nil "n/a (~A)" (type-of c)))))
      (incf *baseline-spent* (seconds-since start)))))

;;; One data set x mode.

(defstruct row
  "Figures for one data set in one mode; times in seconds, NIL if unknown."
  dataset mode objects bytes store into restore consed
  runs problem notes memcpy floor payload baseline)

(defun add-note (row format &rest args)
  (setf (row-notes row)
        (append (row-notes row) (list (apply #'format nil format args)))))

(defun make-output-buffer (size)
  (make-array size :element-type '(unsigned-byte 8) :fill-pointer 0))

(defun store-into-timer (row data args vec)
  "A timer storing into a preallocated vector; check it gives VEC's bytes."
  (let* ((bytes (length vec))
         (buffer (make-output-buffer (+ bytes 4096))))
    ;; Room for the whole output is given; should the store still want more
    ;; (a core bug), note it and retry with more room.
    (loop repeat 4
          until (handler-case (progn (apply #'binstore:store buffer data args) t)
                  (binstore:out-of-space ()
                    (add-note row "store-into: OUT-OF-SPACE with ~D bytes of room for ~D"
                              (array-dimension buffer 0) bytes)
                    (setf buffer (make-output-buffer (* 2 (array-dimension buffer 0))))
                    nil)))
    (unless (and (= (fill-pointer buffer) bytes)
                 (not (mismatch buffer vec)))
      (add-note row "store-into output differs from store's (~D vs ~D bytes)"
                (fill-pointer buffer) bytes))
    (make-timer (lambda ()
                  (setf (fill-pointer buffer) 0)
                  (apply #'binstore:store buffer data args)))))

(defun add-problem (row format &rest args)
  "Record a problem (text starting WRONG, ERROR or TIMEOUT) for ROW."
  (let ((text (apply #'format nil format args)))
    (setf (row-problem row)
          (if (row-problem row) (format nil "~A; ~A" (row-problem row) text) text))))

(defstruct (cell (:constructor make-cell (row)))
  "A data set x mode being measured: its ROW, and the timers of its store,
store-into and restore once made (NIL where a problem stopped it), and
those of the references measured beside them: memcpy of as many bytes as
it stores, and the allocation floor of what its restore conses."
  row store into restore memcpy floor)

(defun prepare-cell (dataset mode data baseline)
  "Check DATA (the data set named DATASET) in MODE and make its timers, each
with one run; returns a CELL.  A cell taking longer than *CELL-TIMEOUT*
seconds is abandoned, so a pathologically slow core still lets the
benchmark finish."
  (let* ((args (mode-store-args mode))
         (row (make-row :dataset dataset :mode mode :objects (object-count data)
                        :baseline baseline))
         (cell (make-cell row))
         (phase "store"))
    (handler-case
        (sb-ext:with-timeout *cell-timeout*
         (let ((vec (apply #'binstore:store nil data args)))
           (setf (row-bytes row) (length vec))
           (setf (cell-store cell) (make-timer (lambda () (apply #'binstore:store nil data args))))
           (setf phase "check")
           ;; one restore first, so the count is of a steady state: the
           ;; working vectors binstore keeps are not counted again
           (binstore:restore vec)
           (multiple-value-bind (restored consed)
               (bytes-consed-by (lambda () (binstore:restore vec)))
             (setf (row-consed row) consed)
             (let ((problem (check-roundtrip data restored
                                             :track (getf args :track-references)
                                             :track-conses (getf args :support-shared-list-structures))))
               (when problem
                 (add-problem row "WRONG: ~A" problem))))
           (setf phase "store-into")
           (setf (cell-into cell) (store-into-timer row data args vec))
           (setf phase "restore")
           (setf (cell-restore cell) (make-timer (lambda () (binstore:restore vec))))
           (unless (row-problem row)
             (setf (cell-memcpy cell) (memcpy-timer (row-bytes row))
                   (cell-floor cell) (alloc-floor-timer (row-consed row))))))
      (sb-ext:timeout ()
        (add-problem row "TIMEOUT: cell abandoned after ~D s (in ~A)" *cell-timeout* phase))
      (serious-condition (c)
        (add-problem row "ERROR: ~A signalled ~A: ~A" phase (type-of c)
                     (remove #\Newline (princ-to-string c)))))
    cell))

(defun cell-timers (cell)
  "The timers of CELL, to be run in rounds together: the references too,
so that a slower phase of the machine falls on them as on binstore."
  (remove nil (list (cell-store cell) (cell-into cell) (cell-restore cell)
                    (cell-memcpy cell) (cell-floor cell))))

(defun finish-cell (cell data)
  "Fill CELL's row from its timers; returns the row."
  (let ((row (cell-row cell)))
    (flet ((best (timer) (and timer (timer-best timer))))
      (setf (row-store row) (best (cell-store cell))
            (row-into row) (best (cell-into cell))
            (row-restore row) (best (cell-restore cell))
            (row-runs row) (and (cell-store cell) (timer-done (cell-store cell)))))
    (when (cell-memcpy cell)
      (setf (row-memcpy row) (timer-best (cell-memcpy cell))
            (row-floor row) (timer-best (cell-floor cell)))
      (when (dataset-option (row-dataset row) :specialized)
        (setf (row-payload row) (payload-bytes data))))
    row))

(defun run-dataset (dataset modes data baseline)
  "Measure DATA (the data set named DATASET) in each of MODES: each cell is
prepared (checked, its timers calibrated), then every timer of every mode
runs in rounds (RUN-ROUNDS); returns the rows."
  (let ((cells (loop for mode in modes
                     collect (let ((t0 (now)))
                               (prog1 (prepare-cell dataset mode data baseline)
                                 (progress "    ~5A checked (~,1F s)~%" mode (seconds-since t0)))))))
    (run-rounds (mapcan #'cell-timers cells))
    (mapcar (lambda (cell) (finish-cell cell data)) cells)))

;;; Derived figures.

(defun ms (seconds) (and seconds (* 1000 seconds)))

(defun per-second (amount seconds)
  (and amount seconds (plusp seconds) (/ amount seconds)))

(defun mb/s (row seconds) (let ((r (per-second (row-bytes row) seconds))) (and r (/ r 1d6))))

(defun memcpy-gb/s (row) (let ((r (per-second (row-bytes row) (row-memcpy row)))) (and r (/ r 1d9))))

(defun payload-percent (row seconds)
  "Payload bandwidth in SECONDS as a percentage of memcpy's bandwidth."
  (let ((payload (per-second (row-payload row) seconds))
        (copy (per-second (row-bytes row) (row-memcpy row))))
    (and payload copy (* 100 (/ payload copy)))))

(defun speedup (base ours)
  "How many times faster OURS is than BASE (both seconds)."
  (and base ours (plusp ours) (/ base ours)))

(defun peer-ratio (ours best)
  (and ours best (plusp best) (/ ours best)))

(defun target-checks (row)
  "List of (what ratio-to-best-peer meets-target-p) for ROW, or NIL when no
peer figures exist.  A byte count meets its target when it is at most the
smallest peer output: its exact count where PEER-EXACT-BYTES knows it, else
the peers' table's figure, rounded to 0.01 MB."
  (let ((peer (find-peer (row-dataset row) (row-mode row))))
    (when peer
      (flet ((timing (what seconds best target)
               (let ((ours (ms seconds)))
                 (list what (peer-ratio ours best) (and ours (<= ours target))))))
        (list (timing "store" (row-store row) (peer-store peer) (peer-target-store peer))
              (timing "store-into" (row-into row) (peer-into peer) (peer-target-into peer))
              (timing "restore" (row-restore row) (peer-restore peer) (peer-target-restore peer))
              (let ((bytes (row-bytes row))
                    (exact (peer-exact-bytes (row-dataset row) (row-mode row))))
                (if exact
                    (list "bytes" (peer-ratio bytes (float exact 1d0)) (and bytes (<= bytes exact)))
                    (let ((mb (and bytes (/ bytes 1d6))))
                      (list "bytes" (peer-ratio mb (peer-bytes-mb peer))
                            (and mb (<= mb (+ (peer-bytes-mb peer) 0.005d0))))))))))))

;;; Formatting.

(defun fmt (x &optional (digits 3))
  "X with about DIGITS significant digits, or - when unknown."
  (cond ((null x) "-")
        ((not (realp x)) (princ-to-string x))
        ((zerop x) "0")
        (t (let* ((magnitude (floor (log (abs x) 10)))
                  (decimals (max 0 (- digits 1 magnitude))))
             (if (zerop decimals)
                 (format nil "~D" (round x))
                 (format nil "~,vF" decimals x))))))

(defun fmt-ratio (ratio)
  (if ratio (format nil "~,2F" ratio) "-"))

(defun fmt-mb (bytes)
  (if bytes (format nil "~,2F MB" (/ bytes 1d6)) "-"))

(defun fmt-times (factor)
  "A speed factor as \"35x faster\" / \"2.0x slower\"."
  (cond ((null factor) "-")
        ((>= factor 1) (format nil "~Ax faster" (fmt factor 2)))
        (t (format nil "~Ax slower" (fmt (/ factor) 2)))))

(defun check-text (row)
  (cond ((row-problem row) (format nil "**~A**" (row-problem row)))
        ((row-notes row) (format nil "ok; ~{~A~^; ~}" (row-notes row)))
        (t "ok")))

(defun markdown-row (stream cells)
  (format stream "|~{ ~A |~}~%" cells))

(defun markdown-header (stream titles)
  (markdown-row stream titles)
  (markdown-row stream (mapcar (constantly "---") titles)))

(defun baseline-cells (row)
  (let ((b (row-baseline row)))
    (cond ((null b) (list "-" "-" "-" "-"))
          ((baseline-note b) (list (baseline-note b) "" "" ""))
          (t (list (fmt (ms (baseline-print-s b)))
                   (fmt (ms (baseline-read-s b)))
                   (fmt-times (speedup (baseline-print-s b) (row-store row)))
                   (fmt-times (speedup (baseline-read-s b) (row-restore row))))))))

(defun write-markdown (stream rows)
  (format stream "# binstore benchmark~%~%~A ~A on ~A, ~A.  Times are the minimum of ~D runs, ~
                  each after a full GC (operations under ~,1F ms are repeated within a run ~
                  and averaged), a data set's modes and operations interleaved in rounds; MB = 10^6 bytes; objects = top-level elements.  ~
                  binstore keeps its working tables between calls (see *scratch-limit*), ~
                  so runs after the first reuse them; restore consed counts one restore ~
                  in that steady state.~%"
          (lisp-implementation-type) (lisp-implementation-version)
          (machine-type) (multiple-value-bind (s m h d mo y) (get-decoded-time)
                           (declare (ignore s))
                           (format nil "~D-~2,'0D-~2,'0D ~2,'0D:~2,'0D" y mo d h m))
          *runs* (* 1000 *min-run-seconds*))
  (format stream "~%## binstore~%~%")
  (markdown-header stream '("data set" "mode" "bytes" "store ms" "store-into ms" "restore ms"
                            "restore consed B/obj" "store MB/s" "restore MB/s"
                            "store Mobj/s" "restore Mobj/s" "round trip"))
  (dolist (row rows)
    (markdown-row stream
                  (list (row-dataset row) (row-mode row) (fmt-mb (row-bytes row))
                        (fmt (ms (row-store row))) (fmt (ms (row-into row)))
                        (fmt (ms (row-restore row)))
                        (fmt (and (row-consed row) (/ (row-consed row) (max 1 (row-objects row)))))
                        (fmt (mb/s row (row-store row))) (fmt (mb/s row (row-restore row)))
                        (fmt (let ((r (per-second (row-objects row) (row-store row)))) (and r (/ r 1d6))))
                        (fmt (let ((r (per-second (row-objects row) (row-restore row)))) (and r (/ r 1d6))))
                        (check-text row))))
  (format stream "~%## Against the Lisp printer/reader and memcpy~%~%~
                  Baseline: `(write data :readably t :circle t)` to a string and `read-from-string` ~
                  (*read-eval* nil), minimum of up to ~D runs; the same figures serve every mode.  ~
                  memcpy: `replace` between octet vectors of the output's size.  Payload % = ~
                  bandwidth on the arrays' raw element bytes relative to memcpy (specialized-array sets); it ~
                  can exceed 100% as `replace` is compiled Lisp, not libc's memcpy.  ~
                  Alloc floor: allocating as many bytes as one restore conses, as octet ~
                  vectors, and touching each 4 KiB page, after a full GC: the page faults ~
                  of fresh memory in small pages (a restore mapping huge pages goes below it).~%~%"
          *baseline-runs*)
  (markdown-header stream '("data set" "mode" "print ms" "read ms" "store vs print"
                            "restore vs read" "memcpy GB/s" "store-into payload % memcpy"
                            "restore payload % memcpy" "alloc floor ms" "restore / floor"))
  (dolist (row rows)
    (markdown-row stream
                  (append (list (row-dataset row) (row-mode row))
                          (baseline-cells row)
                          (list (fmt (memcpy-gb/s row))
                                (fmt (payload-percent row (row-into row)))
                                (fmt (payload-percent row (row-restore row)))
                                (fmt (ms (row-floor row)))
                                (fmt (and (row-floor row) (row-restore row)
                                          (/ (row-restore row) (row-floor row))))))))
  (format stream "~%## Against the best peers~%~%~
                  Peer figures are embedded from the peers' measurements (another run on a similar ~
                  machine: absolute times are noisy).  Ratio = binstore / best peer; targets: times ~
                  <= 0.8 x best, bytes <= smallest.~%~%")
  (markdown-header stream '("data set" "mode" "best store / into / restore ms" "smallest"
                            "target ms" "store" "store-into" "restore" "bytes"))
  (let ((misses '()))
    (dolist (row rows)
      (let ((peer (find-peer (row-dataset row) (row-mode row)))
            (checks (target-checks row)))
        (when peer
          (markdown-row stream
                        (append (list (row-dataset row) (row-mode row)
                                      (format nil "~A / ~A / ~A" (fmt (peer-store peer))
                                              (fmt (peer-into peer)) (fmt (peer-restore peer)))
                                      (let ((exact (peer-exact-bytes (row-dataset row)
                                                                     (row-mode row))))
                                        (if exact
                                            (format nil "~,2F MB (~:D)" (peer-bytes-mb peer) exact)
                                            (format nil "~,2F MB" (peer-bytes-mb peer))))
                                      (format nil "~A / ~A / ~A" (fmt (peer-target-store peer))
                                              (fmt (peer-target-into peer))
                                              (fmt (peer-target-restore peer))))
                                (loop for (what ratio ok) in checks
                                      ;; bytes to four places: a few bytes in ten
                                      ;; million still show
                                      collect (format nil "~A ~A"
                                                      (if (and ratio (string= what "bytes"))
                                                          (format nil "~,4F" ratio)
                                                          (fmt-ratio ratio))
                                                      (if ok "ok" "**MISS**")))))
          (let ((missed (loop for (what ratio ok) in checks
                              unless ok collect (format nil "~A ~Ax" what (fmt-ratio ratio)))))
            (when missed
              (push (format nil "~A/~A: ~{~A~^, ~}" (row-dataset row) (row-mode row) missed)
                    misses))))))
    (format stream "~%## Targets missed~%~%Ratio to the best peer, for the rows over their ~
                    target in the peers' table: 0.80x the best peer for times, as that ~
                    table rounds it, and the smallest output for bytes (exact where the ~
                    data set's shape fixes it, worked out from the peer's format).~%~%")
    (if misses
        (format stream "~{- ~A~%~}" (reverse misses))
        (format stream "None.~%")))
  (let ((wrong (remove-if-not #'row-problem rows)))
    (format stream "~%## Round trips and failures~%~%~:[All ~D round trips checked ok.~;~:*~{- **~A**~%~}~]~%"
            (mapcar (lambda (row) (format nil "~A/~A: ~A" (row-dataset row) (row-mode row)
                                          (row-problem row)))
                    wrong)
            (length rows))))

(defun write-summary (stream rows)
  "The README's table of ROWS: one line per data set and mode, with the
ratios to the best peer (a miss in bold) and to the printer and reader."
  (markdown-header stream '("data set" "mode" "MB" "store ms" "store-into ms" "restore ms"
                            "restore consed B/obj"
                            "vs best peer: store / into / restore / bytes"
                            "faster than print / read"))
  (dolist (row rows)
    (let ((baseline (row-baseline row)))
      (flet ((ratio (check)
               (destructuring-bind (what ratio ok) check
                 (let ((text (cond ((null ratio) "-")
                                   ((string= what "bytes") (format nil "~,4F" ratio))
                                   (t (fmt-ratio ratio)))))
                   (if ok text (format nil "**~A**" text)))))
             (times (base ours)
               (let ((factor (and baseline (not (baseline-note baseline)) (speedup base ours))))
                 (if factor (format nil "~Ax" (fmt factor 2)) "-"))))
        (markdown-row stream
                      (list (row-dataset row) (row-mode row)
                            (if (row-bytes row) (format nil "~,2F" (/ (row-bytes row) 1d6)) "-")
                            (fmt (ms (row-store row))) (fmt (ms (row-into row)))
                            (fmt (ms (row-restore row)))
                            (fmt (and (row-consed row) (/ (row-consed row) (max 1 (row-objects row)))))
                            (let ((checks (target-checks row)))
                              (if checks (format nil "~{~A~^ / ~}" (mapcar #'ratio checks)) "-"))
                            (format nil "~A / ~A"
                                    (times (and baseline (baseline-print-s baseline)) (row-store row))
                                    (times (and baseline (baseline-read-s baseline)) (row-restore row)))))))))

(defun tsv-value (x)
  (cond ((null x) "")
        ((floatp x) (format nil "~,6F" x))
        (t (substitute #\Space #\Tab (princ-to-string x)))))

(defun write-tsv (stream rows)
  (let ((columns
          `(("dataset" ,#'row-dataset) ("mode" ,#'row-mode) ("objects" ,#'row-objects)
            ("bytes" ,#'row-bytes)
            ("store_ms" ,(lambda (r) (ms (row-store r))))
            ("store_into_ms" ,(lambda (r) (ms (row-into r))))
            ("restore_ms" ,(lambda (r) (ms (row-restore r))))
            ("restore_consed_bytes" ,#'row-consed)
            ("store_mb_s" ,(lambda (r) (mb/s r (row-store r))))
            ("restore_mb_s" ,(lambda (r) (mb/s r (row-restore r))))
            ("store_obj_s" ,(lambda (r) (per-second (row-objects r) (row-store r))))
            ("restore_obj_s" ,(lambda (r) (per-second (row-objects r) (row-restore r))))
            ("runs" ,#'row-runs)
            ("roundtrip" ,(lambda (r) (if (row-problem r)
                                          (subseq (row-problem r) 0 (position #\: (row-problem r)))
                                          "ok")))
            ("problem" ,(lambda (r) (or (row-problem r) (format nil "~{~A~^; ~}" (row-notes r)))))
            ("print_ms" ,(lambda (r) (let ((b (row-baseline r))) (and b (ms (baseline-print-s b))))))
            ("read_ms" ,(lambda (r) (let ((b (row-baseline r))) (and b (ms (baseline-read-s b))))))
            ("baseline_note" ,(lambda (r) (let ((b (row-baseline r))) (and b (baseline-note b)))))
            ("memcpy_gb_s" ,#'memcpy-gb/s)
            ("payload_bytes" ,#'row-payload)
            ("store_into_payload_pct_memcpy" ,(lambda (r) (payload-percent r (row-into r))))
            ("restore_payload_pct_memcpy" ,(lambda (r) (payload-percent r (row-restore r))))
            ("alloc_floor_ms" ,(lambda (r) (ms (row-floor r))))
            ,@(loop for what in '("store" "store-into" "restore" "bytes")
                    for name = (substitute #\_ #\- what)
                    collect (list (format nil "~A_ratio_best_peer" name)
                                  (let ((what what))
                                    (lambda (r) (second (assoc what (target-checks r)
                                                               :test #'string=))))))
            ,@(loop for what in '("store" "store-into" "restore" "bytes")
                    for name = (substitute #\_ #\- what)
                    collect (list (format nil "~A_meets_target" name)
                                  (let ((what what))
                                    (lambda (r)
                                      (let ((check (assoc what (target-checks r) :test #'string=)))
                                        (cond ((null check) nil)
                                              ((third check) "yes")
                                              (t "no"))))))))))
    (format stream "~{~A~^	~}~%" (mapcar #'first columns))
    (dolist (row rows)
      (format stream "~{~A~^	~}~%"
              (mapcar (lambda (column) (tsv-value (funcall (second column) row))) columns)))))

;;; Plot.

(defun gnuplot-terminal ()
  "pngcairo when this gnuplot has it, else png; NIL when gnuplot is missing."
  (flet ((works-p (terminal)
           (handler-case
               (zerop (nth-value 2 (uiop:run-program
                                    (list "gnuplot" "-e" (format nil "set terminal ~A" terminal))
                                    :ignore-error-status t :output nil :error-output nil)))
             (error () nil))))
    (cond ((works-p "pngcairo") "pngcairo")
          ((works-p "png") "png"))))

(defun write-plot (directory rows)
  "Grouped bars of store and restore MB/s per data set for the refs mode
(else the first mode run), log scale, into DIRECTORY/throughput.png."
  (let* ((mode (if (find "refs" rows :key #'row-mode :test #'string=)
                   "refs"
                   (row-mode (first rows))))
         (rows (remove-if-not (lambda (row)
                                (and (string= (row-mode row) mode)
                                     (mb/s row (row-store row)) (mb/s row (row-restore row))))
                              rows))
         (data (merge-pathnames "throughput.dat" directory))
         (script (merge-pathnames "throughput.gp" directory))
         (png (merge-pathnames "throughput.png" directory))
         (terminal (gnuplot-terminal)))
    (cond ((null rows)
           (progress "~&No throughput figures to plot.~%"))
          ((null terminal)
           (progress "~&gnuplot not found (Debian package gnuplot-nox): skipping ~A~%" png))
          (t
           (with-open-file (s data :direction :output :if-exists :supersede)
             (format s "# data set	store MB/s	restore MB/s (mode ~A)~%" mode)
             (dolist (row rows)
               (format s "~A	~,3F	~,3F~%" (row-dataset row)
                       (mb/s row (row-store row)) (mb/s row (row-restore row)))))
           (with-open-file (s script :direction :output :if-exists :supersede)
             (format s "# Written by binstore-bench; run from any directory.~%~
                        set terminal ~A size 1400,700~%~
                        set output '~A'~%~
                        set title 'binstore throughput, mode ~A (~A ~A)'~%~
                        set datafile separator '\\t'~%~
                        set style data histograms~%~
                        set style histogram clustered gap 1~%~
                        set style fill solid 0.8 border -1~%~
                        set boxwidth 0.9~%~
                        set logscale y~%~
                        set yrange [1:*]~%~
                        set ylabel 'MB/s (log scale)'~%~
                        set grid ytics mytics~%~
                        set xtics rotate by 45 right nomirror~%~
                        set key top right~%~
                        set bmargin 9~%~
                        plot '~A' using 2:xtic(1) title 'store', '' using 3 title 'restore'~%"
                     terminal (namestring png) mode
                     (lisp-implementation-type) (lisp-implementation-version)
                     (namestring data)))
           (multiple-value-bind (out err status)
               (uiop:run-program (list "gnuplot" (namestring script))
                                 :ignore-error-status t :output :string :error-output :string)
             (declare (ignore out))
             (if (zerop status)
                 (progress "~&Wrote ~A~%" png)
                 (progress "~&gnuplot failed (~D): ~A~%" status err)))))))

;;; Entry point.

(defun select-names (requested all kind)
  "REQUESTED names (strings or symbols) in ALL's order; all when empty."
  (if (null requested)
      all
      (let ((requested (mapcar (lambda (x) (string-downcase (string x))) requested)))
        (dolist (name requested)
          (unless (member name all :test #'string=)
            (error "Unknown ~A ~S; known: ~{~A~^ ~}" kind name all)))
        (remove-if-not (lambda (name) (member name requested :test #'string=)) all))))

(defun results-directory ()
  (asdf:system-relative-pathname "binstore" "bench/results/"))

(defun main (&key datasets modes)
  "Benchmark binstore on DATASETS x MODES (lists of names; NIL or empty means
all: see DATASET-NAMES and MODE-NAMES), print a markdown table and write
bench/results/latest.md, latest.tsv and throughput.png.  Returns the rows."
  (let* ((datasets (select-names datasets (dataset-names) "data set"))
         (modes (select-names modes (mode-names) "mode"))
         (binstore:*require-header* nil)   ; the modes store no header (see *MODES*)
         (*baseline-spent* 0)
         (start (now))
         (rows '()))
    (loop for dataset in datasets
          for index from 1
          for dataset-modes = (remove-if-not (lambda (mode)
                                               (dataset-applies-to-mode-p dataset mode))
                                             modes)
          when dataset-modes
            do (progress "~&[~2D/~D] ~A: generating..." index (length datasets) dataset)
               (let* ((t0 (now))
                      (data (generate-dataset dataset)))
                 (progress " ~,2F s; print/read baseline..." (seconds-since t0))
                 (let* ((t1 (now))
                        (baseline (measure-baseline data)))
                   (progress " ~,2F s~%" (seconds-since t1))
                   (let ((t2 (now)))
                     (dolist (row (run-dataset dataset dataset-modes data baseline))
                       (push row rows)
                       (progress "    ~5A ~A, store ~A ms, into ~A ms, restore ~A ms: ~A~%"
                                 (row-mode row) (fmt-mb (row-bytes row)) (fmt (ms (row-store row)))
                                 (fmt (ms (row-into row))) (fmt (ms (row-restore row)))
                                 (check-text row)))
                     (progress "    (~,1F s)~%" (seconds-since t2))))))
    (setf rows (nreverse rows))
    (let ((directory (results-directory)))
      (ensure-directories-exist directory)
      (with-open-file (s (merge-pathnames "latest.md" directory)
                         :direction :output :if-exists :supersede :external-format :utf-8)
        (write-markdown s rows))
      (with-open-file (s (merge-pathnames "summary.md" directory)
                         :direction :output :if-exists :supersede :external-format :utf-8)
        (write-summary s rows))
      (with-open-file (s (merge-pathnames "latest.tsv" directory)
                         :direction :output :if-exists :supersede :external-format :utf-8)
        (write-tsv s rows))
      (write-markdown *standard-output* rows)
      (finish-output *standard-output*)
      (write-plot directory rows)
      (progress "~&Benchmark done in ~,1F s; results in ~A~%" (seconds-since start) directory))
    rows))
