;;;; Compression benchmark: binstore's own zstd and LZ4 (binstore/compression)
;;;; against binstore's plain output piped through the zstd and lz4 tools.
;;;;
;;;;   make bench-compression
;;;;   (binstore-bench:compression-report :datasets '("people"))
;;;;
;;;; For each data set (a few of the standard ones, bench/datasets.lisp, stored
;;;; at binstore's defaults, header included) and each way of compressing:
;;;; the compressed bytes, the time of store + compress (one call producing
;;;; the compressed octet vector) and of decompress + restore (one call from
;;;; it back to the data).  Each time is cold: one call after a full GC, the
;;;; minimum of 5 such runs.  The rows:
;;;;   plain              (store nil data), (restore octets): no compression
;;;;   binstore zstd -N   (store nil data :compression '(:zstd :level N)),
;;;;                      (restore compressed)
;;;;   binstore lz4       (store nil data :compression :lz4) (level 0)
;;;;   zstd tool -N       (store nil data), its octets written to `zstd -N -c`
;;;;                      through a pipe and its output read back; then
;;;;                      `zstd -d -c` the same way and RESTORE of its output
;;;;   lz4 tool           the same through `lz4 -c` (level 1) and `lz4 -d -c`
;;;; The tools' times include starting the process (about a millisecond).
;;;; Each round trip is checked once.  Results go to stdout and to
;;;; bench/results/compression.md.

(in-package #:binstore-bench)

(defparameter *compression-datasets*
  '("people" "structures" "unicode-strings" "double-vectors" "tiny-integers" "random-double-floats")
  "The data sets the compression benchmark runs by default.")

(defparameter *compression-runs* 5
  "Cold runs per measurement; the minimum is reported.")

(defun cold-seconds (fn)
  "The least time one call of FN takes, each of *COMPRESSION-RUNS* calls
after a full GC."
  (loop repeat *compression-runs*
        minimize (progn (full-gc)
                        (let ((start (now)))
                          (funcall fn)
                          (seconds-since start)))))

(defun pipe-through (program arguments octets)
  "The bytes PROGRAM (with ARGUMENTS) writes to its standard output when
OCTETS are written to its standard input, through pipes (a thread feeds
the input while this one reads the output)."
  (let* ((process (sb-ext:run-program program arguments :search t :wait nil
                                                        :input :stream :output :stream
                                                        :error nil))
         (writer (sb-thread:make-thread
                  (lambda ()
                    (let ((in (sb-ext:process-input process)))
                      (write-sequence octets in)
                      (close in)))
                  :name "pipe-through writer"))
         (out (sb-ext:process-output process))
         (result (make-array (max 4096 (floor (length octets) 4)) :element-type '(unsigned-byte 8)
                                                                    :adjustable t :fill-pointer 0))
         (buffer (make-array 65536 :element-type '(unsigned-byte 8))))
    (loop for n = (read-sequence buffer out)
          while (plusp n)
          do (let ((at (fill-pointer result)))
               (when (> (+ at n) (array-total-size result))
                 (setf result (adjust-array result (* 2 (+ at n)))))
               (setf (fill-pointer result) (+ at n))
               (replace result buffer :start1 at :end2 n)))
    (sb-thread:join-thread writer)
    (sb-ext:process-wait process)
    (unless (zerop (sb-ext:process-exit-code process))
      (error "~a ~{~a~^ ~} exited with ~d" program arguments (sb-ext:process-exit-code process)))
    (sb-ext:process-close process)
    (coerce result '(simple-array (unsigned-byte 8) (*)))))

(defun compression-ways ()
  "Each way of compressing: its name, a function of the data returning the
compressed octets, and a function of those octets returning the data."
  (flet ((ours (name spec)
           (list name
                 (lambda (data) (binstore:store nil data :compression spec))
                 (lambda (octets) (binstore:restore octets))))
         (tool (name program compress-arguments)
           (list name
                 (lambda (data)
                   (pipe-through program compress-arguments (binstore:store nil data)))
                 (lambda (octets)
                   (binstore:restore (pipe-through program '("-d" "-c") octets))))))
    (list (list "plain" (lambda (data) (binstore:store nil data)) #'binstore:restore)
          (ours "binstore zstd -1" '(:zstd :level 1))
          (ours "binstore zstd -3" '(:zstd :level 3))
          (ours "binstore zstd -9" '(:zstd :level 9))
          (ours "binstore lz4" :lz4)
          (tool "zstd tool -1" "zstd" '("-1" "-c" "-q"))
          (tool "zstd tool -3" "zstd" '("-3" "-c" "-q"))
          (tool "lz4 tool" "lz4" '("-1" "-c" "-q")))))

(defun compression-rows (name)
  "The rows of data set NAME: (dataset way bytes store-seconds restore-seconds check)."
  (let ((data (generate-dataset name)))
    (loop for (way compress decompress) in (compression-ways)
          collect (let* ((octets (funcall compress data))
                         (problem (check-roundtrip data (funcall decompress octets)
                                                   :track t :track-conses t))
                         (store (cold-seconds (lambda () (funcall compress data))))
                         (restore (cold-seconds (lambda () (funcall decompress octets)))))
                    (format *error-output* "~&  ~20a ~12:d bytes  ~9,2f ms  ~9,2f ms~@[  WRONG: ~a~]~%"
                            way (length octets) (* 1000 store) (* 1000 restore) problem)
                    (list name way (length octets) store restore problem)))))

(defun compression-table (rows)
  "ROWS as a markdown table."
  (with-output-to-string (s)
    (format s "| data set | compression | bytes | ratio | store + compress ms | decompress + restore ms |~%")
    (format s "|---|---|---:|---:|---:|---:|~%")
    (let ((plain-bytes (make-hash-table :test 'equal)))
      (dolist (row rows)
        (destructuring-bind (dataset way bytes store restore problem) row
          (when (string= way "plain") (setf (gethash dataset plain-bytes) bytes))
          (format s "| ~a | ~a | ~:d | ~,2f | ~,2f | ~,2f~@[ WRONG: ~a~] |~%"
                  dataset way bytes (/ (gethash dataset plain-bytes bytes) bytes)
                  (* 1000 store) (* 1000 restore) problem))))))

(defun compression-report (&key (datasets *compression-datasets*))
  "Run the compression benchmark on DATASETS (names of standard data sets),
print the table and write it to bench/results/compression.md; return the
rows."
  (let ((rows '()))
    (dolist (name datasets)
      (format *error-output* "~&~a:~%" name)
      (setf rows (append rows (compression-rows name))))
    (let ((table (compression-table rows))
          (path (asdf:system-relative-pathname "binstore" "bench/results/compression.md")))
      (write-string table)
      (with-open-file (out path :direction :output :if-exists :supersede)
        (format out "Compression benchmark (`make bench-compression`, bench/compression.lisp): ~
                     each time the least of ~d cold calls (after a full GC), SBCL ~a.~%~%~a"
                *compression-runs* (lisp-implementation-version) table))
      (format t "~&Wrote ~a~%" (namestring path)))
    rows))
