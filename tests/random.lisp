;;;; Randomly generated data (tests/generator.lisp) round-trips in each
;;;; storing mode.  A failure names its mode and seed; reproduce it with
;;;;   (multiple-value-bind (datum store-options compare-options) (random-case :refs 123) ...)

(in-package #:binstore-tests)

(def-suite random :in all
  :description "Thousands of generated data, each checked with SAME-DATA-P.")
(in-suite random)

(defun random-case (mode seed)
  "The datum of case SEED in MODE, the STORE options for it, and the
SAME-DATA-P options to check it with.  MODE is one of
  :refs     objects tracked, not conses; sharing and cycles through non-cons
            containers
  :no-refs  :track-references nil; no sharing, no cycles
  :lists    :support-shared-list-structures t; conses shared and circular too
  :defaults STORE's defaults; everything shared and circular, conses too"
  (let ((state (seeded-random-state seed)))
    (ecase mode
      (:refs (values (random-datum state :sharing t :cycles t)
                     '(:support-shared-list-structures nil)
                     '()))
      (:no-refs (values (random-datum state)
                        '(:track-references nil)
                        '(:identity nil)))
      (:lists (values (random-datum state :sharing t :cycles t :conses t)
                      '(:support-shared-list-structures t)
                      '(:conses t)))
      (:defaults (values (random-datum state :sharing t :cycles t :conses t)
                         '()
                         '(:conses t))))))

(defun failure-kind (condition)
  "What sort of failure CONDITION is, to group the failures of many cases."
  (if (typep condition 'simple-condition)
      (format nil "~s: ~a" (type-of condition) (simple-condition-format-control condition))
      (prin1-to-string (type-of condition))))

(defun run-random-case (mode seed)
  "NIL when case SEED of MODE round-trips.  Otherwise a kind of failure (to
group by) and a message saying what went wrong."
  (multiple-value-bind (datum store-options compare-options) (random-case mode seed)
    (handler-case
        (multiple-value-bind (same message)
            (apply #'same-data-p datum
                   (binstore:restore (apply #'binstore:store nil datum store-options))
                   compare-options)
          (if same
              nil
              (values "restored data differs" message)))
      (serious-condition (condition)
        (values (failure-kind condition)
                (format nil "~s: ~a" (type-of condition) (bounded-report condition)))))))

(defun check-random-mode (mode first-seed count)
  "Run COUNT cases of MODE from FIRST-SEED; one check that none failed.  The
failures are grouped by kind, and each kind is shown by its first two seeds,
so that one frequent bug does not hide the others."
  (let ((kinds '()) (failed 0))           ; kinds: (kind count . examples)
    (loop for seed from first-seed below (+ first-seed count)
          do (multiple-value-bind (kind message) (run-random-case mode seed)
               (when kind
                 (incf failed)
                 (let ((entry (assoc kind kinds :test #'string=)))
                   (unless entry
                     (setf entry (list kind 0))
                     (setf kinds (append kinds (list entry))))
                   (incf (second entry))
                   (when (< (length (cddr entry)) 2)
                     (setf (cddr entry)
                           (append (cddr entry) (list (format nil "seed ~d: ~a" seed message)))))))))
    (is (zerop failed) "~d of ~d random cases failed in mode ~s~:{~%~*~d case~:p like:~@{~%    ~a~}~}"
        failed count mode kinds)))

(test random-with-references
  (check-random-mode :refs 0 4000))

(test random-without-references
  (check-random-mode :no-refs 100000 3000))

(test random-with-shared-lists
  (check-random-mode :lists 200000 3000))

(test random-at-the-defaults
  (check-random-mode :defaults 300000 3000))
