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

(defmacro tracked-leaf ((ss x) &body write)
  "Write the leaf X with WRITE, or a reference when it was written before.
With reference tracking X then gets the next id (after its parts: ids follow
the order in which the decoder completes objects)."
  `(cond ((not (ss-track ,ss)) ,@write)
         ((written-before-p ,ss ,x))
         (t ,@write (remember ,ss ,x))))

(defmacro tracked-simple-leaf ((ss x) &body write)
  "Like TRACKED-LEAF for a leaf without parts (a float, a string, a raw
vector): its id can be taken before it is written, in the same probe."
  `(cond ((not (ss-track ,ss)) ,@write)
         ((written-before-or-remember-p ,ss ,x))
         (t ,@write)))

(defun write-object (ss x)
  "Write X, any storable object."
  (declare (type store-state ss) (optimize speed))
  (let ((ob (ss-obuf ss)))
    (typecase x
      (fixnum (write-fixnum ob x))
      (null (write-u8 ob +tag-nil+))
      (cons (write-container-object ss x))
      (symbol (if (eq x t) (write-u8 ob +tag-t+) (write-symbol ss x)))
      (double-float (tracked-simple-leaf (ss x) (write-double-float ob x)))
      (single-float (write-single-float ob x))
      (character (write-character ob x))
      ;; the platform's names for SIMPLE-BASE-STRING and (SIMPLE-ARRAY
      ;; CHARACTER (*)) (on SBCL those types): the format's base strings are
      ;; ASCII, which another Lisp's base strings need not be
      (format-base-string (tracked-simple-leaf (ss x) (write-simple-base-string ob x)))
      (format-character-string
       (tracked-simple-leaf (ss x) (write-character-string ob (format-string x))))
      (simple-vector (write-container-object ss x))
      ;; Integers within 63 bits are SBCL's fixnums: immediate, never tracked.
      ;; The test is on the value, so every Lisp writes the same bytes.
      (integer (if (typep x '(signed-byte 63))
                   (write-fixnum ob x)
                   (tracked-simple-leaf (ss x) (write-bignum ob x))))
      (ratio (tracked-leaf (ss x) (write-ratio ss x)))
      ;; float parts take no ids: one probe, as for a simple leaf
      ((or (complex double-float) (complex single-float))
       (tracked-simple-leaf (ss x) (write-complex ss x)))
      (complex (tracked-leaf (ss x) (write-complex ss x)))
      (array
       ;; simple vectors went above: a simple one-dimensional array here is
       ;; specialized, known without asking its element type
       (cond ((typep x 'simple-1d-array) ; on SBCL (SIMPLE-ARRAY * (*))
              (tracked-simple-leaf (ss x) (write-specialized-vector ob x (element-type-code x))))
             ((general-t-array-p x) (write-container-object ss x))
             (t
              (tracked-leaf (ss x)
                (incf (ss-depth ss))
                (check-store-depth ss)
                (write-general-array ss x)
                (decf (ss-depth ss))))))
      (hash-table (write-container-object ss x))
      (package (write-package-object ss x))
      (pathname (tracked-leaf (ss x) (write-pathname ss x)))
      (t (cond ((typep x '(or structure-object standard-object condition))
                ;; DESCRIPTOR-FOR refuses the instances UNSTORABLE-P names,
                ;; once per class, unless a user codec takes them
                (write-instance ss x))
               ((codec-for-object x)
                (write-codec-object ss x (codec-descriptor ss (codec-for-object x))))
               (t (unstorable ss x)))))))

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
  "Write the container X: a short list or simple vector of leaves in one
function (WRITE-SHORT-LEAF-LIST, WRITE-SHORT-LEAF-VECTOR); otherwise a
reference if written before; deferred if too deep; otherwise its header,
then (with its id taken) its contents."
  (declare (type store-state ss) (optimize speed))
  (let ((tracked (if (consp x) (ss-lists ss) (ss-track ss))))
    (cond ((if (consp x)
               (and (short-leaf-list-candidate-p ss x) (write-short-leaf-list ss x))
               (and (simple-vector-p x) (short-leaf-vector-candidate-p x)
                    (write-short-leaf-vector ss x))))
          ((and tracked (written-before-p ss x)))
          ;; with tracked conses, only a list not written before
          ((and (consp x) (short-tracked-list-candidate-p ss x) (write-short-leaf-list ss x)))
          ((and (>= (ss-depth ss) +max-physical-depth+) (not (ss-no-defer ss)))
           (write-deferred-container ss x tracked))
          ((and (consp x) (one-walk-list-p ss x))
           (incf (ss-depth ss))
           (check-store-depth ss)
           (write-list-in-one-walk ss x)
           (decf (ss-depth ss)))
          ((and (consp x) (tracked-one-walk-list-p ss x))
           (incf (ss-depth ss))
           (check-store-depth ss)
           (write-tracked-list ss x)
           (decf (ss-depth ss)))
          (t
           (let ((info (write-container-header ss x)))
             (when (and tracked (not (consp x)))
               (remember ss x))
             (incf (ss-depth ss))
             (check-store-depth ss)
             (write-container-contents ss x info)
             (decf (ss-depth ss)))))))

(defun write-deferred-container (ss x tracked)
  "Write the container X deferred: LATER and its header now (its id taken
when TRACKED); its contents after this record, in a FILL naming X by its
rank among the LATERs (WRITE-DEFERRED-CONTENTS)."
  (declare (type store-state ss))
  (write-u8 (ss-obuf ss) +tag-later+)
  (let ((info (write-container-header ss x)))
    (when (and tracked (not (consp x)))
      (remember ss x))
    (push (list x (prog1 (ss-next-later ss) (incf (ss-next-later ss)))
                (+ (ss-depth ss) (ss-depth-base ss)) info)
          (ss-deferred ss))))

(defun write-displaced-target (ss target)
  "Write TARGET, the array a displaced array is displaced to (in the
displaced array's header).  The displaced array takes its id only once its
target is complete; so a target whose elements are objects (a simple
vector, a T array) is written deferred, its contents after the record, when
references are tracked: an element that is the displaced array, or holds
it, then finds it written, where inline it would be written a second time
and restored as a second array (doc/FORMAT.md, Arrays)."
  (declare (type store-state ss))
  (cond ((not (or (simple-vector-p target) (general-t-array-p target)))
         (write-object ss target))
        ((or (not (ss-track ss)) (ss-no-defer ss))
         (write-container-object ss target))
        ((written-before-p ss target))
        (t (write-deferred-container ss target t))))

(defun write-deferred-contents (ss)
  "Write a FILL record for every deferred container, including those that
filling defers in turn."
  (loop while (ss-deferred ss)
        do (destructuring-bind (x later depth info) (pop (ss-deferred ss))
             (let ((ob (ss-obuf ss)))
               (write-u8 ob +tag-fill+)
               (write-varint ob later))
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
