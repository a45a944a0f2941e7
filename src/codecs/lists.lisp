;;;; Conses and lists.
;;;;
;;;; A run of conses linked by their cdrs is written with its length, so the
;;;; conses need no tag each:
;;;;   LIST n  car1 .. carn                 the run ends in NIL
;;;;   DOTTED-LIST n  car1 .. carn  tail    the run ends in a non-NIL atom, or
;;;;                                        (shared-list mode) a shared cons
;;;;   CONS car tail                        a run of one cons that is dotted
;;;; With shared list structures, a run stops before any cons that is
;;;; referenced from elsewhere; that cons then follows as the tail (a
;;;; reference, or a DEF and a new run).  Tails are followed by iteration on
;;;; both sides, so a long chain of runs never deepens the recursion.
;;;;
;;;; Like every container, a run has a header (the tag and n) and contents
;;;; (the cars and the tail), which a deferred run writes separately.

(in-package #:binstore)

(declaim (ftype function write-container-object))

(defun circular-list-error (list)
  (error 'store-error
         :message (format nil "a circular list (starting ~s ...) cannot be stored ~
                               without support-shared-list-structures"
                          (car list))))

(defun list-run (ss list)
  "Length and tail of the run starting at the cons LIST."
  (declare (type cons list) (optimize speed))
  (if (ss-lists ss)
      (let ((refs (ss-refs ss)) (n 1) (c (cdr list)))
        (declare (type index n))
        (loop while (and (consp c) (eql (gethash c refs) 1))
              do (incf n) (setf c (cdr c)))
        (values n c))
      ;; Count with a second pointer going twice as fast, to detect a cycle.
      (let ((n 1) (c (cdr list)) (fast (cdr list)))
        (declare (type index n))
        (loop while (consp c)
              do (incf n)
                 (setf c (cdr c))
                 (when (consp fast)
                   (setf fast (cdr fast))
                   (when (consp fast)
                     (setf fast (cdr fast))
                     (when (eq fast c) (circular-list-error list)))))
        (values n c))))

(defun write-list-header (ss list)
  "Write the tag and length of the run at LIST; return (n . tail) for the contents."
  (let ((ob (ss-obuf ss)))
    (multiple-value-bind (n tail) (list-run ss list)
      (cond ((null tail) (write-u8 ob +tag-list+) (write-varint ob n))
            ((= n 1) (write-u8 ob +tag-cons+))
            (t (write-u8 ob +tag-dotted-list+) (write-varint ob n)))
      (cons n tail))))

(defun write-list-contents (ss list info)
  "Write the cars of the run at LIST, then its tail.  A tail that starts a new
run is written here too, in a loop rather than by recursion."
  (loop
    (destructuring-bind (n . tail) info
      (let ((c list))
        (dotimes (i n)
          (write-object ss (car c))
          (setf c (cdr c))))
      (cond ((null tail) (return))
            ((and (consp tail) (ss-lists ss))
             ;; a shared cons: a reference, or DEF and the next run
             (let ((v (gethash tail (ss-refs ss))))
               (when (and v (minusp v))
                 (write-ref (ss-obuf ss) (- -1 v))
                 (return))
               (new-store-id ss tail)
               (write-u8 (ss-obuf ss) +tag-def+)
               (setf list tail
                     info (write-list-header ss tail))))
            (t (write-object ss tail) (return))))))

;;; Decoding -----------------------------------------------------------

(defun read-list-header (rs tag)
  "Allocate the run announced by TAG; return it and its tag (the fill info)."
  (let* ((ib (rs-ibuf rs))
         (n (if (= tag +tag-cons+)
                1
                (check-count ib (read-varint ib) 1 "a list"))))
    (when (zerop n)
      (restore-invalid rs "a list of length 0" "a length of at least 1"))
    (charge rs (* 16 n))
    (values (make-list n) tag)))

(defun read-list-tail-start (rs)
  "If the next object starts a new run (possibly after DEF), consume its tag
and return it with the id it defines; otherwise return NIL."
  (let* ((ib (rs-ibuf rs))
         (p (need ib 1))
         (b (sb-sys:sap-ref-8 (ibuf-sap ib) p)))
    (flet ((list-tag-p (b) (or (= b +tag-list+) (= b +tag-dotted-list+) (= b +tag-cons+))))
      (cond ((list-tag-p b)
             (setf (ibuf-pos ib) (1+ p))
             (values b nil))
            ((and (= b +tag-def+)
                  (progn (need ib 2)
                         (list-tag-p (sb-sys:sap-ref-8 (ibuf-sap ib) (1+ (ibuf-pos ib))))))
             (let ((b2 (sb-sys:sap-ref-8 (ibuf-sap ib) (1+ (ibuf-pos ib)))))
               (incf (ibuf-pos ib) 2)
               (values b2 (new-restore-id rs))))
            (t nil)))))

(defun fill-list (rs run tag)
  "Read the cars of RUN, then (for a dotted run) its tail, following runs
of runs iteratively."
  (declare (type restore-state rs))
  (loop
    (let ((last run))
      (loop for c on run
            do (setf (car c) (read-object rs)
                     last c))
      (when (= tag +tag-list+)
        (return))
      (multiple-value-bind (next-tag next-id) (read-list-tail-start rs)
        (if (null next-tag)
            (progn (setf (cdr last) (read-object rs))
                   (return))
            (multiple-value-bind (next info) (read-list-header rs next-tag)
              (register rs next-id next)
              (setf (cdr last) next
                    run next
                    tag info)))))))
