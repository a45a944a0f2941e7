;;;; Loads binstore from this checkout (found relative to this file, whatever
;;;; the current directory) and defines the entry points the Makefile calls.

(require :asdf)

(let ((root (merge-pathnames "../" (make-pathname :name nil :type nil
                                                  :defaults *load-truename*))))
  (asdf:load-asd (merge-pathnames "binstore.asd" root)))

(defpackage #:binstore-tools
  (:use #:common-lisp)
  (:export #:run-tests #:run-bench #:run-memory-bench #:run-fuzz))

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

(defun run-fuzz (seconds)
  "Run the mutation fuzzer for SECONDS; exit non-zero when it found failures."
  (asdf:load-system "binstore/fuzz")
  (uiop:quit (if (uiop:symbol-call :binstore-fuzz :fuzz :seconds seconds) 0 1)))
