;;;; The mutation fuzzer (fuzz/fuzzer.lisp) as a test: a fixed-seed run of
;;;; 100,000 mutated inputs (never fewer than 20,000) must find no failure,
;;;; and every input a fuzz run ever saved must now restore or signal a
;;;; BINSTORE-ERROR.
;;;;
;;;; tests/fuzz-regressions/ holds those saved inputs, one file each, named
;;;; <kind>-<hash>.bin where KIND says how restoring it failed when it was
;;;; found (type-error, hang, heap-exhaustion, stack-exhaustion, memory-fault,
;;;; package-created, vague-invalid-input ...) and HASH is a hash of its
;;;; bytes.  `make fuzz SECONDS=600` adds new ones; keep them after the bug
;;;; is fixed, as regression tests.  The directory may be empty or absent.

(in-package #:binstore-tests)

(def-suite fuzz :in all
  :description "Mutated inputs never crash, hang or exhaust the heap.")
(in-suite fuzz)

(defparameter *fuzz-routes* '(:vector :fill-pointer :sap)
  "Every way the fuzzer hands input to RESTORE.")

(defun fuzz-acceptable-everywhere-p (octets)
  "True when restoring OCTETS by every route, interning or not, returns or
signals a BINSTORE-ERROR; otherwise NIL and a description of the failure."
  (dolist (route *fuzz-routes* t)
    (dolist (intern-symbols '(nil t))
      (multiple-value-bind (outcome condition)
          (binstore-fuzz:try-input octets :route route :intern-symbols intern-symbols)
        (when (eq outcome :failure)
          (return-from fuzz-acceptable-everywhere-p
            (values nil (format nil "route ~(~a~), intern-symbols ~a: ~a"
                                route intern-symbols
                                (binstore-fuzz:describe-condition condition)))))))))

(test fuzz-classifier
  "The outcome classifier behind both tests: valid input returns, garbage is
INVALID-INPUT, and neither is a failure."
  (is (eq :returned (binstore-fuzz:try-input (binstore:store nil (list 1 "a" #(2))))))
  (is (eq :invalid-input (binstore-fuzz:try-input
                          (coerce #(#x2F) '(simple-array (unsigned-byte 8) (*))))))
  (is (eq :invalid-input (binstore-fuzz:try-input
                          (coerce #(#x02 #x05 #x71) '(simple-array (unsigned-byte 8) (*)))
                          :route :sap)))
  (is-true (fuzz-acceptable-everywhere-p (binstore:store nil '(:a 1.5d0 "x")))))

(test fuzz-corpus-covers-every-tag
  "The corpus contains every tag byte of src/format/tags.lisp somewhere."
  (let ((missing (binstore-fuzz:missing-tags (binstore-fuzz:build-corpus :verbose t))))
    (is (null missing) "tags missing from the corpus: ~{~a~^ ~}" missing)))

(test fuzz-fixed-seed-run
  "A fixed-seed run of 50,000 mutated inputs finds no failure, and the fast
decoder agrees with the reference decoder on every one it compares.  Bounded
by its count, not by time: the same inputs on any machine."
  (multiple-value-bind (ok counts)
      (binstore-fuzz:fuzz :iterations 50000 :seed 42 :verbose t)
    (is (= 50000 (getf counts :inputs)))
    (is (plusp (getf counts :compared)))
    (is-true ok "~d failing inputs (saved under tests/fuzz-regressions/), ~d disagreements"
             (getf counts :failures) (getf counts :disagreements))))

(defstruct weak-holder "A structure for HOLDS-WEAK-TABLE-P to look into." part)

(test weak-tables-are-compared-by-outcome
  "A weak hash table reached through conses, vectors, hash tables and
structures is found (the differential check then compares outcomes only,
as a collection may take its entries between two restores); an ordinary
table, a string, numbers are not weak."
  (let ((weak (make-hash-table :weakness :key))
        (plain (make-hash-table)))
    (setf (gethash 1 plain) "x")
    (is-false (binstore-fuzz::holds-weak-table-p (list 1 "a" plain (vector 2.5d0 plain))))
    (is-true (binstore-fuzz::holds-weak-table-p (list 1 (vector 2 weak))))
    (let ((outer (make-hash-table)))
      (setf (gethash :inner outer) (make-weak-holder :part (list weak)))
      (is-true (binstore-fuzz::holds-weak-table-p (list outer))))
    (let ((circular (list 1 2)))
      (setf (cddr circular) circular)
      (is-false (binstore-fuzz::holds-weak-table-p circular)))))

(test fuzz-saved-regressions
  "Every input a fuzz run saved now restores or signals a BINSTORE-ERROR;
one saved because the two decoders disagreed on it (disagreement-I-...,
I 1 when symbols were interned) now finds them agreeing."
  (dolist (path (binstore-fuzz:regression-files))
    (let ((octets (binstore-fuzz:read-octets path))
          (name (file-namestring path)))
      (multiple-value-bind (ok why) (fuzz-acceptable-everywhere-p octets)
        (is-true ok "~a: ~a" name why))
      (when (eql 0 (search "disagreement-" name))
        (let ((difference (binstore-fuzz:differential-disagreement
                           octets (char= #\1 (char name (length "disagreement-")))
                           (* 64 1024 1024))))
          (is (null difference) "~a: ~a" name difference))))))
