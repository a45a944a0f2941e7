;;;; What one STORE carries from object to object: the output buffer, the
;;;; reference table, the nesting depth and the containers whose contents are
;;;; deferred to FILL records.
;;;;
;;;; The reference table maps an object to
;;;;   a positive count     seen that many times by the counting pass, not yet written
;;;;   a negative number    already written with id (- -1 value)
;;;; Symbols, packages, class descriptors and deferred containers always get
;;;; an id at their first occurrence, whatever the options, so the table
;;;; exists in every mode.

(in-package #:binstore)

(defstruct (store-state (:conc-name ss-) (:constructor %make-store-state))
  (obuf nil :type obuf)
  (refs nil :type hash-table)
  (track nil)                          ; track-references
  (lists nil)                          ; support-shared-list-structures
  (next-id 0 :type index)
  (depth 0 :type index)                ; containers open in the current record
  (depth-base 0 :type index)           ; logical depth where the current record starts
  (max-depth nil :type (or null index))
  (deferred '())                       ; (object id logical-depth), filled later
  (store-class-slots nil)
  (descriptors nil :type hash-table)   ; class -> class-descriptor
  (root nil))                          ; the data, to locate unstorable objects

(defun make-store-state (obuf &key track lists max-depth store-class-slots root
                                   (size-hint 0))
  (%make-store-state :obuf obuf
                     :refs (make-hash-table :test 'eq :size (max 64 size-hint))
                     :track (and track t) :lists (and track lists t)
                     :max-depth max-depth
                     :store-class-slots store-class-slots
                     :descriptors (make-hash-table :test 'eq)
                     :root root))

(declaim (inline new-store-id))
(defun new-store-id (ss object)
  "Give OBJECT the next id and record that it has been written."
  (let ((id (ss-next-id ss)))
    (setf (ss-next-id ss) (1+ id)
          (gethash object (ss-refs ss)) (- -1 id))
    id))

(defun write-ref (ob id)
  "Write a back-reference to ID."
  (declare (type index id))
  (if (< id +small-ref-count+)
      (write-u8 ob (+ +first-small-ref-tag+ id))
      (progn (write-u8 ob +tag-ref+) (write-varint ob id))))

(declaim (inline note-reference))
(defun note-reference (ss object always)
  "Decide how OBJECT is written.  Returns :ref after writing a reference to
it, :def after writing a DEF (the caller then writes the object, which has
just been given an id), or NIL (write it plainly).  ALWAYS true means the
object kind is always written once (symbols, packages, descriptors)."
  (let ((v (gethash object (ss-refs ss))))
    (cond ((null v)
           (when always
             (new-store-id ss object)
             (write-u8 (ss-obuf ss) +tag-def+)
             :def))
          ((minusp v)
           (write-ref (ss-obuf ss) (- -1 v))
           :ref)
          ((or (> v 1) always)
           (new-store-id ss object)
           (write-u8 (ss-obuf ss) +tag-def+)
           :def)
          (t nil))))

(defun depth-limit-error (max track)
  (error 'limit-exceeded
         :limit :max-depth :value max
         :message (if track
                      "the data nests deeper than max-depth"
                      "the data nests deeper than max-depth (it may be circular: store it with track-references t)")))

(declaim (inline check-store-depth))
(defun check-store-depth (ss)
  "Signal LIMIT-EXCEEDED when the logical depth passes max-depth."
  (let ((max (ss-max-depth ss)))
    (when (and max (> (+ (ss-depth ss) (ss-depth-base ss)) max))
      (depth-limit-error max (ss-track ss)))))
