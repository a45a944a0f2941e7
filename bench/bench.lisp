;;;; The binstore benchmark on the standard data sets, side by side with the
;;;; other Lisp serializers when their sources are at hand.
;;;;
;;;; Run everything (all data sets x modes none, refs, lists):
;;;;   make bench
;;;; Run a subset (space-separated names; empty means all):
;;;;   make bench DATASETS="tiny-integers people" MODES="refs"
;;;; Peers from elsewhere, or none:
;;;;   make bench PEERS=/path/to/peers-src      make bench PEERS=none
;;;; or from a REPL with binstore loaded:
;;;;   (asdf:load-system "binstore/bench")
;;;;   (binstore-bench:main :datasets '("people") :modes '("refs" "lists"))
;;;;
;;;; The headline figures are COLD: each operation is timed as one call after
;;;; (sb-ext:gc :full t), on the monotonic clock, and the minimum of *RUNS*
;;;; such runs is reported.  That is how the peers were measured, and here
;;;; the peers (cl-binary-store, cl-conspack, hyperluminal-mem, cl-store) are
;;;; timed in the same image, the same way, on the same data, when they are
;;;; found (PEER-DIRECTORY): every timer of a data set -- binstore's, each
;;;; peer's, the floors' -- runs once per round, in rounds, so a slower phase
;;;; of the machine falls on all of them alike.  Each round trip is checked;
;;;; a peer whose round trip is wrong, or that cannot store the data set in a
;;;; mode, is shown as such and takes no part in the best peer.  Without the
;;;; peers, the best peer figures transcribed in bench/peers.lisp are used,
;;;; labelled "transcribed".
;;;;
;;;; Beside each row, floors, also cold: for store and store-into, memcpy of
;;;; the output's size; for restore, fresh memory of as many bytes as one
;;;; restore conses (allocated and touched) plus memcpy of the output's size.
;;;;
;;;; Targets: store, store-into and restore at most 0.8 x the best peer of
;;;; this run (restore 0.6 x for people, structures, standard-objects); where
;;;; that is below the floor, at most 1.15 x the floor; bytes at most the
;;;; smallest peer output.
;;;;
;;;; WARM figures (binstore only: calls repeated within a run and averaged,
;;;; what this benchmark reported before) are kept in their own table and
;;;; columns, never compared with the cold peer figures.  The Lisp
;;;; printer/reader is a baseline per data set.
;;;;
;;;; Results go to stdout and to bench/results/latest.md and latest.tsv (and
;;;; summary.md, the README's table), a plot to bench/results/throughput.png
;;;; (needs gnuplot).  Progress goes to *error-output*.

(in-package #:binstore-bench)

(defparameter *transcribed-runs* 5
  "Cold runs per figure when binstore is compared with the figures of
bench/peers.lisp: those were taken as the minimum of 5, and a minimum over
more runs would favour binstore.")

(defparameter *side-by-side-runs* 9
  "Cold runs per figure when the peers are timed in the same run.  Single
cold calls of the same operation vary by up to 2x on this kind of machine
(fresh pages cost more in some phases: doc/PERFORMANCE.md, 2026-12-07), so
a minimum of 5 sometimes misses every fast call of one contestant; every
contestant and floor gets the same runs, in the same rounds.")

(defparameter *runs* *transcribed-runs*
  "Cold runs per figure (one call after a full GC each); the minimum is
reported.  MAIN sets it from its RUNS argument (make bench RUNS=n), else to
*SIDE-BY-SIDE-RUNS* or *TRANSCRIBED-RUNS* by how the peers are compared.")

(defparameter *warm-runs* 3
  "Runs of each warm measurement (calls repeated within a run); the minimum
is reported.")

(defparameter *min-run-seconds* 0.005d0
  "Warm: operations faster than this are repeated within a run to reach it.")

(defparameter *measure-budget* 10
  "Warm: seconds after which a measurement stops adding runs.")

(defparameter *cell-timeout* 90
  "Seconds after which binstore's preparation of one data set x mode is
abandoned (marked TIMEOUT).")

(defparameter *call-timeout* 60
  "Seconds one call of a peer may take before it is abandoned (timeout).")

(defparameter *slow-peer-seconds* 10
  "Seconds a slow peer (cl-store) may spend per data set, all its modes and
operations together; what is left undone is marked timeout.")

(defparameter *baseline-runs* 2
  "Runs of the printer/reader baseline; the minimum is reported.")

(defparameter *baseline-single-run-seconds* 3
  "A printer or reader run longer than this is not repeated.")

(defparameter *baseline-timeout* 60
  "Seconds after which one data set's printer/reader baseline is abandoned.")

(defparameter *baseline-total-budget* 120
  "Seconds of printer/reader baseline per benchmark; later sets get n/a.")

(defparameter *peer-factor* 0.8d0
  "Target: at most this times the best peer's time.")

(defparameter *object-restore-factor* 0.6d0
  "Target for the restores of *OBJECT-RESTORE-DATASETS*.")

(defparameter *object-restore-datasets* '("people" "structures" "standard-objects")
  "Data sets whose restore target is *OBJECT-RESTORE-FACTOR* x the best peer.")

(defparameter *floor-factor* 1.15d0
  "Where factor x best peer is below the floor, the target is this x the floor.")

;;; Clock and measurement.

(defconstant +clock-monotonic+ 1
  "Linux's CLOCK_MONOTONIC.  GET-INTERNAL-REAL-TIME is not used: in this SBCL
it reads the coarse clock, which only advances every 4 ms.")

(defun now ()
  "Nanoseconds on the monotonic clock."
  (multiple-value-bind (seconds nanoseconds) (sb-unix::clock-gettime +clock-monotonic+)
    (+ (* seconds 1000000000) nanoseconds)))

(defun seconds-since (start)
  (/ (- (now) start) 1d9))

(defun full-gc () (sb-ext:gc :full t))

(defun progress (format &rest args)
  (apply #'format *error-output* format args)
  (force-output *error-output*))

;;; Cold timers: one call after a full GC per run.

(defstruct (allowance (:constructor make-allowance (seconds)))
  "Seconds a slow peer may still spend on the current data set."
  seconds)

(defstruct (cold (:constructor make-cold (fn &key allowance)))
  "Cold runs of one operation: FN called once per run after a full GC.  BEST
is the fewest seconds of a run, RUNS the runs made; STATUS a string when it
stopped (\"timeout\", \"ERROR: ...\"); ALLOWANCE, when given, the time budget
it shares with the other operations of a slow peer."
  fn (best nil) (runs 0) (status nil) allowance)

(defun cold-limit (timer)
  "Seconds TIMER's next call may take."
  (let ((allowance (cold-allowance timer)))
    (if allowance
        (min *call-timeout* (allowance-seconds allowance))
        *call-timeout*)))

(defun timed-call (fn limit)
  "Seconds one call of FN takes, started right after a full GC, and its
value; abandoned after LIMIT seconds (signals SB-EXT:TIMEOUT).  The timer
of the time limit is set before the clock starts and cleared after it
stops."
  (full-gc)
  (let (seconds value)
    (sb-ext:with-timeout limit
      (let ((start (now)))
        (setf value (funcall fn))
        (setf seconds (seconds-since start))))
    (values seconds value)))

(defun record-run (timer seconds)
  (incf (cold-runs timer))
  (setf (cold-best timer) (if (cold-best timer) (min (cold-best timer) seconds) seconds))
  timer)

(defun run-cold (timer)
  "One more cold run of TIMER, unless it stopped or its allowance is spent
(then it keeps the runs it made; with none, its status becomes timeout)."
  (unless (cold-status timer)
    (let ((allowance (cold-allowance timer)))
      (if (and allowance (<= (allowance-seconds allowance) 0))
          (when (zerop (cold-runs timer))
            (setf (cold-status timer) "timeout"))
          (let ((limit (cold-limit timer)))
            (handler-case
                (let ((seconds (timed-call (cold-fn timer) limit)))
                  (when allowance (decf (allowance-seconds allowance) seconds))
                  (record-run timer seconds))
              (sb-ext:timeout ()
                (when allowance (decf (allowance-seconds allowance) limit))
                (when (zerop (cold-runs timer))
                  (setf (cold-status timer) (format nil "timeout (~,1F s)" limit))))
              (serious-condition (c)
                (setf (cold-status timer)
                      (format nil "ERROR: ~A" (condition-text c))))))))))

(defun condition-text (c)
  "C's type and report on one line, white space runs made one space."
  (let* ((report (handler-case (princ-to-string c)
                   (error () (string (type-of c)))))
         (text (with-output-to-string (out)
                 (let ((space nil))
                   (loop for char across report
                         do (if (member char '(#\Space #\Tab #\Newline #\Return))
                                (setf space t)
                                (progn (when space (write-char #\Space out) (setf space nil))
                                       (write-char char out))))))))
    (format nil "~A: ~A" (type-of c) (subseq text 0 (min 160 (length text))))))

(defun cold-seconds (timer)
  "TIMER's best seconds when it made a run, else NIL."
  (and timer (cold-best timer)))

;;; Warm timers: calls repeated within a run (kept for continuity; never
;;; compared with cold figures).  Also used by bench/fresh-memory.lisp.

(defun time-reps (fn reps)
  "Seconds per call of FN, timing REPS calls after a full GC."
  (full-gc)
  (let ((start (now)))
    (dotimes (i reps) (funcall fn))
    (/ (seconds-since start) reps)))

(defstruct (timer (:constructor %make-timer (fn reps best)))
  "Warm runs of one operation: FN called REPS times a run, each run after a
full GC; BEST is the fewest seconds a call took in a run, DONE the runs made."
  fn reps best (done 1))

(defun make-timer (fn)
  "A warm timer for FN, calibrated: the calls per run grow (at most tenfold
a step) until a run lasts *MIN-RUN-SECONDS*; the run made with the final
count is its first."
  (let ((reps 1))
    (loop for seconds = (time-reps fn reps)
          do (when (or (>= (* seconds reps) *min-run-seconds*) (>= reps 1000000))
               (return (%make-timer fn reps seconds)))
             (setf reps (* reps (min 10 (ceiling *min-run-seconds*
                                                 (max (* seconds reps) 1d-9))))))))

(defun run-timer (timer)
  "One more warm run of TIMER."
  (setf (timer-best timer) (min (timer-best timer) (time-reps (timer-fn timer) (timer-reps timer))))
  (incf (timer-done timer)))

(defun run-rounds (timers &key (runs *warm-runs*) (budget *measure-budget*))
  "Bring each of the warm TIMERS (one run made) to RUNS runs, in rounds, for
as long as BUDGET seconds per timer allow."
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

;;; Floors.

(defun copy-octets (to from)
  (declare (type (simple-array (unsigned-byte 8) (*)) to from)
           (optimize speed))
  (replace to from))

(defun octets (size fill)
  (make-array size :element-type '(unsigned-byte 8) :initial-element fill))

(defun memcpy-timer (size)
  "A warm timer copying SIZE bytes between two octet vectors with REPLACE."
  (let ((from (octets size 7)) (to (octets size 0)))
    (make-timer (lambda () (copy-octets to from)))))

(defun touch-fresh-memory (bytes)
  "Allocate BYTES of octet vectors (1 MiB each) and write one byte in every
4 KiB page: the cost of fresh memory itself (after a full GC the kernel
faults every page in again), which any restore allocating BYTES pays
whatever it does."
  (let ((kept '()))
    (loop while (> bytes 0)
          do (let* ((n (min bytes (* 1024 1024)))
                    (v (make-array n :element-type '(unsigned-byte 8))))
               (loop for i of-type fixnum from 0 below n by 4096
                     do (setf (aref v i) 1))
               (push v kept)
               (decf bytes n)))
    kept))

(defun store-floor-fn (size)
  "The store floor: memcpy (REPLACE) of SIZE bytes between two octet vectors
that exist already."
  (let ((from (octets (max size 1) 7)) (to (octets (max size 1) 0)))
    (lambda () (copy-octets to from))))

(defun restore-floor-fn (consed size)
  "The restore floor: fresh memory of CONSED bytes, allocated and touched,
then memcpy of SIZE bytes (the payload read) between existing vectors."
  (let ((from (octets (max size 1) 7)) (to (octets (max size 1) 0))
        (consed (max 1 (round consed))))
    (lambda ()
      (prog1 (touch-fresh-memory consed)
        (copy-octets to from)))))

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
  "Minimum seconds of up to *BASELINE-RUNS* calls of FN (each after a full
GC: cold) and the last value."
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

;;; Contestants.  binstore and each peer are described the same way: how to
;;; make, for some data and a mode, a thunk storing it to a new vector, one
;;; storing it into a preallocated buffer (or none), and one restoring it.

(defstruct contestant
  "How to call one serializer.  STORE: (data mode) -> thunk returning its
output.  BYTES: output -> octet count.  INPUT: output -> what RESTORE reads
\(default the output itself).  RESTORE: (input mode) -> thunk returning the
restored data.  INTO: NIL, or (data mode bytes) -> thunk storing into a
buffer preallocated with room for BYTES, returning the bytes written.
UNSUPPORTED: (dataset mode) -> NIL, or why it cannot take part.  SLOW: it
gets *SLOW-PEER-SECONDS* per data set.  HOW: how it is called, for the
header."
  name store (bytes #'length) (input #'identity) restore into
  (unsupported (constantly nil)) slow how)

(defvar *peer-contestants* '()
  "The peers loaded for this benchmark, in column order.")

(defparameter *peer-names* '("cl-binary-store" "cl-conspack" "hyperluminal-mem" "cl-store")
  "The peers, as ASDF systems (cl-conspack's is \"cl-conspack\"), in column order.")

(defun register-peer (contestant)
  "Called by the bench/peer-*.lisp files once their peer is loaded."
  (setf *peer-contestants*
        (sort (cons contestant (remove (contestant-name contestant) *peer-contestants*
                                       :key #'contestant-name :test #'string=))
              #'< :key (lambda (c) (or (position (contestant-name c) *peer-names*
                                                 :test #'string=)
                                       99)))))

(defun mode-tracks-p (mode) (string/= mode "none"))
(defun mode-shares-lists-p (mode) (string= mode "lists"))

;;; Finding and loading the peers.

(defvar *peer-directory* nil
  "Where the peers were loaded from, or NIL (then figures are transcribed).")

(defvar *peer-load-notes* '()
  "(name . text) per peer: loaded, or why not.")

(defun repository-root ()
  (asdf:system-relative-pathname "binstore" ""))

(defun peer-directory (&optional (requested (uiop:getenv "PEERS")))
  "The peers' source directory: REQUESTED (a make variable / environment
variable PEERS) when given -- \"none\" means no peers -- else
../shared/peers-src relative to the repository root when it exists."
  (cond ((and requested (string-equal requested "none")) nil)
        ((and requested (plusp (length requested)))
         (let ((dir (probe-file (uiop:ensure-directory-pathname
                                 (uiop:parse-native-namestring requested)))))
           (unless dir
             (progress "~&PEERS=~A does not exist: using the transcribed peer figures~%" requested))
           dir))
        (t (probe-file (merge-pathnames "../shared/peers-src/" (repository-root))))))

(defun peer-adapter-file (name)
  (asdf:system-relative-pathname "binstore" (format nil "bench/peer-~A.lisp" name)))

(defun load-adapter (name)
  "Compile bench/peer-NAME.lisp into a temporary fasl and load it."
  (let* ((source (peer-adapter-file name))
         (fasl (merge-pathnames (format nil "binstore-bench-peer-~A-~D.fasl" name
                                        (sb-unix:unix-getpid))
                                (uiop:temporary-directory))))
    (unwind-protect
         (let ((*compile-verbose* nil) (*compile-print* nil))
           (handler-bind ((warning #'muffle-warning)
                          #+sbcl (sb-ext:compiler-note #'muffle-warning))
             (multiple-value-bind (output warnings-p failure-p)
                 (compile-file source :output-file fasl)
               (declare (ignore warnings-p))
               (when (or (null output) failure-p)
                 (error "compiling ~A failed" (enough-namestring source (repository-root))))
               (load output))))
      (when (probe-file fasl) (delete-file fasl)))))

(defun load-peers (directory)
  "Load every peer found in DIRECTORY, and its adapter; note what failed."
  (setf *peer-contestants* '() *peer-load-notes* '())
  (asdf:initialize-source-registry
   `(:source-registry (:tree ,(namestring directory)) :inherit-configuration))
  (dolist (name *peer-names*)
    (let ((start (now)))
      (progress "~&Loading peer ~A..." name)
      (handler-case
          (progn
            (let ((*standard-output* (make-broadcast-stream))
                  (*compile-verbose* nil) (*compile-print* nil))
              (handler-bind ((warning #'muffle-warning))
                (asdf:load-system name)))
            (load-adapter name)
            (push (cons name (format nil "loaded~@[ (~A)~]" (peer-version name)))
                  *peer-load-notes*)
            (progress " ~,1F s~%" (seconds-since start)))
        (serious-condition (c)
          (push (cons name (format nil "NOT loaded: ~A" (condition-text c))) *peer-load-notes*)
          (progress " failed: ~A~%" (condition-text c))))))
  (setf *peer-load-notes* (nreverse *peer-load-notes*))
  *peer-contestants*)

(defun peer-version (name)
  (let ((system (asdf:find-system name nil)))
    (and system (asdf:component-version system))))

(defun peer-sources (directory)
  "Rows (folder repository commit) of DIRECTORY/SOURCES.tsv, if present."
  (let ((file (and directory (probe-file (merge-pathnames "SOURCES.tsv" directory)))))
    (when file
      (with-open-file (in file :external-format :utf-8)
        (loop for line = (read-line in nil) while line
              for fields = (uiop:split-string (string-trim '(#\Return) line)
                                              :separator '(#\Tab))
              when (>= (length fields) 3) collect fields)))))

;;; binstore as a contestant.

(defun make-output-buffer (size)
  (make-array size :element-type '(unsigned-byte 8) :fill-pointer 0))

(defparameter *binstore*
  (make-contestant
   :name "binstore"
   :store (lambda (data mode)
            (let ((args (mode-store-args mode)))
              (lambda () (apply #'binstore:store nil data args))))
   :restore (lambda (vec mode)
              (declare (ignore mode))
              (lambda () (binstore:restore vec)))
   :into (lambda (data mode bytes)
           (let ((args (mode-store-args mode))
                 (buffer (make-output-buffer (+ bytes 4096))))
             (lambda ()
               (setf (fill-pointer buffer) 0)
               (apply #'binstore:store buffer data args)
               (fill-pointer buffer))))
   :how "`(binstore:store nil data ...)`; store-into `(binstore:store buffer data ...)`, buffer an octet vector with a fill pointer reset to 0 and room for the output; `(binstore:restore vector)`; no header (`:output-magic-number nil`, restored with `*require-header*` nil)"))

;;; One data set x mode.

(defstruct result
  "One contestant's figures for a data set x mode.  STATUS: NIL when its
round trip was checked ok and it was timed, else what stopped it (WRONG...,
n/a..., timeout, ERROR...).  Times in seconds (NIL: not measured); INTO-NOTE
says why store-into is missing."
  name status bytes store into restore runs into-note
  store-timer into-timer restore-timer)

(defstruct row
  "Figures for one data set in one mode; times in seconds, NIL if unknown."
  dataset mode objects bytes consed problem notes baseline payload
  ;; binstore, cold
  store into restore runs
  ;; binstore, warm
  warm-store warm-into warm-restore warm-runs
  ;; floors, cold
  store-floor restore-floor
  ;; one RESULT per loaded peer, in *PEER-CONTESTANTS* order
  peers
  ;; internal: binstore's result and the floors' timers
  result store-floor-timer restore-floor-timer warm-timers)

(defun add-note (row format &rest args)
  (setf (row-notes row)
        (append (row-notes row) (list (apply #'format nil format args)))))

(defun add-problem (row format &rest args)
  "Record a problem (text starting WRONG, ERROR or TIMEOUT) for ROW."
  (let ((text (apply #'format nil format args)))
    (setf (row-problem row)
          (if (row-problem row) (format nil "~A; ~A" (row-problem row) text) text))))

(defun first-cold-run (fn allowance)
  "FN's value and a cold timer of FN holding this call as its first run
\(one call after a full GC, like every other): abandoned (SB-EXT:TIMEOUT)
after *CALL-TIMEOUT* seconds or what ALLOWANCE has left, which is charged
with the time taken."
  (let ((limit (if allowance
                   (min *call-timeout* (allowance-seconds allowance))
                   *call-timeout*)))
    (when (<= limit 0)
      (error 'sb-ext:timeout))
    (multiple-value-bind (seconds value)
        (handler-bind ((sb-ext:timeout
                         (lambda (c)
                           (declare (ignore c))
                           (when allowance (decf (allowance-seconds allowance) limit)))))
          (timed-call fn limit))
      (when allowance (decf (allowance-seconds allowance) seconds))
      (values value (record-run (make-cold fn :allowance allowance) seconds)))))

(defun prepare-contestant (contestant dataset mode data &key allowance)
  "Store DATA once with CONTESTANT in MODE, restore it, check the round trip,
store into a buffer; each of these calls is the first cold run of its
timer.  Returns a RESULT."
  (let ((result (make-result :name (contestant-name contestant)))
        (phase "store"))
    (let ((reason (funcall (contestant-unsupported contestant) dataset mode)))
      (when reason
        (setf (result-status result) reason)
        (return-from prepare-contestant result)))
    (handler-case
        (multiple-value-bind (output store-timer)
            (first-cold-run (funcall (contestant-store contestant) data mode) allowance)
          (let* ((bytes (funcall (contestant-bytes contestant) output))
                 (input (funcall (contestant-input contestant) output)))
            (setf output nil)
            (setf (result-bytes result) bytes)
            (setf phase "restore")
            (multiple-value-bind (restored restore-timer)
                (first-cold-run (funcall (contestant-restore contestant) input mode) allowance)
              (setf phase "check")
              (let ((problem (check-roundtrip data restored
                                              :track (mode-tracks-p mode)
                                              :track-conses (mode-shares-lists-p mode)
                                              :track-symbols (mode-tracks-p mode))))
                (setf restored nil)
                (when problem
                  (setf (result-status result) (format nil "WRONG: ~A" problem))
                  (return-from prepare-contestant result)))
              (setf (result-store-timer result) store-timer
                    (result-restore-timer result) restore-timer))
            (setf phase "store-into")
            (if (contestant-into contestant)
                (multiple-value-bind (written into-timer)
                    (first-cold-run (funcall (contestant-into contestant) data mode bytes) allowance)
                  (if (eql written bytes)
                      (setf (result-into-timer result) into-timer)
                      (setf (result-into-note result)
                            (format nil "WRONG: store-into wrote ~A bytes, store ~D" written bytes))))
                (setf (result-into-note result) "n/a (no store-into)"))))
      (sb-ext:timeout ()
        (if (string= phase "store-into")
            (setf (result-into-note result) "timeout")
            (setf (result-status result) (format nil "timeout (in ~A)" phase))))
      (serious-condition (c)
        (let ((text (format nil "ERROR in ~A: ~A" phase (condition-text c))))
          (if (string= phase "store-into")
              (setf (result-into-note result) text)
              (setf (result-status result) text)))))
    result))

(defun result-timers (result)
  (remove nil (list (result-store-timer result) (result-into-timer result)
                    (result-restore-timer result))))

(defun finish-result (result)
  "Fill RESULT's times from its timers."
  (setf (result-store result) (cold-seconds (result-store-timer result))
        (result-into result) (cold-seconds (result-into-timer result))
        (result-restore result) (cold-seconds (result-restore-timer result))
        (result-runs result) (let ((timers (result-timers result)))
                               (and timers (reduce #'min timers :key #'cold-runs))))
  (let ((stopped (loop for timer in (list (result-store-timer result) (result-into-timer result)
                                         (result-restore-timer result))
                       for what in '("store" "store-into" "restore")
                       when (and timer (cold-status timer))
                         collect (format nil "~A ~A" what (cold-status timer)))))
    (when (and stopped (null (result-status result)))
      (if (and (null (result-store result)) (null (result-restore result)))
          (setf (result-status result) (format nil "~{~A~^; ~}" stopped))
          (setf (result-into-note result)
                (format nil "~@[~A; ~]~{~A~^; ~}" (result-into-note result) stopped)))))
  result)

(defun prepare-row (dataset mode data baseline allowance)
  "binstore and every peer on DATA in MODE: checked, their cold timers and
the floors' made, binstore's warm timers calibrated.  Returns the ROW."
  (let* ((row (make-row :dataset dataset :mode mode :objects (object-count data)
                        :baseline baseline))
         (result (make-result :name "binstore"))
         (args (mode-store-args mode))
         (phase "store"))
    (setf (row-result row) result)
    ;; binstore: its own checks, as it always had, plus the bytes one
    ;; restore conses (after a first one: it keeps its working vectors).
    (handler-case
        (sb-ext:with-timeout *cell-timeout*
          (let ((store (funcall (contestant-store *binstore*) data mode)))
            (multiple-value-bind (vec store-timer) (first-cold-run store nil)
              (let* ((bytes (length vec))
                     (restore (funcall (contestant-restore *binstore*) vec mode)))
                (setf (row-bytes row) bytes (result-bytes result) bytes)
                (setf phase "check")
                (setf (result-store-timer result) store-timer
                      (result-restore-timer result) (nth-value 1 (first-cold-run restore nil)))
                ;; the bytes consed counted after a first restore, in the
                ;; steady state: binstore keeps its working vectors
                (multiple-value-bind (restored consed) (bytes-consed-by restore)
                  (setf (row-consed row) consed)
                  (let ((problem (check-roundtrip data restored
                                                  :track (getf args :track-references)
                                                  :track-conses (getf args :support-shared-list-structures))))
                    (when problem (add-problem row "WRONG: ~A" problem))))
                (setf phase "store-into")
                (let ((into (funcall (contestant-into *binstore*) data mode bytes)))
                  (multiple-value-bind (written into-timer) (first-cold-run into nil)
                    (unless (eql written bytes)
                      (add-note row "store-into wrote ~A bytes, store ~D" written bytes))
                    (setf (result-into-timer result) into-timer))
                  (setf phase "floors")
                  (setf (row-store-floor-timer row) (make-cold (store-floor-fn bytes))
                        (row-restore-floor-timer row)
                        (make-cold (restore-floor-fn (or (row-consed row) 0) bytes)))
                  (run-cold (row-store-floor-timer row))
                  (run-cold (row-restore-floor-timer row))
                  (setf phase "warm")
                  (setf (row-warm-timers row)
                        (list (make-timer store) (make-timer into) (make-timer restore))))))))
      (sb-ext:timeout ()
        (add-problem row "TIMEOUT: abandoned after ~D s (in ~A)" *cell-timeout* phase))
      (serious-condition (c)
        (add-problem row "ERROR: ~A signalled ~A" phase (condition-text c))))
    (setf (row-peers row)
          (loop for peer in *peer-contestants*
                collect (let ((t0 (now)))
                          (prog1 (prepare-contestant peer dataset mode data
                                                     :allowance (and (contestant-slow peer)
                                                                     allowance))
                            (progress "      ~A ~,1F s" (contestant-name peer)
                                      (seconds-since t0))))))
    row))

(defun row-cold-timers (row)
  "Every cold timer of ROW: binstore's, the floors', each peer's."
  (append (and (row-result row) (result-timers (row-result row)))
          (remove nil (list (row-store-floor-timer row) (row-restore-floor-timer row)))
          (loop for result in (row-peers row) append (result-timers result))))

(defun finish-row (row data)
  "Fill ROW's figures from its timers; returns the row."
  (let ((result (finish-result (row-result row))))
    (setf (row-store row) (result-store result)
          (row-into row) (result-into result)
          (row-restore row) (result-restore result)
          (row-runs row) (result-runs result))
    (when (and (result-status result) (null (row-problem row)))
      (add-problem row "~A" (result-status result)))
    (when (result-into-note result)
      (add-note row "~A" (result-into-note result))))
  (setf (row-store-floor row) (cold-seconds (row-store-floor-timer row))
        (row-restore-floor row) (cold-seconds (row-restore-floor-timer row)))
  (destructuring-bind (&optional store into restore) (row-warm-timers row)
    (flet ((best (timer) (and timer (timer-best timer))))
      (setf (row-warm-store row) (best store)
            (row-warm-into row) (best into)
            (row-warm-restore row) (best restore)
            (row-warm-runs row) (and store (timer-done store)))))
  (mapc #'finish-result (row-peers row))
  (when (dataset-option (row-dataset row) :specialized)
    (setf (row-payload row) (payload-bytes data)))
  ;; the closures hold the data and the outputs: let them go
  (setf (row-result row) (copy-result (row-result row))
        (row-store-floor-timer row) nil (row-restore-floor-timer row) nil
        (row-warm-timers row) nil)
  (dolist (result (cons (row-result row) (row-peers row)))
    (setf (result-store-timer result) nil (result-into-timer result) nil
          (result-restore-timer result) nil))
  row)

(defun run-dataset (dataset modes data baseline)
  "Measure DATA (the data set named DATASET) in each of MODES: every row is
prepared, then every cold timer of every row runs once per round for *RUNS*
rounds, then binstore's warm timers in rounds.  Returns the rows."
  (let* ((allowance (make-allowance *slow-peer-seconds*))
         (rows (loop for mode in modes
                     collect (let ((t0 (now)))
                               (progress "    ~5A" mode)
                               (prog1 (prepare-row dataset mode data baseline allowance)
                                 (progress "; checked in ~,1F s~%" (seconds-since t0))))))
         (cold (loop for row in rows append (row-cold-timers row)))
         (t0 (now)))
    ;; the first run of each was made with its preparation
    (dotimes (round (1- *runs*))
      (dolist (timer cold) (run-cold timer)))
    (progress "    cold: ~D timers x ~D rounds, ~,1F s" (length cold) *runs* (seconds-since t0))
    (setf t0 (now))
    (run-rounds (loop for row in rows append (row-warm-timers row)))
    (progress "; warm ~,1F s~%" (seconds-since t0))
    (mapcar (lambda (row) (finish-row row data)) rows)))

;;; Targets.

(defstruct check
  "One figure of a row against the peers.  WHAT: store, store-into, restore
or bytes.  OURS, BEST (seconds or bytes), WHO the best peer, SOURCE
:measured or :transcribed; FACTOR the multiple of BEST allowed; FLOOR, and
TARGET with BASIS :peer or :floor; OK; RATIO = OURS / BEST."
  what ours best who source factor floor target basis ok ratio rounded)

(defun peers-measured-p ()
  (and *peer-contestants* t))

(defun result-figure (result what)
  (cond ((string= what "store") (result-store result))
        ((string= what "store-into") (result-into result))
        ((string= what "restore") (result-restore result))
        (t (result-bytes result))))

(defun best-measured (row what)
  "The best peer figure of ROW for WHAT among the peers whose round trip was
ok, and its name."
  (let ((best nil) (who nil))
    (dolist (result (row-peers row))
      (let ((value (and (null (result-status result)) (result-figure result what))))
        (when (and value (or (null best) (< value best)))
          (setf best value who (result-name result)))))
    (values best who)))

(defun best-transcribed (row what)
  "The transcribed best peer figure (seconds, or bytes) and who, and for
bytes whether the figure is exact."
  (let ((peer (find-peer (row-dataset row) (row-mode row))))
    (when peer
      (flet ((s (ms) (and ms (/ ms 1000d0))))
        (cond ((string= what "store") (values (s (peer-store peer)) (peer-store-who peer)))
              ((string= what "store-into") (values (s (peer-into peer)) (peer-into-who peer)))
              ((string= what "restore") (values (s (peer-restore peer)) (peer-restore-who peer)))
              (t (let ((exact (peer-exact-bytes (row-dataset row) (row-mode row))))
                   (values (or exact (round (* (peer-bytes-mb peer) 1d6)))
                           (peer-bytes-who peer)
                           (and exact t)))))))))

(defun time-factor (row what)
  (if (and (string= what "restore")
           (member (row-dataset row) *object-restore-datasets* :test #'string=))
      *object-restore-factor*
      *peer-factor*))

(defun row-checks (row)
  "The CHECKs of ROW: store, store-into, restore, bytes."
  (loop for what in '("store" "store-into" "restore" "bytes")
        collect
        (multiple-value-bind (best who exact)
            (if (peers-measured-p) (best-measured row what) (best-transcribed row what))
          (let* ((bytes-p (string= what "bytes"))
                 (ours (cond ((string= what "store") (row-store row))
                             ((string= what "store-into") (row-into row))
                             ((string= what "restore") (row-restore row))
                             (t (row-bytes row))))
                 (floor (cond (bytes-p nil)
                              ((string= what "restore") (row-restore-floor row))
                              (t (row-store-floor row))))
                 (factor (if bytes-p 1 (time-factor row what)))
                 (check (make-check :what what :ours ours :best best :who who
                                    :source (if (peers-measured-p) :measured :transcribed)
                                    :factor factor :floor floor)))
            (when best
              (let ((peer-target (* factor best)))
                (if (and floor (< peer-target floor))
                    (setf (check-target check) (* *floor-factor* floor)
                          (check-basis check) :floor)
                    (setf (check-target check) peer-target
                          (check-basis check) :peer)))
              ;; transcribed sizes not known exactly are rounded to 0.01 MB
              (when (and bytes-p (not (peers-measured-p)) (not exact))
                (setf (check-target check) (+ best 5000)
                      (check-rounded check) t))
              (setf (check-ratio check) (and ours (plusp best) (/ ours best))
                    (check-ok check) (and ours (null (row-problem row))
                                          (<= ours (check-target check)))))
            check))))

(defun row-verdict (checks)
  ":on when every check with a target is met, :off when one is not, :none
when there is no target."
  (let ((targeted (remove nil checks :key #'check-target)))
    (cond ((null targeted) :none)
          ((every #'check-ok targeted) :on)
          (t :off))))

;;; Derived figures and formatting.

(defun ms (seconds) (and seconds (* 1000 seconds)))

(defun per-second (amount seconds)
  (and amount seconds (plusp seconds) (/ amount seconds)))

(defun mb/s (row seconds) (let ((r (per-second (row-bytes row) seconds))) (and r (/ r 1d6))))

(defun memcpy-gb/s (row)
  (let ((r (per-second (row-bytes row) (row-store-floor row)))) (and r (/ r 1d9))))

(defun payload-percent (row seconds)
  "Payload bandwidth in SECONDS as a percentage of the store floor's
\(memcpy's) bandwidth."
  (let ((payload (per-second (row-payload row) seconds))
        (copy (per-second (row-bytes row) (row-store-floor row))))
    (and payload copy (* 100 (/ payload copy)))))

(defun speedup (base ours)
  "How many times faster OURS is than BASE (both seconds)."
  (and base ours (plusp ours) (/ base ours)))

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

(defun fmt-bytes (bytes)
  (if bytes (format nil "~:D" bytes) "-"))

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

(defun short-status (status)
  "The first word of a peer's STATUS, for a table cell."
  (let ((end (position-if (lambda (c) (member c '(#\: #\Space #\())) status)))
    (if end (subseq status 0 end) status)))

(defun fmt-figure (what value)
  (if (string= what "bytes") (fmt-bytes value) (fmt (ms value))))

(defun peer-cell (result what best-who)
  "A peer's figure for WHAT, bold when it is the best, else why it has none."
  (let ((value (and (null (result-status result)) (result-figure result what))))
    (cond (value (let ((text (fmt-figure what value))
                       (runs (result-runs result)))
                   (when (and (not (string= what "bytes")) runs (< runs *runs*))
                     (setf text (format nil "~A (~D/~D)" text runs *runs*)))
                   (if (equal best-who (result-name result)) (format nil "**~A**" text) text)))
          ((result-status result) (short-status (result-status result)))
          ((and (string= what "store-into") (result-into-note result))
           (short-status (result-into-note result)))
          (t "-"))))

(defun target-text (check)
  (cond ((null (check-target check)) "no peer")
        ((string= (check-what check) "bytes") (format nil "<= ~A" (fmt-bytes (round (check-target check)))))
        ((eq (check-basis check) :floor)
         (format nil "~A (~,2Fx floor)" (fmt (ms (check-target check))) *floor-factor*))
        (t (format nil "~A (~,1Fx peer)" (fmt (ms (check-target check))) (check-factor check)))))

(defun verdict-text (check)
  (cond ((null (check-target check)) "-")
        ((check-ok check) "on")
        (t "**OFF**")))

(defun ratio-text (check)
  (if (and (check-ratio check) (string= (check-what check) "bytes"))
      (format nil "~,4F" (check-ratio check))
      (fmt-ratio (check-ratio check))))

;;; The markdown.

(defun timestamp ()
  (multiple-value-bind (s m h d mo y) (get-decoded-time)
    (declare (ignore s))
    (format nil "~D-~2,'0D-~2,'0D ~2,'0D:~2,'0D" y mo d h m)))

(defun git-commit ()
  "The commit binstore is at, and whether files outside bench/results/
differ from it."
  (handler-case
      (flet ((git (&rest args)
               (string-trim '(#\Newline #\Space)
                            (uiop:run-program (list* "git" "-C" (namestring (repository-root)) args)
                                              :output :string :error-output nil))))
        (format nil "~A~:[~; (with uncommitted changes)~]"
                (git "log" "-1" "--format=%h")
                (plusp (length (git "status" "--porcelain" "--untracked-files=no" "--"
                                    "." ":!bench/results")))))
    (error () "unknown")))

(defun write-method (stream)
  "How each column was measured."
  (format stream "# binstore benchmark~%~%~A ~A on ~A, ~A, binstore at ~A.~%~%"
          (lisp-implementation-type) (lisp-implementation-version) (machine-type)
          (timestamp) (git-commit))
  (format stream "## How each column was measured~%~%")
  (format stream "- **cold** (every figure compared with a peer): one call after `(sb-ext:gc :full t)`, ~
                  timed with `CLOCK_MONOTONIC` (`sb-unix:clock-gettime`), minimum of N = ~D runs. ~
                  The first run of each is the call that prepares and checks it; runs 2 to N go in ~
                  rounds, every cold timer of a data set (every mode; binstore, each peer, the ~
                  floors) once per round, so a slower phase of the machine falls on all alike. ~
                  The time limit of a call is armed before the clock starts. A peer figure made ~
                  of fewer runs (time limit) says so: (k/N).~%"
          *runs*)
  (format stream "- **store** = to a new octet vector; **store-into** = into an octet vector ~
                  allocated beforehand with room for the output (allocation not timed); ~
                  **restore** = from the store's output.  binstore: ~A.~%"
          (contestant-how *binstore*))
  (format stream "- **bytes** = the output's length, no header (binstore's header is 5 bytes more).~%")
  (cond ((peers-measured-p)
         (format stream "- **peers**: measured in this run, in this image, the same way (cold, min of ~D), ~
                         on the same data; loaded from `~A` (ASDF `(:tree ...)`). Each peer's round trip ~
                         is checked as binstore's is; a peer whose restore differs (WRONG), that cannot ~
                         store the set in the mode (n/a), or that ran out of time (timeout) takes no part ~
                         in the best peer. In mode none, where shared objects are stored as trees, a peer's ~
                         uninterned symbols may come back as several symbols of the same name (binstore ~
                         keeps them one). cl-store gets ~D s per data set (all its modes and operations; ~
                         calls over the limit are abandoned: timeout); any call ~D s.~%"
                 *runs* (namestring *peer-directory*) *slow-peer-seconds* *call-timeout*)
         (let ((sources (peer-sources *peer-directory*)))
           (format stream "~%| peer | load | repository | commit | how it is called |~%|---|---|---|---|---|~%")
           (dolist (name *peer-names*)
             (let ((source (find name sources :key #'first :test #'string=))
                   (contestant (find name *peer-contestants* :key #'contestant-name :test #'string=)))
               (markdown-row stream
                             (list name
                                   (or (cdr (assoc name *peer-load-notes* :test #'string=)) "-")
                                   (or (second source) "-")
                                   (if source (subseq (third source) 0 (min 12 (length (third source)))) "-")
                                   (if contestant (contestant-how contestant) "-")))))
           (terpri stream)))
        (t
         (format stream "- **peers**: not found~@[ (~A)~]; the best peer figures are **transcribed** from ~
                         bench/peers.lisp (the peers' own cold measurement, min of up to 5 after a full GC, ~
                         another run on a machine like this one): ratios to them are across runs.~%"
                 (and *peer-load-notes* (format nil "~{~A~^; ~}"
                                                (mapcar (lambda (n) (format nil "~A ~A" (car n) (cdr n)))
                                                        *peer-load-notes*))))))
  (format stream "- **floors** (cold, min of ~D, same rounds): store floor = memcpy (`replace` between ~
                  two octet vectors that exist already) of the output's size; restore floor = fresh ~
                  memory of as many bytes as one binstore restore conses (1 MiB octet vectors, one ~
                  byte written per 4 KiB page, after the full GC) plus memcpy of the output's size ~
                  (as bench/fresh-memory.lisp measures).~%" *runs*)
  (format stream "- **targets**: store, store-into, restore <= ~,1Fx the best peer (restore <= ~,1Fx for ~
                  ~{~A~^, ~}); where that is below the floor, <= ~,2Fx the floor instead (the target cell ~
                  says which); bytes <= the smallest peer output.  A row is on target when all four are.~%"
          *peer-factor* *object-restore-factor* *object-restore-datasets* *floor-factor*)
  (format stream "- **warm** (binstore only, own table): calls repeated within a run until it lasts ~
                  ~,1F ms, averaged, minimum of ~D runs each after a full GC: what this benchmark ~
                  reported before. Not comparable with cold figures.~%"
          (* 1000 *min-run-seconds*) *warm-runs*)
  (format stream "- MB = 10^6 bytes; objects = top-level elements; times in ms.~%~%"))

(defun write-summary-lines (stream rows)
  "The count of rows on target and the misses."
  (let* ((verdicts (mapcar (lambda (row) (cons row (row-checks row))) rows))
         (on (count :on verdicts :key (lambda (v) (row-verdict (cdr v)))))
         (off (count :off verdicts :key (lambda (v) (row-verdict (cdr v)))))
         (none (count :none verdicts :key (lambda (v) (row-verdict (cdr v))))))
    (format stream "## Summary~%~%**~D of ~D rows on target** (cold, against the best peer ~A)~
                    ~[~:;, ~:*~D without peer figures~].~%~%"
            on (+ on off)
            (if (peers-measured-p) "measured side by side in this run" "as transcribed")
            none)
    (dolist (what '("store" "store-into" "restore" "bytes"))
      (let ((checks (loop for (nil . checks) in verdicts
                          for check = (find what checks :key #'check-what :test #'string=)
                          when (check-target check) collect check)))
        (format stream "- ~A: ~D of ~D on target~@[ (~D against the floor)~]~%"
                what (count-if #'check-ok checks) (length checks)
                (let ((n (count :floor checks :key #'check-basis))) (and (plusp n) n)))))
    (let ((misses (loop for (row . checks) in verdicts
                        for missed = (remove-if (lambda (c) (or (null (check-target c)) (check-ok c)))
                                                checks)
                        when missed
                          collect (format nil "~A/~A: ~{~A~^; ~}" (row-dataset row) (row-mode row)
                                          (mapcar #'miss-text missed)))))
      (format stream "~%Off target:~%~%~:[None.~%~;~:*~{- ~A~%~}~]~%" misses))))

(defun miss-text (check)
  (if (string= (check-what check) "bytes")
      (format nil "bytes ~A vs ~A (~A, ~,4Fx)" (fmt-bytes (check-ours check))
              (fmt-bytes (check-best check)) (check-who check) (or (check-ratio check) 0))
      (format nil "~A ~A ms = ~Ax ~A's ~A ms, target ~A"
              (check-what check) (fmt (ms (check-ours check))) (fmt-ratio (check-ratio check))
              (check-who check) (fmt (ms (check-best check))) (target-text check))))

(defun write-side-by-side (stream rows)
  (let ((peers (mapcar #'contestant-name *peer-contestants*)))
    (format stream "## Cold, side by side~%~%~
                    One line per data set, mode and figure (ms, or bytes).  ~:[The best peer is ~
                    transcribed (bench/peers.lisp).~;The best peer's cell is bold; a peer without ~
                    a figure shows why (details under Round trips).~]~%~%"
            (peers-measured-p))
    (markdown-header stream (append '("data set" "mode" "figure" "binstore")
                                    (if (peers-measured-p)
                                        peers
                                        '("best peer (transcribed)" "who"))
                                    '("floor" "target" "binstore / best" "")))
    (dolist (row rows)
      (let ((checks (row-checks row)))
        (dolist (check checks)
          (let ((what (check-what check)))
            (markdown-row
             stream
             (append (list (row-dataset row) (row-mode row) what
                           (if (and (row-problem row) (not (string= what "bytes")))
                               (format nil "~A (~A)" (fmt-figure what (check-ours check))
                                       (short-status (row-problem row)))
                               (fmt-figure what (check-ours check))))
                     (if (peers-measured-p)
                         (mapcar (lambda (result) (peer-cell result what (check-who check)))
                                 (row-peers row))
                         (list (if (check-rounded check)
                                   (format nil "~A (rounded)" (fmt-mb (check-best check)))
                                   (fmt-figure what (check-best check)))
                               (or (check-who check) "-")))
                     (list (if (check-floor check) (fmt (ms (check-floor check))) "-")
                           (target-text check) (ratio-text check) (verdict-text check))))))))
    (terpri stream)))

(defun write-warm (stream rows)
  (format stream "## binstore, warm (calls repeated within a run and averaged; not comparable with cold figures)~%~%")
  (markdown-header stream '("data set" "mode" "bytes" "warm store ms" "warm store-into ms"
                            "warm restore ms" "runs" "restore consed B/obj" "warm store MB/s"
                            "warm restore MB/s" "warm restore Mobj/s" "round trip"))
  (dolist (row rows)
    (markdown-row stream
                  (list (row-dataset row) (row-mode row) (fmt-mb (row-bytes row))
                        (fmt (ms (row-warm-store row))) (fmt (ms (row-warm-into row)))
                        (fmt (ms (row-warm-restore row))) (or (row-warm-runs row) "-")
                        (fmt (and (row-consed row) (/ (row-consed row) (max 1 (row-objects row)))))
                        (fmt (mb/s row (row-warm-store row))) (fmt (mb/s row (row-warm-restore row)))
                        (fmt (let ((r (per-second (row-objects row) (row-warm-restore row))))
                               (and r (/ r 1d6))))
                        (check-text row))))
  (terpri stream))

(defun baseline-cells (row)
  (let ((b (row-baseline row)))
    (cond ((null b) (list "-" "-" "-" "-"))
          ((baseline-note b) (list (baseline-note b) "" "" ""))
          (t (list (fmt (ms (baseline-print-s b)))
                   (fmt (ms (baseline-read-s b)))
                   (fmt-times (speedup (baseline-print-s b) (row-store row)))
                   (fmt-times (speedup (baseline-read-s b) (row-restore row))))))))

(defun write-references (stream rows)
  (format stream "## binstore, cold, against the Lisp printer/reader and the floors~%~%~
                  Printer/reader: `(write data :readably t :circle t)` to a string and ~
                  `read-from-string` (*read-eval* nil), one call after a full GC, minimum of up ~
                  to ~D; the same figures serve every mode.  Payload % = bandwidth on the arrays' ~
                  raw element bytes relative to the store floor's memcpy (specialized-array sets).~%~%"
          *baseline-runs*)
  (markdown-header stream '("data set" "mode" "print ms" "read ms" "store vs print"
                            "restore vs read" "cold store MB/s" "cold restore MB/s"
                            "memcpy GB/s" "store-into payload % memcpy" "restore payload % memcpy"
                            "restore floor ms" "restore / floor" "runs"))
  (dolist (row rows)
    (markdown-row stream
                  (append (list (row-dataset row) (row-mode row))
                          (baseline-cells row)
                          (list (fmt (mb/s row (row-store row))) (fmt (mb/s row (row-restore row)))
                                (fmt (memcpy-gb/s row))
                                (fmt (payload-percent row (row-into row)))
                                (fmt (payload-percent row (row-restore row)))
                                (fmt (ms (row-restore-floor row)))
                                (fmt (and (row-restore-floor row) (row-restore row)
                                          (/ (row-restore row) (row-restore-floor row))))
                                (or (row-runs row) "-")))))
  (terpri stream))

(defun rows-text (rows)
  "ROWS as data set (modes), data set (modes)..."
  (let ((sets '()))
    (dolist (row rows)
      (let ((entry (assoc (row-dataset row) sets :test #'string=)))
        (if entry
            (push (row-mode row) (cdr entry))
            (push (list (row-dataset row) (row-mode row)) sets))))
    (format nil "~{~A~^, ~}"
            (mapcar (lambda (entry) (format nil "~A (~{~A~^ ~})" (car entry) (reverse (cdr entry))))
                    (reverse sets)))))

(defun write-failures (stream rows)
  (format stream "## Round trips and failures~%~%")
  (let ((wrong (remove-if-not #'row-problem rows)))
    (if wrong
        (dolist (row wrong)
          (format stream "- **binstore** ~A/~A: ~A~%" (row-dataset row) (row-mode row) (row-problem row)))
        (format stream "binstore: all ~D round trips checked ok.~%" (length rows))))
  (when (peers-measured-p)
    (format stream "~%Peers (identical statuses grouped):~%~%")
    (dolist (peer *peer-contestants*)
      (let ((groups '()) (name (contestant-name peer)) (ok 0))
        (dolist (row rows)
          (let ((result (find name (row-peers row) :key #'result-name :test #'string=)))
            (when result
              (when (null (result-status result)) (incf ok))
              (let ((status (cond ((result-status result))
                                  ;; said once in the header
                                  ((equal (result-into-note result) "n/a (no store-into)") nil)
                                  ((result-into-note result)
                                   (format nil "store-into: ~A" (result-into-note result))))))
                (when status
                  (let ((group (or (assoc status groups :test #'string=)
                                   (first (push (list status) groups)))))
                    (push row (cdr group))))))))
        (format stream "- **~A**: ~D of ~D rows checked ok and timed~:[.~;; otherwise:~]~%"
                name ok (length rows) groups)
        (dolist (group (reverse groups))
          (format stream "  - ~A: ~A~%" (rows-text (reverse (cdr group))) (car group))))))
  (let ((noted (remove-if-not #'row-notes rows)))
    (when noted
      (format stream "~%binstore notes:~%~%")
      (dolist (row noted)
        (format stream "- ~A/~A: ~{~A~^; ~}~%" (row-dataset row) (row-mode row) (row-notes row)))))
  (terpri stream))

(defun write-markdown (stream rows)
  (write-method stream)
  (write-summary-lines stream rows)
  (write-side-by-side stream rows)
  (write-references stream rows)
  (write-warm stream rows)
  (write-failures stream rows))

(defparameter *summary-mode* "refs"
  "The mode of the README's compact table: objects tracked, conses not.")

(defun write-summary (stream rows)
  "The README's compact table: how many of ROWS are on target, then one
line per data set in *SUMMARY-MODE*, cold, with the ratios to the best peer
\(off target in bold) and to the printer and reader.  Every row and
column is in latest.md."
  (let* ((verdicts (mapcar (lambda (row) (row-verdict (row-checks row))) rows))
         (on (count :on verdicts))
         (off (count :off verdicts)))
    (format stream "Cold: one call after a full GC, minimum of ~D; ratios to the best peer ~A. ~
                    ~D of ~D rows (data set x mode) on target; the ~A mode below, every mode in ~
                    [`bench/results/latest.md`](bench/results/latest.md).~%~%"
            *runs* (if (peers-measured-p) "measured in the same run" "as transcribed")
            on (+ on off) *summary-mode*))
  (markdown-header stream '("data set" "MB" "store ms" "store-into ms" "restore ms"
                            "vs best peer: store / into / restore / bytes"
                            "faster than print / read"))
  (dolist (row rows)
    (when (string= (row-mode row) *summary-mode*)
      (let ((baseline (row-baseline row)))
        (flet ((ratio (check)
                 (let ((text (if (check-ratio check) (ratio-text check) "-")))
                   (if (or (null (check-target check)) (check-ok check)) text (format nil "**~A**" text))))
               (times (base ours)
                 (let ((factor (and baseline (not (baseline-note baseline)) (speedup base ours))))
                   (if factor (format nil "~Ax" (fmt factor 2)) "-"))))
          (markdown-row stream
                        (list (row-dataset row)
                              (if (row-bytes row) (format nil "~,2F" (/ (row-bytes row) 1d6)) "-")
                              (fmt (ms (row-store row))) (fmt (ms (row-into row)))
                              (fmt (ms (row-restore row)))
                              (format nil "~{~A~^ / ~}" (mapcar #'ratio (row-checks row)))
                              (format nil "~A / ~A"
                                      (times (and baseline (baseline-print-s baseline)) (row-store row))
                                      (times (and baseline (baseline-read-s baseline)) (row-restore row))))))))))

;;; TSV.

(defun tsv-value (x)
  (cond ((null x) "")
        ((floatp x) (format nil "~,6F" x))
        (t (substitute-if #\Space (lambda (c) (member c '(#\Tab #\Newline #\Return)))
                          (princ-to-string x)))))

(defun tsv-columns ()
  (flet ((check-column (name what fn)
           (list name (lambda (row) (funcall fn (find what (row-checks row)
                                                      :key #'check-what :test #'string=)))))
         (peer-column (name peer fn)
           (list name (lambda (row)
                        (let ((result (find peer (row-peers row) :key #'result-name :test #'string=)))
                          (and result (funcall fn result)))))))
    `(("dataset" ,#'row-dataset) ("mode" ,#'row-mode) ("objects" ,#'row-objects)
      ("bytes" ,#'row-bytes)
      ("store_ms" ,(lambda (r) (ms (row-store r))))
      ("store_into_ms" ,(lambda (r) (ms (row-into r))))
      ("restore_ms" ,(lambda (r) (ms (row-restore r))))
      ("runs" ,#'row-runs)
      ("store_floor_ms" ,(lambda (r) (ms (row-store-floor r))))
      ("restore_floor_ms" ,(lambda (r) (ms (row-restore-floor r))))
      ("restore_consed_bytes" ,#'row-consed)
      ("roundtrip" ,(lambda (r) (if (row-problem r)
                                    (short-status (row-problem r))
                                    "ok")))
      ("problem" ,(lambda (r) (or (row-problem r) (format nil "~{~A~^; ~}" (row-notes r)))))
      ("peer_source" ,(lambda (r) (declare (ignore r)) (if (peers-measured-p) "measured" "transcribed")))
      ,@(loop for what in '("store" "store-into" "restore" "bytes")
              for name = (substitute #\_ #\- what)
              for unit = (if (string= what "bytes") "" "_ms")
              for scale = (if (string= what "bytes") #'identity #'ms)
              append (let ((what what) (scale scale))
                       (list (check-column (format nil "best_~A~A" name unit) what
                                           (lambda (c) (and (check-best c) (funcall scale (check-best c)))))
                             (check-column (format nil "best_~A_who" name) what #'check-who)
                             (check-column (format nil "target_~A~A" name unit) what
                                           (lambda (c) (and (check-target c) (funcall scale (check-target c)))))
                             (check-column (format nil "target_~A_basis" name) what
                                           (lambda (c) (and (check-basis c) (string-downcase (check-basis c)))))
                             (check-column (format nil "~A_ratio_best_peer" name) what #'check-ratio)
                             (check-column (format nil "~A_on_target" name) what
                                           (lambda (c) (cond ((null (check-target c)) nil)
                                                             ((check-ok c) "yes")
                                                             (t "no")))))))
      ("row_on_target" ,(lambda (r) (string-downcase (row-verdict (row-checks r)))))
      ,@(loop for peer in *peer-names*
              for prefix = (substitute #\_ #\- peer)
              append (list (peer-column (format nil "~A_status" prefix) peer
                                        (lambda (p) (or (result-status p) "ok")))
                           (peer-column (format nil "~A_bytes" prefix) peer #'result-bytes)
                           (peer-column (format nil "~A_store_ms" prefix) peer
                                        (lambda (p) (ms (result-store p))))
                           (peer-column (format nil "~A_store_into_ms" prefix) peer
                                        (lambda (p) (ms (result-into p))))
                           (peer-column (format nil "~A_restore_ms" prefix) peer
                                        (lambda (p) (ms (result-restore p))))
                           (peer-column (format nil "~A_runs" prefix) peer #'result-runs)))
      ("warm_store_ms" ,(lambda (r) (ms (row-warm-store r))))
      ("warm_store_into_ms" ,(lambda (r) (ms (row-warm-into r))))
      ("warm_restore_ms" ,(lambda (r) (ms (row-warm-restore r))))
      ("print_ms" ,(lambda (r) (let ((b (row-baseline r))) (and b (ms (baseline-print-s b))))))
      ("read_ms" ,(lambda (r) (let ((b (row-baseline r))) (and b (ms (baseline-read-s b))))))
      ("baseline_note" ,(lambda (r) (let ((b (row-baseline r))) (and b (baseline-note b)))))
      ("memcpy_gb_s" ,#'memcpy-gb/s)
      ("payload_bytes" ,#'row-payload)
      ("store_into_payload_pct_memcpy" ,(lambda (r) (payload-percent r (row-into r))))
      ("restore_payload_pct_memcpy" ,(lambda (r) (payload-percent r (row-restore r)))))))

(defun write-tsv (stream rows)
  (let ((columns (tsv-columns)))
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
  "Grouped bars per data set for the refs mode (else the first mode run),
log scale, into DIRECTORY/throughput.png: binstore's cold store and restore
and the best peer's, as binstore's output MB per second of each (the same
data, so the bars compare times)."
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
             (format s "# data set	binstore store	best peer store	binstore restore	best peer restore (MB/s of binstore's output, cold, mode ~A)~%" mode)
             (dolist (row rows)
               (let ((checks (row-checks row)))
                 (flet ((peer (what)
                          (let ((best (check-best (find what checks :key #'check-what :test #'string=))))
                            (if best (format nil "~,3F" (mb/s row best)) "NaN"))))
                   (format s "~A	~,3F	~A	~,3F	~A~%" (row-dataset row)
                           (mb/s row (row-store row)) (peer "store")
                           (mb/s row (row-restore row)) (peer "restore"))))))
           (with-open-file (s script :direction :output :if-exists :supersede)
             (format s "# Written by binstore-bench; run from any directory.~%~
                        set terminal ~A size 1400,700~%~
                        set output '~A'~%~
                        set title 'binstore vs best peer (~A), cold (one call after a full GC, min of ~D), mode ~A (~A ~A)'~%~
                        set datafile separator '\\t'~%~
                        set datafile missing 'NaN'~%~
                        set style data histograms~%~
                        set style histogram clustered gap 1~%~
                        set style fill solid 0.8 border -1~%~
                        set boxwidth 0.9~%~
                        set logscale y~%~
                        set yrange [1:*]~%~
                        set ylabel 'MB/s of binstore output (log scale)'~%~
                        set grid ytics mytics~%~
                        set xtics rotate by 45 right nomirror~%~
                        set key top right~%~
                        set bmargin 9~%~
                        plot '~A' using 2:xtic(1) title 'binstore store', '' using 3 title 'best peer store', ~
                        '' using 4 title 'binstore restore', '' using 5 title 'best peer restore'~%"
                     terminal (namestring png)
                     (if (peers-measured-p) "same run" "transcribed") *runs* mode
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

(defun progress-row (row)
  (progress "    ~5A ~A, cold store ~A ms, into ~A, restore ~A (floors ~A / ~A): ~A~%"
            (row-mode row) (fmt-mb (row-bytes row)) (fmt (ms (row-store row)))
            (fmt (ms (row-into row))) (fmt (ms (row-restore row)))
            (fmt (ms (row-store-floor row))) (fmt (ms (row-restore-floor row)))
            (check-text row))
  (dolist (result (row-peers row))
    (progress "          ~16A ~A~@[ ~A~]~%" (result-name result)
              (if (result-status result)
                  (result-status result)
                  (format nil "~A bytes, store ~A ms, into ~A, restore ~A"
                          (fmt-bytes (result-bytes result)) (fmt (ms (result-store result)))
                          (fmt (ms (result-into result))) (fmt (ms (result-restore result)))))
              (and (null (result-status result)) (result-into-note result)))))

(defun main (&key datasets modes (peers (uiop:getenv "PEERS")) runs)
  "Benchmark binstore on DATASETS x MODES (lists of names; NIL or empty means
all: see DATASET-NAMES and MODE-NAMES), beside the peers found in PEERS (a
directory, \"none\", or NIL for ../shared/peers-src); print the markdown
and write bench/results/.  RUNS: cold runs per figure (NIL:
*SIDE-BY-SIDE-RUNS* when the peers are timed in this run, *TRANSCRIBED-RUNS*
when not).  Returns the rows."
  (let* ((datasets (select-names datasets (dataset-names) "data set"))
         (modes (select-names modes (mode-names) "mode"))
         (*runs* *runs*)
         (binstore:*require-header* nil)   ; the modes store no header (see *MODES*)
         (*baseline-spent* 0)
         (start (now))
         (rows '()))
    (setf *peer-directory* (peer-directory peers))
    (if *peer-directory*
        (load-peers *peer-directory*)
        (setf *peer-contestants* '() *peer-load-notes* '()))
    (unless (peers-measured-p)
      (progress "~&No peers loaded: comparing with the transcribed figures of bench/peers.lisp~%"))
    (setf *runs* (or runs (if (peers-measured-p) *side-by-side-runs* *transcribed-runs*)))
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
                       (progress-row row))
                     (progress "    (~,1F s; ~,1F s in all)~%" (seconds-since t2)
                               (seconds-since start))))))
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
