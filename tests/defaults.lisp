;;;; Safe by default: what a user meets without choosing any option.
;;;; Identity at the defaults, records (one RESTORE per STORE), the header
;;;; that keeps other files from being taken for data, many top-level
;;;; objects, vectors as places, limits that say how to lift them, and
;;;; errors that are binstore's and print briefly.

(in-package #:binstore-tests)

(def-suite safe-defaults :in all
  :description "Identity, records, headers, limits and errors at the default options.")
(in-suite safe-defaults)

(defun octets-of (list-or-string)
  "A simple octet vector of LIST-OR-STRING's bytes (a string's char codes)."
  (coerce (if (stringp list-or-string) (map 'list #'char-code list-or-string) list-or-string)
          '(simple-array (unsigned-byte 8) (*))))

(defmacro signals-with-message ((condition-type &rest substrings) &body body)
  "Check that BODY signals CONDITION-TYPE whose report contains each of
SUBSTRINGS."
  (let ((c (gensym "C")))
    `(handler-case (progn ,@body (fail "~s was not signalled" ',condition-type))
       (,condition-type (,c)
         (pass)
         (let ((report (princ-to-string ,c)))
           (dolist (s (list ,@substrings))
             (is (search s report) "~s is not in the report ~s" s report))))
       (error (,c) (fail "~s signalled ~s instead: ~a" ',condition-type (type-of ,c) ,c)))))

;;; Identity at the defaults

(test defaults-keep-list-identity
  "A list met twice is one list after a restore, with no option given."
  (let* ((shared (list 1 2 3))
         (copy (binstore:restore (binstore:store nil (list shared shared)))))
    (is (eq (first copy) (second copy))))
  (let* ((alist (list (cons :a 1) (cons :b 2)))
         (copy (binstore:restore (binstore:store nil (vector alist alist alist)))))
    (is (eq (aref copy 0) (aref copy 1)))
    (is (eq (aref copy 1) (aref copy 2)))
    (is (eq (first (aref copy 0)) (first (aref copy 2))))))

(test defaults-store-a-dag-of-lists-once
  "x = (list x x), 30 levels: 2^30 paths, 30 conses pairs.  At the defaults
it is written once per cons and comes back with the same sharing."
  (let ((x (list 1)))
    (dotimes (i 30) (setf x (list x x)))
    (let* ((bytes (binstore:store nil x))
           (copy (binstore:restore bytes)))
      (is (< (length bytes) 1000))
      (loop repeat 30
            do (is (eq (first copy) (second copy)))
               (setf copy (first copy)))
      (is (equal '(1) copy)))))

(test defaults-store-circular-lists
  (let ((l (list 1 2 3)))
    (setf (car l) l)
    (let ((copy (binstore:restore (binstore:store nil l))))
      (is (eq copy (car copy)))
      (is (equal '(2 3) (cdr copy)))))
  (let ((l (list 1 2 3)))
    (setf (cdr (last l)) l)
    (let ((copy (binstore:restore (binstore:store nil l))))
      (is (eq copy (cdddr copy))))))

(test fast-modes-name-the-option-they-lack
  "Without tracking conses, a circular list is refused with the option that
stores it and the path to the list; deep circularity through cars names the
option too."
  (let ((l (list 1 2)))
    (setf (cdr (last l)) l)
    (handler-case (progn (binstore:store nil (list :a (vector l))
                                         :support-shared-list-structures nil)
                         (fail "a circular list was stored without tracking conses"))
      (binstore:circular-list (c)
        (is (eq l (binstore:circular-list-list c)))
        (is (equal '((:cdr) (:car) (:elt 0)) (binstore:circular-list-path c)))
        (is (search ":support-shared-list-structures t" (princ-to-string c))))))
  (let ((l (list 1 2)))
    (setf (car l) l)
    (signals-with-message (binstore:store-limit-exceeded
                           ":support-shared-list-structures t" ":max-depth" "*max-depth*")
      (binstore:store nil l :support-shared-list-structures nil :max-depth 2000)))
  (let ((v (vector 1 2)))
    (setf (aref v 0) v)
    (signals-with-message (binstore:store-limit-exceeded ":track-references t")
      (binstore:store nil v :track-references nil :max-depth 2000))))

;; Not on ABCL: the bound, twice the heap in use (a gigabyte and more in the
;; suite's JVM), takes ABCL over ten minutes to write
#-abcl
(test fast-modes-stop-a-runaway-dag
  "Without tracking conses and without a max-to-write, a DAG whose paths
multiply stops with a message naming the options, instead of writing until
memory runs out."
  (let ((x (list 1)))
    (dotimes (i 40) (setf x (list x x)))
    ;; the bound follows the heap in use: keep it to the live data
    (gc :full t)
    (signals-with-message (binstore:store-limit-exceeded
                           ":support-shared-list-structures t" ":max-to-write")
      (binstore:store nil x :support-shared-list-structures nil))))

(test default-options-are-documented-values
  (is (eq t binstore:*track-references*))
  (is (eq t binstore:*support-shared-list-structures*))
  (is (eq t binstore:*output-magic-number*))
  (is (eq t binstore:*require-header*))
  (is (null binstore:*max-to-write*))
  (is (null binstore:*compression*)))

;;; Not binstore data

(test text-is-not-data
  (signals-with-message (binstore:not-binstore-data "hellowor" ":require-header nil")
    (binstore:restore (octets-of "helloworld")))
  (call-with-temporary-directory
   (lambda (directory)
     (let ((path (merge-pathnames "notes.txt" directory)))
       (with-open-file (out path :direction :output)
         (write-string "helloworld" out))
       (signals binstore:not-binstore-data (binstore:restore path))
       (handler-case (binstore:restore path)
         (binstore:not-binstore-data (c)
           (is (eql 0 (binstore:restore-error-offset c)))))))))

(test other-files-are-not-data
  "The first bytes of other formats, and truncated or damaged headers."
  (dolist (bytes (list '(#x89 #x50 #x4E #x47 #x0D #x0A #x1A #x0A) ; PNG
                       '(#x7F #x45 #x4C #x46 2 1 1 0)             ; ELF
                       '(#x1F #x8B 8 0)                           ; gzip
                       '(#x24) '(#x24 #x42) '(#x24 #x42 #x53)     ; truncated headers
                       '(#x24 #x42 #x53 #x54)
                       '(#x24 #x42 #x53 #x55 3 #x71)              ; a wrong magic
                       '(#x71) '(0 0 0 0)))
    (signals binstore:not-binstore-data (binstore:restore (octets-of bytes)))))

(test headerless-records-restore-when-asked
  (let ((bytes (binstore:store nil '(1 "two") :output-magic-number nil)))
    (signals binstore:not-binstore-data (binstore:restore bytes))
    (is (equal '(1 "two") (binstore:restore bytes :require-header nil)))
    (is (equal '(1 "two")
               (let ((binstore:*require-header* nil)) (binstore:restore bytes))))))

(test version-error-offset-is-the-version-byte
  (handler-case (progn (binstore:restore (octets-of '(#x24 #x42 #x53 #x54 99 #x71)))
                       (fail "version 99 was read"))
    (binstore:unsupported-version (c)
      (is (= 4 (binstore:restore-error-offset c)))
      (is (= 99 (binstore:unsupported-version-version c))))))

;;; Many top-level objects

(test many-top-level-bytes-end-in-a-value-or-an-error
  "300 KB of one-byte objects: never an exhausted stack."
  (let ((bytes (make-array 300000 :element-type '(unsigned-byte 8) :initial-element #x71)))
    (signals binstore:not-binstore-data
      (binstore:restore bytes :intern-symbols nil :max-to-read 1000000))
    ;; headerless, it is one record of one object; the rest is not read
    (is (equal '(1) (multiple-value-list
                     (binstore:restore bytes :require-header nil :intern-symbols nil
                                             :max-to-read 1000000))))))

(test many-separate-objects
  (let ((bytes (binstore:store nil (make-list 1000000 :initial-element :x)
                               :as-separate-objects t)))
    (handler-case (progn (binstore:restore bytes)
                         (fail "a million values were returned"))
      (binstore:restore-limit-exceeded (c)
        (is (typep c 'binstore:restore-error))
        (is (eq :values (binstore:limit-exceeded-limit c)))
        (is (search "MAP-STORED-OBJECTS" (princ-to-string c)))))
    (let ((n 0))
      (binstore:map-stored-objects (lambda (x) (when (eq x :x) (incf n))) bytes)
      (is (= 1000000 n))))
  (let ((objects (loop for i below binstore:+max-values+ collect i)))
    (is (equal objects (multiple-value-list
                        (binstore:restore (binstore:store nil objects
                                                          :as-separate-objects t))))))
  (is (null (multiple-value-list
             (binstore:restore (binstore:store nil '() :as-separate-objects t))))))

(test separate-objects-share-identity
  (let* ((s (list "shared"))
         (values (multiple-value-list
                  (binstore:restore (binstore:store nil (list s s) :as-separate-objects t)))))
    (is (= 2 (length values)))
    (is (eq (first values) (second values)))))

#+sbcl ; raw memory (a SAP) is SBCL's
(test restore-from-sap-ignores-padding
  (let ((region (make-array 4096 :element-type '(unsigned-byte 8) :initial-element 0)))
    (sb-sys:with-pinned-objects (region)
      (let* ((sap (sb-sys:vector-sap region))
             (n (binstore:store-to-sap sap 4096 '(1 2 3))))
        (is (< n 100))
        (is (equal '((1 2 3)) (multiple-value-list (binstore:restore-from-sap sap 4096))))
        (is (equal '((1 2 3))
                   (multiple-value-list
                    (binstore:restore-from-sap sap 4096 :require-header nil))))))))

;;; Records on streams

(test each-restore-reads-one-store
  (call-with-temporary-directory
   (lambda (directory)
     (let ((path (merge-pathnames "records.bin" directory)))
       (with-open-file (out path :direction :output :element-type '(unsigned-byte 8))
         (binstore:store out '(a b))
         (binstore:store out "second")
         (binstore:store out '(3 4) :as-separate-objects t))
       (with-open-file (in path :element-type '(unsigned-byte 8))
         (is (equal '((a b)) (multiple-value-list (binstore:restore in))))
         (is (equal '("second") (multiple-value-list (binstore:restore in))))
         (is (equal '(3 4) (multiple-value-list (binstore:restore in))))
         (is (eq :done (binstore:restore in :eof-error-p nil :eof-value :done)))
         (signals binstore:end-of-data (binstore:restore in)))
       ;; the file place reads the first record
       (is (equal '(a b) (binstore:restore path)))
       (let ((all '()))
         (binstore:do-stored-objects (x path) (push x all))
         (is (equal '((a b) "second" 3 4) (nreverse all))))))))

(test end-of-data-is-not-truncation
  (signals binstore:end-of-data (binstore:restore (octets-of '())))
  (is (eq :eof (binstore:restore (octets-of '()) :eof-error-p nil :eof-value :eof)))
  (let ((bytes (binstore:store nil (list "a string" 1 2))))
    (loop for end from 5 below (length bytes)
          do (handler-case (progn (binstore:restore (subseq bytes 0 end))
                                  (fail "~d bytes of ~d restored" end (length bytes)))
               (binstore:truncated-input () (pass))
               (binstore:end-of-data () (fail "truncation at ~d taken for the end" end))))))

#+sbcl ; a child process through SB-EXT:RUN-PROGRAM
(test records-through-a-pipe-do-not-wait-for-the-next
  "A restore from a pipe returns as soon as its record is read: it does not
read ahead into bytes that have not been written yet."
  (let ((process (sb-ext:run-program "/bin/cat" '() :input :stream :output :stream
                                                     :wait nil :external-format :latin-1)))
    (unwind-protect
         (let ((to (sb-ext:process-input process))
               (from (sb-ext:process-output process)))
           (binstore:store to '(1 "one"))
           (finish-output to)
           (is (equal '(1 "one")
                      (with-timeout (60) ; a hang guard only
                        (binstore:restore from))))
           (binstore:store to :two)
           (finish-output to)
           (is (eq :two (with-timeout (60) (binstore:restore from))))
           (close to)
           (is (eq :end (with-timeout (60)
                          (binstore:restore from :eof-error-p nil :eof-value :end)))))
      (sb-ext:process-close process))))

;;; Vectors as places

(test appending-grows-geometrically
  "40,000 appends to an adjustable vector reallocate it a few dozen times,
not once per append, and every record is there."
  (let ((v (make-array 0 :element-type '(unsigned-byte 8) :adjustable t :fill-pointer 0))
        (sizes '()))
    (dotimes (i 40000)
      (binstore:store v i)
      (pushnew (array-total-size v) sizes))
    (is (< (length sizes) 40) "~d sizes" (length sizes))
    (let ((i 0) (ok t))
      (binstore:do-stored-objects (x v)
        (unless (eql x i) (setf ok nil))
        (incf i))
      (is (= 40000 i))
      (is-true ok))))

(test simple-octet-vector-as-a-place
  (let ((v (make-array 100 :element-type '(unsigned-byte 8) :initial-element 0)))
    (let ((n (binstore:store v '(1 2 3))))
      (is (typep n '(integer 1 100)))
      (is (equal '(1 2 3) (binstore:restore v)))
      (is (equal '(1 2 3) (binstore:restore (subseq v 0 n)))))
    (signals binstore:out-of-space (binstore:store v (make-string 200 :initial-element #\a)))))

;;; Limits and errors

(test limits-name-their-keyword-and-variable
  (signals-with-message (binstore:store-limit-exceeded ":max-to-write" "*max-to-write*")
    (binstore:store nil (make-string 100) :max-to-write 10))
  (signals-with-message (binstore:restore-limit-exceeded ":max-to-read" "*max-to-read*")
    (binstore:restore (binstore:store nil (make-string 100)) :max-to-read 20))
  (let ((deep (list 1)))
    (dotimes (i 50) (setf deep (list deep)))
    (signals-with-message (binstore:restore-limit-exceeded ":max-depth" "*max-depth*")
      (binstore:restore (binstore:store nil deep) :max-depth 10))
    (signals-with-message (binstore:store-limit-exceeded ":max-depth" "*max-depth*")
      (binstore:store nil deep :max-depth 10))))

(test restore-limits-are-restore-errors
  (handler-case (binstore:restore (binstore:store nil (make-string 100)) :max-to-read 20)
    (binstore:restore-error (c)
      (is (typep c 'binstore:limit-exceeded))
      (is (integerp (binstore:restore-error-offset c))))))

(test api-misuse-is-a-binstore-error
  (signals binstore:store-error (binstore:store nil 1 :as-separate-objects 5))
  (signals binstore:store-error (binstore:store nil '(1 . 2) :as-separate-objects t))
  (signals binstore:store-error (binstore:store (make-string-output-stream) 1))
  (signals binstore:restore-error (binstore:restore (make-string-input-stream "abc")))
  (signals binstore:store-error (binstore:store 42 1))
  (signals binstore:restore-error (binstore:restore 42)))

(test messages-print-places-briefly
  (let ((place (make-array 10000000 :initial-element 0)))
    (handler-case (binstore:store place 1)
      (binstore:store-error (c)
        (is (< (length (princ-to-string c)) 400)))))
  (let ((place (make-array 10000000 :initial-element 0)))
    (handler-case (binstore:restore place)
      (binstore:restore-error (c)
        (is (< (length (princ-to-string c)) 400))))))

;; Not on ABCL, whose DEFPACKAGE drops :DOCUMENTATION
#-abcl
(test the-package-is-documented
  (is (stringp (documentation (find-package :binstore) t))))

;;; A class that gained a slot since the data was stored

(defclass evolving-point ()
  ((x :initarg :x :initform 0)))

(test new-slots-get-their-initforms
  (let ((bytes (binstore:store nil (make-instance 'evolving-point :x 5))))
    (unwind-protect
         (progn
           (eval '(defclass evolving-point ()
                   ((x :initarg :x :initform 0)
                    (label :initarg :label :initform "new"))))
           (let ((p (binstore:restore bytes)))
             (is (= 5 (slot-value p 'x)))
             (is (equal "new" (slot-value p 'label)))))
      (eval '(defclass evolving-point ()
              ((x :initarg :x :initform 0)))))))
