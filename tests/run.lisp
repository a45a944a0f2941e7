;;;; Runs the whole suite and prints the closing line CI reads:
;;;;   binstore: N passed, N failed
;;;;
;;;; Two ways in:
;;;;   make test                        -> RUN-ALL-AND-EXIT (exits the process)
;;;;   (asdf:test-system "binstore")    -> RUN-FROM-ASDF (returns, or signals
;;;;                                       TESTS-FAILED; never exits)

(in-package #:binstore-tests)

(defvar *root-suite* 'all
  "The suite RUN-ALL runs: ALL, except in the runner's own tests below, which
bind it to a one-test suite so that running the runner does not run
everything again.")

(defvar *may-exit* t
  "When false, RUN-ALL-AND-EXIT signals an error instead of exiting: the
runner's tests bind it to NIL, so a path that should return but exits would
fail them instead of ending the test process.")

(defun run-all ()
  "Run every test; print the FiveAM report and the closing count line.
Return true when nothing failed."
  (let* ((results (let ((*print-names* t)) (run *root-suite*)))
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
  "Run every test and exit the process: status 0 only when nothing failed.
This is what `make test` calls (tools/load.lisp); nothing else should."
  (let ((passed (run-all)))
    (unless *may-exit*
      (error "RUN-ALL-AND-EXIT called where the image must not exit."))
    (exit-process (if passed 0 1))))

(define-condition tests-failed (error)
  ()
  (:report "binstore: some tests failed (the report and the count line are above)."))

(defun run-from-asdf ()
  "The TEST-OP of the system binstore/tests, reached by
(asdf:test-system \"binstore\"): run every test, print the FiveAM report and
the line `binstore: N passed, N failed', and return T when nothing failed.
When a test failed, signal TESTS-FAILED, an ERROR (the usual ASDF convention:
a script that calls TEST-SYSTEM sees the failure without reading the
output).  It never exits the image; only RUN-ALL-AND-EXIT does."
  (or (run-all) (error 'tests-failed)))

;;; The runner's own tests (suite TOOLING).  They run the real TEST-OP perform method of
;;; binstore/tests (defined in binstore.asd), with *ROOT-SUITE* bound to the
;;; one-test suite RUNNER-PROBE, which is not part of ALL.

(def-suite tooling :in all
  :description "How binstore is built and its tests run: a quiet compile that
still shows warnings; ASDF's test-op returns; the count line.")

(def-suite runner-probe
  :description "Not in ALL: the one test the runner's tests run through ASDF.")

(defvar *probe-passes* t
  "Whether the test in RUNNER-PROBE passes.")

(test (runner-probe-test :suite runner-probe)
  (is-true *probe-passes*))

(defun perform-test-op ()
  "Call the TEST-OP perform method of binstore/tests on RUNNER-PROBE, not
exiting; return what it printed, and the error it signalled or NIL."
  (let ((out (make-string-output-stream))
        (condition nil))
    (let ((*root-suite* 'runner-probe)
          (*may-exit* nil)
          (*on-error* nil)
          (*on-failure* nil)
          (*standard-output* out)
          (*test-dribble* out))
      ;; A session of its own: under (asdf:test-system "binstore") the
      ;; action is being performed already, which ASDF would call circular.
      ;; (ECL's ASDF, 3.1, and CLISP's, 3.2, call the session its cache)
      (handler-case (#+(or sbcl abcl) asdf/session:with-asdf-session #+(or ecl clisp) asdf/cache:with-asdf-cache
                     (:override t)
                      (asdf:perform (asdf:make-operation 'asdf:test-op)
                                    (asdf:find-system "binstore/tests")))
        (error (e) (setf condition e))))
    (values (get-output-stream-string out) condition)))

(defun output-lines (string)
  (with-input-from-string (in string)
    (loop for line = (read-line in nil) while line collect line)))

(in-suite tooling)

(test test-op-returns
  "(asdf:test-system \"binstore\") runs the suite and returns: its perform
method never exits the image, and prints the count line."
  (let ((*probe-passes* t))
    (multiple-value-bind (output condition) (perform-test-op)
      (is (null condition) "test-op signalled ~A" condition)
      (is (member "binstore: 1 passed, 0 failed" (output-lines output) :test #'string=)
          "no count line in:~%~A" output))))

(test test-op-signals-failure
  "When a test fails, the test-op signals TESTS-FAILED (an error) and prints
the count line; it still does not exit."
  (let ((*probe-passes* nil))
    (multiple-value-bind (output condition) (perform-test-op)
      (is (typep condition 'tests-failed) "test-op signalled ~S, not TESTS-FAILED" condition)
      (is (member "binstore: 0 passed, 1 failed" (output-lines output) :test #'string=)
          "no count line in:~%~A" output))))

#+sbcl ; compiler notes are SBCL's
(test quiet-compilation
  "binstore's :around-compile hook (binstore.asd) muffles compiler notes and
the per-file banners for the file it compiles, but lets warnings and style
warnings through, and changes nothing outside that compilation."
  (let ((hook (asdf/component:around-compile-hook
               (asdf:find-component "binstore" '("api" "api"))))
        (notes 0) (style-warnings 0) (warnings 0) (verbose-inside :unset)
        (verbose-outside *compile-verbose*))
    (is (eq 'asdf-user::call-with-quiet-binstore-compilation hook))
    (handler-bind ((sb-ext:compiler-note
                     (lambda (c) (declare (ignore c)) (incf notes)))
                   (warning
                     (lambda (c)
                       (if (typep c 'style-warning) (incf style-warnings) (incf warnings))
                       (muffle-warning c))))
      (let ((*error-output* (make-broadcast-stream)))
        (uiop:call-function
         hook
         (lambda (&rest flags)
           (declare (ignore flags))
           (setf verbose-inside *compile-verbose*)
           ;; a note (generic arithmetic under speed), a style warning (an
           ;; unused variable) and a warning (a constant of the wrong type),
           ;; each signalled at once, not at the end of a compilation unit
           (compile nil '(lambda (x) (declare (optimize speed)) (* x 2.5)))
           (compile nil '(lambda (unused) 1))
           (compile nil '(lambda () (let ((s 1)) (declare (string s)) s)))))))
    (is (= 0 notes) "~D compiler notes got through" notes)
    (is (plusp style-warnings) "the style warning was hidden")
    (is (plusp warnings) "the warning was hidden")
    (is (null verbose-inside))
    (is (eq verbose-outside *compile-verbose*))))
