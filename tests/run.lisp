;;;; Runs the whole suite and prints the closing line CI reads:
;;;;   binstore: N passed, N failed

(in-package #:binstore-tests)

(defun run-all ()
  "Run every test; print the FiveAM report and the closing count line.
Return true when nothing failed."
  (let* ((results (let ((*print-names* t)) (run 'all)))
         (passed (count-if (lambda (r) (typep r 'it.bese.fiveam::test-passed)) results))
         ;; a check the machine cannot make (no huge pages) is skipped, not failed
         (skipped (count-if (lambda (r) (typep r 'it.bese.fiveam::test-skipped)) results))
         (failed (- (length results) passed skipped)))
    (explain! results)
    (when (plusp skipped)
      (format t "~&(~d skipped: what this machine cannot do)~%" skipped))
    (format t "~&binstore: ~d passed, ~d failed~%" passed failed)
    (finish-output)
    (zerop failed)))

(defun run-all-and-exit ()
  "Run every test and exit the process: status 0 only when nothing failed."
  (sb-ext:exit :code (if (run-all) 0 1) :abort nil))
