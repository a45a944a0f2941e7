;;;; A benchmark any Lisp binstore runs on can run: some of the standard data
;;;; sets' shapes (bench/datasets.lisp, which SBCL alone runs as yet), each
;;;; stored to an octet vector and restored, each timed cold (one call after
;;;; a full collection, the minimum of RUNS), as the other benchmarks are.  For
;;;; comparing a port's speed with SBCL's on the same machine:
;;;;
;;;;   sbcl --non-interactive --load bench/portable.lisp --eval '(binstore-portable-bench:run)'
;;;;   ecl --norc --load bench/portable.lisp --eval '(binstore-portable-bench:run)' --eval '(ext:quit)'
;;;;   clisp -q -norc -i bench/portable.lisp -x '(binstore-portable-bench:run :names (list "random-fixnums"))'
;;;;
;;;; CLISP runs one data set per process (make bench-portable does so): it
;;;; has stalled, and once crashed, in a full GC after two sets in one.
;;;;
;;;; The data are drawn from each Lisp's own random numbers: the same shapes
;;;; and sizes, not the same values.

#-clisp (require :asdf)
#+clisp (require "asdf")                ; CLISP's module is named in lower case
(asdf:load-asd (merge-pathnames "../binstore.asd" (or *load-truename* *default-pathname-defaults*)))
(let ((*compile-verbose* nil) (*load-verbose* nil))
  (handler-bind ((warning #'muffle-warning))
    (asdf:load-system "binstore")))

(defpackage #:binstore-portable-bench
  (:use #:common-lisp)
  (:export #:run))

(in-package #:binstore-portable-bench)

(defstruct blarg a b)

(defun random-list (n f) (loop repeat n collect (funcall f)))

(defparameter *datasets*
  `(("random-fixnums" ,(lambda () (random-list 1000000 (lambda () (random (- (expt 2 61) (expt 2 60)))))))
    ("random-double-floats" ,(lambda () (random-list 1000000 (lambda () (random 1d0)))))
    ("complex-list" ,(lambda ()
                       (let ((pi-ish 3.1415d0) (hi "hi") (c (complex 1d0 1d0)) (empty #()))
                         (random-list 1000000
                                      (lambda ()
                                        (cond ((zerop (random 2)) pi-ish)
                                              ((zerop (random 2)) hi)
                                              ((zerop (random 2)) (cons (random 30) 2))
                                              ((zerop (random 2)) c)
                                              (t empty)))))))
    ("ub8-vectors" ,(lambda ()
                      (random-list 1000 (lambda ()
                                          (let ((v (make-array 10000 :element-type '(unsigned-byte 8))))
                                            (dotimes (i 10000 v) (setf (aref v i) (random 256))))))))
    ("double-vectors" ,(lambda ()
                         (random-list 1000 (lambda ()
                                             (let ((v (make-array 1000 :element-type 'double-float)))
                                               (dotimes (i 1000 v) (setf (aref v i) (random 1d0))))))))
    ("double-matrices" ,(lambda ()
                          (random-list 100 (lambda ()
                                             (let ((m (make-array '(100 100) :element-type 'double-float)))
                                               (dotimes (i 10000 m) (setf (row-major-aref m i) (random 1d0))))))))
    ("structures" ,(lambda ()
                     (random-list 100000 (lambda () (make-blarg :a (random 1000) :b (random 1d0))))))
    ("base-strings" ,(lambda ()
                       (random-list 100000 (lambda ()
                                             (coerce (format nil "~36r" (random (expt 2 64))) 'simple-base-string)))))))

(defun full-gc ()
  "A full collection, on each Lisp's terms."
  #+sbcl (sb-ext:gc :full t)
  #+ecl (ext:gc t)
  #+(or clisp abcl) (ext:gc)
  #-(or sbcl ecl clisp abcl) nil)

(defun seconds (thunk runs)
  "The cold time of THUNK, in seconds, as the other benchmarks and the peers
measure it: one call after a full collection, the minimum of RUNS; and its
last value."
  (let ((best nil) (value nil))
    (dotimes (i runs)
      (full-gc)
      (let ((start (binstore::system-microseconds)))
        (setf value (funcall thunk))
        (let ((s (/ (- (binstore::system-microseconds) start) 1d6)))
          (setf best (if best (min best s) s)))))
    (values best value)))

(defun run (&key (runs 5) (names (mapcar #'first *datasets*)) (title t))
  "Time each data set of NAMES (all by default) stored and restored, cold:
the minimum of RUNS (SECONDS); print a line each, after a title line unless
TITLE is NIL (one process per data set prints the title once, from the
first)."
  (when title
    (format t "~&binstore on ~a ~a: cold (one call after a full GC), minimum of ~d, seconds~%~22a ~10a ~10a ~10a~%"
            (lisp-implementation-type) (lisp-implementation-version) runs
            "data set" "store" "restore" "MB"))
  (dolist (name names)
    (let ((data (funcall (second (assoc name *datasets* :test #'string=)))))
      (multiple-value-bind (store bytes) (seconds (lambda () (binstore:store nil data)) runs)
        (let ((restore (seconds (lambda () (binstore:restore bytes)) runs)))
          (format t "~22a ~10,5f ~10,5f ~10,2f~%" name store restore (/ (length bytes) 1d6))
          (finish-output))))))
