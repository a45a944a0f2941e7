;;;; TRANSCRIBED peer figures, used only when the peers' sources are not
;;;; found (see PEER-DIRECTORY in bench.lisp); then the tables label them
;;;; "transcribed".  From the project's peer measurements (cl-binary-store
;;;; 1.4.x, hyperluminal-mem 0.6.2, cl-conspack, cl-store 0.8.11 in one SBCL
;;;; 2.2.9 image, 2 cores, one call after a full GC, minimum of up to 5 runs).
;;;; Kept here as data so the benchmark runs without them.  The target
;;;; columns are the peers' table's 0.8 x; bench.lisp works the targets out
;;;; from the best figures itself (ROW-CHECKS).  typed-structures has none.

(in-package #:binstore-bench)

(defparameter *peer-figures*
  '(;; data set, mode,
    ;; best store ms, who, best store-into ms, who, best restore ms, who,
    ;; smallest output MB (10^6 bytes), who,
    ;; target store ms, target store-into ms, target restore ms
    ("tiny-integers" "none" 8.8d0 "hyperluminal-mem" 1.79d0 "hyperluminal-mem" 10.4d0 "cl-binary-store" 1.00d0 "cl-binary-store" 7.1d0 1.43d0 8.3d0)
    ("tiny-integers" "refs" 16.5d0 "cl-binary-store" 14.43d0 "cl-binary-store" 11.2d0 "cl-binary-store" 1.00d0 "cl-binary-store" 13.2d0 11.54d0 8.9d0)
    ("tiny-integers" "lists" 116.6d0 "cl-binary-store" 122.06d0 "cl-binary-store" 10.2d0 "cl-binary-store" 2.00d0 "cl-binary-store" 93.3d0 97.65d0 8.2d0)
    ("tiny-integers-vector" "none" 6.8d0 "hyperluminal-mem" 1.49d0 "hyperluminal-mem" 5.7d0 "hyperluminal-mem" 1.00d0 "cl-binary-store" 5.5d0 1.19d0 4.6d0)
    ("tiny-integers-vector" "refs" 8.5d0 "cl-binary-store" 6.49d0 "cl-binary-store" 7.1d0 "cl-binary-store" 1.00d0 "cl-binary-store" 6.8d0 5.19d0 5.7d0)
    ("tiny-integers-vector" "lists" 8.3d0 "cl-binary-store" 6.53d0 "cl-binary-store" 7.1d0 "cl-binary-store" 1.00d0 "cl-binary-store" 6.7d0 5.22d0 5.7d0)
    ("same-small-integer" "none" 7.3d0 "hyperluminal-mem" 1.93d0 "hyperluminal-mem" 10.2d0 "cl-binary-store" 2.00d0 "cl-conspack" 5.8d0 1.55d0 8.1d0)
    ("same-small-integer" "refs" 15.2d0 "cl-binary-store" 11.88d0 "cl-binary-store" 10.3d0 "cl-binary-store" 2.00d0 "cl-binary-store" 12.1d0 9.51d0 8.3d0)
    ("same-small-integer" "lists" 119.8d0 "cl-binary-store" 111.21d0 "cl-binary-store" 11.3d0 "cl-binary-store" 2.00d0 "cl-conspack" 95.9d0 88.96d0 9.1d0)
    ("random-fixnums" "none" 7.2d0 "hyperluminal-mem" 2.48d0 "hyperluminal-mem" 10.6d0 "cl-binary-store" 8.00d0 "hyperluminal-mem" 5.7d0 1.99d0 8.5d0)
    ("random-fixnums" "refs" 30.0d0 "cl-binary-store" 12.50d0 "cl-binary-store" 10.7d0 "cl-binary-store" 9.00d0 "cl-binary-store" 24.0d0 10.00d0 8.6d0)
    ("random-fixnums" "lists" 136.7d0 "cl-binary-store" 120.72d0 "cl-binary-store" 11.7d0 "cl-binary-store" 9.00d0 "cl-conspack" 109.4d0 96.58d0 9.3d0)
    ("random-double-floats" "none" 29.4d0 "cl-binary-store" 10.47d0 "cl-binary-store" 21.5d0 "cl-binary-store" 9.00d0 "cl-conspack" 23.5d0 8.38d0 17.2d0)
    ("random-double-floats" "refs" 266.8d0 "cl-binary-store" 231.36d0 "cl-binary-store" 18.3d0 "cl-binary-store" 9.00d0 "cl-binary-store" 213.5d0 185.09d0 14.7d0)
    ("random-double-floats" "lists" 432.8d0 "cl-conspack" 401.62d0 "cl-binary-store" 18.0d0 "cl-binary-store" 9.00d0 "cl-conspack" 346.3d0 321.29d0 14.4d0)
    ("random-single-floats" "none" 8.6d0 "hyperluminal-mem" 3.45d0 "hyperluminal-mem" 10.7d0 "cl-binary-store" 5.00d0 "cl-conspack" 6.9d0 2.76d0 8.6d0)
    ("random-single-floats" "refs" 22.8d0 "cl-binary-store" 13.65d0 "cl-binary-store" 10.5d0 "cl-binary-store" 5.00d0 "cl-binary-store" 18.3d0 10.92d0 8.4d0)
    ("random-single-floats" "lists" 131.4d0 "cl-binary-store" 119.36d0 "cl-binary-store" 11.6d0 "cl-binary-store" 5.00d0 "cl-conspack" 105.1d0 95.48d0 9.3d0)
    ("random-complex-doubles" "none" 52.1d0 "cl-binary-store" 17.07d0 "cl-binary-store" 26.3d0 "cl-binary-store" 17.00d0 "cl-binary-store" 41.7d0 13.66d0 21.0d0)
    ("random-complex-doubles" "refs" 199.1d0 "cl-binary-store" 164.54d0 "cl-binary-store" 27.7d0 "cl-binary-store" 17.00d0 "cl-binary-store" 159.3d0 131.63d0 22.1d0)
    ("random-complex-doubles" "lists" 331.7d0 "cl-binary-store" 271.57d0 "cl-binary-store" 25.5d0 "cl-binary-store" 18.00d0 "cl-binary-store" 265.4d0 217.25d0 20.4d0)
    ("ub8-vectors" "none" 20.8d0 "cl-binary-store" 1.60d0 "cl-binary-store" 6.5d0 "cl-binary-store" 10.00d0 "cl-conspack" 16.6d0 1.28d0 5.2d0)
    ("ub8-vectors" "refs" 21.0d0 "cl-binary-store" 1.85d0 "cl-binary-store" 6.3d0 "cl-binary-store" 10.01d0 "cl-binary-store" 16.8d0 1.48d0 5.1d0)
    ("ub8-vectors" "lists" 20.8d0 "cl-binary-store" 1.95d0 "cl-binary-store" 6.5d0 "cl-binary-store" 10.00d0 "cl-conspack" 16.7d0 1.56d0 5.2d0)
    ("bit-vectors" "none" 2.6d0 "cl-binary-store" 0.21d0 "cl-binary-store" 0.8d0 "cl-binary-store" 1.26d0 "cl-binary-store" 2.1d0 0.17d0 0.7d0)
    ("bit-vectors" "refs" 2.8d0 "cl-binary-store" 0.32d0 "cl-binary-store" 0.8d0 "cl-binary-store" 1.26d0 "cl-binary-store" 2.2d0 0.26d0 0.7d0)
    ("bit-vectors" "lists" 2.9d0 "cl-binary-store" 0.48d0 "cl-binary-store" 0.9d0 "cl-binary-store" 1.26d0 "cl-binary-store" 2.3d0 0.38d0 0.7d0)
    ("double-vectors" "none" 13.7d0 "cl-binary-store" 1.19d0 "cl-binary-store" 4.8d0 "cl-binary-store" 8.00d0 "cl-conspack" 11.0d0 0.95d0 3.9d0)
    ("double-vectors" "refs" 13.8d0 "cl-binary-store" 1.37d0 "cl-binary-store" 4.9d0 "cl-binary-store" 8.01d0 "cl-binary-store" 11.0d0 1.10d0 3.9d0)
    ("double-vectors" "lists" 13.5d0 "cl-binary-store" 1.41d0 "cl-binary-store" 4.8d0 "cl-binary-store" 8.00d0 "cl-conspack" 10.8d0 1.13d0 3.9d0)
    ("double-matrices" "none" 13.4d0 "cl-binary-store" 0.74d0 "cl-binary-store" 4.8d0 "cl-binary-store" 8.00d0 "cl-binary-store" 10.7d0 0.59d0 3.8d0)
    ("double-matrices" "refs" 13.6d0 "cl-binary-store" 0.79d0 "cl-binary-store" 4.8d0 "cl-binary-store" 8.00d0 "cl-binary-store" 10.9d0 0.63d0 3.9d0)
    ("double-matrices" "lists" 12.8d0 "cl-binary-store" 0.75d0 "cl-binary-store" 4.8d0 "cl-binary-store" 8.00d0 "cl-binary-store" 10.2d0 0.60d0 3.8d0)
    ("complex-list" "none" 43.5d0 "cl-binary-store" 31.87d0 "cl-binary-store" 39.8d0 "hyperluminal-mem" 7.26d0 "cl-binary-store" 34.8d0 25.49d0 31.8d0)
    ("complex-list" "refs" 69.1d0 "cl-binary-store" 64.61d0 "cl-binary-store" 17.5d0 "cl-binary-store" 1.43d0 "cl-binary-store" 55.3d0 51.68d0 14.0d0)
    ("complex-list" "lists" 167.5d0 "cl-binary-store" 168.06d0 "cl-binary-store" 17.9d0 "cl-binary-store" 2.30d0 "cl-binary-store" 134.0d0 134.45d0 14.3d0)
    ("same-string" "none" 37.4d0 "cl-binary-store" 26.06d0 "cl-binary-store" 33.5d0 "cl-binary-store" 6.00d0 "cl-binary-store" 29.9d0 20.85d0 26.8d0)
    ("same-string" "refs" 25.4d0 "cl-binary-store" 23.23d0 "cl-binary-store" 10.0d0 "cl-binary-store" 1.00d0 "cl-binary-store" 20.3d0 18.58d0 8.0d0)
    ("same-string" "lists" 134.4d0 "cl-binary-store" 136.61d0 "cl-binary-store" 10.5d0 "cl-binary-store" 2.00d0 "cl-binary-store" 107.5d0 109.29d0 8.4d0)
    ("keywords" "none" 16.0d0 "hyperluminal-mem" 8.36d0 "hyperluminal-mem" 23.0d0 "hyperluminal-mem" 0.79d0 "cl-conspack" 12.8d0 6.69d0 18.4d0)
    ("keywords" "refs" 25.8d0 "cl-binary-store" 21.37d0 "cl-binary-store" 16.4d0 "cl-binary-store" 0.67d0 "cl-binary-store" 20.6d0 17.09d0 13.1d0)
    ("keywords" "lists" 33.0d0 "cl-binary-store" 31.19d0 "cl-binary-store" 14.6d0 "cl-binary-store" 0.69d0 "cl-conspack" 26.4d0 24.95d0 11.7d0)
    ("symbols" "none" 14.3d0 "hyperluminal-mem" 9.20d0 "hyperluminal-mem" 23.0d0 "hyperluminal-mem" 2.59d0 "cl-binary-store" 11.5d0 7.36d0 18.4d0)
    ("symbols" "refs" 24.2d0 "cl-binary-store" 22.56d0 "cl-binary-store" 15.2d0 "cl-binary-store" 0.67d0 "cl-binary-store" 19.3d0 18.04d0 12.2d0)
    ("symbols" "lists" 33.8d0 "cl-binary-store" 30.99d0 "cl-binary-store" 16.7d0 "cl-binary-store" 0.77d0 "cl-binary-store" 27.1d0 24.79d0 13.3d0)
    ("uninterned-symbols" "none" 8.5d0 "cl-binary-store" 5.91d0 "cl-binary-store" 9.1d0 "cl-binary-store" 1.24d0 "cl-binary-store" 6.8d0 4.73d0 7.3d0)
    ("uninterned-symbols" "refs" 8.4d0 "cl-binary-store" 7.75d0 "cl-binary-store" 3.2d0 "cl-binary-store" 0.44d0 "cl-binary-store" 6.7d0 6.20d0 2.6d0)
    ("uninterned-symbols" "lists" 20.0d0 "cl-binary-store" 19.23d0 "cl-binary-store" 3.3d0 "cl-binary-store" 0.54d0 "cl-binary-store" 16.0d0 15.38d0 2.6d0)
    ("structures" "none" 13.1d0 "cl-binary-store" 10.20d0 "cl-binary-store" 18.5d0 "cl-binary-store" 1.59d0 "cl-binary-store" 10.5d0 8.16d0 14.8d0)
    ("structures" "refs" 70.3d0 "cl-binary-store" 55.68d0 "cl-binary-store" 17.9d0 "cl-binary-store" 1.49d0 "cl-binary-store" 56.3d0 44.54d0 14.3d0)
    ("structures" "lists" 64.8d0 "cl-binary-store" 62.93d0 "cl-binary-store" 18.3d0 "cl-binary-store" 1.49d0 "cl-binary-store" 51.8d0 50.34d0 14.6d0)
    ("standard-objects" "none" 23.8d0 "cl-binary-store" 27.11d0 "cl-binary-store" 31.7d0 "cl-binary-store" 1.19d0 "cl-binary-store" 19.0d0 21.68d0 25.4d0)
    ("standard-objects" "refs" 33.8d0 "cl-binary-store" 33.76d0 "cl-binary-store" 15.6d0 "cl-binary-store" 0.49d0 "cl-binary-store" 27.1d0 27.01d0 12.5d0)
    ("standard-objects" "lists" 34.1d0 "cl-binary-store" 32.36d0 "cl-binary-store" 21.0d0 "cl-binary-store" 0.49d0 "cl-binary-store" 27.3d0 25.89d0 16.8d0)
    ("base-strings" "none" 6.5d0 "cl-binary-store" 4.00d0 "hyperluminal-mem" 4.1d0 "hyperluminal-mem" 0.79d0 "cl-binary-store" 5.2d0 3.20d0 3.2d0)
    ("base-strings" "refs" 15.9d0 "cl-binary-store" 15.93d0 "cl-binary-store" 5.9d0 "cl-binary-store" 0.79d0 "cl-binary-store" 12.7d0 12.74d0 4.7d0)
    ("base-strings" "lists" 36.4d0 "cl-binary-store" 24.86d0 "cl-binary-store" 8.0d0 "cl-binary-store" 0.89d0 "cl-binary-store" 29.2d0 19.88d0 6.4d0)
    ("unicode-strings" "none" 9.1d0 "cl-binary-store" 4.55d0 "hyperluminal-mem" 5.9d0 "hyperluminal-mem" 0.99d0 "cl-conspack" 7.3d0 3.64d0 4.7d0)
    ("unicode-strings" "refs" 20.4d0 "cl-binary-store" 25.82d0 "cl-binary-store" 19.3d0 "cl-binary-store" 0.99d0 "cl-binary-store" 16.3d0 20.66d0 15.4d0)
    ("unicode-strings" "lists" 30.6d0 "cl-binary-store" 28.36d0 "cl-binary-store" 12.8d0 "cl-binary-store" 0.99d0 "cl-conspack" 24.5d0 22.68d0 10.3d0)
    ("tangled-conses" "lists" 0.3d0 "cl-binary-store" 0.25d0 "cl-binary-store" 0.1d0 "cl-binary-store" 0.01d0 "cl-binary-store" 0.2d0 0.20d0 0.1d0)
    ("specialized-arrays" "none" 1.0d0 "cl-binary-store" 0.03d0 "cl-binary-store" 0.3d0 "cl-binary-store" 0.51d0 "cl-binary-store" 0.8d0 0.02d0 0.2d0)
    ("specialized-arrays" "refs" 0.9d0 "cl-binary-store" 0.04d0 "cl-binary-store" 0.3d0 "cl-binary-store" 0.51d0 "cl-binary-store" 0.7d0 0.03d0 0.2d0)
    ("specialized-arrays" "lists" 1.0d0 "cl-binary-store" 0.06d0 "cl-binary-store" 0.4d0 "cl-binary-store" 0.51d0 "cl-binary-store" 0.8d0 0.05d0 0.3d0)
    ("people" "none" 10.4d0 "cl-binary-store" 6.17d0 "cl-binary-store" 8.1d0 "cl-binary-store" 0.65d0 "cl-binary-store" 8.4d0 4.93d0 6.5d0)
    ("people" "refs" 23.1d0 "cl-binary-store" 30.06d0 "cl-binary-store" 7.5d0 "cl-binary-store" 0.56d0 "cl-binary-store" 18.5d0 24.05d0 6.0d0)
    ("people" "lists" 20.8d0 "cl-binary-store" 19.16d0 "cl-binary-store" 10.5d0 "cl-binary-store" 0.55d0 "cl-binary-store" 16.6d0 15.33d0 8.4d0))
  "Best peer figures and targets per (data set, mode); see the file header.")

