;;;; Loads binstore from the current directory and runs its portable tests
;;;; (tests/portable/) on the Lisp that loads this file, form by form, then
;;;; exits with 0 when every test passed, 1 otherwise: what make test-clisp
;;;; runs (a Lisp reads a whole -x argument before evaluating it, so ASDF's
;;;; package must exist before the forms that name it are read).

(require "asdf")
(push (truename "./") asdf:*central-registry*)
(handler-bind ((warning #'muffle-warning))
  (asdf:load-system "binstore/portable-tests"))
(uiop:quit (if (funcall (read-from-string "binstore-portable-tests:run")) 0 1))
