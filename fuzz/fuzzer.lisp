;;;; Mutation fuzzer for RESTORE.
;;;;
;;;; The property under test: restoring ANY octet sequence either returns data
;;;; or signals a BINSTORE-ERROR -- never a raw Lisp error (type-error ...),
;;;; never heap or control stack exhaustion, never a memory fault, never a hang,
;;;; and never a package created behind the caller's back.
;;;;
;;;; How: store a corpus of valid files that together use every tag of
;;;; src/format/tags.lisp, then restore an endless stream of mutated copies of them,
;;;; each under a wall-clock timeout and a bounded :max-to-read.  An input that
;;;; breaks the property is shrunk and saved under tests/fuzz-regressions/,
;;;; where tests/fuzz.lisp replays it on every test run.

(defpackage #:binstore-fuzz
  (:use #:common-lisp)
  (:export #:fuzz
           #:try-input
           #:build-corpus
           #:missing-tags
           #:regression-directory
           #:regression-files
           #:read-octets
           #:describe-condition
           #:compressed-p
           #:differential-disagreement))

(in-package #:binstore-fuzz)

;;; ------------------------------------------------------------------
;;; Data types the corpus stores (their tags: instance, class descriptor,
;;; unbound slot).  The fuzzer's own package, so garbage that names them
;;; touches nothing else.

(defstruct fuzz-point
  (x 0d0 :type double-float)            ; raw slots
  (y 0 :type fixnum)
  (label nil))

(defstruct (fuzz-point3 (:include fuzz-point))
  (z 0f0 :type single-float))

(defclass fuzz-node ()
  ((name :initarg :name :accessor fuzz-node-name)
   (next :initarg :next :initform nil :accessor fuzz-node-next)
   (note :initarg :note)                ; left unbound in some instances
   (shared :allocation :class :initform 'shared-value)))

(define-condition fuzz-condition (error)
  ((code :initarg :code :reader fuzz-condition-code)))

(defun fuzz-string-hash (string)
  (sxhash (string-upcase string)))

(defun fuzz-string-test (a b)
  (string-equal a b))

(sb-ext:define-hash-table-test fuzz-string-test fuzz-string-hash)

;;; ------------------------------------------------------------------
;;; Octet helpers

(deftype octets () '(simple-array (unsigned-byte 8) (*)))

(defun make-octets (n)
  (make-array n :element-type '(unsigned-byte 8)))

(defun to-octets (sequence)
  "A fresh simple octet vector holding SEQUENCE's elements."
  (let ((v (make-octets (length sequence))))
    (replace v sequence)
    v))

(defun varint-octets (n)
  "The unsigned LEB128 encoding of N, as a list of octets."
  (loop collect (if (< n 128) n (logior #x80 (ldb (byte 7 0) n)))
        do (setf n (ash n -7))
        until (zerop n)))

(defun replace-range (v start end insert)
  "A new octet vector: V with [START, END) replaced by the octets INSERT."
  (let* ((insert (to-octets insert))
         (out (make-octets (+ start (length insert) (- (length v) end)))))
    (replace out v :end2 start)
    (replace out insert :start1 start)
    (replace out v :start1 (+ start (length insert)) :start2 end)
    out))

(defun content-hash (v)
  "64-bit FNV-1a of V as 16 hex digits: names a regression file by content."
  (let ((h #xcbf29ce484222325))
    (loop for b across v
          do (setf h (ldb (byte 64 0) (* (logxor h b) #x100000001b3))))
    (format nil "~(~16,'0x~)" h)))

(defun hex-string (v &key (limit 96))
  (format nil "~{~2,'0x~^ ~}~:[~; ...~]"
          (coerce (subseq v 0 (min limit (length v))) 'list)
          (> (length v) limit)))

(defun read-octets (pathname)
  "The contents of the file PATHNAME as a simple octet vector."
  (with-open-file (s pathname :element-type '(unsigned-byte 8))
    (let ((v (make-octets (file-length s))))
      (read-sequence v s)
      v)))

;;; ------------------------------------------------------------------
;;; The corpus

(defun ensure-logical-host ()
  (unless (ignore-errors (logical-pathname-translations "BINSTOREFUZZ"))
    (setf (logical-pathname-translations "BINSTOREFUZZ")
          '(("**;*.*.*" "/tmp/binstore-fuzz/**/*.*")))))

(defparameter *element-types*
  '(bit (unsigned-byte 2) (unsigned-byte 4) (unsigned-byte 7) (unsigned-byte 8)
    (unsigned-byte 15) (unsigned-byte 16) (unsigned-byte 31) (unsigned-byte 32)
    (unsigned-byte 62) (unsigned-byte 63) (unsigned-byte 64)
    (signed-byte 8) (signed-byte 16) (signed-byte 32) fixnum (signed-byte 64)
    single-float double-float (complex single-float) (complex double-float)
    character base-char t)
  "Every array element type the format distinguishes (NIL handled apart).")

(defun sample-element (type i)
  "A value of array element TYPE that varies with I."
  (cond ((eq type 'bit) (mod i 2))
        ((eq type 'fixnum) (if (oddp i) most-positive-fixnum (- i)))
        ((eq type 'single-float) (* i 1.5f0))
        ((eq type 'double-float) (* i -2.25d0))
        ((equal type '(complex single-float)) (complex (float i 1f0) 1f0))
        ((equal type '(complex double-float)) (complex -1d0 (float i 1d0)))
        ((eq type 'character) (code-char (if (oddp i) #x3BB (+ 65 i))))
        ((eq type 'base-char) (code-char (+ 97 i)))
        ((eq type t) (if (oddp i) (list i) i))
        ((eq (first type) 'unsigned-byte)
         (if (oddp i) (1- (expt 2 (second type))) (mod i (expt 2 (second type)))))
        (t (if (oddp i) (- (expt 2 (1- (second type)))) (mod i 64)))))

(defun sample-vector (type n)
  (let ((v (make-array n :element-type type)))
    (dotimes (i n v)
      (setf (aref v i) (sample-element type i)))))

(defun specialized-arrays ()
  "Vectors and arrays of every element type, rank 0..3, fill pointers,
adjustable and displaced arrays."
  (append
   (loop for type in *element-types* collect (sample-vector type 5))
   (list (make-array '() :initial-element 'rank-zero)
         (make-array '() :element-type 'double-float :initial-element 1d0)
         (make-array '(0 4) :element-type '(unsigned-byte 8))
         (make-array '(2 3) :element-type '(signed-byte 16)
                            :initial-contents '((1 -2 3) (-4 5 -6)))
         (make-array '(2 2 2) :initial-element :cell)
         (make-array 6 :element-type '(unsigned-byte 4) :fill-pointer 2
                       :initial-element 9)
         (make-array '(2 2) :element-type 'bit :adjustable t
                            :initial-element 1)
         (make-array 5 :element-type 'character :fill-pointer 3 :adjustable t
                       :initial-element #\z)
         (make-array 4 :element-type 'base-char :fill-pointer 4
                       :initial-element #\b))
   (let* ((base (sample-vector '(unsigned-byte 32) 10))
          (window (make-array 4 :element-type '(unsigned-byte 32)
                                :displaced-to base :displaced-index-offset 3)))
     (list base window))))

(defun atoms ()
  "Numbers, characters and strings of every encoding."
  (list nil t 0 -16 143 144 200 255 256 -17 -200 -256 -257 30000 -30000
        (expt 2 30) (- (expt 2 31)) (expt 2 62) (- (expt 2 63)) (expt 2 64)
        (expt 2 100) (- (expt 3 200)) 1/3 -22/7 (/ (expt 2 90) 7)
        1.5f0 -0.0f0 1d300 -0d0
        sb-ext:single-float-positive-infinity
        sb-ext:double-float-negative-infinity
        (sb-kernel:make-single-float -4194304)
        (sb-kernel:make-double-float -524288 0)
        #c(1 2) #c(1/2 -3) #c(1.0f0 2.0f0) #c(1d0 -2d0)
        #\a (code-char 0) (code-char 255) (code-char #x3BB) (code-char #xD800)
        (code-char #x10FFFF)
        (coerce "base" 'simple-base-string) ""
        (coerce (list #\n #\a (code-char #xEF) #\v #\e #\Space (code-char #x3BB)
                      (code-char #x1D11E) (code-char #xDFFF))
                'string)))

(defun symbols-and-packages ()
  (let ((u (make-symbol "UNINTERNED")))
    (list 'fuzz-node :keyword-symbol u u 'car 'lambda '&optional
          (make-symbol "") (find-package "BINSTORE-FUZZ")
          (find-package "COMMON-LISP") (find-package "KEYWORD"))))

(defun hash-tables ()
  (let ((eq-table (make-hash-table :test 'eq :size 50 :rehash-size 2.0
                                   :rehash-threshold 0.5))
        (eql-table (make-hash-table :test 'eql :weakness :key))
        (equal-table (make-hash-table :test 'equal :synchronized t))
        (equalp-table (make-hash-table :test 'equalp :weakness :value))
        (custom (make-hash-table :test 'fuzz-string-test)))
    (setf (gethash 'a eq-table) 1
          (gethash :self eq-table) eq-table          ; a cycle through a table
          (gethash 1/2 eql-table) 'half
          (gethash (expt 2 70) eql-table) "big"
          (gethash "key" equal-table) '(1 2 3)
          (gethash '(1 "x") equal-table) #(v)
          (gethash #(1 2) equalp-table) 'vector-key
          (gethash "Mixed" custom) "case")
    (list eq-table eql-table equal-table equalp-table custom)))

(defun pathnames ()
  (ensure-logical-host)
  (list #p"/tmp/a/b.txt"
        (make-pathname :directory '(:relative "x" :up "y") :name "n" :type "t"
                       :version :newest)
        (make-pathname :directory '(:absolute :wild-inferiors) :name :wild)
        (make-pathname :name "only")
        (logical-pathname "BINSTOREFUZZ:DIR;FILE.LISP.3")))

(defun objects ()
  (let ((unbound (make-instance 'fuzz-node :name "lonely"))
        (looped (make-instance 'fuzz-node :name :loop :note 1)))
    (setf (fuzz-node-next looped) looped)
    (list (make-fuzz-point :x 1.5d0 :y -7 :label "p")
          (make-fuzz-point3 :x -0d0 :y most-negative-fixnum :z 2.5f0)
          unbound looped
          (make-condition 'fuzz-condition :code 42))))

(defun shared-data ()
  "Forty strings each used twice: ids beyond the 32 small back-reference tags."
  (let ((strings (loop for i below 40 collect (format nil "s~d" i))))
    (append strings (reverse strings))))

(defun circular-conses ()
  (let ((ring (list 1 2 3))
        (tail (list :shared :tail)))
    (setf (cdr (last ring)) ring)
    (list ring (cons 'x tail) (cons 'y tail) (cons 'a 'b) '(1 2 . 3))))

(defun self-vector ()
  (let ((v (make-array 3)))
    (setf (aref v 0) v (aref v 1) "in" (aref v 2) v)
    v))

(defun deep-list (depth)
  (let ((x nil))
    (dotimes (i depth x)
      (setf x (list x i)))))

(defun deep-vector (depth)
  (let ((x #()))
    (dotimes (i depth x)
      (setf x (vector x)))))

(defun node-chain (length)
  (let ((x nil))
    (dotimes (i length x)
      (setf x (make-instance 'fuzz-node :name i :next x)))))

(defun deep-table (depth)
  (let ((x :bottom))
    (dotimes (i depth x)
      (let ((table (make-hash-table)))
        (setf (gethash i table) x)
        (setf x table)))))

(defparameter *plain-options*
  '(() (:track-references nil :output-magic-number nil)
    (:support-shared-list-structures nil :output-end-marker t)
    (:support-shared-list-structures nil :output-magic-number nil))
  "Option sets for data without cycles.")

(defparameter *cyclic-options*
  '(() (:output-end-marker t :output-magic-number nil)
    (:support-shared-list-structures nil :output-magic-number nil))
  "Option sets for data with cycles through non-conses (references needed).")

(defun corpus-items ()
  "Each item: (description data option-sets &key separate)."
  (list (list "atoms" (atoms) *plain-options*)
        (list "atoms, separate" (subseq (atoms) 0 12)
              '((:as-separate-objects t)
                (:as-separate-objects t :output-magic-number t
                 :output-end-marker t)))
        (list "arrays" (specialized-arrays) *cyclic-options*)
        (list "arrays of nil" (list (make-array 0 :element-type nil)
                                    (make-array '(2 0) :element-type nil))
              '(()))
        (list "symbols" (symbols-and-packages) *plain-options*)
        (list "hash tables" (hash-tables) *cyclic-options*)
        (list "pathnames" (pathnames) *plain-options*)
        (list "objects" (objects)
              '(() (:store-class-slots t) (:output-magic-number t)))
        (list "shared strings" (shared-data)
              '(() (:track-references nil)))
        (list "circular conses" (circular-conses)
              '((:support-shared-list-structures t)))
        (list "self vector" (self-vector) *cyclic-options*)
        (list "long list" (loop for i below 3000 collect (mod i 300))
              '(() (:output-end-marker t)))
        (list "deep list" (deep-list 1500) *plain-options*)
        (list "deep vector" (deep-vector 1200) '(() (:track-references nil)))
        (list "node chain" (node-chain 1100) '(()))
        (list "deep table" (deep-table 1050) '(()))
        (list "mixed, separate"
              (list (first (objects)) (deep-vector 10) "x" (hash-tables))
              '((:as-separate-objects t)))
        ;; compressed records, when binstore/compression is loaded (as the
        ;; tests load it): their frames are mutated too
        (when binstore::*compression-hook*
          (list "compressed" (list (subseq (atoms) 0 12) (shared-data) (first (objects)))
                '((:compression :zstd) (:compression :lz4)
                  (:compression (:zstd :level 19) :output-magic-number nil))))
        ;; numeric arrays, shuffled (a shuffle container in the frame) and not
        (when binstore::*compression-hook*
          (list "compressed arrays" (list (specialized-arrays) (noisy-doubles 300)
                                          (sample-vector '(signed-byte 32) 100))
                '((:compression :zstd) (:compression (:lz4 :shuffle t))
                  (:compression (:zstd :level 1 :shuffle nil)))))
        ;; payloads long enough (72 KB, 70 KB) to be decompressed straight
        ;; into their arrays (a direct read, src/io/input.lisp)
        (when binstore::*compression-hook*
          (list "compressed large arrays"
                (list (noisy-doubles 9000) (sample-vector '(unsigned-byte 8) 70000))
                '((:compression :lz4) (:compression :zstd))))))

(defun noisy-doubles (n)
  "N doubles of a sine with noise: a numeric payload worth shuffling."
  (let ((v (make-array n :element-type 'double-float))
        (rs (sb-ext:seed-random-state 3)))
    (dotimes (i n v)
      (setf (aref v i) (+ (sin (* i 0.01d0)) (random 1d-3 rs))))))

(defun build-corpus (&key (verbose t))
  "Store every corpus item under each of its option sets.  Returns a list of
(description options octets).  Items the core fails to store or to restore
are reported (when VERBOSE) and the stored ones kept."
  (let ((corpus '()))
    (dolist (item (remove nil (corpus-items)) (nreverse corpus))
      (destructuring-bind (description data option-sets) item
        (dolist (options option-sets)
          (handler-case
              (let ((octets (to-octets (apply #'binstore:store nil data options))))
                (push (list description options octets) corpus)
                (multiple-value-bind (outcome condition) (try-input octets :intern-symbols t)
                  (when (and verbose (not (eq outcome :returned)))
                    (format t "~&fuzz: corpus file ~s ~s does not restore: ~a~%"
                            description options (describe-condition condition)))))
            (error (c)
              (when verbose
                (format t "~&fuzz: cannot store corpus item ~s ~s: ~a~%"
                        description options (describe-condition c))))))))))

(defun missing-tags (corpus)
  "Names of the type tags (and tag ranges) no corpus file contains anywhere.
A cheap stand-in for real coverage: each tag byte must at least occur."
  (let ((seen (make-array 256 :element-type 'bit :initial-element 0)))
    (dolist (entry corpus)
      (loop for b across (third entry) do (setf (sbit seen b) 1)))
    (append
     (loop for code from 0 below (length binstore::+tag-names+)
           for name = (svref binstore::+tag-names+ code)
           when (and name (zerop (sbit seen code)))
             collect (string-downcase name))
     (unless (find 1 seen :start binstore::+first-small-ref-tag+
                          :end (+ binstore::+first-small-ref-tag+
                                  binstore::+small-ref-count+))
       (list "small back-reference")))))

;;; ------------------------------------------------------------------
;;; Mutations.  Each takes the input, the corpus and a random state and
;;; returns a new octet vector.

(defparameter *interesting-octets*
  (vector 0 1 #x2F #x30 #x37 #x38 #x3F #x40 #x5F #x60 #x7F #x80 #xFE #xFF
          binstore::+tag-list+ binstore::+tag-simple-vector+ binstore::+tag-ref+
          binstore::+tag-later+ binstore::+tag-fill+ binstore::+tag-tracking+
          binstore::+tag-no-tracking+ binstore::+tag-full-tracking+
          binstore::+tag-header+ binstore::+tag-end+)
  "Boundaries of the tag ranges, and the tags that shape the stream.")

(defparameter *type-tag-count*
  (1+ (position-if #'identity binstore::+tag-names+ :from-end t))
  "Type tags are 0 below this.")

(defparameter *huge-values*
  (list (expt 2 28) (1- (expt 2 31)) (expt 2 32) (expt 2 40) (expt 2 60)
        (1- (expt 2 62)) (expt 2 63) (1- (expt 2 64)) (expt 2 70) (expt 2 200)))

(defparameter *length-tags*
  (list binstore::+tag-list+ binstore::+tag-dotted-list+ binstore::+tag-bignum+
        binstore::+tag-character+ binstore::+tag-base-string+ binstore::+tag-string+
        binstore::+tag-simple-vector+ binstore::+tag-specialized-vector+
        binstore::+tag-octet-vector+ binstore::+tag-double-vector+
        binstore::+tag-array+ binstore::+tag-hash-table+
        binstore::+tag-class-descriptor+ binstore::+tag-ref+ binstore::+tag-fill+
        binstore::+tag-header+)
  "Tags followed (at once, or after a byte or so) by a varint worth inflating.")

(defun pick (sequence rs)
  (elt sequence (random (length sequence) rs)))

(defun position-in (v rs &optional (extra 0))
  "A random index into V (or up to EXTRA past its end)."
  (random (max 1 (+ (length v) extra)) rs))

(defun edit-copy (v rs max-edits edit)
  "A copy of V on which EDIT (called with the copy) made 1 to MAX-EDITS
changes in place; V itself when it is empty."
  (let ((v (copy-seq v)))
    (when (plusp (length v))
      (dotimes (i (1+ (random max-edits rs)))
        (funcall edit v)))
    v))

(defun mutate-flip-bits (v corpus rs)
  (declare (ignore corpus))
  (edit-copy v rs 4 (lambda (v)
                      (let ((p (position-in v rs)))
                        (setf (aref v p) (logxor (aref v p) (ash 1 (random 8 rs))))))))

(defun mutate-random-bytes (v corpus rs)
  (declare (ignore corpus))
  (edit-copy v rs 4 (lambda (v) (setf (aref v (position-in v rs)) (random 256 rs)))))

(defun mutate-interesting-bytes (v corpus rs)
  (declare (ignore corpus))
  (edit-copy v rs 3 (lambda (v)
                      (setf (aref v (position-in v rs))
                            (if (zerop (random 3 rs))
                                (random (+ 2 *type-tag-count*) rs) ; a type tag, or just past them
                                (pick *interesting-octets* rs))))))

(defun mutate-insert-bytes (v corpus rs)
  (declare (ignore corpus))
  (let ((p (position-in v rs 1)))
    (replace-range v p p (loop repeat (1+ (random 8 rs))
                               collect (if (zerop (random 2 rs))
                                           (random 256 rs)
                                           (pick *interesting-octets* rs))))))

(defun mutate-delete-range (v corpus rs)
  (declare (ignore corpus))
  (if (zerop (length v))
      v
      (let* ((p (position-in v rs))
             (n (1+ (random (min 16 (- (length v) p)) rs))))
        (replace-range v p (+ p n) '()))))

(defun mutate-truncate (v corpus rs)
  (declare (ignore corpus))
  (subseq v 0 (position-in v rs)))

(defun mutate-duplicate-range (v corpus rs)
  (declare (ignore corpus))
  (if (zerop (length v))
      v
      (let* ((start (position-in v rs))
             (end (+ start 1 (random (min 64 (- (length v) start)) rs)))
             (at (position-in v rs 1)))
        (replace-range v at at (subseq v start end)))))

(defun mutate-splice (v corpus rs)
  (let ((other (third (pick corpus rs))))
    (concatenate 'octets
                 (subseq v 0 (position-in v rs 1))
                 (subseq other (position-in other rs 1)))))

(defun varint-end (v start)
  "End of the varint at START in V (at most 10 bytes, clipped to V)."
  (loop for i from start below (min (length v) (+ start 10))
        unless (logbitp 7 (aref v i)) return (1+ i)
        finally (return (min (length v) (+ start 10)))))

(defun mutate-huge-varint (v corpus rs)
  "Replace a varint, preferably the one after a length-carrying tag, by the
encoding of a huge value."
  (declare (ignore corpus))
  (let* ((tags (loop for i from 0 below (length v)
                     when (member (aref v i) *length-tags*) collect i))
         (start (if (and tags (plusp (random 4 rs)))
                    (min (length v)
                         ;; after the tag, or after the flag and code bytes
                         ;; of arrays and hash tables
                         (+ (pick tags rs) 1 (random 4 rs)))
                    (position-in v rs 1))))
    (replace-range v start (varint-end v start)
                   (varint-octets (pick *huge-values* rs)))))

(defun mutate-long-varint (v corpus rs)
  "Insert an overlong varint: a run of continuation bytes."
  (declare (ignore corpus))
  (let ((p (position-in v rs 1)))
    (replace-range v p p (append (loop repeat (+ 9 (random 40 rs))
                                       collect (pick #(#x80 #xFF) rs))
                                 (list (random 128 rs))))))

(defparameter *mutators*
  (vector #'mutate-flip-bits #'mutate-random-bytes #'mutate-interesting-bytes
          #'mutate-insert-bytes #'mutate-delete-range #'mutate-truncate
          #'mutate-duplicate-range #'mutate-splice #'mutate-huge-varint
          #'mutate-long-varint))

(defun mutate (v corpus rs)
  "V after one to three random mutations."
  (dotimes (i (1+ (random 3 rs)) v)
    (setf v (funcall (pick *mutators* rs) v corpus rs))))

;;; ------------------------------------------------------------------
;;; Restoring one input, three ways: a simple octet vector; a non-simple
;;; vector whose fill pointer hides trailing junk; raw memory that ends
;;; exactly at an inaccessible page, so any read past the end faults.

(defconstant +arena-size+ (* 1024 1024))

(defvar *arena* nil
  "Base sap of a mapping of +ARENA-SIZE+ readable bytes followed by one
inaccessible page, :UNAVAILABLE when it could not be made.")

(defvar *page-size* nil)

(defun arena ()
  (when (null *arena*)
    (setf *page-size* (sb-alien:alien-funcall
                       (sb-alien:extern-alien "getpagesize" (function sb-alien:int))))
    (let ((sap (sb-alien:alien-funcall
                (sb-alien:extern-alien "mmap" (function sb-sys:system-area-pointer
                                                        sb-sys:system-area-pointer
                                                        sb-alien:unsigned-long
                                                        sb-alien:int sb-alien:int
                                                        sb-alien:int sb-alien:long))
                (sb-sys:int-sap 0) (+ +arena-size+ *page-size*)
                3                       ; PROT_READ | PROT_WRITE
                #x22                    ; MAP_PRIVATE | MAP_ANONYMOUS
                -1 0)))
      (setf *arena*
            (if (and (/= (sb-sys:sap-int sap) (ldb (byte 64 0) -1))
                     (zerop (sb-alien:alien-funcall
                             (sb-alien:extern-alien "mprotect"
                                                    (function sb-alien:int
                                                              sb-sys:system-area-pointer
                                                              sb-alien:unsigned-long
                                                              sb-alien:int))
                             (sb-sys:sap+ sap +arena-size+) *page-size* 0)))
                sap
                :unavailable))))
  (if (eq *arena* :unavailable) nil *arena*))

(defun restore-from-guarded-sap (octets &rest keys)
  (let* ((base (arena))
         (n (length octets)))
    (if (or (null base) (> n +arena-size+))
        (apply #'binstore:restore octets keys)
        (let ((sap (sb-sys:sap+ base (- +arena-size+ n))))
          (dotimes (i n)
            (setf (sb-sys:sap-ref-8 sap i) (aref octets i)))
          (apply #'binstore:restore-from-sap sap n keys)))))

(defun restore-with-hidden-tail (octets &rest keys)
  (let ((v (make-array (+ (length octets) 8) :element-type '(unsigned-byte 8)
                                             :fill-pointer (length octets)
                                             :initial-element #x02)))
    (replace v octets)
    (apply #'binstore:restore v keys)))

(define-condition package-created (error)
  ((names :initarg :names :reader package-created-names))
  (:documentation "Raised by the fuzzer itself: a restore created packages.")
  (:report (lambda (c s)
             (format s "restore created package~p ~{~a~^, ~}"
                     (length (package-created-names c)) (package-created-names c)))))

(define-condition vague-invalid-input (error)
  ((original :initarg :original :reader vague-invalid-input-original))
  (:documentation "Raised by the fuzzer itself: an INVALID-INPUT without an
offset inside the input, or without saying what was expected.")
  (:report (lambda (c s)
             (let ((o (vague-invalid-input-original c)))
               (format s "invalid-input with offset ~s and expected ~s: ~a"
                       (binstore:restore-error-offset o)
                       (binstore:invalid-input-expected o)
                       (binstore:binstore-error-message o))))))

(defun failure-kind (condition)
  "A short file-name-safe word for a failure."
  (typecase condition
    (package-created "package-created")
    (vague-invalid-input "vague-invalid-input")
    (sb-ext:timeout "hang")
    (sb-kernel::heap-exhausted-error "heap-exhaustion")
    (sb-kernel::control-stack-exhausted "stack-exhaustion")
    (sb-sys:memory-fault-error "memory-fault")
    (type-error "type-error")
    (t (string-downcase (substitute #\- #\% (symbol-name (type-of condition)))))))

(defun one-line (string &key (limit 400))
  "STRING with each run of whitespace made one space, cut to LIMIT characters."
  (let ((words (with-output-to-string (out)
                 (loop with space = nil
                       for c across string
                       do (if (member c '(#\Space #\Tab #\Newline #\Return))
                              (setf space t)
                              (progn (when space (write-char #\Space out))
                                     (setf space nil)
                                     (write-char c out)))))))
    (if (> (length words) limit)
        (concatenate 'string (subseq words 0 limit) " ...")
        words)))

(defun describe-condition (condition)
  "CONDITION's type and report on one line, even when the report fails.
Printing is bounded: the report may show restored (perhaps circular) data."
  (format nil "~s: ~a" (type-of condition)
          (one-line (or (ignore-errors
                         (let ((*print-circle* t) (*print-length* 20) (*print-level* 4))
                           (princ-to-string condition)))
                        "<report failed>"))))

(defun try-input (octets &key (route :vector) (intern-symbols nil) (timeout 2)
                              (max-to-read (* 64 1024 1024)))
  "Restore OCTETS once and classify what happened.  ROUTE is :VECTOR (a simple
octet vector), :FILL-POINTER (a non-simple vector with junk past its fill
pointer) or :SAP (raw memory ending at an inaccessible page).  Returns the
outcome -- :RETURNED, :INVALID-INPUT, :LIMIT-EXCEEDED, :BINSTORE-ERROR (any
other binstore condition: missing package, symbol, class ...) or :FAILURE --
and the condition, if any, as a second value.  A restore that creates a
package is a :FAILURE too (the new package is deleted again), and so is an
INVALID-INPUT that does not give an offset inside the input and a
description of what was expected."
  (let ((packages (list-all-packages))
        ;; headerless inputs too: mutations past the header are the point
        (keys (list :max-to-read max-to-read :intern-symbols intern-symbols
                    :require-header nil)))
    (multiple-value-bind (outcome condition)
        (handler-case
            (progn
              (sb-ext:with-timeout timeout
                (ecase route
                  (:vector (apply #'binstore:restore octets keys))
                  (:fill-pointer (apply #'restore-with-hidden-tail octets keys))
                  (:sap (apply #'restore-from-guarded-sap octets keys))))
              (values :returned nil))
          (binstore:invalid-input (c) (values :invalid-input c))
          (binstore:limit-exceeded (c) (values :limit-exceeded c))
          (binstore:binstore-error (c) (values :binstore-error c))
          (serious-condition (c) (values :failure c)))
      (let ((new (set-difference (list-all-packages) packages)))
        (cond
          (new
           (let ((names (mapcar #'package-name new)))
             (mapc #'delete-package new)
             (values :failure (make-condition 'package-created :names names))))
          ((and (eq outcome :invalid-input)
                (not (and (typep (binstore:restore-error-offset condition)
                                 `(integer 0 ,(length octets)))
                          (stringp (binstore:invalid-input-expected condition))
                          (plusp (length (binstore:invalid-input-expected condition))))))
           (values :failure (make-condition 'vague-invalid-input :original condition)))
          (t (values outcome condition)))))))

;;; ------------------------------------------------------------------
;;; Failures: shrink, save, replay

(defun regression-directory ()
  "Where failing inputs are kept: tests/fuzz-regressions/ in this checkout."
  (asdf:system-relative-pathname "binstore" "tests/fuzz-regressions/"))

(defun regression-files ()
  "Every saved failing input."
  (directory (merge-pathnames "*.bin" (regression-directory))))

(defun failure-label (octets route intern-symbols)
  "The failure kind of OCTETS on ROUTE, or NIL when it does not fail."
  (multiple-value-bind (outcome condition)
      (try-input octets :route route :intern-symbols intern-symbols)
    (when (eq outcome :failure)
      (failure-kind condition))))

(defun failure-key (condition)
  "What makes two failures look like one bug: the kind and the condition's
report with its numbers (offsets, addresses) removed."
  (format nil "~a ~a" (failure-kind condition)
          (remove-if #'digit-char-p (describe-condition condition))))

(defun shrink (octets kind route intern-symbols &key (seconds 5))
  "A smaller input failing with the same KIND, found while time allows:
delete chunks (halving the chunk size down to one byte), then set single
bytes to 0, and start over while that makes progress."
  (let ((deadline (+ (get-internal-real-time)
                     (* seconds internal-time-units-per-second)))
        (best octets))
    (labels ((time-left-p () (< (get-internal-real-time) deadline))
             (fails-p (candidate)
               (equal kind (failure-label candidate route intern-symbols)))
             (delete-pass ()
               (loop for chunk = (max 1 (floor (length best) 2)) then (floor chunk 2)
                     while (plusp chunk)
                     do (let ((start 0))
                          (loop while (and (< start (length best)) (time-left-p))
                                do (let ((candidate (replace-range
                                                     best start
                                                     (min (length best) (+ start chunk))
                                                     '())))
                                     (if (fails-p candidate)
                                         (setf best candidate)
                                         (incf start chunk)))))))
             (zero-pass ()
               (loop for i below (length best)
                     while (time-left-p)
                     unless (zerop (aref best i))
                       do (let ((candidate (copy-seq best)))
                            (setf (aref candidate i) 0)
                            (when (fails-p candidate)
                              (setf best candidate))))))
      (loop for before = best
            do (delete-pass)
               (zero-pass)
            while (and (time-left-p) (not (equalp before best)))))
    best))

(defun save-regression (kind octets)
  "Write OCTETS to <kind>-<hash>.bin unless an identical file exists."
  (let ((path (merge-pathnames (format nil "~a-~a.bin" kind (content-hash octets))
                               (regression-directory))))
    (ensure-directories-exist path)
    (unless (probe-file path)
      (with-open-file (s path :direction :output :element-type '(unsigned-byte 8)
                              :if-exists :supersede)
        (write-sequence octets s)))
    path))

;;; ------------------------------------------------------------------
;;; The differential check: the fast decoder against the reference decoder

(defun outcome-signature (thunk)
  "What THUNK (a restore returning a list of objects) did, in a form two
decoders' outcomes compare by: (:values octets) with the objects stored
again (NIL where they cannot be: then only that they returned counts), or
\(:condition class-name)."
  (handler-case
      (let ((objects (funcall thunk)))
        (list :values (ignore-errors
                       (binstore:store nil objects :output-magic-number nil))))
    (binstore:binstore-error (c) (list :condition (type-of c)))
    (serious-condition (c) (list :crash (type-of c)))))

(defun compressed-p (octets)
  "True when OCTETS begin with the zstd or LZ4 frame magic, after any end
markers (which RESTORE skips before a record, as SKIP-TO-RECORD does):
RESTORE reads them as a compressed record, which the reference decoder, a
decoder of the format alone, does not."
  (let ((start (or (position binstore::+tag-end+ octets :test-not #'=) (length octets))))
    (and (>= (- (length octets) start) 4)
         (binstore::frame-magic-method
          (logior (aref octets start) (ash (aref octets (+ start 1)) 8)
                  (ash (aref octets (+ start 2)) 16) (ash (aref octets (+ start 3)) 24))))))

(defun holds-weak-table-p (objects)
  "True when a hash table with weakness is reachable from OBJECTS by the
steps the writer takes (BINSTORE::OBJECT-CHILDREN).  Such a table loses an
entry whose key or value nothing else holds at any collection, so two
restores of the same bytes can differ by when the collector ran: only their
outcomes, not their contents, are compared."
  (let ((seen (make-hash-table :test 'eq))
        (stack (list objects)))
    (loop while stack
          do (let ((x (pop stack)))
               (when (and (hash-table-p x) (sb-ext:hash-table-weakness x))
                 (return-from holds-weak-table-p t))
               (loop for (child) in (binstore::object-children x)
                     unless (or (typep child '(or number character symbol))
                                (gethash child seen))
                       do (setf (gethash child seen) t)
                          (push child stack))))
    nil))

(defun differential-disagreement (octets intern-symbols max-to-read)
  "NIL when RESTORE and the reference decoder (BINSTORE::REFERENCE-RESTORE)
agree on OCTETS: the same objects (compared by their stored bytes, unless
they hold a weak table: HOLDS-WEAK-TABLE-P) or the same condition class.  Otherwise a string saying how they differ.  Not
compared (NIL): a compressed record (COMPRESSED-P)."
  (when (compressed-p octets)
    (return-from differential-disagreement nil))
  (let* ((keys (list :max-to-read max-to-read :intern-symbols intern-symbols
                     :require-header nil))
         (fast (outcome-signature
                (lambda () (multiple-value-list (apply #'binstore:restore octets keys)))))
         (reference (outcome-signature
                     (lambda () (values (apply #'binstore::reference-restore octets
                                               :max-count binstore:+max-values+ keys))))))
    (unless (or (equalp fast reference)
                ;; both returned, and one result cannot be stored again, or
                ;; holds a weak table (the objects are restored once more
                ;; to look: the signatures keep only their bytes)
                (and (eq (first fast) :values) (eq (first reference) :values)
                     (or (null (second fast)) (null (second reference))
                         (holds-weak-table-p
                          (ignore-errors
                           (multiple-value-list (apply #'binstore:restore octets keys)))))))
      (format nil "fast ~s, reference ~s"
              (if (eq (first fast) :values) :returned (second fast))
              (if (eq (first reference) :values) :returned (second reference))))))

;;; ------------------------------------------------------------------
;;; The driver

;;; Compressed inputs.  A mutated frame mostly fails its checksum; to reach
;;; what lies behind it (the shuffle container, the decoder reading from a
;;; decompressor), half the compressed inputs of a COMPRESSED-ONLY run are
;;; instead a frame's content, mutated, compressed again into a new frame.

(defun frame-content (octets)
  "The bytes the zstd or LZ4 frames OCTETS hold, decompressed (NIL when
they do not decompress)."
  (let ((source (funcall (if (= (aref octets 0) #x28) 'binstore:make-zstd-source
                             'binstore:make-lz4-source)
                         (binstore:make-octets-source octets)))
        (out (make-array 0 :element-type '(unsigned-byte 8) :adjustable t :fill-pointer 0))
        (buffer (make-array 65536 :element-type '(unsigned-byte 8))))
    (loop for end = (binstore:source-read source buffer 0 (length buffer))
          do (loop for i below end do (vector-push-extend (aref buffer i) out))
          while (= end (length buffer)))
    (to-octets out)))

(defun compress-content (content rs)
  "CONTENT in a new frame of a random method, as binstore's sinks make it."
  (let ((sink (funcall (if (zerop (random 2 rs)) 'binstore:make-zstd-sink 'binstore:make-lz4-sink)
                       (binstore:make-octets-sink))))
    (binstore:sink-write sink content 0 (length content))
    (to-octets (binstore:sink-finish sink))))

(defun compressed-input (entry corpus rs)
  "A fuzzed compressed input from the corpus ENTRY (description options
octets content): its frame mutated, or its content mutated and compressed
again."
  (if (zerop (random 2 rs))
      (mutate (third entry) corpus rs)
      (compress-content (mutate (fourth entry) corpus rs) rs)))

(defun fuzz (&key (seconds nil) (iterations nil) (seed 42) (verbose t) (differential t)
                  (compressed-only nil))
  "Restore mutated copies of a corpus of valid files until SECONDS have
passed or ITERATIONS inputs were tried (whichever comes first; 60 seconds
when neither is given), with random state seeded by SEED.  Every input that
makes RESTORE fail otherwise than by returning or signalling a BINSTORE-ERROR
is shrunk, saved under tests/fuzz-regressions/ and printed.  With
DIFFERENTIAL, every input restored from a simple vector is also read by the
reference decoder, and an input on which the two differ (other objects, or
another condition class) counts as a failure and is printed.  Prints a
summary line when VERBOSE.  Inputs that begin with a frame magic (RESTORE
decompresses them) are counted as compressed.  With COMPRESSED-ONLY (which
needs binstore/compression loaded), every input comes from a compressed
corpus file: its frame mutated, or its content mutated and compressed
again (COMPRESSED-INPUT).  Returns T when no failure was found, NIL
otherwise; the second value is a plist of counts (:inputs :compressed
:returned :invalid-input :limit-exceeded :other-binstore-error :failures)."
  (when (and (null seconds) (null iterations))
    (setf seconds 60))
  (let* ((rs (sb-ext:seed-random-state seed))
         (corpus (let ((all (build-corpus :verbose verbose)))
                   (if compressed-only
                       (loop for entry in all
                             when (compressed-p (third entry))
                               collect (append entry (list (frame-content (third entry)))))
                       all)))
         (compressed 0)
         (missing (missing-tags corpus))
         (start (get-internal-real-time))
         (deadline (and seconds (+ start (round (* seconds internal-time-units-per-second)))))
         (next-progress (+ start (* 30 internal-time-units-per-second)))
         (counts (list :returned 0 :invalid-input 0 :limit-exceeded 0
                       :binstore-error 0 :failure 0))
         (failures (make-hash-table :test 'equal))
         (compared 0)
         (disagreements 0)
         (tried 0))
    (when (null corpus)
      (when verbose (format t "~&fuzz: empty corpus, nothing to fuzz~%"))
      (return-from fuzz (values nil (list :inputs 0))))
    (when (and verbose missing)
      (format t "~&fuzz: the corpus lacks tag~p ~{~a~^ ~}~%" (length missing) missing))
    (loop
      (when (or (and iterations (>= tried iterations))
                (and deadline (>= (get-internal-real-time) deadline)))
        (return))
      (let* ((input (if compressed-only
                        (compressed-input (pick corpus rs) corpus rs)
                        (mutate (third (pick corpus rs)) corpus rs)))
             (route (case (random 5 rs) ((0 1 2) :vector) (3 :fill-pointer) (t :sap)))
             ;; Mostly do not intern: garbage names must not pollute packages.
             (intern-symbols (zerop (random 8 rs))))
        (incf tried)
        (when (compressed-p input)
          (incf compressed))
        (multiple-value-bind (outcome condition)
            (try-input input :route route :intern-symbols intern-symbols)
          (incf (getf counts outcome))
          (when (and differential (eq route :vector) (not (eq outcome :failure)))
            (incf compared)
            (let ((difference (differential-disagreement input intern-symbols
                                                         (* 64 1024 1024))))
              (when difference
                ;; kept whole, as a regression test that compares both
                ;; decoders again (tests/fuzz.lisp)
                (let ((path (and (< disagreements 10)
                                 (save-regression (format nil "disagreement-~d"
                                                          (if intern-symbols 1 0))
                                                  input))))
                  (when (and verbose (< disagreements 10))
                    (format t "~&fuzz: DISAGREEMENT ~a~%  input ~d bytes: ~a~%  saved as ~a~%"
                            difference (length input) (hex-string input) path)
                    (finish-output)))
                (incf disagreements))))
          (when (eq outcome :failure)
            ;; Shrinking is slow: only the first input of each kind of
            ;; failure (kind and report, digits ignored) is shrunk and saved.
            (let ((key (failure-key condition)))
              (unless (gethash key failures)
                (setf (gethash key failures) t)
                (let* ((kind (failure-kind condition))
                       (small (shrink input kind route intern-symbols))
                       (path (save-regression kind small)))
                  (when verbose
                    (format t "~&fuzz: FAILURE ~a (route ~(~a~), intern-symbols ~a): ~a~%  ~
                               input ~d bytes, shrunk to ~d: ~a~%  saved ~a~%"
                            kind route intern-symbols (describe-condition condition)
                            (length input) (length small) (hex-string small)
                            (file-namestring path))
                    (finish-output)))))))
        (when (and verbose (> (get-internal-real-time) next-progress))
          (setf next-progress (+ (get-internal-real-time)
                                 (* 30 internal-time-units-per-second)))
          (format t "~&fuzz: ~d inputs so far (~d compressed)~%" tried compressed)
          (finish-output))))
    (let* ((elapsed (max 1/1000 (/ (- (get-internal-real-time) start)
                                   internal-time-units-per-second)))
           (failure-count (getf counts :failure)))
      (when verbose
        (format t "~&fuzz: ~d inputs (~d compressed) in ~,1f s (~d inputs/s), corpus ~d files: ~
                   returned ~d, invalid-input ~d, limit-exceeded ~d, ~
                   other binstore errors ~d, failures ~d (~d distinct); ~
                   ~d compared with the reference decoder, ~d disagreement~:p~%"
                tried compressed elapsed (round tried elapsed) (length corpus)
                (getf counts :returned) (getf counts :invalid-input)
                (getf counts :limit-exceeded) (getf counts :binstore-error)
                failure-count (hash-table-count failures) compared disagreements)
        (finish-output))
      (values (and (zerop failure-count) (zerop disagreements))
              (list :inputs tried
                    :compressed compressed
                    :returned (getf counts :returned)
                    :invalid-input (getf counts :invalid-input)
                    :limit-exceeded (getf counts :limit-exceeded)
                    :other-binstore-error (getf counts :binstore-error)
                    :failures failure-count
                    :compared compared
                    :disagreements disagreements
                    :missing-tags missing)))))
