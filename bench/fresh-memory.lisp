;;;; What a restore of specialized arrays is up against: fresh memory.
;;;;
;;;;   make bench-memory
;;;;
;;;; The main benchmark compares a restore's payload bandwidth with memcpy
;;;; (REPLACE between two octet vectors that exist already).  A restore
;;;; cannot write into memory that exists already: it must make its arrays,
;;;; and every page the heap gives a new object has been zeroed first, by
;;;; the kernel when it faults the page in (after a full GC, SBCL hands its
;;;; free pages back), or, when SBCL reuses a page it kept, by SBCL's
;;;; allocator (zeroize_pages_if_needed in gencgc.c) before Lisp gets it.
;;;; So each byte restored is written twice, where memcpy writes it once.
;;;;
;;;; This program times, for each specialized-array data set, in rounds
;;;; after a full GC as the main benchmark does:
;;;;   memcpy       REPLACE between octet vectors of the output's size;
;;;;   fresh copy   the least any restore does: for each array of the data
;;;;                set, a new octet vector of its payload's size, filled by
;;;;                REPLACE from a vector that exists already;
;;;;   restore      (restore vec);
;;;;   pages kept   (restore vec) with SBCL told not to hand free pages back
;;;;                on a full GC, so the restore reuses pages SBCL zeroes
;;;;                itself.  This sets the runtime's small_generation_limit
;;;;                for those runs only; a measurement, never something
;;;;                binstore does.  Left out where the runtime lacks it.
;;;; and prints each one's payload bandwidth as a percentage of memcpy's.

(in-package #:binstore-bench)

(defun specialized-dataset-names ()
  "The data sets whose payload is the raw elements of specialized arrays."
  (remove-if-not (lambda (name) (dataset-option name :specialized)) (dataset-names)))

(defun small-generation-limit-sap ()
  "The address of gencgc's small_generation_limit, or NIL.  A full GC hands
free pages back to the kernel when it collects a generation above it."
  (let ((address (sb-sys:find-foreign-symbol-address "small_generation_limit")))
    (and address (sb-sys:int-sap address))))

(defun call-keeping-free-pages (fn)
  "Call FN with full GCs keeping SBCL's free pages mapped (the limit raised
above every generation); the runtime's value is put back after."
  (let ((sap (small-generation-limit-sap)))
    (let ((old (sb-sys:signed-sap-ref-8 sap 0)))
      (setf (sb-sys:signed-sap-ref-8 sap 0) sb-vm:+pseudo-static-generation+)
      (unwind-protect (funcall fn)
        (setf (sb-sys:signed-sap-ref-8 sap 0) old)))))

(defun fresh-copy-timer (data)
  "A timer making, for each array of DATA, a fresh octet vector of the
array's payload size and filling it with REPLACE."
  (let* ((sizes (map 'list #'array-payload-bytes data))
         (source (make-array (reduce #'max sizes) :element-type '(unsigned-byte 8)
                                                  :initial-element 7)))
    (declare (type (simple-array (unsigned-byte 8) (*)) source))
    (make-timer (lambda ()
                  (loop for size of-type fixnum in sizes
                        collect (copy-octets (make-array size :element-type '(unsigned-byte 8))
                                             source))))))

(defun fresh-memory-row (dataset)
  "Time DATASET's references and restores in rounds; return a plist of the
best seconds of each, the payload and the output's size."
  (let* ((data (generate-dataset dataset))
         (vec (binstore:store nil data :output-magic-number nil
                                       :support-shared-list-structures nil))
         (restore (lambda () (binstore:restore vec :require-header nil)))
         (keep (small-generation-limit-sap))
         (memcpy (memcpy-timer (length vec)))
         (copy (fresh-copy-timer data))
         (plain (make-timer restore))
         (kept (and keep (call-keeping-free-pages (lambda () (make-timer restore))))))
    (loop repeat (1- *runs*)
          do (run-timer memcpy)
             (run-timer copy)
             (run-timer plain)
             (when kept
               (call-keeping-free-pages
                (lambda ()
                  ;; the default runs' full GCs handed every free page back:
                  ;; map as many again first, for the timed run to reuse
                  (dotimes (i (timer-reps kept)) (funcall restore))
                  (run-timer kept)))))
    (flet ((best (timer) (and timer (timer-best timer))))
      (list :dataset dataset :payload (payload-bytes data) :bytes (length vec)
            :memcpy (best memcpy) :copy (best copy) :restore (best plain)
            :kept (best kept)))))

(defun write-fresh-memory-table (stream rows)
  (markdown-header stream '("data set" "payload MB" "memcpy ms" "fresh copy ms" "restore ms"
                            "pages kept ms" "fresh copy %" "restore %" "pages kept %"))
  (dolist (row rows)
    (destructuring-bind (&key dataset payload bytes memcpy copy restore kept) row
      (flet ((percent (seconds)
               ;; payload bandwidth over memcpy's bandwidth on the output's bytes
               (and seconds (fmt (* 100 (/ (/ payload seconds) (/ bytes memcpy))) 2))))
        (markdown-row stream
                      (list dataset (fmt (/ payload 1d6)) (fmt (ms memcpy)) (fmt (ms copy))
                            (fmt (ms restore)) (if kept (fmt (ms kept)) "-")
                            (percent copy) (percent restore) (or (percent kept) "-")))))))

(defun fresh-memory-report (&key (datasets (specialized-dataset-names)))
  "Measure the specialized-array DATASETS against memcpy and fresh memory
(see this file's header); print the table and write it to
bench/results/fresh-memory.md."
  (let ((rows (loop for dataset in datasets
                    collect (prog1 (fresh-memory-row dataset)
                              (progress "  ~A done~%" dataset))))
        (path (merge-pathnames "fresh-memory.md" (results-directory))))
    (ensure-directories-exist path)
    (with-open-file (out path :direction :output :if-exists :supersede
                              :external-format :utf-8)
      (format out "# Restoring specialized arrays against fresh memory~%~%~
                   SBCL ~A.  Best of ~D runs, each after a full GC, in rounds; ~
                   % = payload bandwidth relative to memcpy's (see bench/fresh-memory.lisp).~%~%"
              (lisp-implementation-version) *runs*)
      (write-fresh-memory-table out rows))
    (write-fresh-memory-table *standard-output* rows)
    (format t "~&Written to ~A~%" (namestring path))
    rows))
