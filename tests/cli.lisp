;;;; FILE-STATISTICS (src/stats.lisp) and the command-line tool bin/binstore
;;;; (src/cli.lisp): the statistics' counts, and the tool's output and exit
;;;; status, from BINSTORE-CLI:MAIN in this image and from the program run as
;;;; a process (build/binstore when `make cli' built it and it is up to date,
;;;; else bin/binstore loading binstore from the checkout; one test forces
;;;; that path).

(in-package #:binstore-tests)

(def-suite cli :in all
  :description "FILE-STATISTICS and the command-line tool bin/binstore.")
(in-suite cli)

(defstruct cli-point
  "A structure the tool's tests store (the tool's image does not know it)."
  x y)

;;; Helpers ---------------------------------------------------------------------------

(defun text-lines-of (string)
  "The lines of STRING."
  (with-input-from-string (in string)
    (loop for line = (read-line in nil) while line collect line)))

(defun run-main (&rest arguments)
  "Run BINSTORE-CLI:MAIN on ARGUMENTS in this image; return its exit status
and the lines it printed on standard output and on error output."
  (let* ((out (make-string-output-stream))
         (err (make-string-output-stream))
         (status (let ((*standard-output* out) (*error-output* err))
                   (binstore-cli:main arguments))))
    (values status (text-lines-of (get-output-stream-string out))
            (text-lines-of (get-output-stream-string err)))))

(defun binstore-program-pathname ()
  "bin/binstore of this checkout."
  (asdf:system-relative-pathname "binstore" "bin/binstore"))

(defun run-program-binstore (arguments &key (directory (uiop:temporary-directory)) environment)
  "Run bin/binstore with ARGUMENTS as a process in DIRECTORY, with no
standard input, ENVIRONMENT (a list of NAME=VALUE) added to its
environment; return its exit status and its output and error lines."
  (multiple-value-bind (out err status)
      (uiop:run-program (append (and environment (cons "env" environment))
                                (list (uiop:native-namestring (binstore-program-pathname)))
                                arguments)
                        :directory directory :input nil
                        :output :string :error-output :string :ignore-error-status t)
    (values status (text-lines-of out) (text-lines-of err))))

(defun cli-write-file (path octets)
  "Write the octets OCTETS (a list or vector) to the file PATH; return PATH."
  (with-open-file (out path :direction :output :element-type '(unsigned-byte 8)
                            :if-exists :supersede)
    (write-sequence (coerce octets '(vector (unsigned-byte 8))) out))
  path)

(defmacro with-cli-files ((directory) &body body)
  "Run BODY with DIRECTORY bound to a fresh directory, deleted after."
  `(call-with-temporary-directory (lambda (,directory) ,@body)))

(defun file-in (directory name)
  "The native name of the file NAME in DIRECTORY, for an argument."
  (uiop:native-namestring (merge-pathnames name directory)))

(defparameter *small-record* (binstore:store nil (list 1 "two" :three))
  "21 bytes: a header, full-tracking, a list of 1, \"two\" and :three.")

(defparameter *small-record-statistics*
  '("21 bytes, 1 record, 6 objects"
    "record 1 at 0x0000: 21 bytes, version 5, 1 top-level object, 6 objects"
    ""
    "family                  objects       bytes  share"
    "keyword                       1           7  33.3%"
    "record: header                1           5  23.8%"
    "string                        1           5  23.8%"
    "list                          1           2   9.5%"
    "record: full-tracking         1           1   4.8%"
    "small integer                 1           1   4.8%"
    "total                         6          21 100.0%")
  "What PRINT-STATISTICS prints for *SMALL-RECORD*.")

