;;;; Loads binstore from the current directory and runs its portable tests
;;;; (tests/portable/) on the Lisp that loads this file, form by form, then
;;;; exits with 0 when every test passed, 1 otherwise: what make test-clisp
;;;; runs (a Lisp reads a whole -x argument before evaluating it, so ASDF's
;;;; package must exist before the forms that name it are read).

(require "asdf")
(push (truename "./") asdf:*central-registry*)
;; A load that fails exits 2: left to the debugger, a Lisp reading an empty
;; standard input (ABCL) would end with status 0 and hide the failure.
(handler-case (handler-bind ((warning #'muffle-warning))
                (asdf:load-system "binstore/portable-tests"))
  (error (e)
    (format *error-output* "~&binstore/portable-tests did not load: ~A~%" e)
    (uiop:quit 2)))
(uiop:quit (if (funcall (read-from-string "binstore-portable-tests:run")) 0 1))
