;;;; The platform's objects on ABCL: the names of src/platform/objects.lisp
;;;; (SBCL's) and src/platform/sbcl/types.lisp with the same contracts.
;;;; Floats are src/platform/abcl/floats.lisp's, bignum digits
;;;; src/platform/portable/integers.lisp's.  ABCL's structures hold every
;;;; slot boxed (SYS:STRUCTURE-REF), its standard objects have slot vectors
;;;; (MOP:STANDARD-INSTANCE-ACCESS), and it specializes arrays for bits,
;;;; (unsigned-byte 8, 16, 32) and characters only.

(in-package #:binstore)

(defconstant +fixnum-tag-bits+ 0
  "How far a fixnum's value is shifted left in a vector of fixnums: ABCL's
fixnum vectors are T vectors holding the integers themselves.")

;;; Identity.  The JVM's collector moves objects and tells no address, so
;;; OBJECT-ADDRESS numbers each object it is asked about: numbers are
;;; multiples of 16, as objects' granules are on SBCL, and the same for as
;;; long as the object lives, so the epoch never changes.
;;;
;;; The numbers are not kept in an EQ hash table: ABCL hashes an EQ table's
;;; keys by SXHASH, which for a cons or a string follows its contents, so a
;;; list of 40,000 equal lists put them all in one bucket and took 30 s to
;;; store instead of one.  They are kept by the JVM's identity hash code
;;; instead (SYS:IDENTITY-HASH-CODE): a bucket holds a weak reference to
;;; each object and its number, and the references whose objects died are
;;; swept out as the table grows.

(deftype gc-epoch ()
  "What CURRENT-GC-EPOCH returns."
  'cons)

(define-global **gc-epoch** (list :numbers-never-move)
  "The one epoch: objects' numbers never change.")

(defmacro current-gc-epoch ()
  "The current epoch: on ABCL always the same."
  '**gc-epoch**)

(defmacro without-collections (&body body)
  "Run BODY: objects' numbers never change on ABCL, so there is nothing to
hold off."
  `(progn ,@body))

(define-global **object-numbers** (make-hash-table :test 'eql)
  "Identity hash code -> a list of (weak reference . number), one for each
object OBJECT-ADDRESS was asked about that had that code.")

(define-global **object-numbers-lock** (threads:make-mutex)
  "Held while **OBJECT-NUMBERS** is read or changed (threads share it).")

(define-global **next-object-number** 1
  "The number OBJECT-ADDRESS gives next (times 16).")

(define-global **numbered-since-sweep** 0
  "Entries added to **OBJECT-NUMBERS** since it was last swept.")

(define-global **sweep-after** 65536
  "How many entries may be added before the next sweep: twice the live
ones after a sweep, so sweeps cost a constant per entry.")

(defun sweep-object-numbers ()
  "Drop the entries of objects that died; return how many live on."
  (let ((live 0) (emptied '()))
    (maphash (lambda (code entries)
               (let ((kept (delete-if-not (lambda (entry)
                                            (nth-value 1 (ext:weak-reference-value (car entry))))
                                          entries)))
                 (if kept
                     (progn (setf (gethash code **object-numbers**) kept)
                            (incf live (length kept)))
                     (push code emptied))))
             **object-numbers**)
    (dolist (code emptied) (remhash code **object-numbers**))
    live))

(defun object-address (object)
  "A non-negative integer that identifies OBJECT for as long as it lives
\(see above), a multiple of 16."
  (let ((code (sys:identity-hash-code object)))
    (threads:with-mutex (**object-numbers-lock**)
      (loop for (reference . number) in (gethash code **object-numbers**)
            do (multiple-value-bind (referent alive) (ext:weak-reference-value reference)
                 (when (and alive (eq referent object))
                   (return-from object-address number))))
      (when (> (incf **numbered-since-sweep**) **sweep-after**)
        (setf **sweep-after** (max 65536 (* 2 (sweep-object-numbers)))
              **numbered-since-sweep** 0))
      (let ((number (ash (prog1 **next-object-number** (incf **next-object-number**)) 4)))
        (push (cons (ext:make-weak-reference object) number)
              (gethash code **object-numbers**))
        number))))

;;; The identity table's seen bits (src/core/identity-table.lisp): words of
;;; 16 bits, so that every word is a fixnum (ABCL's are 32-bit, signed) in a
;;; vector ABCL specializes.

(defconstant +seen-word-bits+ 16
  "Bits in a word of the identity table's seen bits.")

(deftype seen-word ()
  "A word of the identity table's seen bits."
  '(unsigned-byte 16))

(deftype heap-address ()
  "What OBJECT-ADDRESS returns: a number from a table, never negative."
  'unsigned-byte)

;;; Arrays and strings.  ABCL's TYPEP takes a vector made adjustable (without
;;; a fill pointer) for a (SIMPLE-ARRAY <type> (*)), though not for a
;;; SIMPLE-ARRAY: the types binstore tests simple vectors with add that.

(deftype simple-1d-array ()
  "A simple one-dimensional array of any element type."
  '(and simple-array (simple-array * (*))))

(deftype simple-octet-vector ()
  "A simple vector of octets."
  '(and simple-array (simple-array (unsigned-byte 8) (*))))

(defun array-widetag (vector)
  "A small integer below 256 that is the same for exactly the simple
vectors with VECTOR's element representation: one for each of the element
types ABCL's arrays have."
  (if (null (array-element-type vector))
      7                                 ; before strings: ABCL's are strings too
      (typecase vector
        (simple-bit-vector 1)
        ((simple-array (unsigned-byte 8) (*)) 2)
        ((simple-array (unsigned-byte 16) (*)) 3)
        ((simple-array (unsigned-byte 32) (*)) 4)
        (simple-string 5)
        (t 6))))

(defun array-storage (array)
  "The simple vector holding the elements of the non-displaced ARRAY in
row-major order: ARRAY itself when it is a simple vector.  ABCL gives no
vector sharing another array's data, so it is a copy, and whoever writes
into it gives it back with STORE-ARRAY-STORAGE."
  (if (typep array 'simple-1d-array)
      array
      (let* ((n (array-total-size array))
             (copy (cl:make-array n :element-type (array-element-type array))))
        (dotimes (i n copy)
          (setf (aref copy i) (row-major-aref array i))))))

(defun store-array-storage (array storage)
  "Put into ARRAY the elements of STORAGE, which ARRAY-STORAGE gave for it
and which were written since (nothing when STORAGE is ARRAY itself)."
  (unless (eq array storage)
    (dotimes (i (array-total-size array))
      (setf (row-major-aref array i) (aref storage i))))
  array)

(defun array-data-copy (array start end)
  "A simple vector holding the elements of the vector ARRAY from START below
END (NIL: its length), and the bounds in it: ARRAY itself, or a copy."
  (let ((end (or end (length array))))
    (if (typep array 'simple-1d-array)
        (values array start end)
        (values (subseq array start end) 0 (- end start)))))

(defmacro with-array-data (((data-var array) (start-var start) (end-var end)) &body body)
  "Run BODY with DATA-VAR bound to a simple vector holding the elements of
the vector ARRAY (displaced or not) and START-VAR and END-VAR to the bounds
START and END (END NIL: the length) in it.  On ABCL a vector that is not
simple is copied, and what BODY writes into the copy is put back into
ARRAY when BODY returns."
  (let ((a (gensym "ARRAY")) (s (gensym "START"))
        (declarations (loop while (and (consp (first body)) (eq (first (first body)) 'declare))
                            collect (pop body))))
    `(let* ((,a ,array) (,s ,start))
       (multiple-value-bind (,data-var ,start-var ,end-var) (array-data-copy ,a ,s ,end)
         ,@declarations
         (multiple-value-prog1 (progn ,@body)
           (unless (eq ,data-var ,a)
             (replace ,a ,data-var :start1 ,s :start2 ,start-var :end2 ,end-var)))))))

;;; Strings, element types and symbols as CLISP and ABCL alike answer
;;; them: src/platform/portable/objects.lisp.

;;; Packages.

(defun package-locked-p (package)
  "NIL: ABCL has no package locks."
  (declare (ignore package))
  nil)

;;; Hash tables.

(defun hash-table-weakness (table)
  "TABLE's weakness: NIL, :KEY, :VALUE, :KEY-AND-VALUE or :KEY-OR-VALUE."
  (sys:hash-table-weakness table))

(defun make-hash-table-as-stored (&rest arguments &key synchronized &allow-other-keys)
  "MAKE-HASH-TABLE with the options the format stores: :WEAKNESS as ABCL
takes it; SYNCHRONIZED is dropped (ABCL's tables have no such option)."
  (declare (ignore synchronized))
  (apply #'make-hash-table
         (loop for (key value) on arguments by #'cddr
               unless (eq key :synchronized)
                 append (list key value))))

(declaim (inline format-rehash-size format-rehash-threshold format-hash-table-test))
(defun format-rehash-size (table)
  "TABLE's rehash size as the format stores it: its HASH-TABLE-REHASH-SIZE."
  (hash-table-rehash-size table))

(defun format-rehash-threshold (table)
  "TABLE's rehash threshold as the format stores it: its
HASH-TABLE-REHASH-THRESHOLD."
  (hash-table-rehash-threshold table))

(defun format-hash-table-test (table)
  "TABLE's test as the format names it: its HASH-TABLE-TEST."
  (hash-table-test table))

(defun identity-hashed-table-p (table)
  "True when TABLE hashes its keys by identity, so that a key may be put
in before its contents are read: never on ABCL, whose EQ and EQL tables
hash a cons or a string by SXHASH, by its contents (a cons key filled after
it went in is not found)."
  (declare (ignore table))
  nil)

(defun hash-table-synchronized-p (table)
  "NIL: ABCL makes no table synchronized on request."
  (declare (ignore table))
  nil)

(deftype system-object ()
  "Objects of the runtime that have no meaning outside this process:
threads, locks (THREADS::MUTEX, which ABCL does not export), weak
references, Java objects."
  '(or threads:thread threads::mutex ext:weak-reference java:java-object))

;;; Classes and slots, through the metaobject protocol.  A structure class's
;;; slots are ABCL's defstruct slot descriptions (vectors), not slot
;;; definition objects: the accessors below take both.

(defun structure-slot-p (slotd)
  "True when SLOTD is one of ABCL's defstruct slot descriptions."
  (and (vectorp slotd) (eq (aref slotd 0) 'sys::defstruct-slot-description)))

(defun class-slots (class)
  "The effective slots of the finalized CLASS."
  (mop:class-slots class))

(defun slot-definition-name (slotd)
  "SLOTD's name."
  (if (structure-slot-p slotd) (sys::dsd-name slotd) (mop:slot-definition-name slotd)))

(defun slot-definition-type (slotd)
  "SLOTD's declared type (T when none)."
  (if (structure-slot-p slotd) (sys::dsd-type slotd) (mop:slot-definition-type slotd)))

(defun slot-definition-allocation (slotd)
  "Where SLOTD's value lives: :INSTANCE, :CLASS or another allocation."
  (if (structure-slot-p slotd) :instance (mop:slot-definition-allocation slotd)))

(defun slot-definition-initfunction (slotd)
  "The function of no arguments computing SLOTD's initform, or NIL (for a
structure's slot: NIL, as its constructor holds the initform)."
  (if (structure-slot-p slotd) nil (mop:slot-definition-initfunction slotd)))

(defun slot-definition-location (slotd)
  "The index of SLOTD's value in an instance when it is an instance slot."
  (if (structure-slot-p slotd) (sys::dsd-index slotd) (mop:slot-definition-location slotd)))

(defun method-specializers (method)
  "The specializers of METHOD's required parameters."
  (mop:method-specializers method))

(defun applicable-methods-using-classes (function classes)
  "The methods of the generic FUNCTION that apply to arguments of CLASSES,
and whether that is known from the classes alone."
  (mop:compute-applicable-methods-using-classes function classes))

(defun ensure-class-finalized (class)
  "Finalize CLASS's inheritance unless done; return CLASS."
  (unless (mop:class-finalized-p class)
    (mop:finalize-inheritance class))
  class)

(defun condition-class-p (class)
  "True when CLASS is a class of conditions."
  (and (typep class 'class) (subtypep class 'condition)))

(deftype condition-class ()
  "The class of condition classes (ABCL: standard classes under CONDITION)."
  '(and standard-class (satisfies condition-class-p)))

;;; Instances.

(defun instance-layout (instance)
  "What tells instances of one class apart from others: a standard object's
or condition's layout, which a redefinition of its class replaces; a
structure's class (ABCL gives structures no layout), and a class's
class: ABCL's built-in classes have no layout either, and asking for it
throws a Java exception that ends ABCL (classes are refused at their
descriptor, after this)."
  (if (typep instance '(or structure-object class))
      (class-of instance)
      (sys:std-instance-layout instance)))

(defmacro structure-slot-at (instance index)
  "The slot at INDEX of the structure INSTANCE (a place)."
  `(sys:structure-ref ,instance ,index))

(defsetf structure-slot-at sys:structure-set)

(defun print-bounded (object stream &optional (level 0))
  "Print OBJECT to STREAM as PRIN1 does, but that structures, and the
lists and vectors around them, stop at *PRINT-LEVEL* and *PRINT-LENGTH*
\(ABCL's printer ignores *PRINT-LEVEL* for structures): *BOUNDED-PRINTER*
\(src/conditions.lisp) on ABCL."
  (flet ((element (i x)
           ;; the I-th element X; false when the rest is left out
           (when (plusp i) (write-char #\Space stream))
           (if (>= i *print-length*)
               (progn (write-string "..." stream) nil)
               (progn (print-bounded x stream (1+ level)) t))))
    (cond ((and (typep object '(or cons structure-object (and vector (not string) (not bit-vector))))
                (>= level *print-level*))
           (write-char #\# stream))
          ((consp object)
           (write-char #\( stream)
           (loop for tail = object then (cdr tail)
                 for i from 0
                 while (consp tail)
                 do (unless (element i (car tail)) (return))
                 finally (when tail
                           (write-string " . " stream)
                           (print-bounded tail stream (1+ level))))
           (write-char #\) stream))
          ((typep object '(and vector (not string) (not bit-vector)))
           (write-string "#(" stream)
           (loop for i below (length object)
                 while (element i (aref object i)))
           (write-char #\) stream))
          ((typep object 'structure-object)
           (format stream "#S(~s" (type-of object))
           (loop for slotd in (mop:class-slots (class-of object))
                 for i from 0
                 do (write-char #\Space stream)
                    (when (>= i *print-length*) (write-string "..." stream) (return))
                    (format stream ":~a " (slot-definition-name slotd))
                    (print-bounded (structure-slot-at object (slot-definition-location slotd))
                                   stream (1+ level)))
           (write-char #\) stream))
          (t (prin1 object stream)))))

(setf *bounded-printer* 'print-bounded)

(defmacro standard-slot-at (instance index)
  "The value at INDEX of the standard object INSTANCE's slots (a place);
the unbound marker for an unbound slot (UNBOUND-MARKER-P)."
  `(mop:standard-instance-access ,instance ,index))

(declaim (inline unbound-marker-p))
(defun unbound-marker-p (value)
  "True when VALUE, read with STANDARD-SLOT-AT, marks an unbound slot."
  (eq value sys:+slot-unbound+))

(defun structure-slot-description (class name)
  "The slot description of the slot NAME of the structure CLASS."
  (find name (mop:class-slots class) :key #'slot-definition-name))

(defun structure-slot-index (class name)
  "The index of the slot NAME in an instance of the structure class CLASS."
  (slot-definition-location (structure-slot-description class name)))

(defun structure-slot-reader (class name)
  "A function (instance) returning the value of the slot NAME."
  (let ((i (structure-slot-index class name)))
    (lambda (o) (sys:structure-ref o i))))

(defun structure-slot-setter (class name)
  "A function (instance value) setting the slot NAME directly."
  (let ((i (structure-slot-index class name)))
    (lambda (o v) (sys:structure-set o i v))))

(defun structure-slot-raw-kind (class name)
  "NIL: ABCL holds every structure slot boxed."
  (declare (ignore class name))
  nil)

(defun set-structure-raw-slot (instance index kind value)
  "Set the slot at INDEX (never called on ABCL, which has no raw slots)."
  (declare (ignore kind))
  (sys:structure-set instance index value))