(defun statistics-lines (place &rest options)
  "The lines PRINT-STATISTICS prints for PLACE's statistics."
  (text-lines-of (with-output-to-string (out)
                   (binstore:print-statistics (apply #'binstore:file-statistics place options)
                                              :stream out))))

(defun family-row (statistics family)
  "(objects bytes) of FAMILY in STATISTICS, or NIL."
  (rest (assoc family (getf statistics :families) :test #'string=)))

(defun class-row (statistics class)
  "(kind slots descriptors instances bytes) of CLASS in STATISTICS, or NIL."
  (rest (assoc class (getf statistics :classes) :test #'string=)))

;;; FILE-STATISTICS ---------------------------------------------------------------

(test statistics-of-a-small-record
  "The statistics of a small record, printed, exactly: each byte counted
once, in the object whose tag or payload it is."
  (is (equal *small-record-statistics* (statistics-lines *small-record*))))

(test statistics-families-and-classes
  "Families name element types; classes count their instances and the
bytes under them; the families' bytes add up to the bytes read."
  (let* ((points (loop for i below 5 collect (make-cli-point :x i :y (* 1.5d0 i))))
         (data (list points
                     (make-array 4 :element-type '(unsigned-byte 16) :initial-element 9)
                     (make-array 3 :element-type 'single-float :initial-element 1.0)
                     (make-array '(2 2) :element-type 'double-float :initial-element 0d0)))
         (octets (binstore:store nil data))
         (statistics (binstore:file-statistics octets)))
    (is (null (getf statistics :condition)))
    (is (= (length octets) (getf statistics :read)
           (reduce #'+ (getf statistics :families) :key #'third)))
    ;; tag, element type code, n, 4 x 2 bytes
    (is (equal '(1 11) (family-row statistics "specialized-vector (unsigned-byte 16)")))
    (is (equal '(1 15) (family-row statistics "specialized-vector single-float")))
    (is (equal 1 (first (family-row statistics "array double-float"))))
    (is (equal 5 (first (family-row statistics "instance"))))
    (is (equal 1 (first (family-row statistics "class-descriptor"))))
    ;; the five doubles: 9 bytes each (x = 0 is the small integer 0; y = 0d0 a double too)
    (is (equal '(5 45) (family-row statistics "double-float")))
    (let ((row (class-row statistics "BINSTORE-TESTS::CLI-POINT")))
      (is (eq :structure (first row)))
      (is (= 2 (second row)))
      (is (= 1 (third row)))
      (is (= 5 (fourth row)))
      ;; five instance tags and the slots, five doubles and five small
      ;; integers (the descriptor and the references to it are read before
      ;; the instance's class is known: they count for the list)
      (is (= (+ 5 45 5) (fifth row))))))

(test statistics-of-deferred-and-shared-data
  "Containers deferred with LATER count once, their FILL's bytes for them;
conses shared and referenced count as cons references (short-cons-ref)."
  (let* ((deep (let ((x nil)) (dotimes (i 2500 x) (setf x (list x)))))
         (statistics (binstore:file-statistics (binstore:store nil deep)))
         (lists (family-row statistics "list")))
    (is (null (getf statistics :condition)))
    (is (= 2500 (first lists)))
    ;; each list: its tag and n=1, in the run or in a FILL
    (is (= 5000 (second lists)))
    (is (plusp (first (family-row statistics "later"))))
    (is (= (first (family-row statistics "later"))
           (first (family-row statistics "record: fill")))))
  (let* ((shared (list 1 2))
         (statistics (binstore:file-statistics
                      (binstore:store nil (list shared (cdr shared))
                                      :support-shared-list-structures t))))
    (is (equal 1 (first (family-row statistics "short-cons-ref"))))
    (is (null (getf statistics :condition)))))

(test statistics-stop-at-malformed-bytes-and-frames
  "Malformed bytes end the counting with the condition and its offset;
a compressed record ends it with where the frame is."
  (let* ((octets (coerce '(#x24 #x42 #x53 #x54 #x03 #x29 #x02 #x02 #x71 #x2F)
                         '(simple-array (unsigned-byte 8) (*))))
         (statistics (binstore:file-statistics octets))
         (lines (statistics-lines octets)))
    (is (typep (getf statistics :condition) 'binstore:invalid-input))
    (is (= 9 (getf statistics :error-offset)))
    (is (equal "record 1 at 0x0000: 10 bytes, malformed, 5 objects" (second lines)))
    (is (search "error at 0x0009 (9): binstore: invalid input at byte 9: next-ref before any reference"
                (car (last lines)))))
  (let* ((octets (concatenate '(vector (unsigned-byte 8)) *small-record*
                              (binstore:store nil "compressed" :compression :zstd)))
         (statistics (binstore:file-statistics octets)))
    (is (null (getf statistics :condition)))
    (is (equal '(:zstd 21) (getf statistics :compressed)))
    (is (= 1 (length (getf statistics :records))))
    (is (search "stopped at 0x0015 (21): a zstd frame"
                (car (last (statistics-lines octets)))))))

(test statistics-never-fail-on-fuzzed-input
  "On the fuzzer's corpus and 1,000 mutated copies FILE-STATISTICS signals
nothing, creates no package, its families' bytes add up to the bytes read,
and a record the reference decoder reads is counted without a condition."
  (let* ((corpus (binstore-fuzz:build-corpus :verbose nil))
         (inputs (append (mapcar #'third corpus) (mutated-inputs corpus 1000 23)))
         (packages (list-all-packages))
         (failures '()))
    (dolist (octets inputs)
      (handler-case
          (let ((statistics (binstore:file-statistics octets)))
            (unless (= (getf statistics :read)
                       (reduce #'+ (getf statistics :families) :key #'third))
              (push (list (octets-hex octets) "the bytes do not add up") failures))
            (let ((end (ignore-errors
                        (nth-value 1 (binstore::reference-restore
                                      octets :require-header nil :intern-symbols nil
                                             :max-to-read *differential-max-to-read*
                                             :max-depth nil)))))
              (when end
                (let ((condition (getf (binstore:file-statistics (subseq octets 0 end))
                                       :condition)))
                  (when condition
                    (push (list (octets-hex octets) (bounded-report condition)) failures))))))
        (serious-condition (c)
          (push (list (octets-hex octets) (bounded-report c)) failures))))
    (is (null failures) "~d input~:p: ~{~%  ~{~a: ~a~}~}" (length failures)
        (subseq failures 0 (min 3 (length failures))))
    (is (null (set-difference (list-all-packages) packages)))))

;;; The tool, in this image ---------------------------------------------------------

(test cli-help
  "--help for the tool and for each command: exit status 0, the usage on
standard output."
  (multiple-value-bind (status out err) (run-main "--help")
    (is (= 0 status))
    (is (equal "Usage: binstore COMMAND [OPTIONS] FILE" (first out)))
    (is (find "  stats FILE     objects and bytes per type family and per class" out
              :test #'string=))
    (is (null err)))
  (dolist (command '("explain" "stats" "check"))
    (multiple-value-bind (status out err) (run-main command "--help")
      (is (= 0 status))
      (is (equal (format nil "Usage: binstore ~a [OPTIONS] FILE" command) (first out)))
      (is (null err)))
    (is (equal (nth-value 1 (run-main command "--help"))
               (nth-value 1 (run-main "help" command))))))

(test cli-usage-errors
  "Unknown commands and options, a missing or extra FILE, a bad number:
exit status 2, the problem and where help is on error output."
  (flet ((usage-error (expected &rest arguments)
           (multiple-value-bind (status out err) (apply #'run-main arguments)
             (is (= 2 status) "~s: status ~a" arguments status)
             (is (null out))
             (is (equal expected (first err)) "~s: ~s" arguments err)
             (is (search "--help' for usage." (second err))))))
    (usage-error "binstore: no command given")
    (usage-error "binstore: unknown command \"frob\"" "frob" "x.bin")
    (usage-error "binstore: unknown option --frob" "--frob")
    (usage-error "binstore: explain: unknown option --frob" "explain" "--frob" "x.bin")
    (usage-error "binstore: explain: no FILE given" "explain")
    (usage-error "binstore: stats: one FILE only, not 2: a.bin b.bin" "stats" "a.bin" "b.bin")
    (usage-error "binstore: explain: --depth wants a non-negative integer, not \"deep\""
                 "explain" "--depth" "deep" "x.bin")
    (usage-error "binstore: explain: --depth needs a value" "explain" "x.bin" "--depth")
    (usage-error "binstore: check: --no-intern takes no value" "check" "--no-intern=1" "x.bin")
    (usage-error "binstore: no command \"frob\"" "help" "frob")))

(test cli-explain
  "explain prints EXPLAIN's lines; --items, --depth, --start and --record page it;
malformed bytes: the lines read, then exit status 1 and the reason."
  (with-cli-files (directory)
    (let ((file (file-in directory "small.bin"))
          (long (file-in directory "long.bin"))
          (bad (file-in directory "bad.bin")))
      (cli-write-file file *small-record*)
      (multiple-value-bind (status out err) (run-main "explain" file)
        (is (= 0 status))
        (is (equal (text-lines-of (with-output-to-string (s)
                                    (binstore:explain *small-record* :stream s)))
                   out))
        (is (null err)))
      (cli-write-file long (binstore:store nil (list (loop for i below 30 collect i) '((((1)))))))
      (let ((out (nth-value 1 (run-main "explain" "--items=5" "--depth" "2" long))))
        (is (find "… 25 more (max-items)" out :test #'search))
        (is (find "… 1 more nested deeper than max-depth" out :test #'search)))
      (let ((out (nth-value 1 (run-main "explain" "--items" "all" long))))
        ;; the 30 of the long list and the 1 deep in the other
        (is (= 31 (count "  integer " out :test #'search))))
      ;; two records: --start at the second (in hex) explains it alone
      (cli-write-file file (concatenate 'list *small-record* *small-record*))
      (multiple-value-bind (status out) (run-main "explain" "--start" "0x15" file)
        (is (= 0 status))
        (is (equal "record 1 at 0x0015 (21)" (first out)))
        (is (equal "end of input at 0x002A (42): 1 record" (car (last out)))))
      ;; three records: --record 2 explains the second alone
      (cli-write-file file (concatenate 'list *small-record* *small-record* *small-record*))
      (multiple-value-bind (status out err) (run-main "explain" "--record" "2" file)
        (is (= 0 status))
        (is (equal "record 1 at 0x0015 (21)" (first out)))
        (is (equal "end of input at 0x002A (42): 1 record" (car (last out))))
        (is (null err)))
      (multiple-value-bind (status out err) (run-main "explain" "--record" "4" file)
        (is (= 1 status))
        (is (null out))
        (is (equal (list (format nil "binstore: ~a: no record 4: 3 records" file)) err)))
      (is (= 2 (run-main "explain" "--record" "1" "--start" "0" file)))
      (cli-write-file bad '(#x24 #x42 #x53 #x54 #x03 #x29 #x02 #x02 #x71 #x2F))
      (multiple-value-bind (status out err) (run-main "explain" bad)
        (is (= 1 status))
        (is (search "error at 0x0009 (9)" (car (last out))))
        (is (equal (list (format nil "binstore: ~a: invalid input at byte 9: next-ref before ~
                                      any reference; expected a reference before it" bad))
                   err))))))

(test cli-stats
  "stats prints the statistics after the file's name; malformed bytes:
exit status 1; a file that is not there: 1, and the reason."
  (with-cli-files (directory)
    (let ((file (file-in directory "small.bin"))
          (bad (file-in directory "bad.bin")))
      (cli-write-file file *small-record*)
      (multiple-value-bind (status out err) (run-main "stats" file)
        (is (= 0 status))
        (is (equal (cons (format nil "~a: ~a" file (first *small-record-statistics*))
                         (rest *small-record-statistics*))
                   out))
        (is (null err)))
      (cli-write-file file (loop repeat 12 append (coerce *small-record* 'list)))
      (let ((out (nth-value 1 (run-main "stats" "--records" "3" file))))
        (is (equal "record 3 at 0x002A: 21 bytes, version 5, 1 top-level object, 6 objects"
                   (fourth out)))
        (is (equal "… 9 more records" (fifth out))))
      (is (= 12 (count "record " (nth-value 1 (run-main "stats" "--records" "all" file))
                       :test (lambda (prefix line) (eql 0 (search prefix line))))))
      (cli-write-file bad '(#x24 #x42 #x53 #x54 #x03 #x29 #x02 #x02 #x71 #x2F))
      (multiple-value-bind (status out err) (run-main "stats" bad)
        (is (= 1 status))
        (is (search "error at 0x0009 (9)" (car (last out))))
        (is (= 1 (length err)))
        (is (eql 0 (search (format nil "binstore: ~a: invalid input at byte 9" bad) (first err)))))
      (multiple-value-bind (status out err) (run-main "stats" (file-in directory "absent.bin"))
        (is (= 1 status))
        (is (null out))
        (is (equal (list (format nil "binstore: ~a: no such file" (file-in directory "absent.bin")))
                   err))))))

(test cli-check
  "check restores every record: 0 and a line on standard output; 1 and the
condition's message on error output when a record does not restore (bad
bytes, a limit, an empty file)."
  (with-cli-files (directory)
    (let ((file (file-in directory "data.bin"))
          (bad (file-in directory "bad.bin"))
          (empty (file-in directory "empty.bin")))
      (cli-write-file file (concatenate 'list *small-record* (binstore:store nil '(((((1))))))))
      (multiple-value-bind (status out err) (run-main "check" file)
        (is (= 0 status))
        (is (equal (list (format nil "~a: 2 objects in ~d bytes restored" file
                                 (+ (length *small-record*)
                                    (length (binstore:store nil '(((((1))))))))))
                   out))
        (is (null err)))
      (multiple-value-bind (status out err) (run-main "check" "--max-depth" "3" file)
        (is (= 1 status))
        (is (null out))
        (is (= 1 (length err)))
        (is (eql 0 (search (format nil "binstore: ~a: " file) (first err))))
        (is (search "Limit :max-depth is 3" (first err))))
      (multiple-value-bind (status out err) (run-main "check" "--max-to-read=8" file)
        (is (= 1 status))
        (is (null out))
        (is (search "Limit :max-to-read is 8" (first err))))
      (is (= 0 (run-main "check" "--max-to-read" "none" file)))
      (cli-write-file bad '(#x24 #x42 #x53 #x54 #x03 #x29 #x02 #x02 #x71 #x2F))
      (multiple-value-bind (status out err) (run-main "check" bad)
        (is (= 1 status))
        (is (null out))
        (is (equal (list (format nil "binstore: ~a: invalid input at byte 9: next-ref before ~
                                      any reference; expected a reference before it" bad))
                   err)))
      (cli-write-file empty '())
      (multiple-value-bind (status out err) (run-main "check" empty)
        (is (= 1 status))
        (is (null out))
        (is (equal (list (format nil "binstore: ~a: no record to restore: the file is empty" empty))
                   err))))))

;;; The tool, as a process -----------------------------------------------------------

(test cli-program
  "bin/binstore run as a process, from another directory, without standard
input: its exit statuses and lines are MAIN's; check --load defines what
the file needs in the tool's image."
  (with-cli-files (directory)
    (let ((file (file-in directory "small.bin"))
          (points (file-in directory "points.bin"))
          (definitions (file-in directory "points.lisp")))
      (cli-write-file file *small-record*)
      (multiple-value-bind (status out err) (run-program-binstore '("--help"))
        (is (eql 0 status))
        (is (equal (nth-value 1 (run-main "--help")) out))
        (is (null err)))
      (multiple-value-bind (status out err) (run-program-binstore '("explain" "--frob" "small.bin"))
        (is (eql 2 status))
        (is (null out))
        (is (equal (nth-value 2 (run-main "explain" "--frob" "small.bin")) err)))
      ;; a relative name, in the process's directory
      (multiple-value-bind (status out err) (run-program-binstore '("stats" "small.bin") :directory directory)
        (is (eql 0 status))
        (is (equal (nth-value 1 (run-main "stats" file))
                   (cons (concatenate 'string file (subseq (first out) (length "small.bin")))
                         (rest out))))
        (is (null err)))
      ;; a compressed record: check decompresses it, stats stops at it
      (let ((compressed (file-in directory "compressed.bin")))
        (binstore:store (uiop:parse-native-namestring compressed) (list "a" "b" "c")
                        :compression :zstd)
        (multiple-value-bind (status out err) (run-program-binstore (list "check" compressed))
          (is (eql 0 status))
          (is (equal (nth-value 1 (run-main "check" compressed)) out))
          (is (eql 0 (search (format nil "~a: 1 object in " compressed) (first out))))
          (is (null err)))
        (multiple-value-bind (status out err) (run-program-binstore (list "stats" compressed))
          (is (eql 0 status))
          (is (search "stopped at 0x0000 (0): a zstd frame" (car (last out))))
          (is (null err))))
      ;; the tool's image has no package BINSTORE-TESTS, and so no CLI-POINT...
      (cli-write-file points (binstore:store nil (list (make-cli-point :x 1 :y 2))))
      (multiple-value-bind (status out err) (run-program-binstore (list "check" points))
        (is (eql 1 status))
        (is (null out))
        (is (= 1 (length err)))
        (is (search "BINSTORE-TESTS" (first err))))
      ;; ...until --load defines them
      (with-open-file (out definitions :direction :output :if-exists :supersede)
        (format out "(defpackage #:binstore-tests (:use #:common-lisp))~%~
                     (in-package #:binstore-tests)~%~
                     (defstruct cli-point x y)~%"))
      (multiple-value-bind (status out err) (run-program-binstore (list "check" "--load" definitions points))
        (is (eql 0 status))
        (is (equal (list (format nil "~a: 1 object in ~d bytes restored" points
                                 (with-open-file (in points) (file-length in))))
                   out))
        (is (null err))))))

(test cli-program-from-the-checkout
  "bin/binstore without the saved executable (BINSTORE_LOAD set): it loads
binstore from the checkout and runs the same code."
  (with-cli-files (directory)
    (let ((file (file-in directory "small.bin")))
      (cli-write-file file *small-record*)
      (multiple-value-bind (status out err)
          (run-program-binstore (list "stats" file) :environment '("BINSTORE_LOAD=1"))
        (is (eql 0 status))
        (is (equal (nth-value 1 (run-main "stats" file)) out))
        (is (null err)))
      (multiple-value-bind (status out err)
          (run-program-binstore (list "check" (file-in directory "absent.bin"))
                    :environment '("BINSTORE_LOAD=1"))
        (is (eql 1 status))
        (is (null out))
        (is (equal (nth-value 2 (run-main "check" (file-in directory "absent.bin"))) err))))))
