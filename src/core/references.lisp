;;;; The counting pass: with track-references, find which objects occur more
;;;; than once before writing, so that only those get an id (a DEF before
;;;; their first occurrence) and everything else is written plainly.
;;;;
;;;; What is counted: every object that is a heap object and can be shared:
;;;; numbers that are boxed (bignums, double floats, ratios, complexes),
;;;; strings, arrays, hash tables, pathnames, structures, standard objects,
;;;; conditions, and conses only with shared list structures.  Immediates
;;;; (fixnums, characters, single floats) are never counted; symbols and
;;;; packages are always written once anyway.
;;;;
;;;; The walk recurses like the writer and, like the writer, stops at
;;;; +max-physical-depth+ and continues from a work list, so deep data never
;;;; deepens the stack.  An object met again is not walked again, which also
;;;; ends cycles; a cycle through conses that are not counted (no shared list
;;;; structures) is caught by the depth limit.

(in-package #:binstore)

(defun unstorable-p (x)
  "True for objects binstore refuses to store: they stand for code or for
resources of the running image."
  (typep x '(or function stream sb-sys:system-area-pointer sb-ext:weak-pointer
             sb-thread:thread sb-thread:mutex sb-thread:waitqueue class
             sb-alien-internals:alien-value)))

(defun storable-instance-p (x)
  (and (typep x '(or structure-object standard-object condition))
       (not (unstorable-p x))))

(defun container-object-p (x)
  "True for the objects whose contents are arbitrary objects and may be
deferred: conses, simple vectors, T arrays, hash tables and instances."
  (typecase x
    ((or cons simple-vector hash-table) t)
    (array (general-t-array-p x))
    (t (storable-instance-p x))))

(declaim (inline counted-object-p))
(defun counted-object-p (x)
  "True for objects the counting pass tracks (conses are decided apart)."
  (not (typep x '(or fixnum character single-float symbol package))))

(defun count-references (ss root)
  (let ((refs (ss-refs ss))
        (lists (ss-lists ss))
        (max-depth (ss-max-depth ss))
        (work '()))                     ; (object . logical-depth)
    (labels ((seen-again-p (x)
               ;; count X; true when it had been seen before
               (> (incf (the fixnum (gethash x refs 0))) 1))
             (visit (x depth base)
               (declare (type index depth base))
               (when (and max-depth (> (+ depth base) max-depth))
                 (depth-limit-error max-depth (ss-track ss)))
               (cond ((consp x) (visit-list x depth base))
                     ((not (counted-object-p x)))
                     ((and (>= depth +max-physical-depth+) (container-object-p x))
                      (push (cons x (+ depth base)) work))
                     ((seen-again-p x))
                     (t (visit-children x (1+ depth) base))))
             (visit-list (x depth base)
               (cond ((>= depth +max-physical-depth+)
                      (push (cons x (+ depth base)) work))
                     (lists
                      (loop for c = x then (cdr c)
                            while (consp c)
                            do (when (seen-again-p c) (return))
                               (visit (car c) (1+ depth) base)
                            finally (visit c (1+ depth) base)))
                     (t
                      (multiple-value-bind (n tail) (list-run ss x)
                        (declare (ignore n))
                        (loop for c = x then (cdr c)
                              while (consp c)
                              do (visit (car c) (1+ depth) base))
                        (visit tail (1+ depth) base)))))
             (visit-children (x depth base)
               (typecase x
                 (simple-vector
                  (loop for e across x do (visit e depth base)))
                 (array
                  (multiple-value-bind (target) (array-displacement x)
                    (cond (target (visit target depth base))
                          ((eq (array-element-type x) t)
                           (let ((storage (sb-ext:array-storage-vector x)))
                             (dotimes (i (array-total-size x))
                               (visit (svref storage i) depth base)))))))
                 (hash-table
                  (maphash (lambda (k v) (visit k depth base) (visit v depth base)) x))
                 (complex
                  (visit (realpart x) depth base)
                  (visit (imagpart x) depth base))
                 ((or structure-object standard-object condition)
                  (when (storable-instance-p x)
                    (dolist (name (class-descriptor-slot-names (descriptor-for ss x)))
                      (when (slot-boundp x name)
                        (visit (slot-value x name) depth base))))))))
      (visit root 0 0)
      (loop while work
            do (destructuring-bind (x . depth) (pop work)
                 (if (consp x)
                     (visit-list x 0 depth)
                     (unless (seen-again-p x)
                       (visit-children x 1 depth))))))))

