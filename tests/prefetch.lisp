;;;; The prefetches of the collection writers (src/platform/prefetch.lisp): they
;;;; must never fault, whatever they are given, and must not change what is
;;;; written at any distance from a collection's end.

(in-package #:binstore-tests)

(def-suite prefetch :in all
  :description "Prefetching ahead of the collection writers.")
(in-suite prefetch)

(test (prefetch-takes-any-argument :fixture format-2-defaults)
  "A prefetch reads nothing: immediates, NIL, heap objects, and indexes far
past a vector's end are all harmless, and it returns no values."
  (dolist (x (list 0 -1 most-positive-fixnum most-negative-fixnum #\a 1.5f0 nil t
                   'symbol "string" (cons 1 2) 1d0 (make-hash-table)))
    (is (null (multiple-value-list (binstore::prefetch-object x)))))
  (dolist (i (list 0 1 7 1000 (ash 1 40) most-positive-fixnum))
    (is (null (multiple-value-list (binstore::prefetch-svref (vector 1 2) i)))))
  (is (null (multiple-value-list (binstore::prefetch-svref #() 5)))))

(defun prefetch-pool ()
  "Objects that take each of the writers' paths: symbols of each kind
(looked up in every mode), strings, a structure, boxed numbers, a list."
  (list 'alpha :beta (make-symbol "G") "str" (make-gen-point :x 1 :y 2) 1d0
        #c(1d0 2d0) (list 1 2) 7 #\c))

(test (collections-around-the-prefetch-distances :fixture format-2-defaults)
  "The list and vector writers ask for the elements 4 and 8 ahead.  Lists
and vectors of every length up to past both, with proper and dotted ends,
round trip in each mode, objects met twice keeping their identity."
  (let ((pool (prefetch-pool)))
    (dotimes (n 20)
      (let* ((elements (loop for i below n collect (elt pool (mod (* i 3) (length pool)))))
             (data (list elements
                         (append elements 'tail)
                         (coerce elements 'simple-vector))))
        (loop for (track lists) in '((nil nil) (t nil) (t t))
              do (check-same data (round-trip data :track-references track
                                                   :support-shared-list-structures lists)
                             :identity track :conses lists))))))

(defun many-symbols (n)
  "N fresh uninterned symbols: enough of them make the writers prefetch
ahead of runs of symbols (see PREFETCH-SYMBOLS-P)."
  (loop for i below n collect (make-symbol (format nil "S~d" i))))

(test (long-runs-of-symbols :fixture format-2-defaults)
  "Past +PREFETCH-FROM-COUNT+ symbols in the table, runs of symbols take a
writer of their own.  Runs ending at a non-symbol, at a dotted tail, and
symbols met again within and across runs all round trip in each mode."
  (let* ((symbols (many-symbols (+ binstore::+prefetch-from-count+ 1000)))
         (tail (loop for i below 40
                     collect (if (zerop (mod i 7)) i (nth (* i 13) symbols))))
         (data (list (append symbols tail (list "end") (subseq symbols 0 20))
                     (append (subseq symbols 0 12) :dotted)
                     (coerce (append tail symbols) 'simple-vector))))
    (loop for (track lists) in '((nil nil) (t nil) (t t))
          do (check-same data (round-trip data :track-references track
                                               :support-shared-list-structures lists)
                         :identity t :conses lists))))

(test (circular-run-of-symbols :fixture format-2-defaults)
  "A run of symbols that closes on itself is caught without shared list
structures, and round trips with them."
  (let* ((symbols (many-symbols (+ binstore::+prefetch-from-count+ 1000)))
         (circle (copy-list symbols)))
    (setf (cdr (last circle)) (nthcdr 5000 circle))
    ;; the table passes the threshold before the circle is entered
    (let ((data (list symbols circle)))
      (signals binstore:store-error (binstore:store nil data))
      (signals binstore:store-error (binstore:store nil data :track-references t))
      (let ((copy (round-trip data :track-references t :support-shared-list-structures t)))
        (check-same data copy :identity t :conses t)
        (is (eq (nthcdr (length symbols) (second copy)) (nthcdr 5000 (second copy))))))))
