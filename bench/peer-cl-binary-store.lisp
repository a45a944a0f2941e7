;;;; Benchmark adapter for cl-binary-store (loaded by LOAD-PEERS in
;;;; bench.lisp only when the system loaded; not part of binstore).  Our own
;;;; code calling its public API: STORE and RESTORE with the keywords and
;;;; variables it documents.

(in-package #:binstore-bench)

(defun cl-binary-store-args (mode)
  "cl-binary-store's equivalent of the benchmark MODE."
  (list :track-references (mode-tracks-p mode)
        :support-shared-list-structures (mode-shares-lists-p mode)))

(register-peer
 (make-contestant
  :name "cl-binary-store"
  :how "`(cl-binary-store:store nil data :track-references r :support-shared-list-structures l)` (none: nil nil, refs: t nil, lists: t t); store-into: `store` into a simple octet vector allocated beforehand with room; restore: `(cl-binary-store:restore v)` with v a simple copy of the store's output (made before timing: `store nil` returns an adjustable vector with a fill pointer, which `restore` reads through a slow stream path)"
  :store (lambda (data mode)
           (let ((args (cl-binary-store-args mode)))
             (lambda () (apply #'cl-binary-store:store nil data args))))
  :input (lambda (output) (coerce output '(simple-array (unsigned-byte 8) (*))))
  :restore (lambda (input mode)
             (declare (ignore mode))
             (lambda () (cl-binary-store:restore input)))
  :into (lambda (data mode bytes)
          (let ((args (cl-binary-store-args mode))
                (buffer (make-array (+ bytes 4096) :element-type '(unsigned-byte 8))))
            (lambda () (apply #'cl-binary-store:store buffer data args))))))