;;; The peers' table rounds output sizes to 0.01 MB, which can hide a
;;; difference of a few bytes: cl-conspack's 1,000 octet vectors are
;;; 10,004,004 bytes, shown as 10.00 MB.  For the rows whose size does not
;;; depend on the random values, the named peer's exact count, worked out
;;; from its format: list and vector headers, a list's closing NIL, no file
;;; header (cl-binary-store 1.4.3 and cl-conspack write none by default).
(defparameter *peer-exact-bytes*
  ;; data set            none      refs      lists
  '(("tiny-integers"          1000007  1000007  2000001)
    ("tiny-integers-vector"   1000006  1000006  1000006)
    ("same-small-integer"     2000006  2000007  2000006)
    ("random-fixnums"         8000016  9000007  9000006)
    ("random-double-floats"   9000006  9000007  9000006)
    ("random-single-floats"   5000006  5000007  5000006)
    ("random-complex-doubles" 17000007 17000007 18000001)
    ("ub8-vectors"            10004004 10005005 10004004)
    ("double-vectors"         8004004  8005005  8004004)
    ("double-matrices"        8000703  8000703  8000801)
    ("specialized-arrays"     508823   508823   508835)
    ("same-string"            nil      1000013  nil))
  "Per data set, the smallest peer's exact output in bytes in modes none,
refs and lists (NIL: not known), where the peers' table rounds it and the
size is fixed by the data set's shape.")

(defun peer-exact-bytes (dataset mode)
  "The smallest peer's exact output in bytes for DATASET and MODE, or NIL
where only the rounded figure is known."
  (let ((row (assoc dataset *peer-exact-bytes* :test #'string=))
        (column (position mode '("none" "refs" "lists") :test #'string=)))
    (and row column (nth column (rest row)))))

(defstruct (peer (:type list))
  "One row of *PEER-FIGURES*."
  dataset mode store store-who into into-who restore restore-who
  bytes-mb bytes-who target-store target-into target-restore)

(defun find-peer (dataset mode)
  "The peer row for DATASET and MODE (strings), or NIL."
  (find-if (lambda (row) (and (string= (peer-dataset row) dataset)
                              (string= (peer-mode row) mode)))
           *peer-figures*))
