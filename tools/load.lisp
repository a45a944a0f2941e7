;;;; Loads binstore from this checkout (found relative to this file, whatever
;;;; the current directory) and defines the entry points the Makefile calls.

(require :asdf)

(let ((root (merge-pathnames "../" (make-pathname :name nil :type nil
                                                  :defaults *load-truename*))))
  (asdf:load-asd (merge-pathnames "binstore.asd" root)))

(defpackage #:binstore-tools
  (:use #:common-lisp)
  (:export #:run-tests #:check-quiet-build #:run-bench #:run-memory-bench
           #:run-compression-bench #:update-readme-results #:run-fuzz))

(in-package #:binstore-tools)

(defun run-tests ()
  "Build and run the whole test suite; exit 0 only when nothing failed.
\(Only this exits: (asdf:test-system \"binstore\") returns.)"
  (asdf:load-system "binstore/tests")
  (uiop:symbol-call :binstore-tests :run-all-and-exit))

(defun split-lines (string)
  (with-input-from-string (in string)
    (loop for line = (read-line in nil) while line collect line)))

(defparameter *build-noise*
  '("; note:" "; compiling file " "; wrote " "; compilation finished in " "; compiling (")
  "How the lines a quiet build of binstore must not print begin: SBCL's
compiler notes and COMPILE-FILE's banners.")

(defun noise-line-p (line)
  (some (lambda (prefix) (eql 0 (search prefix line))) *build-noise*))

(defun check-quiet-build ()
  "Compile and load binstore in this image, which must have an empty fasl
cache (make runs it with XDG_CACHE_HOME set to a new directory); let what the
build prints through, and exit 1 when it printed compiler notes or per-file
banners (binstore.asd's :around-compile hook muffles them), 0 otherwise.
Warnings and style warnings are shown but not counted: they are for the
authors to read, not for this check to judge."
  (let* ((component (asdf:find-component "binstore" '("api" "api")))
         (fasl (first (asdf:output-files (asdf:make-operation 'asdf:compile-op) component)))
         (log (make-string-output-stream)))
    (when (probe-file fasl)
      (format *error-output* "~&check-quiet-build: ~A exists: the fasl cache is not empty~%" fasl)
      (uiop:quit 2))
    (let* ((tee (make-broadcast-stream *standard-output* log))
           (*standard-output* tee)
           (*error-output* tee)
           (*trace-output* tee))
      (asdf:load-system "binstore"))
    (unless (probe-file fasl)
      (format *error-output* "~&check-quiet-build: ~A was not written: nothing was compiled~%" fasl)
      (uiop:quit 2))
    (let* ((lines (split-lines (get-output-stream-string log)))
           (noise (count-if #'noise-line-p lines)))
      (format t "~&Quiet build: binstore compiled in an empty cache printed ~D line~:P, ~
                 ~D of them compiler notes or file banners.~%"
              (length lines) noise)
      (finish-output)
      (uiop:quit (if (zerop noise) 0 1)))))

(defun split-words (string)
  (let ((words '()) (start nil))
    (loop for i from 0 to (length string)
          for c = (if (< i (length string)) (char string i) #\Space)
          do (cond ((and (char= c #\Space) start)
                    (push (subseq string start i) words) (setf start nil))
                   ((and (char/= c #\Space) (not start)) (setf start i))))
    (nreverse words)))

(defun run-bench (&key (datasets "") (modes "") (peers "") (runs ""))
  "Run the benchmark on DATASETS and MODES (space-separated names; empty
means all) beside the peers in PEERS (a directory, \"none\", or empty for
../shared/peers-src when it exists) with RUNS cold runs per figure (empty:
the default), print the table and write bench/results/."
  (asdf:load-system "binstore/bench")
  (uiop:symbol-call :binstore-bench :main
                    :datasets (split-words datasets)
                    :modes (split-words modes)
                    :peers (and (plusp (length peers)) peers)
                    :runs (and (plusp (length runs)) (parse-integer runs)))
  (uiop:quit 0))

(defun run-memory-bench ()
  "Run bench/fresh-memory.lisp: restores of the specialized-array data sets
against memcpy and fresh memory; print the table and write it to
bench/results/fresh-memory.md."
  (asdf:load-system "binstore/bench")
  (uiop:symbol-call :binstore-bench :fresh-memory-report)
  (uiop:quit 0))

(defun run-compression-bench (&key (datasets ""))
  "Run bench/compression.lisp on DATASETS (space-separated names; empty: its
default ones): binstore's zstd and LZ4 against the zstd and lz4 tools; print
the table and write bench/results/compression.md."
  (asdf:load-system "binstore/bench-compression")
  (let ((names (split-words datasets)))
    (if names
        (uiop:symbol-call :binstore-bench :compression-report :datasets names)
        (uiop:symbol-call :binstore-bench :compression-report)))
  (uiop:quit 0))

(defparameter *results-begin* "<!-- results: begin (make readme-results) -->"
  "The line after which README.md holds the table of the latest run.")

(defparameter *results-end* "<!-- results: end -->"
  "The line before which that table ends.")

(defun file-string (path)
  (with-open-file (in path :external-format :utf-8)
    (let* ((text (make-string (file-length in)))
           (end (read-sequence text in)))
      (subseq text 0 end))))

(defun update-readme-results ()
  "Put bench/results/summary.md, the table of the latest `make bench`, in
README.md between *RESULTS-BEGIN* and *RESULTS-END*.  The new README is
written beside the old one and renamed over it."
  (let* ((readme (asdf:system-relative-pathname "binstore" "README.md"))
         (summary (asdf:system-relative-pathname "binstore" "bench/results/summary.md"))
         (text (file-string readme))
         (begin (search *results-begin* text))
         (end (search *results-end* text)))
    (unless (and begin end (< begin end))
      (error "README.md lacks the lines ~S and ~S around the results" *results-begin* *results-end*))
    (let ((new (concatenate 'string
                            (subseq text 0 (+ begin (length *results-begin*)))
                            (string #\Newline) (file-string summary)
                            (subseq text end)))
          (temporary (make-pathname :type "md-new" :defaults readme)))
      (with-open-file (out temporary :direction :output :if-exists :supersede
                                     :external-format :utf-8)
        (write-string new out))
      (rename-file temporary readme)
      (format t "~&README.md: results table from ~A~%" (namestring summary)))))

(defun run-fuzz (seconds)
  "Run the mutation fuzzer for SECONDS; exit non-zero when it found failures.
binstore/compression is loaded too, so that compressed records are in the
corpus."
  (asdf:load-system "binstore/compression")
  (asdf:load-system "binstore/fuzz")
  (uiop:quit (if (uiop:symbol-call :binstore-fuzz :fuzz :seconds seconds) 0 1)))
