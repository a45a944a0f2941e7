;;;; Shared dictionaries: symbols, strings and classes that the writer and
;;;; the reader agree on beforehand, so that a record refers to them instead
;;;; of spelling them out.
;;;;
;;;;   DICTIONARY fingerprint(4 bytes) n
;;;; after the record's tracking tag: the dictionary's n entries take ids 0
;;;; to n-1, in order, whatever the tracking flags, and the record's objects
;;;; refer to them as to any object written before.  A class entry stands
;;;; for its class descriptor.  The fingerprint (64-bit FNV-1a of what each
;;;; entry is, folded to 32 bits: small messages are what dictionaries are
;;;; for) and the size let the reader refuse a record stored with another
;;;; dictionary: DICTIONARY-MISMATCH (an unnoticed mismatch needs the same
;;;; size and a 1 in 2^32 coincidence).

(in-package #:binstore)

(defstruct (dictionary (:constructor %make-dictionary (entries slot-names fingerprint))
                       (:copier nil) (:predicate dictionaryp))
  "The entries of a dictionary (a simple vector: symbols, strings, classes),
for each class entry the names of the slots its instances store (NIL for
the others), and the fingerprint."
  (entries #() :type simple-vector)
  (slot-names #() :type simple-vector)
  (fingerprint 0 :type (unsigned-byte 32)))

(defmethod print-object ((d dictionary) stream)
  (print-unreadable-object (d stream :type t)
    (format stream "~d entr~:@p ~8,'0x" (length (dictionary-entries d))
            (dictionary-fingerprint d))))

(defvar *dictionary* nil
  "The dictionary (MAKE-DICTIONARY) STORE writes records with and RESTORE
reads them with, or NIL for none.  A record stored with a dictionary names
it by its fingerprint; RESTORE signals DICTIONARY-MISMATCH unless it is
given the same one.  Overridden per call by :DICTIONARY.")

(defconstant +fnv-offset+ #xcbf29ce484222325 "FNV-1a's 64-bit offset basis.")
(defconstant +fnv-prime+ #x100000001b3 "FNV-1a's 64-bit prime.")

(defun fnv-1a (hash octets)
  "HASH (an FNV-1a state) after the octets of the list OCTETS."
  (declare (type (unsigned-byte 64) hash))
  (dolist (octet octets hash)
    (setf hash (ldb (byte 64 0) (* (logxor hash octet) +fnv-prime+)))))

(defun text-octets (string)
  "The code points of STRING, each as three octets, then a zero octet: an
unambiguous spelling of STRING for the fingerprint."
  (append (loop for char across string
                for code = (char-code char)
                nconc (list (ldb (byte 8 16) code) (ldb (byte 8 8) code) (ldb (byte 8 0) code)))
          (list 0)))

(defun symbol-octets (symbol)
  "SYMBOL spelt for the fingerprint: its package's name and its name."
  (append (text-octets (package-name (symbol-package symbol)))
          (text-octets (symbol-name symbol))))

(defun class-entry-slot-names (class)
  "The names of the slots a dictionary's class entry stores: those
STORED-SLOTS names for an instance of CLASS, class slots left out."
  (mapcar (lambda (spec) (slot-definition-name (first spec)))
          (slot-specs (lambda () (funcall (instance-allocator class)))
                      class (class-kind-of-class class) nil 'store-error)))

(defun make-dictionary (objects)
  "A dictionary of OBJECTS, a sequence of symbols (interned: not NIL, T or
uninterned ones), strings and classes (structure classes, standard classes,
condition classes; a class stands for the description of its instances'
slots, whose names STORED-SLOTS gives now), without duplicates.  Give the
same dictionary (the same objects, in the same order, in programs whose
classes have the same stored slots) to STORE and RESTORE with :DICTIONARY
or *DICTIONARY*: a record then refers to each entry in one or two bytes.
Strings restore as the dictionary's own string objects (EQ to them).
Signals STORE-ERROR for anything else."
  (let* ((entries (map 'simple-vector
                       (lambda (x) (if (stringp x) (coerce x 'simple-string) x))
                       objects))
         (hash +fnv-offset+)
         (slot-names (make-array (length entries) :initial-element nil)))
    (flet ((fail (control &rest arguments)
             (error 'store-error :message (format nil "make-dictionary: ~?" control arguments))))
      (loop for x across entries
            for i from 0
            do (setf hash
                     (cond ((and (symbolp x) x (not (eq x t)) (symbol-package x))
                            (fnv-1a hash (cons 1 (symbol-octets x))))
                           ((stringp x)
                            (fnv-1a hash (cons 2 (text-octets x))))
                           ((typep x '(or structure-class standard-class condition-class))
                            (let ((names (class-entry-slot-names x)))
                              (setf (svref slot-names i) names)
                              (fnv-1a hash (append (list 3) (symbol-octets (class-name x))
                                                   (loop for name in names
                                                         append (symbol-octets name))))))
                           (t (fail "~a cannot be an entry: symbols, strings and classes can"
                                    (brief x)))))
               (when (position x entries :end i :test #'equal)
                 (fail "~a is there twice" (brief x)))))
    (%make-dictionary entries slot-names (logxor (ldb (byte 32 0) hash) (ldb (byte 32 32) hash)))))

;;; Storing ----------------------------------------------------------------------

(defun write-dictionary-tag (ss dictionary)
  "Write the DICTIONARY tag of a record stored with DICTIONARY and give its
entries ids 0 to n-1 in the store's identity table, as the reader will."
  (let ((ob (ss-obuf ss))
        (entries (dictionary-entries dictionary)))
    (write-u8 ob +tag-dictionary+)
    (let ((fingerprint (dictionary-fingerprint dictionary)))
      (dotimes (i 4)
        (write-u8 ob (ldb (byte 8 (* 8 i)) fingerprint))))
    (write-varint ob (length entries))
    (loop for x across entries
          for names across (dictionary-slot-names dictionary)
          do (cond ((symbolp x) (remember-recurring ss x))
                   ((stringp x)
                    (when (< (written-id ss x) 0)
                      (remember ss x)))
                   (t (let ((d (class-entry-descriptor ss x names)))
                        (setf (class-descriptor-id d) (remember-recurring ss d))))))))

(defun class-entry-descriptor (ss class slot-names)
  "The class descriptor of CLASS whose instances store SLOT-NAMES, made the
store's descriptor for CLASS."
  (let* ((prototype (funcall (instance-allocator class)))
         (specs (remove-if-not (lambda (spec)
                                 (member (slot-definition-name (first spec)) slot-names))
                               (slot-specs (lambda () prototype) class
                                           (class-kind-of-class class) t 'store-error)))
         (d (make-descriptor-from-specs class (class-kind-of-class class) specs
                                         (instance-layout prototype))))
    (setf (gethash class (or (ss-descriptors ss)
                             (setf (ss-descriptors ss) (make-hash-table :test 'eq))))
          d)))

;;; Restoring --------------------------------------------------------------------

(defun read-dictionary-tag (rs)
  "Read a DICTIONARY tag (just peeked) and give the entries of *DICTIONARY*
ids 0 to n-1; DICTIONARY-MISMATCH unless *DICTIONARY* is the dictionary the
record names."
  (let* ((ib (rs-ibuf rs))
         (start (ibuf-offset ib))
         (fingerprint (progn (read-u8 ib)
                             (loop for i below 4
                                   sum (ash (read-u8 ib) (* 8 i)))))
         (n (read-varint ib))
         (dictionary *dictionary*))
    (unless (and dictionary
                 (= fingerprint (dictionary-fingerprint dictionary))
                 (= n (length (dictionary-entries dictionary))))
      (error 'dictionary-mismatch
             :offset start :fingerprint fingerprint
             :message (format nil "the record was stored with a dictionary of ~d entr~:@p, ~
                                   fingerprint ~8,'0x; ~:[no dictionary was given~;~:*~a was given~]"
                              n fingerprint dictionary)))
    (unless (= 0 (rs-next-id rs))
      (restore-invalid rs "a dictionary after the record's first object" "a dictionary first"))
    (loop for x across (dictionary-entries dictionary)
          for names across (dictionary-slot-names dictionary)
          do (if (or (symbolp x) (stringp x))
                 (register-always rs x)
                 (read-class-descriptor-of-class rs (class-kind-of-class x) (class-name x) names)))))
