;;;; Benchmark adapter for cl-conspack (loaded by LOAD-PEERS in bench.lisp
;;;; only when the system loaded; not part of binstore).  Our own code
;;;; calling its public API: ENCODE, DECODE, ENCODE-TO-BUFFER, TRACKING-REFS,
;;;; and DEFENCODING for the data sets' structure and standard classes (it
;;;; stores no instance without such per-type code).

(in-package #:binstore-bench)

(conspack:defencoding bench-blarg a b)
(conspack:defencoding c-blarg a b)
(conspack:defencoding address street state zip)
(conspack:defencoding person first second age addresses telephone email)
(conspack:defencoding typed-item d s f w c str u8 l any)

(defmacro with-conspack-mode ((mode) &body body)
  "BODY with conspack's reference tracking (a fresh context) in the modes
that track references; conspack's tracking covers conses too, so refs and
lists are the same for it."
  `(flet ((body () ,@body))
     (declare (dynamic-extent #'body))
     (if (mode-tracks-p ,mode)
         (conspack:tracking-refs () (body))
         (body))))

(register-peer
 (make-contestant
  :name "cl-conspack"
  :how "`(conspack:encode data)`, in `(conspack:tracking-refs () ...)` in refs and lists (its tracking covers conses: the two modes are one for it); `defencoding` for the data sets' structures and classes; store-into: `(conspack:encode-to-buffer data (fast-io:make-output-buffer :vector v))` with v allocated beforehand with room; restore: `(conspack:decode v)`, in `tracking-refs` likewise"
  :store (lambda (data mode)
           (lambda () (with-conspack-mode (mode) (conspack:encode data))))
  :restore (lambda (input mode)
             (lambda () (with-conspack-mode (mode) (conspack:decode input))))
  :into (lambda (data mode bytes)
          (let ((vector (make-array (+ bytes 4096) :element-type '(unsigned-byte 8))))
            (lambda ()
              (let ((buffer (fast-io:make-output-buffer :vector vector)))
                (with-conspack-mode (mode) (conspack:encode-to-buffer data buffer))
                ;; the room given is the store's output and 4 KiB more: it
                ;; fits (the bytes written are checked against the store's)
                (fast-io:buffer-position buffer)))))))
