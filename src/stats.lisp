;;;; BINSTORE:FILE-STATISTICS and PRINT-STATISTICS: how many objects of each
;;;; type family a place holds and how many bytes they take, and per class
;;;; the instances and their bytes.  Like EXPLAIN (src/explain.lisp) it reads
;;;; by the grammar (src/format/grammar.lisp) with the cursor and READ-PARTS
;;;; of src/format/reference.lisp, makes no objects, interns nothing and
;;;; looks no class or package up: it counts any data, from any image, and
;;;; stops at the first malformed byte with what it counted so far.
;;;;
;;;; Every byte is given to exactly one object, the innermost one being read
;;;; when the byte is read: an object's own bytes are its tag and what
;;;; follows it (header, payload, the tail's tag of a run...), not the
;;;; objects nested in it.  So the families' bytes add up to the bytes read.
;;;; The bytes are counted in an ACCOUNT per object being read: when a nested
;;;; object begins, the bytes since the last mark go to the enclosing account;
;;;; when it ends, to its own.  An account is tallied (its family's objects and
;;;; bytes, its class's) when it ends, so that its family (an array's element
;;;; type) and class (an instance's descriptor) may be learnt as it is read.

(in-package #:binstore)

(defstruct (st-account (:constructor make-st-account (family objects &optional class)))
  "The object being read: its FAMILY (a string), OBJECTS (1, or 0 for the
contents of a container that a FILL completes, counted at its LATER), the
BYTES given to it so far, the CLASS its bytes count for (the class name, a
string, of the instance it is or is nested in most closely, or NIL), and
whether it is an INSTANCE of that class."
  family
  (objects 1 :type (integer 0 1))
  (bytes 0 :type unsigned-byte)
  class
  (instance nil))

(defstruct (statistician (:conc-name st-))
  "One FILE-STATISTICS: the cursor and its walker; the values of the
record's ids (for references to descriptors and symbols) and the number of
its cons ids; its tracking flags; the containers LATER announced (rank ->
(spec fields family class)); the account being read and the position up to
which bytes were given to accounts; the tallies: family -> (objects . bytes),
class name -> (kind slots descriptors instances bytes); the objects counted
in the current record."
  cursor walker
  (ids (make-array 64 :adjustable t :fill-pointer 0))
  (cons-ids 0 :type unsigned-byte)
  (last-ref -1)                         ; the id the last reference named
  (track-objects t)
  (track-conses nil)
  (pending (make-hash-table))
  (next-later 0)
  (current (make-st-account "between records" 0))
  (mark 0 :type unsigned-byte)
  (families (make-hash-table :test 'equal))
  (classes (make-hash-table :test 'equal))
  (record-objects 0 :type unsigned-byte)
  (stack-limit 0 :type word))

;;; Accounts ------------------------------------------------------------------------

(defun st-attribute (st)
  "Give the bytes read since the mark to the current account; move the mark."
  (let ((pos (cursor-pos (st-cursor st))))
    (when (> pos (st-mark st))
      (incf (st-account-bytes (st-current st)) (- pos (st-mark st))))
    (setf (st-mark st) pos)))

(defun st-tally (st account)
  "Add ACCOUNT's objects and bytes to its family's, and its class's."
  (let ((entry (or (gethash (st-account-family account) (st-families st))
                   (setf (gethash (st-account-family account) (st-families st)) (cons 0 0)))))
    (incf (car entry) (st-account-objects account))
    (incf (cdr entry) (st-account-bytes account)))
  (incf (st-record-objects st) (st-account-objects account))
  (let ((class (st-account-class account)))
    (when class
      (let ((entry (st-class-entry st class)))
        (when (st-account-instance account)
          (incf (fourth entry) (st-account-objects account)))
        (incf (fifth entry) (st-account-bytes account))))))

(defun st-class-entry (st name)
  "The tally of the class NAME: (kind slots descriptors instances bytes)."
  (or (gethash name (st-classes st))
      (setf (gethash name (st-classes st)) (list nil nil 0 0 0))))

(defun st-nested-account (st family)
  "A new account of one object of FAMILY whose bytes count for the class
that ST's current account's count for."
  (make-st-account family 1 (st-account-class (st-current st))))

(defmacro with-st-account ((st account) &body body)
  "Read BODY's bytes into ACCOUNT, nested in the current account; tally ACCOUNT
when BODY ends, even when it ends with an error (what was read counts)."
  (let ((s (gensym "ST")) (f (gensym "ACCOUNT")) (saved (gensym "SAVED")))
    `(let* ((,s ,st) (,f ,account) (,saved (st-current ,s)))
       (st-attribute ,s)
       (setf (st-current ,s) ,f)
       (unwind-protect (progn ,@body)
         (st-attribute ,s)
         (st-tally ,s ,f)
         (setf (st-current ,s) ,saved)))))

(defun st-begin-next-run (st spec)
  "The current account, a run of conses, ends where the run of SPEC that
continues its list begins: tally it and make it that run's account."
  (let ((account (st-current st)))
    (st-attribute st)
    (st-tally st account)
    (setf (st-account-family account) (st-family-name spec '())
          (st-account-objects account) 1
          (st-account-bytes account) 0)))

(defun st-family-name (spec fields)
  "The family of an object of SPEC whose parts are FIELDS: the tag's name;
for a specialized vector or an array, with its element type."
  (let ((name (string-downcase (tag-spec-name spec))))
    (if (and (member (tag-spec-name spec) '(:specialized-vector :array))
             (integerp (field fields 'code))
             (element-type-entry (field fields 'code)))
        (format nil "~a ~(~a~)" name (second (element-type-entry (field fields 'code))))
        name)))

;;; Objects ------------------------------------------------------------------------

(defun st-check-stack (st &optional deep)
  "Signal RESTORE-LIMIT-EXCEEDED (:nesting) rather than recurse into the
last +REFERENCE-STACK-MARGIN+ of the control stack.  With DEEP, signal it
whatever the stack: ABCL's count of levels (COUNTING-NESTING) is past
its limit."
  (when (or deep (stack-exhausted-p (st-stack-limit st)))
    (error 'restore-limit-exceeded
           :limit :nesting :value +max-physical-depth+ :offset (cursor-pos (st-cursor st))
           :message "the input nests deeper than FILE-STATISTICS's stack allows")))

(defun st-take-ids (st spec value)
  "Give the object of SPEC (VALUE, for references to it) the ids its rule
gives it, all but a run's cons ids."
  (when (ecase (tag-spec-ids spec)
          ((:never :conses) nil)
          (:always t)
          ((:tracked :container) (st-track-objects st)))
    (vector-push-extend value (st-ids st))))

(defun st-id-value (st id start)
  "The value of the object with ID, named by the reference at START, which
becomes the id named last; INVALID-INPUT when it has none yet."
  (unless (< id (length (st-ids st)))
    (cursor-invalid (st-cursor st) (format nil "reference to id ~d, which is not defined yet" id)
                    "an id defined earlier" start))
  (setf (st-last-ref st) id)
  (aref (st-ids st) id))

(defun st-read-object (st &optional slot-value-p)
  "Read one object (with SLOT-VALUE-P, the unbound-slot tag too) in an account
of its own; return its value for the grammar's expressions, as EXPLAIN's:
the number, character or string it is, an uninterned symbol named as the
symbol is printed, a FORMAT-DESCRIPTOR for a class descriptor, else a list
\(kind offset)."
  (st-check-stack st)
  (counting-nesting ((st-check-stack st t) :reference)
    (let* ((cursor (st-cursor st))
           (start (cursor-pos cursor))
           (tag (cursor-peek cursor))
           (spec (and (< tag +first-small-ref-tag+) (tag-spec tag))))
      (cond ((>= tag +first-small-int-tag+)
             (with-st-account (st (st-nested-account st "small integer"))
               (- (cursor-u8 cursor) +small-int-bias+)))
            ((>= tag +first-small-ref-tag+)
             (with-st-account (st (st-nested-account st "small ref"))
               (st-id-value st (- (cursor-u8 cursor) +first-small-ref-tag+) start)))
            ((and slot-value-p spec (eq (tag-spec-role spec) :slot))
             (with-st-account (st (st-nested-account st "unbound-slot"))
               (cursor-u8 cursor)
               '(:unbound)))
            ((or (null spec) (not (eq (tag-spec-role spec) :object)))
             (cursor-invalid cursor (format nil "tag #x~2,'0x where an object should ~
                                                 start~@[ (~(~a~))~]"
                                            tag (and spec (tag-spec-name spec)))
                             "an object tag" start))
            (t (let ((account (st-nested-account st (st-family-name spec '()))))
                 (with-st-account (st account)
                   (cursor-u8 cursor)
                   (st-read-tagged st spec start account))))))))

(defun st-read-tagged (st spec start account)
  "Read the object of SPEC whose tag was read at START, in ACCOUNT; return its value."
  (ecase (tag-spec-kind spec)
    (:leaf (st-read-leaf st spec start account))
    (:reference
     (let ((id (referenced-id (st-walker st) spec (st-last-ref st) start)))
       (if (eq (tag-spec-refers spec) :conses)
           (if (< id (st-cons-ids st))
               (list :cons start)
               (cursor-invalid (st-cursor st)
                               (format nil "reference to cons ~d, which is not defined yet" id)
                               "a cons id defined earlier" start))
           (st-id-value st id start))))
    (:container
     (multiple-value-bind (value fields) (st-open-container st spec start account)
       (st-fill-container st spec fields)
       value))
    (:deferred
     (field (read-parts (st-walker st) (tag-spec-parts spec) '()) 'container))))

(defun st-open-container (st spec start account)
  "Read the header of the container of SPEC whose tag was read at START,
in ACCOUNT, and give it its ids; return its value and the header's fields."
  (let* ((fields (read-parts (st-walker st) (tag-spec-parts spec) '()))
         (value (list (tag-spec-name spec) start)))
    (setf (st-account-family account) (st-family-name spec fields))
    (let ((descriptor (field fields 'descriptor)))
      (when (format-descriptor-p descriptor)
        (setf (st-account-class account) (st-class-name descriptor)
              (st-account-instance account) t)))
    (if (eq (tag-spec-ids spec) :conses)
        (when (st-track-conses st)
          (incf (st-cons-ids st) (field fields 'n)))
        (st-take-ids st spec value))
    (values value fields)))

(defun st-fill-container (st spec fields)
  "Read the contents of the container of SPEC (header FIELDS) in the
current account.  The runs that continue a list at its tail are read in a
loop, each in an account of its own (ST-BEGIN-NEXT-RUN)."
  (let ((walker (st-walker st)))
    (if (not (eq (tag-spec-ids spec) :conses))
        (read-parts walker (tag-spec-contents spec) fields)
        (loop
          (let ((tail (field (read-parts walker (tag-spec-contents spec) fields) 'cdr)))
            (if (and (consp tail) (eq (first tail) :continuation))
                (setf spec (second tail)
                      fields (third tail))
                (return)))))))

(defun st-tail (st)
  "The TAIL-FN: a list tag continues the run (its header read in an account of
its own; the value is (:continuation spec fields)); anything else is the
final cdr, an object."
  (let* ((cursor (st-cursor st))
         (start (cursor-pos cursor))
         (tag (cursor-peek cursor)))
    (if (cons-run-tag-p tag)
        (let ((spec (tag-spec tag)))
          (st-begin-next-run st spec)
          (cursor-u8 cursor)
          (multiple-value-bind (value fields) (st-open-container st spec start (st-current st))
            (declare (ignore value))
            (list :continuation spec fields)))
        (st-read-object st))))

(defun st-later (st)
  "The LATER-FN: a container's tag and header (in an account of its own, the
LATER's account around it), its contents waiting for their FILL; return its
value."
  (let* ((cursor (st-cursor st))
         (start (cursor-pos cursor))
         (tag (cursor-peek cursor)))
    (unless (container-tag-p tag)
      (cursor-invalid cursor (format nil "LATER before tag #x~2,'0x" tag) "a container tag"))
    (let* ((spec (tag-spec tag))
           (account (st-nested-account st (st-family-name spec '()))))
      (with-st-account (st account)
        (cursor-u8 cursor)
        (multiple-value-bind (value fields) (st-open-container st spec start account)
          (setf (gethash (st-next-later st) (st-pending st))
                (list spec fields (st-account-family account) (st-account-class account)))
          (incf (st-next-later st))
          value)))))

(defun st-fill (st n)
  "The FILL-FN: the contents of the container LATER numbered N, in an account
of its family and class that counts no object (its LATER counted it)."
  (let ((pending (gethash n (st-pending st))))
    (unless pending
      (cursor-invalid (st-cursor st)
                      (format nil "FILL for LATER container ~d, which awaits no contents" n)
                      "the rank of an unfilled LATER container"))
    (remhash n (st-pending st))
    (destructuring-bind (spec fields family class) pending
      (with-st-account (st (make-st-account family 0 class))
        (st-fill-container st spec fields))
      nil)))

(defun st-class-name (descriptor)
  "The class name of DESCRIPTOR (a FORMAT-DESCRIPTOR EXPLAIN's way), as text."
  (let ((name (format-descriptor-class-name descriptor)))
    (if (symbolp name) (symbol-name name) (ex-print name))))

(defun st-read-leaf (st spec start account)
  "Read the leaf of SPEC whose tag was read at START, in ACCOUNT; return its
value, and give it its ids."
  (let* ((fields (read-parts (st-walker st) (tag-spec-parts spec) '()))
         (name (tag-spec-name spec)))
    (setf (st-account-family account) (st-family-name spec fields))
    (flet ((f (name) (field fields name)))
      (let ((value
              (case name
                (:nil nil)
                (:t t)
                (:uint8 (f 'b))
                (:negint8 (- -1 (f 'b)))
                ((:int16 :int32 :int64) (f 'value))
                (:bignum (if (logbitp 0 (f 'v)) (- (f 'magnitude)) (f 'magnitude)))
                ((:single-float :double-float) (f 'value))
                (:ratio (/ (f 'numerator) (f 'denominator)))
                ((:complex-single :complex-double :complex-rational)
                 (complex (f 'real) (f 'imag)))
                (:character (code-char (f 'code)))
                ((:base-string :string) (f 'chars))
                ((:symbol :keyword :uninterned-symbol)
                 (make-symbol (ex-symbol-text name (f 'name) (f 'package))))
                (:package (list :package (f 'name)))
                (:class-descriptor
                 (let* ((descriptor (make-format-descriptor :kind (f 'kind)
                                                            :class-name (f 'class-name)
                                                            :slot-names (f 'slot-names)))
                        (entry (st-class-entry st (st-class-name descriptor))))
                   (setf (first entry) (nth (f 'kind) +class-kinds+)
                         (second entry) (length (f 'slot-names)))
                   (incf (third entry))
                   descriptor))
                (t (list name start)))))
        (st-take-ids st spec value)
        value))))

(defun st-object-part (st part index)
  "The OBJECT-FN: object INDEX of an :OBJECT or :OBJECTS PART; as EXPLAIN,
of the parts' types it checks the one its values can have: a class
descriptor, an instance's first object."
  (declare (ignore index))
  (let* ((options (if (eq (first part) :objects) (cdddr part) (cddr part)))
         (value (st-read-object st (getf options :unbound))))
    (when (and (eq (getf options :type) 'format-descriptor)
               (not (format-descriptor-p value)))
      (cursor-invalid (st-cursor st) "an instance whose descriptor is not a class descriptor"
                      "a class descriptor"))
    value))

(defun make-statistics-walker (st)
  "The walker of ST: objects, tails, LATER and FILL as FILE-STATISTICS reads them."
  (make-walker :cursor (st-cursor st)
               :lenient t
               :object-fn (lambda (walker part fields index)
                            (declare (ignore walker fields))
                            (st-object-part st part index))
               :tail-fn (lambda (walker part fields)
                          (declare (ignore walker part fields))
                          (st-tail st))
               :later-fn (lambda (walker part fields)
                           (declare (ignore walker part fields))
                           (st-later st))
               :fill-fn (lambda (walker part fields)
                          (declare (ignore walker))
                          (st-fill st (field fields (second part))))))

;;; Records ----------------------------------------------------------------------------

(defun st-peek-is (st name)
  "True when a byte is left and it is the tag NAME."
  (let ((cursor (st-cursor st)))
    (and (not (cursor-at-end-p cursor))
         (= (cursor-peek cursor) (tag-spec-code (tag-spec-named name))))))

(defun st-record-tag (st name)
  "Read the record tag NAME (just peeked) and its parts in an account of its
own (family \"record: NAME\"); return the fields."
  (with-st-account (st (make-st-account (format nil "record: ~(~a~)" name) 1))
    (cursor-u8 (st-cursor st))
    (read-parts (st-walker st) (tag-spec-parts (tag-spec-named name)) '())))

(defun st-record (st)
  "Count the record at the cursor; return (version top-level-objects)."
  (let ((cursor (st-cursor st))
        (top-level 0))
    (setf (fill-pointer (st-ids st)) 0
          (st-cons-ids st) 0
          (st-last-ref st) -1
          (st-track-objects st) t
          (st-track-conses st) nil
          (st-next-later st) 0)
    (clrhash (st-pending st))
    (let ((version (if (st-peek-is st :header)
                       (field (st-record-tag st :header) 'version)
                       +format-version+)))
      (when (cursor-at-end-p cursor)
        (error 'truncated-input :offset (cursor-pos cursor) :message "the record has no object"
                                :expected "an object"))
      (let ((flags (record-tracking-flags (lambda (name) (st-peek-is st name))
                                          (lambda (name) (st-record-tag st name)))))
        (when flags
          (setf (st-track-objects st) (logtest flags +track-objects+)
                (st-track-conses st) (logtest flags +track-conses+))))
      (when (st-peek-is st :dictionary)
        ;; the entries of a shared dictionary take the first ids; what they
        ;; are is not in the file (an instance of a class entry ends the count)
        (dotimes (i (field (st-record-tag st :dictionary) 'n))
          (vector-push-extend nil (st-ids st))))
      (flet ((top-level-object ()
               (st-read-object st)
               (incf top-level)
               (loop while (if (< version 3)
                               (st-peek-is st :fill)
                               (plusp (hash-table-count (st-pending st))))
                     do (unless (st-peek-is st :fill)
                          (cursor-invalid cursor
                                          (format nil "~d container~:p announced by LATER not filled"
                                                  (hash-table-count (st-pending st)))
                                          "a FILL record for each"))
                        (st-record-tag st :fill))))
        (if (< version 3)
            (loop
              (when (cursor-at-end-p cursor) (return))
              (when (st-peek-is st :end)
                (st-record-tag st :end)
                (return))
              (top-level-object))
            (let ((count (if (st-peek-is st :objects)
                             (field (st-record-tag st :objects) 'n)
                             1)))
              (dotimes (i count)
                (top-level-object))
              (when (st-peek-is st :end)
                (st-record-tag st :end)))))
      (when (plusp (hash-table-count (st-pending st)))
        (cursor-invalid cursor (format nil "~d container~:p announced by LATER never filled"
                                       (hash-table-count (st-pending st)))
                        "a FILL record for each"))
      (list version top-level))))

(defun statistics-of-octets (octets start)
  "FILE-STATISTICS's work on OCTETS from START."
  (let* ((cursor (make-cursor octets start (length octets) nil nil))
         (st (make-statistician :cursor cursor :mark start
                                :stack-limit (stack-limit +reference-stack-margin+)))
         (records '())
         (record-start start)
         (compressed nil)
         (condition nil))
    (setf (st-walker st) (make-statistics-walker st))
    (flet ((record-entry (version top-level)
             (list :start record-start :bytes (- (cursor-pos cursor) record-start)
                   :version version :top-level-objects top-level
                   :objects (st-record-objects st))))
      (handler-case
          (loop
            (loop while (st-peek-is st :end)
                  do (st-record-tag st :end))
            (when (cursor-at-end-p cursor)
              (return))
            (let ((method (frame-magic-at-cursor cursor)))
              (when method
                (setf compressed (list method (cursor-pos cursor)))
                (return)))
            (setf record-start (cursor-pos cursor)
                  (st-record-objects st) 0)
            (push (apply #'record-entry (st-record st)) records))
        ((or error storage-condition) (c)
          (setf condition c)
          (push (record-entry nil nil) records))))
    (st-attribute st)
    (let ((families (loop for family being the hash-keys of (st-families st)
                            using (hash-value entry)
                          collect (list family (car entry) (cdr entry))))
          (classes (loop for class being the hash-keys of (st-classes st)
                           using (hash-value entry)
                         collect (cons class entry))))
      (list :bytes (length octets)
            :start start
            :read (- (cursor-pos cursor) start)
            :records (nreverse records)
            :families (sort families (lambda (a b)
                                       (or (> (third a) (third b))
                                           (and (= (third a) (third b))
                                                (string< (first a) (first b))))))
            :classes (sort classes (lambda (a b)
                                     (or (> (sixth a) (sixth b))
                                         (and (= (sixth a) (sixth b))
                                              (string< (first a) (first b))))))
            :compressed compressed
            :condition condition
            :error-offset (and condition
                               (or (and (typep condition 'restore-error)
                                        (integerp (restore-error-offset condition))
                                        (restore-error-offset condition))
                                   (cursor-pos cursor)))))))

(defun file-statistics (place &key (start 0))
  "Count what PLACE, an octet vector (up to its fill pointer) or a file name
\(a string or pathname), holds from byte START, record after record, and
return a property list:

  :BYTES       the size of PLACE
  :START       START
  :READ        the bytes read from START
  :RECORDS     per record, (:start offset :bytes n :version v
               :top-level-objects n :objects n); after malformed bytes, the
               record they end has :version NIL
  :FAMILIES    per type family, (family objects bytes), most bytes first: a
               family is a tag's name (\"list\", \"string\", \"instance\", \"ref\"...),
               with the element type for \"specialized-vector\" and
               \"array\"; \"small integer\" and \"small ref\" are the integers
               and references written in their tag byte; \"record: NAME\"
               the record tags (header, tracking, objects, fill, end)
  :CLASSES     per class named by a class descriptor, (name kind slots
               descriptors instances bytes), most bytes first: NAME as the
               file spells it (\"PACKAGE::NAME\"), KIND :structure,
               :standard-object or :condition, BYTES those of its instances
               and of the objects in their slots, down to the instances
               nested in them (which count for their own class)
  :COMPRESSED  NIL, or (method offset) for the compressed record (a zstd or
               LZ4 frame) at which counting stopped
  :CONDITION   NIL, or the condition malformed bytes signalled, at which
               counting stopped
  :ERROR-OFFSET  the offset of that condition

An object's bytes are its own: its tag and what follows the tag but the
objects nested in it, so that every byte read is counted once and the
families' bytes add up to :READ.  The contents of a container deferred with LATER count for it where
its FILL holds them.

Like EXPLAIN, FILE-STATISTICS makes no object, interns no symbol, looks no
package or class up, and does not decompress: it stops at a compressed
record, and at malformed bytes, with what it counted.  It never signals
for the data (a file that cannot be read signals BINSTORE-FILE-ERROR)."
  (check-type start (integer 0))
  (let ((octets (if (or (stringp place) (pathnamep place))
                    (explain-file-octets place)
                    place)))
    (unless (typep octets '(vector (unsigned-byte 8)))
      (error 'restore-error :message (format nil "cannot count ~a: expected an octet vector ~
                                                   or a file name" (brief place))))
    (statistics-of-octets octets (min start (length octets)))))

(defun print-statistics (statistics &key (stream *standard-output*) (max-records 10))
  "Print STATISTICS, what FILE-STATISTICS returns, to STREAM: a line on the
whole, a line per record (at most MAX-RECORDS, NIL for all), a table of the
type families (objects, bytes, share of the bytes read), a table of the
classes, and where counting stopped if it did not reach the end."
  (destructuring-bind (&key bytes start read records families classes compressed condition
                            error-offset)
      statistics
    (let ((objects (reduce #'+ families :key #'second)))
      (format stream "~d byte~:p~:[~*~; from byte ~d~], ~d record~:p, ~d object~:p~%"
              bytes (plusp start) start (length records) objects)
      (loop for record in records
            for i from 1
            when (and max-records (> i max-records))
              do (format stream "… ~d more record~:p~%" (- (length records) max-records))
                 (return)
            do (destructuring-bind (&key start bytes version top-level-objects objects) record
                 (format stream "record ~d at 0x~4,'0x: ~d byte~:p, ~:[malformed~*~;version ~d~], ~
                                 ~@[~d top-level object~:p, ~]~d object~:p~%"
                         i start bytes version version top-level-objects objects)))
      (when families
        (let ((width (reduce #'max families :key (lambda (row) (length (first row)))
                                            :initial-value 20)))
          (format stream "~%~va ~9@a ~11@a ~6@a~%" width "family" "objects" "bytes" "share")
          (loop for (family count family-bytes) in families
                do (format stream "~va ~9d ~11d ~5,1f%~%" width family count family-bytes
                           (if (plusp read) (/ (* 100.0 family-bytes) read) 0.0)))
          (format stream "~va ~9d ~11d ~5,1f%~%" width "total" objects read
                  (if (plusp read) 100.0 0.0))))
      (when classes
        (let ((width (reduce #'max classes :key (lambda (row) (length (first row)))
                                           :initial-value 20)))
          (format stream "~%~va ~15a ~5@a ~9@a ~11@a~%" width "class" "kind" "slots" "instances"
                  "bytes")
          (loop for (name kind slots nil instances class-bytes) in classes
                do (format stream "~va ~15a ~5@a ~9d ~11d~%" width name
                           (string-downcase (or kind "?")) (or slots "?") instances
                           class-bytes))))
      (when compressed
        (format stream "~%stopped at 0x~4,'0x (~d): ~:[a zstd~;an LZ4~] frame, a record stored ~
                        with :compression; counted binstore's own bytes only (~d byte~:p not read)~%"
                (second compressed) (second compressed) (eq (first compressed) :lz4)
                (- bytes (second compressed))))
      (when condition
        (format stream "~%error at 0x~4,'0x (~d): ~a~%" error-offset error-offset
                (or (ignore-errors (princ-to-string condition))
                    (format nil "a ~s" (type-of condition)))))
      statistics)))
