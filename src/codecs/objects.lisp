;;;; Structures, standard objects and conditions.
;;;;
;;;;   CLASS-DESCRIPTOR kind class-name n slot-name1 .. slot-namen
;;;;   INSTANCE descriptor value1 .. valuen
;;;; A descriptor is written once per class and store (it always gets an id),
;;;; then referenced.  An unbound slot's value is the UNBOUND-SLOT tag.  The header
;;;; of an instance is its tag and descriptor; the values are its contents.
;;;;
;;;; On restore a descriptor is resolved once against the classes of the
;;;; running image: a missing class or slot signals MISSING-CLASS /
;;;; MISSING-SLOT with restarts, and the answer serves every instance.
;;;;
;;;; The extension points (src/extensions.lisp) are asked here, once per
;;;; class: STORED-SLOTS when a descriptor is made, on both sides;
;;;; RESTORE-CONSTRUCTION, AFTER-RESTORE and UPGRADE-INSTANCE when one is
;;;; resolved.  A class without methods gets the descriptors it always had.
;;;;
;;;; User codecs: a descriptor of kind :codec names a codec instead of a
;;;; class, with one slot, the value the codec wrote.  A codec that makes
;;;; its object from that value (DECODE) writes CODEC-OBJECT descriptor
;;;; value, and the object takes its id after the value, as a leaf; one that
;;;; allocates first (ALLOCATE, FILL) writes INSTANCE descriptor value, and
;;;; the object takes its id before the value, as a container, so the value
;;;; may hold it.

