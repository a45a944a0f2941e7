;;;; Extension points: how a program tells binstore about its own types.
;;;;
;;;; Per class, four generic functions, each asked once per class per store
;;;; or restore (never per instance unless the program defines a method that
;;;; asks for it):
;;;;   STORED-SLOTS          which slots to store, and how to transform them
;;;;   RESTORE-CONSTRUCTION  :allocate (the default) or :initialize
;;;;   AFTER-RESTORE         called on each restored instance, at the end
;;;;   UPGRADE-INSTANCE      fills an instance whose class changed since
;;;;                         the file was written
;;;; Per type, user codecs (DEFINE-CODEC): a writer and a reader under a
;;;; name the file carries, for instances of any class and for objects
;;;; binstore refuses otherwise (functions, foreign pointers, streams...).
;;;;
;;;; This file holds the protocol and the registry only; the instance codec
;;;; (src/codecs/objects.lisp) and the reference decoder apply them.

(in-package #:binstore)

;;; Classes -------------------------------------------------------------------

(defgeneric stored-slots (object)
  (:documentation "Which slots of OBJECT's class binstore stores, and how.
Returns :ALL (the default method: every slot with :instance allocation, and
class slots too when *STORE-CLASS-SLOTS*) or a list whose elements are slot
names, stored as they are, or lists (NAME &key STORE RESTORE): STORE, a
function of one argument, turns a bound slot's value into the value written;
RESTORE turns the value read back into the slot's value (it runs when the
instance is restored, possibly before objects the value contains are
complete).  Slots left out are not written: on restore a standard object's
slot gets its initform (as CLOS does for a slot a class gains), a
structure's keeps what ALLOCATE-INSTANCE gave it.

binstore calls this once per class per STORE, with the first instance it
meets, and once per class per RESTORE with an uninitialized instance made
by ALLOCATE-INSTANCE: a method must depend on the class only.  A name that
is not a slot of the class signals STORE-ERROR."))

(defmethod stored-slots ((object t))
  :all)

(defgeneric restore-construction (object)
  (:documentation "How an instance of OBJECT's class is made on restore:
:ALLOCATE (the default method) makes it with ALLOCATE-INSTANCE and sets the
stored slots; :INITIALIZE then also calls INITIALIZE-INSTANCE on it with no
initargs, once the whole restore is complete: initforms fill the slots the
file does not hold, and the class's INITIALIZE-INSTANCE and
SHARED-INITIALIZE methods run (standard objects and conditions only; for a
structure class RESTORE signals INVALID-INPUT).  Called once per class per
restore with an uninitialized instance."))

(defmethod restore-construction ((object t))
  :allocate)

(defgeneric after-restore (object)
  (:documentation "Called on each restored instance of a class that has a
method, after the whole restore is complete (every object of the record
filled, cycles included), in the order the instances were made; after
INITIALIZE-INSTANCE when RESTORE-CONSTRUCTION says :INITIALIZE.  Its value
is ignored.  The default method does nothing, and binstore calls the
function only for classes with another applicable method (decided once per
class per restore)."))

(defmethod after-restore ((object t))
  nil)

(defgeneric upgrade-instance (object slot-values)
  (:documentation "Fill OBJECT, a fresh instance made by ALLOCATE-INSTANCE
of a class whose slots differ from those the file holds (a slot gained,
lost or renamed since it was written), from SLOT-VALUES, a property list of
the stored slot names and their values in the order written (unbound slots
left out).  binstore calls it for every such instance when a method
applies to the class (decided once per class per restore: only the first
argument may be specialized usefully); otherwise it handles the change as
before, with the restarts of MISSING-SLOT.  The instance already has its
id, so values may refer to it (cycles), and objects it refers to may not
yet be complete.  Its value is ignored."))

;;; User codecs ---------------------------------------------------------------

(defstruct (user-codec (:constructor make-user-codec (name type encode decode allocate fill)))
  "A codec registered under NAME (a symbol) for objects of TYPE: ENCODE
makes the one object written for it; DECODE makes the object from what was
read; or ALLOCATE (no arguments) makes an empty object before the stored
one is read, and FILL (object stored) completes it."
  (name nil :type symbol)
  type
  (encode nil :type function)
  (decode nil :type (or null function))
  (allocate nil :type (or null function))
  (fill nil :type (or null function)))

(defvar *user-codecs* '()
  "The registered codecs, newest first: the newest whose type an object
has is the one that writes it.")

(defun register-codec (name &key type encode decode allocate fill)
  "Register (or replace) the codec NAME, a symbol, for objects of TYPE, a
type specifier.  ENCODE, a function of the object, returns the one value
binstore stores for it (any storable value).  On restore either DECODE, a
function of that value, returns the object (the value cannot then contain
the object itself: STORE signals STORE-ERROR on such a cycle), or ALLOCATE,
a function of no arguments, returns an empty object, which gets its id at
once, and FILL, a function of the object and the value, completes it, so the
value may refer to the object (cycles).  The file holds NAME, not a number,
written once per store.  A codec applies to instances of any class (it is
chosen once per class per store, before the slots would be) and to objects
binstore otherwise refuses; it does not replace binstore's own encoding of
numbers, characters, strings, symbols, conses, arrays, hash tables,
packages and pathnames.  Returns NAME."
  (check-type name (and symbol (not null)))
  (check-type encode function)
  (unless (if decode
              (and (functionp decode) (null allocate) (null fill))
              (and (functionp allocate) (functionp fill)))
    (error "register-codec ~s: give DECODE, or ALLOCATE and FILL" name))
  (setf *user-codecs*
        (cons (make-user-codec name type encode decode allocate fill)
              (remove name *user-codecs* :key #'user-codec-name)))
  name)

(defun unregister-codec (name)
  "Remove the codec NAME; true when there was one."
  (let ((present (find name *user-codecs* :key #'user-codec-name)))
    (setf *user-codecs* (remove name *user-codecs* :key #'user-codec-name))
    (and present t)))

(defmacro define-codec (name (type) &key encode decode allocate fill)
  "Register the codec NAME for objects of TYPE (unevaluated): REGISTER-CODEC
with the other arguments evaluated, at load time."
  `(register-codec ',name :type ',type :encode ,encode :decode ,decode
                          :allocate ,allocate :fill ,fill))

(defun find-codec (name)
  "The codec registered under NAME, or NIL."
  (find name *user-codecs* :key #'user-codec-name))

(defun codec-for-object (object)
  "The codec that writes OBJECT: the newest whose type it has, or NIL."
  (and *user-codecs*
       (find-if (lambda (codec) (typep object (user-codec-type codec))) *user-codecs*)))
