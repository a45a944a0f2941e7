;;;; binstore's portable tests: the same data stored on every Lisp binstore
;;;; runs on must give the same bytes, and restore to equal data.
;;;;
;;;; Plain Common Lisp and binstore, no test framework, so that a Lisp the
;;;; port is young on runs it: (binstore-portable-tests:run) prints one line
;;;; per case and returns true when all passed.  The expected bytes are in
;;;; golden.sexp beside this file, written on SBCL with
;;;; (binstore-portable-tests:write-golden); a case whose bytes differ
;;;; between Lisps by nature (a hash table's size, which the table chooses)
;;;; is checked by round trip only, and says why.

(defpackage #:binstore-portable-tests
  (:use #:common-lisp)
  (:export #:run #:write-golden #:cases #:run-places))

(in-package #:binstore-portable-tests)

(defstruct point x y (z 0d0 :type double-float) (label "" :type string))

(defclass account ()
  ((owner :initarg :owner)
   (balance :initarg :balance)
   (history :initarg :history)
   (unset)))

(defun circular-list (&rest elements)
  (let ((list (copy-list elements)))
    (setf (cdr (last list)) list)
    list))

(defun base (string) (coerce string 'simple-base-string))

(defun character-string (string) (coerce string '(simple-array character (*))))

(defun vector-of (type &rest elements)
  (make-array (length elements) :element-type type :initial-contents elements))

(defun cases ()
  "The cases: (name data &key (bytes t) (why nil) (needs nil) (again
:bytes)), BYTES NIL for a case checked by round trip only, NEEDS what a
Lisp must have for the case's bytes to be SBCL's (see UNMET-NEEDS), AGAIN
:SIMILAR when the restored data stored again may give other bytes (then
they must restore to similar data).  Built fresh on each call, the
same on every Lisp: strings are made with the type meant (a literal is a
character string on SBCL and ECL, but not by the standard)."
  (let ((shared (list 1 2 3))
        (text (character-string "shared")))
    `(;; integers, of every width the format has, around each boundary
      ("small integers" (0 1 -1 -16 143 144 -17 255 256 -256 -257))
      ("16/32/64-bit" (32767 -32768 65535 ,(expt 2 31) ,(- (expt 2 31))
                       ,(1- (expt 2 61)) ,(expt 2 61) ,(1- (expt 2 62)) ,(expt 2 62)
                       ,(1- (expt 2 63)) ,(- (expt 2 63))))
      ("bignums" (,(expt 2 63) ,(expt 2 64) ,(- (expt 2 64)) ,(expt 3 200) ,(- (expt 7 150))))
      ("ratios" (1/3 -22/7 ,(/ (expt 2 70) 3)))
      ("floats" (1.5f0 -0.0f0 2.5d0 -0.0d0 3.141592653589793d0 1d-300
                 ,most-positive-double-float ,least-positive-single-float))
      ("complexes" (#c(1.0f0 2.0f0) #c(1d0 -2d0) #c(1 2) #c(1/2 -3)))
      ("characters" (#\a #\Space ,(code-char 0) ,(code-char 233) ,(code-char #x20AC)
                     ,(code-char #x1F600))
       :needs ((:char-code #x1F600)))
      ;; strings: the format's base strings are ASCII, written from base
      ;; strings; character strings are UTF-8, whatever their characters
      ("character strings" (,(character-string "hello") ,(character-string "")
                            ,(character-string "héllo, €uro 😀")
                            ,(character-string (make-string 300 :initial-element #\x)))
       :needs (:character-strings (:char-code #x1F600)))
      ("base strings" (,(base "hello") ,(base "") ,(base (make-string 200 :initial-element #\y))))
      ("symbols" (:keyword :|MiXeD| car cl:list ,(make-symbol "UNINTERNED") nil t
                  point binstore:store))
      ("package" ,(find-package "COMMON-LISP"))
      ;; lists
      ("proper list" (1 (2 3) ((4)) "five" 6.0d0) :needs (:character-strings))
      ("dotted list" (1 2 . 3))
      ("alist" ((:a . 1) (:b . 2) ("c" . #\c)) :needs (:character-strings))
      ("shared structure" (,shared ,shared ,text ,text) :needs (:character-strings))
      ("circular list" ,(circular-list 1 2 3))
      ("long list" ,(loop for i below 1000 collect i))
      ("list of doubles" ,(loop for i below 100 collect (* i 0.5d0)))
      ;; arrays
      ("simple vector" #(1 "two" :three (4) #(5)) :needs (:character-strings))
      ("octet vector" ,(vector-of '(unsigned-byte 8) 0 1 127 128 255))
      ("signed vectors" (,(vector-of '(signed-byte 8) -128 0 127)
                         ,(vector-of '(signed-byte 16) -32768 1 32767)
                         ,(vector-of '(signed-byte 32) (- (expt 2 31)) 0 (1- (expt 2 31)))
                         ,(vector-of '(signed-byte 64) (- (expt 2 63)) 0 (1- (expt 2 63))))
       :needs ((:element-types (signed-byte 8) (signed-byte 16) (signed-byte 32)
                               (signed-byte 64))))
      ("unsigned vectors" (,(vector-of '(unsigned-byte 16) 0 65535)
                           ,(vector-of '(unsigned-byte 32) 0 (1- (expt 2 32)))
                           ,(vector-of '(unsigned-byte 64) 0 (1- (expt 2 64))))
       :needs ((:element-types (unsigned-byte 16) (unsigned-byte 32) (unsigned-byte 64))))
      ("float vectors" (,(vector-of 'double-float 1d0 -2.5d0 1d300)
                        ,(vector-of 'single-float 1.0f0 -2.5f0))
       :needs ((:element-types double-float single-float)))
      ("complex vectors" (,(vector-of '(complex double-float) #c(1d0 2d0) #c(-3d0 0d0))
                          ,(vector-of '(complex single-float) #c(1.0f0 2.0f0)))
       :needs ((:element-types (complex double-float) (complex single-float))))
      ("bit vectors" (,(vector-of 'bit 1 0 1 1 0 0 0 1 1 0)
                      ,(vector-of 'bit 1 1 1 1 1 1 1 1)
                      ,(make-array 100 :element-type 'bit :initial-element 1)))
      ("character vectors" (,(make-array 3 :element-type 'character :initial-contents "aé€")
                            ,(make-array 3 :element-type 'base-char :initial-contents "abc")))
      ("2-d double array" ,(make-array '(2 3) :element-type 'double-float
                                              :initial-contents '((1d0 2d0 3d0) (4d0 5d0 6d0)))
       :needs ((:element-types double-float)))
      ("3-d T array" ,(make-array '(2 2 2) :initial-contents '(((1 2) (3 4)) ((5 6) (7 8)))))
      ("fill pointer" ,(make-array 5 :element-type '(unsigned-byte 8) :initial-contents '(1 2 3 4 5)
                                     :fill-pointer 3))
      ("adjustable" ,(make-array 4 :initial-contents '(a b c d) :adjustable t))
      ("adjustable string" ,(make-array 3 :element-type 'character :initial-contents "xyz"
                                          :adjustable t :fill-pointer 2))
      ("displaced" ,(let ((target (vector-of 'double-float 1d0 2d0 3d0 4d0)))
                      (list target (make-array 2 :element-type 'double-float
                                                 :displaced-to target :displaced-index-offset 1)))
       :needs ((:element-types double-float)))
      ;; structures and standard objects
      ("structure" ,(make-point :x 1 :y "two" :z 3d0 :label (character-string "p"))
       :needs (:character-strings))
      ("structures" ,(loop for i below 20
                           collect (make-point :x i :y (list i) :z (* 1d0 i)
                                               :label (character-string "q")))
       :needs (:character-strings))
      ("standard object" ,(make-instance 'account :owner (character-string "ann") :balance 10
                                                  :history (list 1 2))
       :needs (:character-strings))
      ;; the strings in a pathname are of the type the Lisp chooses: SBCL
      ;; shares directory lists between pathnames, so that "tmp" is a base
      ;; string or not as the pathnames made before it were
      ("pathname" ,(parse-namestring (character-string "/tmp/x.lisp"))
       :bytes nil :why "the type of a pathname's strings is the Lisp's")
      ;; hash tables: size and rehash size are the table's choice, which
      ;; differ between Lisps (SBCL 7 and 1.5 where ECL has 1024 and 1.5d0)
      ("hash table" ,(let ((h (make-hash-table :test 'equal)))
                       (setf (gethash (character-string "k") h) (list 1 2))
                       h)
       :bytes nil :why "size and rehash size are the Lisp's")
      ("hash table eq" ,(let ((h (make-hash-table :test 'eq)))
                          (loop for i below 50 do (setf (gethash i h) (* i i)))
                          h)
       ;; a table rebuilt from its records may iterate in another order
       ;; (ABCL's chains put the newest key first): stored again, it must
       ;; restore to the same data, not give the same bytes
       :bytes nil :why "size, rehash size and order are the Lisp's" :again :similar))))

;;; What a Lisp must have for a case's bytes to be SBCL's --------------------

(defun unmet-needs (needs)
  "Why this Lisp cannot write a case with NEEDS as SBCL does (a list of
strings, NIL when it can).  A need is :CHARACTER-STRINGS (the case holds
ASCII character strings, which must be told from base strings to get the
format's STRING tag), (:ELEMENT-TYPES type...) (arrays specialized for
each type, so written with its code) or (:CHAR-CODE code) (a character of
that code)."
  (loop for need in needs
        for reason
          = (cond ((eq need :character-strings)
                   (when (subtypep '(simple-array character (*)) 'base-string)
                     "a character string is a base string here: an ASCII one gets the base-string tag"))
                  ((eq (first need) :element-types)
                   (let ((general (remove-if (lambda (type)
                                               (equal (upgraded-array-element-type type) type))
                                             (rest need))))
                     (when general
                       (format nil "arrays of ~{~s~^, ~} are not specialized here: written as T arrays"
                               general))))
                  ((eq (first need) :char-code)
                   (when (>= (second need) char-code-limit)
                     (format nil "no character of code #x~x here (char-code-limit #x~x)"
                             (second need) char-code-limit))))
        when reason collect reason))

(defun char-code-needs-met-p (needs)
  "True when this Lisp has every character NEEDS names (see UNMET-NEEDS):
the case's golden bytes can then be restored here."
  (loop for need in needs
        never (and (consp need) (eq (first need) :char-code)
                   (>= (second need) char-code-limit))))

;;; Comparing ---------------------------------------------------------------

(defun hex (octets)
  (with-output-to-string (s)
    (loop for b across octets do (format s "~(~2,'0x~)" b))))

(defun unhex (string)
  (let ((octets (make-array (floor (length string) 2) :element-type '(unsigned-byte 8))))
    (dotimes (i (length octets) octets)
      (setf (aref octets i) (parse-integer string :start (* 2 i) :end (+ 2 (* 2 i)) :radix 16)))))

(defparameter *golden-file*
  (asdf:system-relative-pathname "binstore" "tests/portable/golden.sexp"))

(defun read-golden ()
  (with-open-file (in *golden-file* :external-format :utf-8)
    (let ((*read-eval* nil)) (read in))))

(defun write-golden ()
  "Write golden.sexp from this Lisp's bytes (run on SBCL)."
  (with-open-file (out *golden-file* :direction :output :if-exists :supersede
                                     :external-format :utf-8)
    (with-standard-io-syntax
      (let ((*print-pretty* t) (*print-right-margin* 100))
        (format out ";;;; The bytes of each case of tests/portable/portable.lisp, written on~%~
                     ;;;; ~a ~a by (binstore-portable-tests:write-golden).~%"
                (lisp-implementation-type) (lisp-implementation-version))
        (write (loop for (name data . options) in (cases)
                     when (getf options :bytes t)
                       collect (list name (hex (binstore:store nil data))))
               :stream out)
        (terpri out))))
  *golden-file*)

(defun similar (a b)
  "EQUALP, but for the kinds EQUALP does not look into, with cycles cut."
  (let ((seen (make-hash-table :test 'eq)))
    (labels ((walk (a b)
               (cond ((eq a b) t)
                     ((and (consp a) (consp b))
                      (if (gethash a seen)
                          t
                          (progn (setf (gethash a seen) t)
                                 (and (walk (car a) (car b)) (walk (cdr a) (cdr b))))))
                     ((and (symbolp a) (symbolp b))
                      (and (null (symbol-package a)) (null (symbol-package b))
                           (string= a b)))
                     ((and (stringp a) (stringp b)) (string= a b))
                     ((and (arrayp a) (arrayp b))
                      (and (equal (array-dimensions a) (array-dimensions b))
                           (loop for i below (array-total-size a)
                                 always (walk (row-major-aref a i) (row-major-aref b i)))))
                     ((and (typep a 'structure-object) (typep b 'structure-object))
                      (and (eq (type-of a) (type-of b)) (equalp a b)))
                     ((and (typep a 'standard-object) (typep b 'standard-object))
                      (and (eq (class-of a) (class-of b))
                           (loop for slot in '(owner balance history unset)
                                 always (if (slot-boundp a slot)
                                            (and (slot-boundp b slot)
                                                 (walk (slot-value a slot) (slot-value b slot)))
                                            (not (slot-boundp b slot))))))
                     ((and (hash-table-p a) (hash-table-p b))
                      (and (= (hash-table-count a) (hash-table-count b))
                           (eq (hash-table-test a) (hash-table-test b))
                           (loop for k being the hash-keys of a using (hash-value v)
                                 always (walk v (gethash k b)))))
                     (t (equalp a b)))))
      (walk a b))))

(defun run (&key (stream *standard-output*))
  "Run every case: its bytes against golden.sexp (unless the case is
round trip only, or this Lisp cannot write them: UNMET-NEEDS), its golden
bytes restored to data similar to the case's (when this Lisp has its
characters), then the round trip: the restored data similar to the data,
and stored again, the same bytes.  Print a line per case; return true when
all passed, and the numbers passed and failed."
  (let ((golden (ignore-errors (read-golden)))
        (passed 0) (failed 0))
    (unless golden
      (format stream "~&no golden file ~a: bytes not compared~%" *golden-file*))
    (loop for (name data . options) in (cases)
          do (let ((problems '())
                   (unmet (unmet-needs (getf options :needs))))
               (handler-case
                   (let* ((bytes (binstore:store nil data))
                          (expected (second (assoc name golden :test #'string=)))
                          (restored (binstore:restore bytes))
                          (again (binstore:store nil restored)))
                     (when (and expected (char-code-needs-met-p (getf options :needs))
                                (not (similar data (binstore:restore (unhex expected)))))
                       (push "golden bytes restore to other data" problems))
                     (cond ((not (getf options :bytes t)))
                           (unmet)
                           ((null golden))
                           ((null expected) (push "no golden bytes" problems))
                           ((string/= expected (hex bytes))
                            (push (format nil "bytes differ from golden:~%    got      ~a~%    expected ~a"
                                          (hex bytes) expected)
                                  problems)))
                     (unless (similar data restored)
                       (push "restored data differ" problems))
                     (unless (if (eq (getf options :again :bytes) :similar)
                                 (similar data (binstore:restore again))
                                 (equalp bytes again))
                       (push "restored data store to other bytes" problems)))
                 (error (e)
                   (push (format nil "error: ~a" e) problems)))
               (if problems
                   (incf failed)
                   (incf passed))
               (format stream "~&~:[PASS~;FAIL~] ~a~@[ (round trip only: ~a)~]~
                               ~@[ (bytes not compared here: ~{~a~^; ~})~]~{~%    ~a~}~%"
                       problems name (getf options :why) unmet (reverse problems))))
    (let ((places (run-places :stream stream)))
      (format stream "~&binstore portable tests on ~a ~a: ~d passed, ~d failed~:[, and a place check failed~;~]~%"
              (lisp-implementation-type) (lisp-implementation-version) passed failed places)
      (values (and places (zerop failed)) passed failed))))

;;; Places ------------------------------------------------------------------
;;; The same data through each kind of place STORE and RESTORE take: files
;;; (the platform's system calls), streams, vectors with fill pointers,
;;; record streams, EXPLAIN, and the persistent store (locks, fsync, rename).

(defun temporary-file (name)
  (merge-pathnames (format nil "binstore-portable-~a-~a" name (random 1000000))
                   #p"/tmp/"))

(defparameter *place-data*
  (list 1 "two" :three (list 4.0d0 5/6) (vector-of 'double-float 7d0 8d0)))

(defun place-checks ()
  "(name . thunk) pairs, each thunk true when its check holds."
  (list
   (cons "file"
         (lambda ()
           (let ((file (temporary-file "file")))
             (unwind-protect
                  (progn (binstore:store file *place-data*)
                         (and (similar (binstore:restore file) *place-data*)
                              ;; the file holds the bytes a vector gets
                              (equalp (with-open-file (in file :element-type '(unsigned-byte 8))
                                        (let ((v (make-array (file-length in)
                                                             :element-type '(unsigned-byte 8))))
                                          (read-sequence v in)
                                          v))
                                      (binstore:store nil *place-data*))))
               (when (probe-file file) (delete-file file))))))
   (cons "file replaced"
         (lambda ()
           (let ((file (temporary-file "replaced")))
             (unwind-protect
                  (progn (binstore:store file 1)
                         (binstore:store file 2)
                         (eql (binstore:restore file) 2))
               (when (probe-file file) (delete-file file))))))
   (cons "stream"
         (lambda ()
           (let ((file (temporary-file "stream")))
             (unwind-protect
                  (progn
                    (with-open-file (out file :direction :output :element-type '(unsigned-byte 8))
                      (binstore:store out *place-data*)
                      (binstore:store out :second))
                    (with-open-file (in file :element-type '(unsigned-byte 8))
                      (and (similar (binstore:restore in) *place-data*)
                           (eq (binstore:restore in) :second))))
               (when (probe-file file) (delete-file file))))))
   (cons "vector with a fill pointer, records"
         (lambda ()
           (let ((v (make-array 0 :element-type '(unsigned-byte 8) :adjustable t :fill-pointer 0))
                 (seen '()))
             (binstore:store v 1)
             (binstore:store v "two")
             (binstore:store v (list 3))
             (binstore:map-stored-objects (lambda (x) (push x seen)) v)
             (similar (reverse seen) (list 1 "two" (list 3))))))
   (cons "separate objects"
         (lambda ()
           (let ((shared (list :shared)))
             (multiple-value-bind (a b c)
                 (binstore:restore (binstore:store nil (list shared shared 3)
                                                   :as-separate-objects t))
               (and (eq a b) (equal a '(:shared)) (eql c 3))))))
   (cons "explain"
         (lambda ()
           (let ((text (with-output-to-string (s)
                         (binstore:explain (binstore:store nil *place-data*) :stream s))))
             (and (search "header" text) (search "1 record" text) t))))
   (cons "persistent store"
         (lambda ()
           (let ((file (temporary-file "store")))
             (unwind-protect
                  (let ((store (binstore:open-store file)))
                    (unwind-protect
                         (progn
                           (binstore:with-transaction (store)
                             (setf (binstore:root store :data) *place-data*))
                           (binstore:with-transaction (store :read-only t)
                             (similar (binstore:root store :data) *place-data*)))
                      (binstore:close-store store)))
               (dolist (f (directory (make-pathname :name :wild :type :wild
                                                    :defaults file)))
                 (when (search (pathname-name file) (namestring f))
                   (delete-file f)))))))))

(defun run-places (&key (stream *standard-output*))
  "Run the place checks; print a line each; true when all passed."
  (let ((failed 0))
    (loop for (name . check) in (place-checks)
          do (let ((result (handler-case (funcall check)
                             (error (e) (format nil "error: ~a" e)))))
               (unless (eq result t) (incf failed))
               (format stream "~&~:[FAIL~;PASS~] place: ~a~@[ (~a)~]~%"
                       (eq result t) name (and (stringp result) result))))
    (zerop failed)))
