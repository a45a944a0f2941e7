;;;; Loads binstore/tests from the current directory and runs the whole
;;;; suite on the Lisp that loads this file, then exits with 0 when nothing
;;;; failed, 1 when a test failed, 2 when the suite did not load: what make
;;;; test-clisp-suite runs (CLISP takes a file, not --eval forms; a Lisp
;;;; reads a whole form before evaluating it, so ASDF's package must exist
;;;; before the forms that name it are read).

(require "asdf")
(push (truename "./") asdf:*central-registry*)
(handler-case (handler-bind ((warning #'muffle-warning))
                (asdf:load-system "binstore/tests"))
  (error (e)
    (format *error-output* "~&binstore/tests did not load: ~A~%" e)
    (uiop:quit 2)))
(funcall (read-from-string "binstore-tests:run-all-and-exit"))
