;;;; Loads binstore from this checkout (found relative to this file, whatever
;;;; the current directory) and defines the entry points the Makefile calls.

(require :asdf)

(let ((root (merge-pathnames "../" (make-pathname :name nil :type nil
                                                  :defaults *load-truename*))))
  (asdf:load-asd (merge-pathnames "binstore.asd" root)))

(defpackage #:binstore-tools
  (:use #:common-lisp)
  (:export #:run-tests #:run-bench #:run-memory-bench #:update-readme-results #:run-fuzz))

(in-package #:binstore-tools)

(defun run-tests ()
  "Build and run the whole test suite; exit 0 only when nothing failed."
  (asdf:load-system "binstore/tests")
  (uiop:symbol-call :binstore-tests :run-all-and-exit))

(defun split-words (string)
  (let ((words '()) (start nil))
    (loop for i from 0 to (length string)
          for c = (if (< i (length string)) (char string i) #\Space)
          do (cond ((and (char= c #\Space) start)
                    (push (subseq string start i) words) (setf start nil))
                   ((and (char/= c #\Space) (not start)) (setf start i))))
    (nreverse words)))

(defun run-bench (&key (datasets "") (modes ""))
  "Run the benchmark on DATASETS and MODES (space-separated names; empty
means all), print the table and write bench/results/."
  (asdf:load-system "binstore/bench")
  (uiop:symbol-call :binstore-bench :main
                    :datasets (split-words datasets)
                    :modes (split-words modes))
  (uiop:quit 0))

(defun run-memory-bench ()
  "Run bench/fresh-memory.lisp: restores of the specialized-array data sets
against memcpy and fresh memory; print the table and write it to
bench/results/fresh-memory.md."
  (asdf:load-system "binstore/bench")
  (uiop:symbol-call :binstore-bench :fresh-memory-report)
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
  "Run the mutation fuzzer for SECONDS; exit non-zero when it found failures."
  (asdf:load-system "binstore/fuzz")
  (uiop:quit (if (uiop:symbol-call :binstore-fuzz :fuzz :seconds seconds) 0 1)))
