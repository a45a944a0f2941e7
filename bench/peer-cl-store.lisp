;;;; Benchmark adapter for cl-store (loaded by LOAD-PEERS in bench.lisp only
;;;; when the system loaded; not part of binstore).  Our own code calling
;;;; its public API: CL-STORE:STORE and CL-STORE:RESTORE on flexi-streams'
;;;; in-memory octet streams, *CHECK-FOR-CIRCS* for the modes.  It is slow:
;;;; it gets *SLOW-PEER-SECONDS* per data set.

(in-package #:binstore-bench)

(register-peer
 (make-contestant
  :name "cl-store"
  :slow t
  :how "`(cl-store:store data s)` to `flexi-streams:with-output-to-sequence` (octets), `(cl-store:restore s)` from `flexi-streams:with-input-from-sequence`; `cl-store:*check-for-circs*` nil in none, t in refs and lists (its tracking covers conses); no store-into"
  :store (lambda (data mode)
           (let ((circs (mode-tracks-p mode)))
             (lambda ()
               (let ((cl-store:*check-for-circs* circs))
                 (flexi-streams:with-output-to-sequence (s :element-type '(unsigned-byte 8))
                   (cl-store:store data s))))))
  :restore (lambda (input mode)
             (let ((circs (mode-tracks-p mode)))
               (lambda ()
                 (let ((cl-store:*check-for-circs* circs))
                   (flexi-streams:with-input-from-sequence (s input)
                     (cl-store:restore s))))))))