(in-package #:binstore)

(defstruct (class-descriptor (:constructor make-class-descriptor
                                 (class kind slot-names readers layout locations)))
  class
  (kind 0 :type (integer 0 3))
  slot-names
  ;; per slot, a function (instance) -> value or **UNSET**
  (readers #() :type simple-vector)
  layout         ; the layout the readers are valid for (standard objects)
  ;; when every stored slot is a boxed slot held in the instance (structures)
  ;; or its slot vector (standard objects), the index of each: the values
  ;; are then read in place, with no reader to call
  (locations nil :type (or null (simple-array fixnum (*))))
  (codec nil :type (or null user-codec)) ; for a codec's descriptor
  (id -1 :type fixnum))  ; the descriptor's id once written in this store

(defun make-codec-descriptor (codec)
  "The descriptor of the user codec CODEC: kind :codec, one slot."
  (let ((d (make-class-descriptor nil +class-kind-codec+ '(:value) #() nil nil)))
    (setf (class-descriptor-codec d) codec)
    d))

(defun slot-access (class slotd)
  "How a slot of CLASS is reached directly: (values :structure name) for a
structure slot, (values :location index) for an instance slot of a standard
object, or (values :slot-value name)."
  (let ((name (slot-definition-name slotd)))
    (cond ((typep class 'structure-class)
           (values :structure name))
          ((and (typep class 'standard-class)
                (integerp (slot-definition-location slotd)))
           (values :location (slot-definition-location slotd)))
          (t (values :slot-value name)))))

(defun slot-reader (class slotd)
  "A function (instance) returning the value of SLOTD, or **UNSET** when the
slot is unbound."
  (multiple-value-bind (how where) (slot-access class slotd)
    (ecase how
      (:structure (structure-slot-reader class where))
      (:location (lambda (o)
                   (let ((v (standard-slot-at o where)))
                     (if (unbound-marker-p v) **unset** v))))
      (:slot-value (lambda (o)
                     (if (slot-boundp o where) (slot-value o where) **unset**))))))

(defun boxed-slot-location (class slotd)
  "The index at which an instance of CLASS holds SLOTD when the value sits
there as it is (a structure slot of raw type T, or an instance slot of a
standard object); otherwise NIL."
  (multiple-value-bind (how where) (slot-access class slotd)
    (case how
      (:structure (structure-boxed-slot-index class where))
      (:location where))))

(defun boxed-slot-locations (class slots)
  "The BOXED-SLOT-LOCATION of each of SLOTS (effective slot definitions,
NIL for a discarded one) when all have one; otherwise NIL."
  (let ((locations (mapcar (lambda (slotd) (and slotd (boxed-slot-location class slotd)))
                           slots)))
    (when (every #'integerp locations)
      (coerce locations '(simple-array fixnum (*))))))

(defun class-stored-slots (class kind store-class-slots)
  "The slot definitions of CLASS whose values are stored by default."
  (ensure-class-finalized class)
  (remove-if-not (lambda (slotd)
                   (and (not (lisp-own-slot-p slotd))
                        (or (/= kind +class-kind-standard-object+)
                            store-class-slots
                            (eq (slot-definition-allocation slotd) :instance))))
                 (class-slots class)))

(defun other-method-applies-p (function classes)
  "True when a method of the generic FUNCTION other than its method on T
\(binstore's default) may apply to arguments of CLASSES."
  (multiple-value-bind (methods known) (applicable-methods-using-classes function classes)
    (or (not known)
        (some (lambda (method)
                (notevery (lambda (specializer) (eq specializer (find-class 't)))
                          (method-specializers method)))
              methods))))

(defun slot-specs (instance class kind store-class-slots error-type)
  "What STORED-SLOTS says of CLASS, asked of the instance the function
INSTANCE returns, only when a method other than the default applies: a list
of (slot-definition store-function restore-function), one per stored slot,
in order.  A name that is not a slot of CLASS, or a malformed entry,
signals ERROR-TYPE."
  (let ((answer (if (other-method-applies-p #'stored-slots (list class))
                    (stored-slots (funcall instance))
                    :all)))
    (flet ((fail (control &rest arguments)
             (error error-type
                    :message (format nil "stored-slots of ~s: ~?" (class-name class)
                                     control arguments))))
      (if (eq answer :all)
          (mapcar (lambda (slotd) (list slotd nil nil))
                  (class-stored-slots class kind store-class-slots))
          (progn
            (unless (listp answer)
              (fail "~s is neither :ALL nor a list" answer))
            (ensure-class-finalized class)
            (mapcar (lambda (entry)
                      (destructuring-bind (name &key store restore)
                          (if (and (consp entry) (evenp (length (rest entry))))
                              entry
                              (list entry))
                        (let ((slotd (find name (class-slots class) :key #'slot-definition-name)))
                          (unless (and (symbolp name) slotd)
                            (fail "~s names no slot" name))
                          (unless (and (or (null store) (functionp store))
                                       (or (null restore) (functionp restore)))
                            (fail "the STORE and RESTORE of ~s are not functions" name))
                          (list slotd store restore))))
                    answer))))))

(defun transformed-reader (reader store)
  "READER, or when STORE is a function, a reader that returns STORE of a
bound slot's value."
  (if store
      (lambda (o)
        (let ((value (funcall (the function reader) o)))
          (if (eq value **unset**) value (funcall (the function store) value))))
      reader))

(defun class-kind-of-class (class)
  "The descriptor kind of the instances of CLASS."
  (cond ((typep class 'structure-class) +class-kind-structure+)
        ((typep class 'condition-class) +class-kind-condition+)
        (t +class-kind-standard-object+)))

(defun class-kind (object)
  (etypecase object
    (structure-object +class-kind-structure+)
    (condition +class-kind-condition+)
    (standard-object +class-kind-standard-object+)))

(defun descriptor-for (ss object)
  "The class descriptor for OBJECT's class, made at its first instance.  The
last one asked for is kept aside under the layout of the instance that
asked: instances of one class tend to come together, and an instance's
layout is one load away where CLASS-OF is a call.  (Instances of one class
with different layouts, some not yet updated to a redefinition, each find
the class's one descriptor.)"
  (declare (type store-state ss) (optimize speed))
  (let ((wrapper (instance-layout object)))
    (if (eq wrapper (ss-last-wrapper ss))
        (ss-last-descriptor ss)
        (let ((d (find-or-make-descriptor ss object (class-of object))))
          (setf (ss-last-wrapper ss) wrapper
                (ss-last-descriptor ss) d)))))

(declaim (inline update-instance))
(defun update-instance (object slot-name)
  "Bring the standard OBJECT, made before its class was redefined, to the
class's current layout: touching its slot SLOT-NAME does it."
  (slot-boundp object slot-name)
  (values))

(defun find-or-make-descriptor (ss object class)
  (let ((descriptors (or (ss-descriptors ss)
                         ;; made at the first instance: most stores have none
                         (setf (ss-descriptors ss) (make-hash-table :test 'eq)))))
    (or (gethash class descriptors)
        (setf (gethash class descriptors)
              (let ((codec (codec-for-object object)))
                (if codec
                    (codec-descriptor ss codec)
                    (let ((kind (progn
                                  ;; once per class: instances of a class the
                                  ;; writer refuses never get a descriptor
                                  (when (unstorable-p object)
                                    (unstorable ss object))
                                  (class-kind object))))
                      (let ((specs (slot-specs (lambda () object) class kind
                                               (ss-store-class-slots ss) 'store-error)))
                        ;; the descriptor is for the class as it is now: an
                        ;; instance made before a redefinition is brought up
                        ;; to date before its layout is taken as the
                        ;; descriptor's (ECL updates only then)
                        (when (and (= kind +class-kind-standard-object+) specs)
                          (update-instance object (slot-definition-name (first (first specs)))))
                        (make-descriptor-from-specs class kind specs
                                                    (instance-layout object))))))))))

(defun make-descriptor-from-specs (class kind specs layout)
  "The class descriptor of CLASS, of KIND, storing the slots of SPECS (see
SLOT-SPECS), for instances of LAYOUT (NIL: none known yet)."
  (let ((slots (mapcar #'first specs)))
    (make-class-descriptor
     class kind
     (mapcar #'slot-definition-name slots)
     (map 'vector (lambda (spec)
                    (transformed-reader (slot-reader class (first spec)) (second spec)))
          specs)
     layout
     ;; a transformed value is not read in place
     (and (notany #'second specs) (boxed-slot-locations class slots)))))

(defun codec-descriptor (ss codec)
  "The descriptor of the user codec CODEC in this store, made once."
  (let ((descriptors (or (ss-descriptors ss)
                         (setf (ss-descriptors ss) (make-hash-table :test 'eq)))))
    (or (gethash codec descriptors)
        (setf (gethash codec descriptors) (make-codec-descriptor codec)))))

(defun write-class-descriptor (ss d)
  "Write D, or a reference to it after its first time (its id kept in it,
as the descriptor lives only as long as the store)."
  (let ((ob (ss-obuf ss)))
    (if (>= (class-descriptor-id d) 0)
        (write-ref ob (class-descriptor-id d) (ss-refs ss))
        (progn
          (write-u8 ob +tag-class-descriptor+)
          (write-u8 ob (class-descriptor-kind d))
          (write-object ss (let ((codec (class-descriptor-codec d)))
                             (if codec
                                 (user-codec-name codec)
                                 (class-name (class-descriptor-class d)))))
          (write-varint ob (length (class-descriptor-slot-names d)))
          (dolist (name (class-descriptor-slot-names d))
            (write-object ss name))
          (setf (class-descriptor-id d) (remember-recurring ss d))))))

(declaim (inline referable-descriptor-id))
(defun referable-descriptor-id (d)
  "The id of the class descriptor D when it has been written and an
instance's header can refer to it with PUT-INSTANCE-TAG, else NIL."
  (let ((id (class-descriptor-id d)))
    (and (>= id 0) (< id (expt 2 32)) id)))

(declaim (inline put-instance-tag))
(defun put-instance-tag (ob descriptor-id table)
  "Write the tag of an instance and the reference to its class descriptor,
DESCRIPTOR-ID (under 2^32), under one room check; TABLE is the store's
table of objects (see PUT-REF)."
  (declare (type obuf ob) (type (unsigned-byte 32) descriptor-id))
  (let* ((p (reserve ob (1+ (ref-length descriptor-id table))))
         (sap (obuf-sap ob)))
    (setf (mem-u8 sap p) +tag-instance+)
    (put-ref sap (1+ p) descriptor-id table)))

(defun write-instance-header (ss object)
  "Tag and descriptor; returns the descriptor for the contents.  After the
class's first instance the descriptor is a reference (PUT-INSTANCE-TAG)."
  (declare (type store-state ss) (optimize speed))
  (let* ((d (descriptor-for ss object))
         (ob (ss-obuf ss))
         (id (referable-descriptor-id d)))
    (if id
        (put-instance-tag ob id (ss-refs ss))
        (progn
          (write-u8 ob +tag-instance+)
          (write-class-descriptor ss d)))
    d))

(defun write-instance (ss object)
  "Write OBJECT, a structure, standard object or condition.  After its
class's first instance, when it is not to be deferred, in this one function:
its descriptor is then a reference that takes no id, so the instance can
take its own id before its header is written, in the same probe that asks
whether it was written before.  Otherwise as any container."
  (declare (type store-state ss) (optimize speed))
  (let* ((d (descriptor-for ss object))
         (id (referable-descriptor-id d)))
    (cond
      ((class-descriptor-codec d) (write-codec-object ss object d))
      ((and id (< (ss-depth ss) +max-physical-depth+))
        (unless (and (ss-track ss) (written-before-or-remember-p ss object))
          (put-instance-tag (ss-obuf ss) id (ss-refs ss))
          (incf (ss-depth ss))
          (check-store-depth ss)
          (write-instance-contents ss object d)
          (decf (ss-depth ss))))
      (t (write-container-object ss object)))))

(defun write-codec-object (ss object d)
  "Write OBJECT with the user codec of the descriptor D: a reference when
it was written before; otherwise the codec's value, after the descriptor,
as CODEC-OBJECT (the codec DECODEs: OBJECT takes its id after the value,
which therefore cannot hold OBJECT: STORE-ERROR) or as INSTANCE (the codec
ALLOCATEs and FILLs: OBJECT takes its id first).  Codec objects are never
deferred, so they nest at most +MAX-PHYSICAL-DEPTH+ deep."
  (declare (type store-state ss))
  (let* ((codec (class-descriptor-codec d))
         (allocates (user-codec-allocate codec))
         (ob (ss-obuf ss)))
    (when (member object (ss-codec-stack ss) :test #'eq)
      (error 'store-error
             :message (format nil "~a holds itself through the value of its codec ~s, ~
                                   which makes objects with DECODE; a codec with ALLOCATE ~
                                   and FILL can store a cycle"
                              (brief object) (user-codec-name codec))))
    (unless (and (ss-track ss) (written-before-p ss object))
      (when (>= (ss-depth ss) +max-physical-depth+)
        (error 'store-limit-exceeded
               :limit :nesting :value +max-physical-depth+
               :message (format nil "objects of user codecs nest deeper than ~d"
                                +max-physical-depth+)))
      (write-u8 ob (if allocates +tag-instance+ +tag-codec-object+))
      (write-class-descriptor ss d)
      (when (and allocates (ss-track ss))
        (remember ss object))
      (let ((value (funcall (user-codec-encode codec) object)))
        (incf (ss-depth ss))
        (check-store-depth ss)
        (if allocates
            (write-object ss value)
            (progn
              (push object (ss-codec-stack ss))
              (unwind-protect (write-object ss value)
                (pop (ss-codec-stack ss)))))
        (decf (ss-depth ss)))
      (when (and (not allocates) (ss-track ss))
        (remember ss object)))))

(declaim (inline write-slot-value))
(defun write-slot-value (ss x)
  "Write X, a slot's value: NIL, T, a fixnum or a single float (and without
reference tracking a double or a complex of floats) here, with the window's
room checked once, anything else through WRITE-OBJECT."
  (declare (type store-state ss))
  (let* ((ob (ss-obuf ss))
         (p (obuf-pos ob))
         (boxed (not (ss-track ss))))
    (if (and (immediate-leaf-p x boxed)
             (<= (+ p +max-leaf-bytes+) (obuf-end ob)))
        (let ((sap (obuf-sap ob)))
          (setf (obuf-pos ob)
                (pointer- (put-immediate-leaf (pointer+ sap p) x boxed) sap)))
        (write-object ss x))))

(defun write-instance-contents (ss object d)
  (let ((ob (ss-obuf ss)))
    (when (and (= (class-descriptor-kind d) +class-kind-standard-object+)
               (class-descriptor-slot-names d)
               (not (eq (instance-layout object) (class-descriptor-layout d))))
      ;; an instance of a redefined class: to the current layout, which the
      ;; readers were made for
      (update-instance object (first (class-descriptor-slot-names d))))
    (let ((locations (class-descriptor-locations d)))
      (cond ((null locations)
             (loop for reader across (the simple-vector (class-descriptor-readers d))
                   do (let ((value (funcall (the function reader) object)))
                        (if (eq value **unset**)
                            (write-u8 ob +tag-unbound-slot+)
                            (write-object ss value)))))
            ((= (class-descriptor-kind d) +class-kind-structure+)
             (loop for i of-type fixnum across locations
                   do (write-slot-value ss (structure-slot-at object i))))
            (t
             (loop for i of-type fixnum across locations
                   do (let ((value (standard-slot-at object i)))
                        (if (unbound-marker-p value)
                            (write-u8 ob +tag-unbound-slot+)
                            (write-slot-value ss value)))))))))

;;; Decoding -----------------------------------------------------------
;;; A restored descriptor is resolved once against the running image into
;;; what making each instance takes: an allocator, and per stored slot a
;;; setter (NIL: discard the value) and the slot's type (NIL: any value).

(defstruct (restore-descriptor
            (:constructor make-restore-descriptor
                (class allocator setters checks locations raw-kinds structure-p
                 &key codec finish upgrade slot-names)))
  class
  (allocator nil :type function)
  (setters #() :type simple-vector)
  ;; per slot, its SLOT-CHECK; NIL when no slot checks anything
  (checks nil :type (or null simple-vector))
  ;; when every stored slot is a boxed slot held in the instance (or its
  ;; slot vector), the index of each: the values then go straight into
  ;; place, with no setter to call
  (locations nil :type (or null (simple-array fixnum (*))))
  ;; for a structure with raw slots, each slot's STRUCTURE-SLOT-RAW-KIND
  (raw-kinds nil :type (or null simple-vector))
  (structure-p nil :type boolean)
  ;; the extension points: a user codec (then the rest is unused), what to
  ;; do once the restore is complete (a list of functions of the instance:
  ;; INITIALIZE-INSTANCE, AFTER-RESTORE), and whether UPGRADE-INSTANCE fills
  ;; the instances from the stored slot names (SLOT-NAMES)
  (codec nil :type (or null user-codec))
  (finish '() :type list)
  (upgrade nil :type boolean)
  (slot-names '() :type list))

(defun new-slot-names (class stored-slots)
  "The names of CLASS's instance slots with an initform that STORED-SLOTS
\(effective slot definitions, NIL for discarded ones) leave out, for a
standard class; NIL otherwise."
  (when (typep class 'standard-class)
    (loop for slotd in (class-slots class)
          when (and (eq (slot-definition-allocation slotd) :instance)
                    (slot-definition-initfunction slotd)
                    (not (member slotd stored-slots)))
            collect (slot-definition-name slotd))))

(defun slot-setter (class slotd)
  "A function (instance value) that sets SLOTD of a fresh instance of CLASS."
  (multiple-value-bind (how where) (slot-access class slotd)
    (ecase how
      (:structure (structure-slot-setter class where))
      (:location (lambda (o v) (setf (standard-slot-at o where) v)))
      (:slot-value (lambda (o v) (setf (slot-value o where) v))))))

;;; A slot's type is checked on every value restored into it: a value of
;;; another type in a typed slot would break the code compiled for the
;;; class.  The types real programs' slots have are tested inline, by a
;;; jump on the type's number or by an integer range; any other type is parsed once and tested
;;; generically, which costs several times as much.

(defparameter *slot-check-classes*
  #(simple-string simple-base-string string list cons symbol double-float
    single-float integer real number character simple-vector hash-table
    ;; the types of raw structure slots
    (unsigned-byte 64) (signed-byte 64) (complex double-float) (complex single-float))
  "Slot types tested inline: SLOT-VALUE-FITS-P dispatches on the position
of the type here.")

(defun type-equal-p (a b)
  "True when the type specifiers A and B are known to name the same type."
  (and (subtypep a b) (subtypep b a)))

(defun fixnum-range (type)
  "The bounds (LOW . HIGH) of TYPE when it is a range of fixnums written in
one of the standard ways ((integer a b), (unsigned-byte n), (signed-byte
n), (mod n), bit, fixnum), otherwise NIL."
  (let ((range (cond ((eq type 'fixnum) (cons most-negative-fixnum most-positive-fixnum))
                     ((eq type 'bit) (cons 0 1))
                     ((atom type) nil)
                     ((and (eq (first type) 'unsigned-byte) (integerp (second type)))
                      (cons 0 (1- (expt 2 (second type)))))
                     ((and (eq (first type) 'signed-byte) (integerp (second type)))
                      (cons (- (expt 2 (1- (second type)))) (1- (expt 2 (1- (second type))))))
                     ((and (eq (first type) 'mod) (integerp (second type)))
                      (cons 0 (1- (second type))))
                     ((and (eq (first type) 'integer) (= (length type) 3)
                           (integerp (second type)) (integerp (third type)))
                      (cons (second type) (third type))))))
    (and range
         (typep (car range) 'fixnum) (typep (cdr range) 'fixnum)
         range)))

(defun type-check (type)
  "What SLOT-VALUE-FITS-P tests a value against for the type specifier
TYPE: NIL when any value will do, the position of TYPE in
*SLOT-CHECK-CLASSES*, a cons of fixnum bounds, or TYPE parsed (PARSE-TYPE)."
  (cond ((eq type t) nil)
        ((fixnum-range type))
        ((position type *slot-check-classes* :test #'type-equal-p))
        (t (parse-type type))))

(defun slot-check (slotd)
  "The TYPE-CHECK of the slot definition SLOTD's type."
  (type-check (slot-definition-type slotd)))

(declaim (inline slot-value-fits-p))
(defun slot-value-fits-p (value check)
  "True when VALUE may go in a slot with the SLOT-CHECK CHECK."
  (cond ((null check) t)
        ((consp check)
         (and (typep value 'fixnum)
              (<= (the fixnum (car check)) value (the fixnum (cdr check)))))
        ((typep check 'fixnum)
         ;; a jump table, in the order of *SLOT-CHECK-CLASSES*
         (case check
           (0 (simple-string-p value))
           (1 (typep value 'simple-base-string))
           (2 (stringp value))
           (3 (listp value))
           (4 (consp value))
           (5 (symbolp value))
           (6 (typep value 'double-float))
           (7 (typep value 'single-float))
           (8 (integerp value))
           (9 (realp value))
           (10 (numberp value))
           (11 (characterp value))
           (12 (simple-vector-p value))
           (13 (hash-table-p value))
           (14 (typep value '(unsigned-byte 64)))
           (15 (typep value '(signed-byte 64)))
           (16 (typep value '(complex double-float)))
           (17 (typep value '(complex single-float)))))
        (t (parsed-typep value check))))

(defun slot-check-type (check)
  "The type a SLOT-CHECK tests, for messages."
  (cond ((consp check) `(integer ,(car check) ,(cdr check)))
        ((typep check 'fixnum) (svref *slot-check-classes* check))
        (t (parsed-type-specifier check))))

(defun slot-checks (slots)
  "The SLOT-CHECK of each of SLOTS (effective slot definitions, NIL for a
discarded one) as a simple vector, or NIL when none checks anything."
  (let ((checks (map 'vector (lambda (slotd) (and slotd (slot-check slotd))) slots)))
    (and (some #'identity checks) checks)))

(defun standard-allocation-p (class)
  "True when ALLOCATE-INSTANCE on CLASS runs SBCL's own method for standard
classes and nothing else: then that method's work can be done directly."
  (let ((standard-class (find-class 'standard-class)))
    (and (eq (class-of class) standard-class)
         (equal (compute-applicable-methods #'allocate-instance (list class))
                (list (find-method #'allocate-instance '() (list standard-class) nil))))))

(defun lisp-own-slots (class)
  "The slot definitions of CLASS that LISP-OWN-SLOT-P names: the slots an
instance restored sets from their initforms (none but on ECL)."
  (ensure-class-finalized class)
  (remove-if-not #'lisp-own-slot-p (class-slots class)))

(defun instance-allocator (class)
  "A function of no arguments returning a fresh instance of CLASS whose
slots are then all set.  Copying a template is the fastest way to make a
structure instance; a standard object is made as SBCL's ALLOCATE-INSTANCE
method makes it (when no other method applies), without the generic
function's dispatch, which cost more than the rest of a small object's
restoring."
  (let ((allocate
          (cond ((typep class 'structure-class)
                 (let ((template (allocate-instance class)))
                   (lambda () (copy-structure template))))
                ((standard-allocation-p class)
                 (standard-instance-allocator class))
                (t (lambda () (allocate-instance class)))))
        (own (lisp-own-slots class)))
    (if (null own)
        allocate
        ;; slots the Lisp keeps for itself (an ECL condition's report) are
        ;; not stored: set from their initforms
        (lambda ()
          (let ((instance (funcall allocate)))
            (dolist (slotd own instance)
              (let ((initfunction (slot-definition-initfunction slotd)))
                (when initfunction
                  (setf (slot-value instance (slot-definition-name slotd))
                        (funcall initfunction))))))))))

(defun read-name-interactively (prompt)
  "The arguments of a restart that takes a name: one object read from
*QUERY-IO* after PROMPT."
  (format *query-io* prompt)
  (list (read *query-io*)))

(defun find-or-ask-class (rs name)
  (or (and (symbolp name) (find-class name nil))
      (restart-case
          (error 'missing-class :name name :offset (ibuf-offset (rs-ibuf rs))
                                :message "no such class")
        (use-other-class (class)
          :report "Use another class instead."
          :interactive (lambda () (read-name-interactively "Class name: "))
          (find-or-ask-class rs (if (typep class 'class) (class-name class) class))))))

(defun find-or-ask-slot (rs class name)
  "The effective slot definition of CLASS for the stored slot NAME, or NIL
when the caller chose to discard it."
  (flet ((lookup (name)
           (find name (class-slots class) :key #'slot-definition-name)))
    (or (lookup name)
        (restart-case
            (error 'missing-slot :class (class-name class) :name name
                                 :offset (ibuf-offset (rs-ibuf rs))
                                 :message "no such slot")
          (discard-slot ()
            :report "Discard the stored values of this slot."
            nil)
          (use-other-slot (other)
            :report "Store the values in another slot."
            :interactive (lambda () (read-name-interactively "Slot name: "))
            (find-or-ask-slot rs class other))))))

(defun find-or-ask-codec (rs name)
  "The user codec registered under NAME, or what the restarts of
MISSING-CODEC choose: NIL to skip (restore its objects as NIL)."
  (or (and (symbolp name) (find-codec name))
      (restart-case
          (error 'missing-codec :name name :offset (ibuf-offset (rs-ibuf rs))
                                :message "is not registered")
        (skip-codec ()
          :report "Restore every object of this codec as NIL."
          nil)
        (use-other-codec (other)
          :report "Use another codec instead."
          :interactive (lambda () (read-name-interactively "Codec name: "))
          (find-or-ask-codec rs other)))))

(defun codec-restore-descriptor (rs name slot-names)
  "The restore descriptor of a :CODEC class descriptor naming the codec
NAME; its allocator makes the object of a codec that allocates first."
  (unless (and (symbolp name) (equal slot-names '(:value)))
    (restore-invalid rs "a codec descriptor without a symbol for name and one slot :VALUE"
                     "a codec's name and the slot :VALUE"))
  (let* ((codec (find-or-ask-codec rs name))
         (allocate (and codec (user-codec-allocate codec))))
    (make-restore-descriptor nil (or allocate (constantly nil)) #() nil nil nil nil
                             :codec codec :slot-names slot-names)))

(defun read-class-descriptor (rs)
  (let* ((ib (rs-ibuf rs))
         (kind (read-u8 ib))
         (name (read-object rs))
         (n (check-count ib (read-varint ib) 1 "a slot list"))
         (slot-names (loop repeat n collect (read-object rs))))
    (unless (<= kind +class-kind-codec+)
      (restore-invalid rs (format nil "class kind ~d" kind) "0, 1, 2 or 3"))
    (unless (every #'symbolp slot-names)
      (restore-invalid rs "a slot name that is not a symbol" "symbols"))
    (if (= kind +class-kind-codec+)
        (register-always rs (codec-restore-descriptor rs name slot-names))
        (read-class-descriptor-of-class rs kind name slot-names))))

(defun upgrade-p (class kind prototype slot-names)
  "True when the instances of CLASS (of KIND) whose stored slots are
SLOT-NAMES are to be filled by UPGRADE-INSTANCE: the slots STORED-SLOTS
names today differ from them, and a method applies.  PROTOTYPE returns an
instance of CLASS."
  (and (other-method-applies-p #'upgrade-instance (list class (find-class 'cons)))
       (let ((current (mapcar (lambda (spec) (slot-definition-name (first spec)))
                              (slot-specs prototype class kind nil 'invalid-input)))
             (all (mapcar #'slot-definition-name (class-slots class))))
         ;; a stored slot the class lost, or a slot it stores today that
         ;; the file does not hold (class slots are stored or not by option)
         (or (set-difference slot-names all) (set-difference current slot-names)))))

(defun finish-functions (rs class prototype)
  "What to call on each instance of CLASS once the restore is complete:
INITIALIZE-INSTANCE when RESTORE-CONSTRUCTION says :INITIALIZE, then
AFTER-RESTORE when a method applies.  PROTOTYPE returns an instance of
CLASS, to ask RESTORE-CONSTRUCTION when a method of it applies."
  (let ((construction (if (other-method-applies-p #'restore-construction (list class))
                          (restore-construction (funcall prototype))
                          :allocate)))
    (unless (member construction '(:allocate :initialize))
      (restore-invalid rs (format nil "restore-construction of ~s is ~s" (class-name class)
                                  construction)
                       ":ALLOCATE or :INITIALIZE"))
    (when (and (eq construction :initialize) (typep class 'structure-class))
      (restore-invalid rs (format nil "restore-construction of structure ~s is :INITIALIZE"
                                  (class-name class))
                       ":ALLOCATE (structures have no INITIALIZE-INSTANCE)"))
    (append (and (eq construction :initialize) (list #'initialize-instance))
            (and (other-method-applies-p #'after-restore (list class))
                 (list #'after-restore)))))

(defun restore-transforms (class kind prototype slots)
  "For SLOTS (effective slot definitions, NIL for discarded ones) of CLASS
\(of KIND), the RESTORE function STORED-SLOTS gives each, or NIL when none
has one.  PROTOTYPE returns an instance of CLASS."
  (let* ((specs (slot-specs prototype class kind t 'invalid-input))
         (transforms (mapcar (lambda (slotd)
                               (and slotd (third (find slotd specs :key #'first))))
                             slots)))
    (and (some #'identity transforms) transforms)))

(defun transformed-setter (rs class setter check transform)
  "SETTER, or when TRANSFORM is a function, a setter of TRANSFORM of the
value, checked against the slot's CHECK."
  (if (and setter transform)
      (lambda (o v)
        (let ((value (funcall (the function transform) v)))
          (unless (slot-value-fits-p value check)
            (restore-invalid rs (format nil "a slot of ~s gets a ~s from its RESTORE function"
                                        (class-name class) (type-of value))
                             (format nil "a value of type ~s" (slot-check-type check))))
          (funcall (the function setter) o value)))
      setter))

(defun read-class-descriptor-of-class (rs kind name slot-names)
  "The restore descriptor of a class descriptor of KIND (not :CODEC)
naming the class NAME and its stored SLOT-NAMES."
  (let ((class (find-or-ask-class rs name)))
    (unless (typep class (ecase kind
                           (#.+class-kind-structure+ 'structure-class)
                           (#.+class-kind-standard-object+ 'standard-class)
                           (#.+class-kind-condition+ 'condition-class)))
      (restore-invalid rs (format nil "class ~s is not of the stored kind" (class-name class))
                       "a class of the same kind"))
    (ensure-class-finalized class)
    (let* ((allocate (instance-allocator class))
           ;; the extension points with methods for the class are asked
           ;; with an instance of it, made once, when one is needed
           (prototype (let ((instance nil))
                        (lambda () (or instance (setf instance (funcall allocate))))))
           (finish (finish-functions rs class prototype)))
      (if (upgrade-p class kind prototype slot-names)
          (register-always
           rs (make-restore-descriptor class allocate #() nil nil nil
                                       (typep class 'structure-class)
                                       :finish finish :upgrade t :slot-names slot-names))
          (let* ((slots (mapcar (lambda (slot-name) (find-or-ask-slot rs class slot-name))
                                slot-names))
                 (transforms (restore-transforms class kind prototype slots))
                 (checks (slot-checks slots))
                 (new-slots (and (not (member #'initialize-instance finish))
                                 (new-slot-names class slots))))
            (register-always
             rs (make-restore-descriptor
                 class
                 (if new-slots
                     ;; what CLOS does for slots a redefined class adds: their
                     ;; initforms, which cannot see the other slots, so they
                     ;; may run before the stored slots are filled
                     (lambda () (shared-initialize (funcall allocate) new-slots))
                     allocate)
                 (if transforms
                     (map 'vector (lambda (slotd transform check)
                                    (and slotd (transformed-setter
                                                rs class (slot-setter class slotd)
                                                check transform)))
                          slots transforms (or checks (make-list (length slots))))
                     (map 'vector (lambda (slotd) (and slotd (slot-setter class slotd))) slots))
                 ;; a transformed value is checked by its setter
                 (if transforms
                     (and checks
                          (map 'vector (lambda (check transform) (and (not transform) check))
                               checks transforms))
                     checks)
                 ;; a transformed value goes through its setter, and an
                 ;; instance with FINISH functions through FILL-EXTENDED-INSTANCE
                 (and (not transforms) (not finish) (restore-slot-locations class slots))
                 (and (not transforms) (not finish) (restore-slot-raw-kinds class slots))
                 (typep class 'structure-class)
                 :finish finish)))))))

(declaim (inline read-instance-header fill-instance))
(defun read-instance-header (rs)
  "Read the descriptor and allocate the instance; return it and the descriptor."
  (declare (optimize speed))
  (let ((d (read-object rs)))
    (unless (restore-descriptor-p d)
      (restore-invalid rs "an instance whose descriptor is not a class descriptor"
                       "a class descriptor"))
    (charge rs (* 8 (+ 2 (length (restore-descriptor-setters d)))))
    (values (funcall (restore-descriptor-allocator d)) d)))

(defun unbound-structure-slot (rs class)
  (restore-invalid rs (format nil "an unbound slot in structure ~s" (class-name class))
                   "a value (structure slots are always bound)"))

(defun restore-slot-locations (class slots)
  "Where the values of SLOTS (effective slot definitions of CLASS, NIL for
a discarded one) go, when every one has a place to go in an instance: for a
structure the index of each slot, boxed or raw; for a standard object the
BOXED-SLOT-LOCATIONS.  Otherwise NIL."
  (if (and (typep class 'structure-class) (every #'identity slots))
      (map '(simple-array fixnum (*))
           (lambda (slotd) (structure-slot-index class (slot-definition-name slotd)))
           slots)
      (boxed-slot-locations class slots)))

(defun restore-slot-raw-kinds (class slots)
  "For a structure CLASS with raw slots among SLOTS, the
STRUCTURE-SLOT-RAW-KIND of each of them; otherwise NIL."
  (when (and (typep class 'structure-class) (every #'identity slots))
    (let ((kinds (map 'vector (lambda (slotd)
                                (structure-slot-raw-kind class (slot-definition-name slotd)))
                      slots)))
      (and (some #'identity kinds) kinds))))

(defun slot-type-error (rs d i value)
  "Signal that the value VALUE read for the Ith stored slot of D's class is
not of the slot's type."
  (declare (type restore-descriptor d))
  (let ((class (restore-descriptor-class d)))
    (restore-invalid
     rs (format nil "a slot of ~s gets a ~s" (class-name class) (type-of value))
     (format nil "a value of type ~s"
             (slot-check-type (svref (restore-descriptor-checks d) i))))))

(defun fill-plain-slots (rs object d locations)
  "Read the values of OBJECT's slots, each into its place in LOCATIONS
\(raw or boxed, for a structure: see RESTORE-SLOT-RAW-KINDS), checking those
of a typed slot first."
  (declare (type restore-descriptor d) (type (simple-array fixnum (*)) locations)
           (optimize speed))
  (let ((ib (rs-ibuf rs))
        (checks (restore-descriptor-checks d))
        (raw-kinds (restore-descriptor-raw-kinds d)))
    (flet ((fill-slots (structure checked)
             ;; inline with constant arguments: each kind of class gets a
             ;; loop without the tests it does not need (an untyped standard
             ;; object's restore took 7% longer with them)
             (flet ((value (k tag)
                      ;; the Kth slot's value, which follows TAG, checked
                      (let ((value (object-from-tag rs tag)))
                        (when checked
                          (unless (slot-value-fits-p value (svref checks k))
                            (slot-type-error rs d k value)))
                        value)))
               (declare (inline value))
               (loop for i of-type fixnum across locations
                     for k of-type index from 0
                     do (let ((tag (read-u8 ib)))
                          (cond ((not structure)
                                 ;; a fresh instance's slots start unbound
                                 (unless (= tag +tag-unbound-slot+)
                                   (setf (standard-slot-at object i) (value k tag))))
                                ((= tag +tag-unbound-slot+)
                                 (unbound-structure-slot rs (restore-descriptor-class d)))
                                (t
                                 (let ((value (value k tag))
                                       (kind (and raw-kinds (svref raw-kinds k))))
                                   (if kind
                                       ;; checked above against the slot's type
                                       (set-structure-raw-slot object i kind value)
                                       (setf (structure-slot-at object i) value))))))))))
      (declare (inline fill-slots))
      (if (restore-descriptor-structure-p d)
          (if checks (fill-slots t t) (fill-slots t nil))
          (if checks (fill-slots nil t) (fill-slots nil nil))))
    object))

(defun fill-instance (rs object d)
  (declare (type restore-descriptor d))
  (let ((locations (restore-descriptor-locations d)))
    (cond (locations (fill-plain-slots rs object d locations))
          ((or (null (restore-descriptor-class d)) ; a user codec's
               (restore-descriptor-upgrade d) (restore-descriptor-finish d))
           (fill-extended-instance rs object d))
          (t (fill-slots-through-setters rs object d)))))

(defun fill-extended-instance (rs object d)
  "Fill OBJECT, of a class with extension points, or made by a user codec
that allocates first (or NIL for a skipped codec); its FINISH functions
wait for the end of the restore."
  (declare (type restore-descriptor d))
  (when (restore-descriptor-finish d)
    ;; pushed before the slots are read: the functions run in the order
    ;; the instances were made
    (push (cons object (restore-descriptor-finish d)) (rs-finish rs)))
  (let ((codec (restore-descriptor-codec d)))
    (cond ((restore-descriptor-class d)
           (if (restore-descriptor-upgrade d)
               (upgrade-instance
                object
                (loop for name in (restore-descriptor-slot-names d)
                      for value = (read-slot-value rs)
                      unless (eq value **unset**)
                        nconc (list name value)))
               (fill-slots-through-setters rs object d)))
          ((null codec)
           ;; a skipped codec (SKIP-CODEC): its value is read and dropped
           (read-object rs))
          ((user-codec-fill codec)
           (funcall (user-codec-fill codec) object (read-object rs)))
          (t (error 'missing-codec
                    :name (user-codec-name codec) :offset (ibuf-offset (rs-ibuf rs))
                    :message "has no ALLOCATE and FILL for an object written by one")))
    object))

(defun read-slot-value (rs)
  "A slot's value, or **UNSET** for an unbound slot."
  (if (= (peek-u8 (rs-ibuf rs)) +tag-unbound-slot+)
      (progn (read-u8 (rs-ibuf rs)) **unset**)
      (read-object rs)))

(defun fill-slots-through-setters (rs object d)
  "Read the values of OBJECT's slots, checking each against the slot's type
and storing it with the slot's setter."
  (declare (type restore-descriptor d))
  (let ((class (restore-descriptor-class d))
        (setters (restore-descriptor-setters d))
        (checks (restore-descriptor-checks d)))
    (dotimes (i (length setters) object)
      (let ((value (read-slot-value rs))
            (setter (svref setters i)))
        (cond ((null setter))                       ; a discarded slot
              ((eq value **unset**)
               ;; a fresh instance's slots start unbound; structures have none
               (when (typep class 'structure-class)
                 (unbound-structure-slot rs class)))
              ((or (null checks) (slot-value-fits-p value (svref checks i)))
               (funcall (the function setter) object value))
              (t (slot-type-error rs d i value)))))))

(defun read-instance (rs)
  "Read an instance whose tag was just consumed (READ-CONTAINER's work for
it, in one function)."
  (declare (optimize speed))
  (multiple-value-bind (object d) (read-instance-header rs)
    (register rs object)
    (nested (rs) (fill-instance rs object d))))

(defun read-codec-object (rs)
  "Read a CODEC-OBJECT whose tag was just consumed: its codec's descriptor,
the value, then the object DECODE makes of it, which takes its id."
  (let ((d (read-object rs)))
    (unless (and (restore-descriptor-p d) (null (restore-descriptor-class d)))
      (restore-invalid rs "a codec object whose descriptor is not a codec's"
                       "a codec descriptor"))
    (let* ((value (nested (rs) (read-object rs)))
           (codec (restore-descriptor-codec d))
           (object (cond ((null codec) nil)          ; skipped (SKIP-CODEC)
                         ((user-codec-decode codec)
                          (funcall (user-codec-decode codec) value))
                         (t (error 'missing-codec
                                   :name (user-codec-name codec)
                                   :offset (ibuf-offset (rs-ibuf rs))
                                   :message "has no DECODE for an object written by one")))))
      (register rs object))))

(defun run-finish-functions (rs)
  "Call the functions the extension points asked for on the instances
restored so far, oldest first, once: the record's objects are complete."
  (let ((pending (nreverse (rs-finish rs))))
    (setf (rs-finish rs) '())
    (loop for (object . functions) in pending
          do (dolist (function functions)
               (funcall (the function function) object)))))
