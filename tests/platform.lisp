;;;; The tests' own platform seam: the few things the suite asks of the Lisp
;;;; it runs on (float bits, seeded random states, a wall-clock guard against
;;;; hangs, bytes allocated, threads, slots, exiting) named once, for SBCL,
;;;; ECL and ABCL.  The test files call these and name no Lisp's own symbol,
;;;; except in tests of SBCL by nature, which binstore.asd loads on SBCL only
;;;; (see the README's list of what the suite skips on other Lisps).

(in-package #:binstore-tests)

;;; Tests.  FiveAM registers a test by EVAL of a lambda of its body: SBCL
;;; compiles what it evaluates, ECL runs it in its bytecode interpreter,
;;; which cannot run binstore's inline C (FFI:C-INLINE, in the expansions
;;; of its memory and slot accessors) and runs everything else slowly, and
;;; ABCL in its interpreter, a hundred times slower than its compiled code.

#-sbcl
(defmacro test (name &body body)
  "FiveAM's TEST, with the test's body compiled with the file it is in:
NAME is a symbol or (NAME &key FIXTURE SUITE ...), BODY a docstring,
declarations and forms, as for FIVEAM:TEST."
  (destructuring-bind (test-name &key fixture &allow-other-keys)
      (if (consp name) name (list name))
    (multiple-value-bind (forms declarations)
        (alexandria:parse-body body :documentation t)
      `(progn
         (fiveam:test ,name ,@body)
         (setf (fiveam::test-lambda (fiveam::get-test ',test-name))
               (lambda ()
                 ,@(if fixture
                       (destructuring-bind (fixture-name &rest arguments)
                           (alexandria:ensure-list fixture)
                         `((with-fixture ,fixture-name ,arguments
                             ,@declarations ,@forms)))
                       `(,@declarations ,@forms))))
         ',test-name))))

;;; Gray streams on CLISP.  The tests define STREAM-READ-SEQUENCE and
;;; STREAM-WRITE-SEQUENCE methods (STREAM SEQUENCE &OPTIONAL START END), as
;;; SBCL, ECL and ABCL name them; CLISP reads and writes octets in bulk
;;; through STREAM-READ-BYTE-SEQUENCE and STREAM-WRITE-BYTE-SEQUENCE, with
;;; two more optional arguments.  The tests' binary streams are of these
;;; classes, which call the first through the second.

#+clisp
(progn
  (defgeneric stream-read-sequence (stream sequence &optional start end)
    (:documentation "Read octets into SEQUENCE from START below END; return
the index after the last one read."))
  (defgeneric stream-write-sequence (stream sequence &optional start end)
    (:documentation "Write the octets of SEQUENCE from START below END;
return SEQUENCE."))
  (defclass fundamental-binary-input-stream (gray:fundamental-binary-input-stream) ()
    (:documentation "A binary Gray input stream read in bulk by STREAM-READ-SEQUENCE."))
  (defclass fundamental-binary-output-stream (gray:fundamental-binary-output-stream) ()
    (:documentation "A binary Gray output stream written in bulk by STREAM-WRITE-SEQUENCE."))
  (defmethod gray:stream-read-byte-sequence ((stream fundamental-binary-input-stream) sequence
                                             &optional (start 0) end no-hang interactive)
    (declare (ignore no-hang interactive))
    (stream-read-sequence stream sequence start (or end (length sequence))))
  (defmethod gray:stream-write-byte-sequence ((stream fundamental-binary-output-stream) sequence
                                              &optional (start 0) end no-hang interactive)
    (declare (ignore no-hang interactive))
    (stream-write-sequence stream sequence start (or end (length sequence)))
    sequence))

;;; Floats.  Bits as integers, to compare NaNs and signed zeros exactly.

(defun double-float-bits (x)
  "The IEEE 754 encoding of the double float X, an (unsigned-byte 64)."
  #+sbcl (ldb (byte 64 0) (sb-kernel:double-float-bits x))
  #+ecl (ffi:c-inline (x) (:double) :uint64-t
                      "({ double d_ = #0; uint64_t b_; __builtin_memcpy(&b_, &d_, 8); b_; })"
                      :one-liner t :side-effects nil)
  #+(or abcl clisp) (binstore::double-float-bits x))

(defun single-float-bits (x)
  "The IEEE 754 encoding of the single float X, an (unsigned-byte 32)."
  #+sbcl (ldb (byte 32 0) (sb-kernel:single-float-bits x))
  #+ecl (ffi:c-inline (x) (:float) :uint32-t
                      "({ float f_ = #0; uint32_t b_; __builtin_memcpy(&b_, &f_, 4); b_; })"
                      :one-liner t :side-effects nil)
  #+(or abcl clisp) (binstore::single-float-bits x))

(defun float-element-bits (array index)
  "The encoding of the element at row-major INDEX of ARRAY, a (possibly
displaced or multidimensional) array of element type DOUBLE-FLOAT or
SINGLE-FLOAT, read without making the float: ECL traps when it boxes a
signalling NaN."
  #+(or sbcl abcl clisp) (let ((x (row-major-aref array index)))
           (etypecase x
             (double-float (double-float-bits x))
             (single-float (single-float-bits x))))
  #+ecl (progn
          (check-type index (integer 0))
          (assert (< index (array-total-size array)))
          (if (eq (array-element-type array) 'double-float)
              ;; an array's and a vector's data pointer (SELF) share their
              ;; offset in the header, and include the displacement
              (ffi:c-inline (array index) (:object :fixnum) :uint64-t
                            "({ uint64_t b_; __builtin_memcpy(&b_, (#0)->array.self.df + #1, 8); b_; })"
                            :one-liner t :side-effects nil)
              (ffi:c-inline (array index) (:object :fixnum) :uint32-t
                            "({ uint32_t b_; __builtin_memcpy(&b_, (#0)->array.self.sf + #1, 4); b_; })"
                            :one-liner t :side-effects nil))))

(defun make-double-float (high low)
  "The double float whose upper 32 bits are HIGH, a (signed-byte 32), and
whose lower 32 bits are LOW, an (unsigned-byte 32)."
  (binstore::double-float-from-bits high low))

(defun make-single-float (bits)
  "The single float whose encoding is BITS, a (signed-byte 32)."
  (binstore::single-float-from-bits bits))

(defparameter *nan-payloads-kept-p*
  #-clisp (/= (double-float-bits (make-double-float #x7FF80000 0))
              (double-float-bits (make-double-float #x7FF80000 1)))
  #+clisp nil
  "True when this Lisp keeps a NaN's payload: ABCL's floats read a NaN's bits
as the JVM's one quiet NaN; CLISP has no NaN.")

;;; How deep the deepest test data nest: deep enough to pass the default
;;; :MAX-DEPTH (a million), within the tests' guard against hangs (a minute
;;; an operation) on a Lisp fifty times slower than SBCL (ABCL), and in
;;; fewer bytes than a CLISP vector holds (2^24).

(defparameter *deep-nesting* #-(or abcl clisp) 10000000 #+(or abcl clisp) 2000000
  "The depth of the deepest hostile data: HOSTILE-TEN-MILLION-DEEP-LIST's
list and HOSTILE-TEN-MILLION-DEEP-INPUT's input.")

;;; Integers a collection never takes from a weak hash table.

(defparameter *immortal-integer-bound*
  #-abcl nil
  #+abcl 256
  "NIL where every fixnum is an immediate, never collected; else the bound
below which the non-negative integers are shared objects that live for
ever (ABCL boxes every fixnum but 0 to 255, and a weak table loses a boxed
key no one else holds).")

;;; Specialized arrays.

(defun specialized-here-p (element-type)
  "True when this Lisp keeps arrays of ELEMENT-TYPE apart from T arrays
\(and, for BASE-CHAR, base strings apart from character strings), as SBCL
does: where it does not (ABCL's double-float arrays are T arrays, all its
strings are base strings), the same forms make other data, with other bytes
\(doc/FORMAT.md, Across Lisps)."
  (if (eq element-type 'base-char)
      (not (subtypep 'character 'base-char))
      (not (eq (upgraded-array-element-type element-type) t))))

;;; The infinities; NIL on CLISP, which has none (nor NaNs, denormals or a
;;; negative zero: FLOATS-HERE leaves out what this Lisp lacks).

(defconstant +double-positive-infinity+
  #+sbcl sb-ext:double-float-positive-infinity
  #+(or ecl abcl) ext:double-float-positive-infinity
  #+clisp nil)
(defconstant +double-negative-infinity+
  #+sbcl sb-ext:double-float-negative-infinity
  #+(or ecl abcl) ext:double-float-negative-infinity
  #+clisp nil)
(defconstant +single-positive-infinity+
  #+sbcl sb-ext:single-float-positive-infinity
  #+(or ecl abcl) ext:single-float-positive-infinity
  #+clisp nil)
(defconstant +single-negative-infinity+
  #+sbcl sb-ext:single-float-negative-infinity
  #+(or ecl abcl) ext:single-float-negative-infinity
  #+clisp nil)

(defmacro floats-here (&rest forms)
  "A list of the values of FORMS, floats, leaving out those this Lisp has
no float for: a form whose value is NIL (an infinity on CLISP) or which
signals BINSTORE::UNREPRESENTABLE-FLOAT (a NaN's or a denormal's bits)."
  #-clisp `(list ,@forms)
  #+clisp `(remove nil (list ,@(loop for form in forms
                                     collect `(handler-case ,form
                                                (binstore::unrepresentable-float () nil))))))

(defun signed-32 (bits)
  "The (unsigned-byte 32) BITS read as a (signed-byte 32)."
  (if (logbitp 31 bits) (- bits (expt 2 32)) bits))

(defun quieted (x)
  "The float X, or, when X is a signalling NaN, the quiet NaN of the same
sign and payload.  For data made on ECL, which traps whenever it compares
a signalling NaN (storing a complex with one as a part does: REALPART
boxes the part, comparing it with zero); elsewhere X itself."
  #-ecl x
  #+ecl (etypecase x
          (double-float
           (let ((bits (double-float-bits x)))
             (if (and (= (ldb (byte 11 52) bits) #x7FF) (plusp (ldb (byte 51 0) bits))
                      (not (logbitp 51 bits)))
                 (let ((quiet (logior bits (expt 2 51))))
                   (make-double-float (signed-32 (ldb (byte 32 32) quiet)) (ldb (byte 32 0) quiet)))
                 x)))
          (single-float
           (let ((bits (single-float-bits x)))
             (if (and (= (ldb (byte 8 23) bits) #xFF) (plusp (ldb (byte 22 0) bits))
                      (not (logbitp 22 bits)))
                 (make-single-float (signed-32 (logior bits (expt 2 22))))
                 x)))))

(declaim (notinline one-object))
(defun one-object (x)
  "X, through a call whose value's type the compiler does not know.  A
test that shares a number between places binds it to this: ECL's compiler
keeps a local known to be a DOUBLE-FLOAT unboxed and boxes it afresh at
each use, so the data would hold equal numbers, not one number twice
(which CL permits: EQ on numbers is the implementation's choice)."
  x)

;;; Files.

(defparameter *utf-8* #-clisp :utf-8 #+clisp charset:utf-8
  "The external format of UTF-8 text files for OPEN (an object of its own
on CLISP, which takes no keyword there).")

;;; Random states.  The same seed gives the same sequence on one Lisp;
;;; the Lisps' generators differ, so a seed names a different datum on each.

(defun seeded-random-state (seed)
  "A fresh random state determined by the integer SEED."
  #+sbcl (sb-ext:seed-random-state seed)
  #+ecl (make-random-state seed)
  ;; ABCL's random state wraps a java.util.Random, which it offers no way
  ;; to seed: the field is set through Java's reflection
  #+abcl (let ((state (make-random-state nil))
               (field (java:jcall "getDeclaredField"
                                  (java:jclass "org.armedbear.lisp.RandomState") "random")))
           (java:jcall "setAccessible" field java:+true+)
           (java:jcall "setSeed" (java:jcall "get" field state)
                       (ldb (byte 63 0) (sxhash seed)))
           state)
  ;; CLISP's random state is 64 bits, which it reads back as it prints them
  #+clisp (let ((*read-eval* nil))
            (read-from-string
             (format nil "#S(random-state #*~64,'0b)"
                     (ldb (byte 64 0) (* (1+ seed) #x9E3779B97F4A7C15))))))

;;; Bytes allocated: what a test may bound where a time would depend on the
;;; machine.  (ECL's figure comes from its collector and counts whole
;;; allocation granules, so bounds are checked with the same margins; ABCL's
;;; is the JVM's count for the calling thread.)

(defun bytes-consed ()
  "Bytes allocated by this process (on ABCL, this thread) so far."
  #+sbcl (sb-ext:get-bytes-consed)
  #+ecl (progn (si:gc-stats t) (values (si:gc-stats t)))
  ;; called through the public interface: the JVM refuses reflection on
  ;; its implementing class
  #+abcl (java:jcall (java:jmethod "com.sun.management.ThreadMXBean" "getCurrentThreadAllocatedBytes")
                     (java:jstatic "getThreadMXBean" "java.lang.management.ManagementFactory"))
  ;; the space TIME reports: its seventh and eighth values, in units of
  ;; 2^24 bytes and bytes
  #+clisp (multiple-value-bind (real-high real-low run-high run-low gc-high gc-low
                                space-high space-low)
              (sys::%%time)
            (declare (ignore real-high real-low run-high run-low gc-high gc-low))
            (+ (* space-high (expt 2 24)) space-low)))

;;; A guard against hangs: a wall-clock limit no passing test comes near.

(define-condition test-timeout (serious-condition)
  ((seconds :initarg :seconds :reader test-timeout-seconds))
  (:report (lambda (c stream)
             (format stream "no answer within ~d seconds" (test-timeout-seconds c)))))

(defun call-with-timeout (seconds thunk)
  "Call THUNK; signal TEST-TIMEOUT in this thread when it has not returned
after SECONDS.  Return THUNK's values.  (On CLISP, which has no threads to
watch from, THUNK is called unguarded.)"
  #+sbcl (handler-case (sb-ext:with-timeout seconds (funcall thunk))
           (sb-ext:timeout () (error 'test-timeout :seconds seconds)))
  #+ecl (let* ((caller mp:*current-process*)
               (done nil)
               (watchdog (mp:process-run-function
                          "binstore test watchdog"
                          (lambda ()
                            (loop repeat (* 10 seconds)
                                  until done do (sleep 1/10))
                            (unless done
                              (mp:interrupt-process
                               caller (lambda ()
                                        (unless done
                                          (error 'test-timeout :seconds seconds)))))))))
          (unwind-protect (funcall thunk)
            (setf done t)
            (mp:process-join watchdog)))
  #+abcl (let* ((caller (threads:current-thread))
                (done nil)
                (watchdog (threads:make-thread
                           (lambda ()
                             (loop repeat (* 10 seconds)
                                   until done do (sleep 1/10))
                             (unless done
                               (threads:interrupt-thread
                                caller (lambda ()
                                         (unless done
                                           (error 'test-timeout :seconds seconds))))))
                           :name "binstore test watchdog")))
           (declare (ignore watchdog))
           ;; not joined, which would wait up to a tenth of a second at
           ;; each call (thousands in the differential tests): it ends by
           ;; itself, and an interrupt it made after DONE does nothing
           (unwind-protect (funcall thunk)
             (setf done t)))
  #+clisp (progn seconds (funcall thunk)))

(defmacro with-timeout ((seconds) &body body)
  "Evaluate BODY under CALL-WITH-TIMEOUT."
  `(call-with-timeout ,seconds (lambda () ,@body)))

;;; Identity tables: an object's identity as a hash key.  ABCL hashes an
;;; EQ table's keys by SXHASH, which follows a cons's or a string's
;;; contents, so equal conses share a bucket and a walk of a long list of
;;; them takes quadratic time; there the key is binstore's number for the
;;; object (BINSTORE::OBJECT-ADDRESS), by the JVM's identity hash.

(defun make-identity-table ()
  "A hash table for keys made by IDENTITY-KEY."
  #-abcl (make-hash-table :test 'eq)
  #+abcl (make-hash-table :test 'eql))

(declaim (inline identity-key))
(defun identity-key (object)
  "A key that names OBJECT's identity in a MAKE-IDENTITY-TABLE table."
  #-abcl object
  #+abcl (binstore::object-address object))

;;; Collections.

(defun collect-moving-objects ()
  "A full collection where it moves the objects binstore knows by their
address (SBCL); nothing on the Lisps whose collector does not move them
\(ECL) or where binstore numbers objects for as long as they live (CLISP,
ABCL, whose full collection is the JVM's, and takes long)."
  #+sbcl (gc :full t))

(defun gc (&key full)
  "Collect garbage now: every generation when FULL."
  #+sbcl (sb-ext:gc :full full)
  #+ecl (ext:gc full)
  #+abcl (progn full (ext:gc))
  #+clisp (progn full (ext:gc)))

;;; Threads and locks.  (CLISP has none: the tests that start threads are
;;; left out there.)

(defun make-test-thread (function &key name)
  "Start a thread calling FUNCTION; JOIN-TEST-THREAD returns its value."
  #+sbcl (sb-thread:make-thread function :name name)
  #+ecl (mp:process-run-function (or name "binstore test") function)
  #+abcl (threads:make-thread function :name (or name "binstore test"))
  #+clisp (error "no thread for ~a: CLISP has no threads" (or name function)))

(defun join-test-thread (thread)
  "Wait for THREAD and return the value its function returned."
  #+sbcl (sb-thread:join-thread thread)
  #+ecl (values (mp:process-join thread))
  #+abcl (values (threads:thread-join thread))
  #+clisp (error "no thread ~a to join: CLISP has no threads" thread))

(defun make-test-lock ()
  "A fresh lock for WITH-TEST-LOCK."
  #+sbcl (sb-thread:make-mutex)
  #+ecl (mp:make-lock)
  #+abcl (threads:make-mutex)
  #+clisp nil)

(defmacro with-test-lock ((lock) &body body)
  "Evaluate BODY holding LOCK."
  #+sbcl `(sb-thread:with-mutex (,lock) ,@body)
  #+ecl `(mp:with-lock (,lock) ,@body)
  #+abcl `(threads:with-mutex (,lock) ,@body)
  #+clisp `(progn ,lock ,@body))

;;; Classes and structures.

(defun class-finalized-p (class)
  "True when CLASS is finalized (its slots and precedence list computed)."
  #+sbcl (sb-mop:class-finalized-p class)
  #+ecl (clos:class-finalized-p class)
  #+abcl (mop:class-finalized-p class)
  #+clisp (clos:class-finalized-p class))

(defun slot-names (object)
  "The names of every slot of OBJECT's class, shared ones included."
  (mapcar #'binstore::slot-definition-name (binstore::class-slots (class-of object))))

(defun instance-slot-names (object)
  "The names of the slots OBJECT (a standard object or condition) keeps in
itself (not its class's shared slots), but for the Lisp's own slots, which
binstore does not store (BINSTORE::LISP-OWN-SLOT-P)."
  (loop for slotd in (binstore::class-slots (class-of object))
        when (and (eq (binstore::slot-definition-allocation slotd) :instance)
                  ;; the Lisp's own (ECL's condition report), not stored
                  (not (binstore::lisp-own-slot-p slotd)))
          collect (binstore::slot-definition-name slotd)))

(defun structure-slots (structure)
  "The slots of STRUCTURE as (NAME . RAW-P) in order: RAW-P when the slot
holds an unboxed number (a fresh box on each read; SBCL only)."
  #+sbcl (loop for dsd in (sb-kernel:dd-slots
                           (sb-kernel:find-defstruct-description (type-of structure)))
               collect (cons (sb-kernel:dsd-name dsd)
                             (not (eq (sb-kernel:dsd-raw-type dsd) t))))
  #-sbcl (loop for slotd in (binstore::class-slots (class-of structure))
              collect (cons (binstore::slot-definition-name slotd) nil)))

(defun make-test-hash-table (&rest options)
  "MAKE-HASH-TABLE of OPTIONS, which may ask for :WEAKNESS and
:SYNCHRONIZED on any Lisp: ABCL's takes no :SYNCHRONIZED (and makes no table
synchronized), which is left out there as binstore leaves it out."
  #-(or abcl clisp) (apply #'make-hash-table options)
  #+(or abcl clisp) (apply #'binstore::make-hash-table-as-stored options))

(defun hash-table-weakness (table)
  "TABLE's weakness (NIL, :KEY, :VALUE, :KEY-AND-VALUE or :KEY-OR-VALUE)."
  (binstore::hash-table-weakness table))

(defun hash-table-synchronized-p (table)
  "True when TABLE is safe to use from several threads at once."
  #+sbcl (sb-ext:hash-table-synchronized-p table)
  #+ecl (ext:hash-table-synchronized-p table)
  #+(or abcl clisp) (binstore::hash-table-synchronized-p table))

;;; The process.

(defun exit-process (code)
  "End this process with status CODE, after unwinding and flushing."
  #+sbcl (sb-ext:exit :code code :abort nil)
  #+ecl (ext:quit code)
  #+abcl (ext:quit :status code)
  #+clisp (ext:quit code))
