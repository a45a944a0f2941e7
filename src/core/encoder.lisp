;;;; The encoder: one TYPECASE that sends each object to its codec, the
;;;; container protocol (header, contents) with deferral of deep contents,
;;;; and the top-level record loop.
;;;;
;;;; Deep data: a container met at physical depth +max-physical-depth+ is
;;;; written as LATER + its header (which gives it an id), and its contents
;;;; are written after the current top-level object as FILL id + contents.
;;;; So neither the writer nor the reader ever recurses deeper than that,
;;;; however deep the data is.

(in-package #:binstore)

(defun unstorable (ss x)
  (error 'unstorable-object :object x :path (path-to ss x)
                            :message "this kind of object cannot be stored"))

(declaim (inline plain-or-def-p))
(defun plain-or-def-p (ss x)
  "For a leaf object: write a reference to it and return NIL if it was
written before, else write a DEF when it is shared and return T."
  (or (not (ss-track ss))
      (not (eq (note-reference ss x nil) :ref))))

(defun write-object (ss x)
  "Write X, any storable object."
  (declare (type store-state ss) (optimize speed))
  (let ((ob (ss-obuf ss)))
    (typecase x
      (fixnum (write-fixnum ob x))
      (null (write-u8 ob +tag-nil+))
      (cons (write-container-object ss x))
      (symbol
       (cond ((eq x t) (write-u8 ob +tag-t+))
             ((eq (note-reference ss x t) :ref))
             (t (write-symbol-body ss x))))
      (double-float (when (plain-or-def-p ss x) (write-double-float ob x)))
      (single-float (write-single-float ob x))
      (character (write-character ob x))
      (simple-base-string (when (plain-or-def-p ss x) (write-simple-base-string ob x)))
      ((simple-array character (*))
       (when (plain-or-def-p ss x) (write-character-string ob x)))
      (simple-vector (write-container-object ss x))
      (integer (when (plain-or-def-p ss x) (write-integer ob x)))
      (ratio (when (plain-or-def-p ss x) (write-ratio ss x)))
      (complex (when (plain-or-def-p ss x) (write-complex ss x)))
      (array
       (cond ((general-t-array-p x) (write-container-object ss x))
             ((not (plain-or-def-p ss x)))
             ((typep x '(simple-array * (*)))
              (write-specialized-vector ob x (element-type-code x)))
             (t
              (incf (ss-depth ss))
              (check-store-depth ss)
              (write-general-array ss x)
              (decf (ss-depth ss)))))
      (hash-table (write-container-object ss x))
      (package (when (eq (note-reference ss x t) :def)
                 (write-u8 ob +tag-package+)
                 (write-string-payload ob (package-name x))))
      (pathname (when (plain-or-def-p ss x) (write-pathname ss x)))
      (t (if (storable-instance-p x)
             (write-container-object ss x)
             (unstorable ss x))))))

;;; Containers --------------------------------------------------------------

(defun write-container-header (ss x)
  "Write X's tag and header; return what WRITE-CONTAINER-CONTENTS needs."
  (typecase x
    (cons (write-list-header ss x))
    (simple-vector (write-simple-vector-header ss x))
    (array (write-array-header ss x))
    (hash-table (write-hash-table-tag+header ss x))
    (t (write-instance-header ss x))))

(defun write-container-contents (ss x info)
  (typecase x
    (cons (write-list-contents ss x info))
    (simple-vector (write-simple-vector-contents ss x))
    (array (write-array-contents ss x))
    (hash-table (write-hash-table-contents ss x))
    (t (write-instance-contents ss x info))))

(defun write-container-object (ss x)
  "Write the container X: a reference if written before; deferred if too
deep; otherwise (after a DEF when shared) its header and contents."
  (declare (type store-state ss) (optimize speed))
  (let* ((tracked (and (ss-track ss) (or (ss-lists ss) (not (consp x)))))
         (count (and tracked (gethash x (ss-refs ss)))))
    (declare (type (or null fixnum) count))
    (cond ((and count (minusp count))
           (write-ref (ss-obuf ss) (- -1 count)))
          ((>= (ss-depth ss) +max-physical-depth+)
           (let ((id (new-store-id ss x)))
             (write-u8 (ss-obuf ss) +tag-later+)
             (push (list x id (+ (ss-depth ss) (ss-depth-base ss))
                         (write-container-header ss x))
                   (ss-deferred ss))))
          (t
           (when (and count (> count 1))
             (new-store-id ss x)
             (write-u8 (ss-obuf ss) +tag-def+))
           (let ((info (write-container-header ss x)))
             (incf (ss-depth ss))
             (check-store-depth ss)
             (write-container-contents ss x info)
             (decf (ss-depth ss)))))))

(defun write-deferred-contents (ss)
  "Write a FILL record for every deferred container, including those that
filling defers in turn."
  (loop while (ss-deferred ss)
        do (destructuring-bind (x id depth info) (pop (ss-deferred ss))
             (let ((ob (ss-obuf ss)))
               (write-u8 ob +tag-fill+)
               (write-varint ob id))
             (setf (ss-depth-base ss) depth
                   (ss-depth ss) 1)
             (check-store-depth ss)
             (write-container-contents ss x info)))
  (setf (ss-depth-base ss) 0 (ss-depth ss) 0))

(defun write-top-level-object (ss x)
  "Write X as one top-level record, followed by its FILL records."
  (setf (ss-depth ss) 0 (ss-depth-base ss) 0 (ss-root ss) x)
  (write-object ss x)
  (write-deferred-contents ss))

;;; Where an unstorable object sits: found after the fact by a breadth-first
;;; search from the root, so the writer keeps no path while it works.

;;; Where an unstorable object sits: found after the fact by a breadth-first
;;; search from the root, so the writer keeps no path while it works.

(defun object-children (x)
  "The (child . step) pairs of X that the writer would visit."
  (let ((children '()))
    (flet ((add (child step) (push (cons child step) children)))
      (typecase x
        (cons (add (car x) '(:car)) (add (cdr x) '(:cdr)))
        (array
         (when (eq (array-element-type x) t)
           (dotimes (i (array-total-size x))
             (add (row-major-aref x i) (list (if (vectorp x) :elt :aref) i)))))
        (hash-table
         (maphash (lambda (k v) (add k (list :key k)) (add v (list :value k))) x))
        (t
         (when (storable-instance-p x)
           (dolist (slotd (sb-mop:class-slots (class-of x)))
             (let ((name (sb-mop:slot-definition-name slotd)))
               (when (slot-boundp x name)
                 (add (slot-value x name) (list :slot name)))))))))
    (nreverse children)))

(defun path-to (ss target)
  "A list of steps from the stored root to TARGET, or NIL if not found."
  (let ((seen (make-hash-table :test 'eq))
        (queue (make-array 16 :adjustable t :fill-pointer 0)))
    (vector-push-extend (cons (ss-root ss) '()) queue)
    (loop for i from 0
          while (< i (length queue))
          do (destructuring-bind (x . path) (aref queue i)
               (when (eq x target)
                 (return-from path-to (reverse path)))
               (loop for (child . step) in (object-children x)
                     unless (or (gethash child seen)
                                (typep child '(or number character symbol)))
                       do (setf (gethash child seen) t)
                          (vector-push-extend (cons child (cons step path)) queue))))
    nil))
