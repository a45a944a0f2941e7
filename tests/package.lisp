;;;; Test package and the root suite every test file hangs its suite under.

(defpackage #:binstore-tests
  (:use #:common-lisp #:fiveam)
  (:export #:run-all #:run-all-and-exit #:all))

(in-package #:binstore-tests)

(def-suite all :description "Every binstore test.")
