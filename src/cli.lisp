;;;; The command-line tool bin/binstore: MAIN takes the arguments after the
;;;; program's name and returns the exit status, so that tests call it in
;;;; the test image as well as run the program.
;;;;
;;;;   binstore explain [--depth N] [--items N|all] [--start OFFSET | --record K] FILE
;;;;   binstore stats [--start OFFSET] [--records N|all] FILE
;;;;   binstore check [--max-to-read N|none] [--max-depth N] [--no-intern]
;;;;                  [--load LISP-FILE]... [--system NAME]... FILE
;;;;   binstore help [COMMAND], binstore --help, binstore COMMAND --help
;;;;
;;;; Exit status: 0 done; 1 the data (or the file) is not what the command
;;;; needs, with "binstore: <message>" on *ERROR-OUTPUT*; 2 a usage error,
;;;; with the usage on *ERROR-OUTPUT*.  It names no SBCL package: the
;;;; arguments come from, and the exit goes through, UIOP.

(defpackage #:binstore-cli
  (:use #:common-lisp)
  (:documentation "The command-line tool bin/binstore: explain, stats and
check on a file of binstore data.  MAIN runs it on a list of arguments.")
  (:export #:main #:toplevel))

(in-package #:binstore-cli)

(define-condition usage-error (error)
  ((command :initarg :command :initform nil :reader usage-error-command)
   (message :initarg :message :reader usage-error-message))
  (:documentation "The arguments are not what the tool (COMMAND: one of its
commands, or NIL) takes; MAIN prints MESSAGE and the usage, and returns 2.")
  (:report (lambda (c s) (write-string (usage-error-message c) s))))

(defun usage (command control &rest arguments)
  "Signal a USAGE-ERROR of COMMAND, its message made by FORMAT from CONTROL
and ARGUMENTS."
  (error 'usage-error :command command :message (apply #'format nil control arguments)))

;;; Help texts ------------------------------------------------------------------

(defparameter *tool-help*
  "Usage: binstore COMMAND [OPTIONS] FILE

Read a file of binstore data (what binstore:store wrote) without the program
that wrote it.

Commands:
  explain FILE   every tag of every record: offsets, bytes, fields, ids
  stats FILE     objects and bytes per type family and per class
  check FILE     restore every record, with limits; exit status 0 when it
                 restores, 1 (and the reason) when it does not
  help [COMMAND] this text, or a command's

Run `binstore COMMAND --help' for a command's options.
Exit status: 0 done, 1 the file is unreadable or its data malformed, 2 usage error.
"
  "What `binstore --help' prints.")

(defparameter *command-help*
  '(("explain" . "Usage: binstore explain [OPTIONS] FILE

Print an account of every tag of every record of FILE (binstore:explain):
one line per object and record tag, with its offset in hex and decimal, its
first bytes, its tag, fields and value, the ids it takes and what a
reference names, nested objects indented; then a line per record.  Makes no
object, so any file can be explained, whatever packages and classes it
names.  Stops at malformed bytes (after printing what it read, then a line
\"error at\") and at a compressed record.

Options:
  --depth N        show objects nested at most N deep (default 8)
  --items N        show at most N objects per container (default 20);
                   `all' for every one
  --start OFFSET   begin at byte OFFSET (decimal, or hex as 0x1F0) rather
                   than 0: the start of a record
  --record K       explain the Kth record alone (from 1, as `binstore stats'
                   numbers them); its lines keep the file's offsets but it
                   is called record 1
  --help           this text

Exit status: 0 explained to the end (or to a compressed record), 1 stopped
at malformed bytes or the file cannot be read, 2 usage error.
")
    ("stats" . "Usage: binstore stats [OPTIONS] FILE

Count what FILE holds (binstore:file-statistics): per record its bytes and
objects; per type family (a tag's name, with the element type for
specialized vectors and arrays) the objects and the bytes they take, an
object's own bytes only (its tag and payload, not its nested objects'), so
that the bytes add up to the file's; per class named in the file, its kind,
slots, instances, and the bytes of the instances with their slots' contents.
Makes no object, so any file can be counted.  Stops at malformed bytes (with
what it counted, then a line \"error at\") and at a compressed record.

Options:
  --start OFFSET   begin at byte OFFSET (decimal, or hex as 0x1F0)
  --records N      list at most N records (default 10); `all' for every one
  --help           this text

Exit status: 0 counted to the end (or to a compressed record), 1 stopped at
malformed bytes or the file cannot be read, 2 usage error.
")
    ("check" . "Usage: binstore check [OPTIONS] FILE

Restore every record of FILE in this program (binstore:map-stored-objects),
with limits, and discard what it made: the test of whether a program can
restore the file.  Symbols are interned and classes looked up here, so a
file naming packages or classes of its own needs them defined (--load,
--system) or fails with missing-package, missing-symbol or missing-class.
Compressed records are decompressed when binstore/compression could be
loaded (it needs libzstd, liblz4 and libxxhash).

Options:
  --max-to-read N  bytes of input, and of memory for restored objects, one
                   record may use (default binstore's *max-to-read*);
                   `none' for no bound
  --max-depth N    how deeply the data may nest (default *max-depth*)
  --no-intern      intern no new symbol (*intern-symbols* nil): a symbol not
                   already present is missing-symbol
  --load FILE      load this Lisp file first (to define packages and
                   classes); may be repeated
  --system NAME    load this ASDF system first; may be repeated
  --help           this text

Prints `FILE: N objects in M bytes restored' and exits 0 when every record
restores; prints `binstore: ' and the condition's message on standard error
and exits 1 when one does not (or FILE is empty); 2 usage error.
"))
  "Each command's --help text.")

(defun command-help (command)
  "The --help text of COMMAND (a string)."
  (cdr (assoc command *command-help* :test #'string=)))

;;; Arguments ----------------------------------------------------------------------

(defun parse-count (command option text &key hex none)
  "TEXT, the value of OPTION of COMMAND, as a non-negative integer (with
HEX, also written 0x...), or NIL when NONE is the word TEXT is; a usage
error otherwise."
  (cond ((and none (string-equal text none)) nil)
        (t (let* ((hexp (and hex (> (length text) 2) (string-equal "0x" text :end2 2)))
                  (digits (if hexp (subseq text 2) text))
                  (value (and (plusp (length digits))
                              (every (lambda (c) (digit-char-p c (if hexp 16 10))) digits)
                              (parse-integer digits :radix (if hexp 16 10)))))
             (or value
                 (usage command "~a wants a non-negative integer~:[~;, or 0x and hex digits~]~
                                 ~@[, or `~a'~], not ~s"
                        option hex none text))))))

(defun parse-options (command arguments specs)
  "Split ARGUMENTS of COMMAND into options and operands.  SPECS lists
\(name kind), KIND :flag (no value), :value or :values (repeatable, values
collected in order).  An option's value is the next argument or follows
`='; `--' ends the options.  Return a plist (keyword value) and the
operands.  --help is a flag of every command."
  (let ((options '()) (operands '()))
    (loop while arguments
          do (let ((argument (pop arguments)))
               (cond ((string= argument "--")
                      (setf operands (append (reverse arguments) operands)
                            arguments '()))
                     ((and (> (length argument) 1) (char= (char argument 0) #\-))
                      (let* ((equals (position #\= argument))
                             (name (subseq argument 0 equals))
                             (spec (or (assoc name specs :test #'string=)
                                       (and (string= name "--help") '("--help" :flag))
                                       (usage command "unknown option ~a" name)))
                             (key (intern (string-upcase (string-left-trim "-" name)) :keyword)))
                        (if (eq (second spec) :flag)
                            (if equals
                                (usage command "~a takes no value" name)
                                (setf (getf options key) t))
                            (let ((value (cond (equals (subseq argument (1+ equals)))
                                               (arguments (pop arguments))
                                               (t (usage command "~a needs a value" name)))))
                              (if (eq (second spec) :values)
                                  (setf (getf options key)
                                        (append (getf options key) (list value)))
                                  (setf (getf options key) value))))))
                     (t (push argument operands)))))
    (values options (nreverse operands))))

(defun one-file (command operands)
  "The one operand of COMMAND, the file; a usage error unless there is one."
  (cond ((null operands) (usage command "no FILE given"))
        ((rest operands) (usage command "one FILE only, not ~d: ~{~a~^ ~}"
                                (length operands) operands))
        (t (first operands))))

;;; Errors ------------------------------------------------------------------------

(defun condition-text (condition)
  "CONDITION's report without binstore's prefix \"binstore: \", on one line."
  (let* ((text (or (ignore-errors (princ-to-string condition))
                   (format nil "a ~(~a~)" (type-of condition))))
         (text (if (eql 0 (search "binstore: " text)) (subseq text 10) text)))
    (substitute #\Space #\Newline text)))

(defun fail (control &rest arguments)
  "Print `binstore: ' and the message of CONTROL and ARGUMENTS on
*ERROR-OUTPUT*; return 1, the exit status."
  (format *error-output* "binstore: ~?~%" control arguments)
  (finish-output *error-output*)
  1)

(defun native (file)
  "The pathname of FILE, a file name as the shell gives it (no wildcards)."
  (uiop:parse-native-namestring file))

(defun file-problem (file)
  "The exit status 1 and a message when FILE is not a readable regular
file, else NIL."
  (let ((found (ignore-errors (probe-file (native file)))))
    (cond ((not found) (fail "~a: no such file" file))
          ((null (pathname-name found)) (fail "~a: a directory, not a file" file))
          (t nil))))

;;; The commands -------------------------------------------------------------------

(defun file-octets (file)
  "The bytes of FILE, in a vector with a fill pointer."
  (with-open-file (in (native file) :element-type '(unsigned-byte 8))
    (let ((octets (make-array (file-length in) :element-type '(unsigned-byte 8)
                                               :fill-pointer t)))
      (setf (fill-pointer octets) (read-sequence octets in))
      octets)))

(defun record-bounds (file octets number)
  "The offset of the NUMBERth record (from 1) of OCTETS, the bytes of FILE,
and the offset after it (the end of OCTETS for a malformed record); a
message and the exit status 1 when there is no such record."
  (let* ((statistics (binstore:file-statistics octets))
         (records (getf statistics :records))
         (record (and (plusp number) (nth (1- number) records))))
    (if record
        (let ((start (getf record :start)))
          (values start (if (getf record :version)
                            (+ start (getf record :bytes))
                            (length octets))))
        (values nil nil
                (fail "~a: no record ~d: ~d record~:p~:[~; before a compressed one~]~
                       ~:[~; and malformed bytes~]"
                      file number (length records) (getf statistics :compressed)
                      (getf statistics :condition))))))

(defun explain-command (arguments)
  "binstore explain: see its help text."
  (multiple-value-bind (options operands)
      (parse-options "explain" arguments '(("--depth" :value) ("--items" :value)
                                           ("--start" :value) ("--record" :value)))
    (when (getf options :help)
      (write-string (command-help "explain"))
      (return-from explain-command 0))
    (let ((file (one-file "explain" operands))
          (depth (parse-count "explain" "--depth" (getf options :depth "8")))
          (items (parse-count "explain" "--items" (getf options :items "20") :none "all"))
          (start (parse-count "explain" "--start" (getf options :start "0") :hex t))
          (record (and (getf options :record)
                       (parse-count "explain" "--record" (getf options :record)))))
      (when (and record (getf options :start))
        (usage "explain" "--start and --record: one or the other"))
      (or (file-problem file)
          (let ((place (native file)))
            (when record
              (let ((octets (file-octets file)))
                (multiple-value-bind (record-start record-end status)
                    (record-bounds file octets record)
                  (unless record-start
                    (return-from explain-command status))
                  ;; EXPLAIN reads up to the fill pointer: the record alone
                  (setf (fill-pointer octets) record-end
                        place octets
                        start record-start))))
            (multiple-value-bind (records condition)
                (binstore:explain place :max-depth depth :max-items items :start start)
              (declare (ignore records))
              (finish-output)
              (if condition
                  (fail "~a: ~a" file (condition-text condition))
                  0)))))))

(defun stats-command (arguments)
  "binstore stats: see its help text."
  (multiple-value-bind (options operands)
      (parse-options "stats" arguments '(("--start" :value) ("--records" :value)))
    (when (getf options :help)
      (write-string (command-help "stats"))
      (return-from stats-command 0))
    (let ((file (one-file "stats" operands))
          (start (parse-count "stats" "--start" (getf options :start "0") :hex t))
          (records (parse-count "stats" "--records" (getf options :records "10") :none "all")))
      (or (file-problem file)
          (let ((statistics (binstore:file-statistics (native file) :start start)))
            (format t "~a: " file)
            (binstore:print-statistics statistics :max-records records)
            (finish-output)
            (let ((condition (getf statistics :condition)))
              (if condition
                  (fail "~a: ~a" file (condition-text condition))
                  0)))))))

(defun check-command (arguments)
  "binstore check: see its help text."
  (multiple-value-bind (options operands)
      (parse-options "check" arguments '(("--max-to-read" :value) ("--max-depth" :value)
                                         ("--no-intern" :flag) ("--load" :values)
                                         ("--system" :values)))
    (when (getf options :help)
      (write-string (command-help "check"))
      (return-from check-command 0))
    (let* ((file (one-file "check" operands))
           (max-to-read (if (getf options :max-to-read)
                            (parse-count "check" "--max-to-read" (getf options :max-to-read)
                                         :none "none")
                            binstore:*max-to-read*))
           (max-depth (if (getf options :max-depth)
                          (parse-count "check" "--max-depth" (getf options :max-depth))
                          binstore:*max-depth*)))
      (dolist (lisp-file (getf options :load))
        (when (file-problem lisp-file)
          (return-from check-command 1))
        (handler-case (let ((*standard-output* (make-broadcast-stream)))
                        (load (native lisp-file)))
          (error (e) (return-from check-command
                       (fail "--load ~a: ~a" lisp-file (condition-text e))))))
      (dolist (system (getf options :system))
        (handler-case (let ((*standard-output* (make-broadcast-stream)))
                        (asdf:load-system system))
          (error (e) (return-from check-command
                       (fail "--system ~a: ~a" system (condition-text e))))))
      (or (file-problem file)
          (let ((objects 0))
            (handler-case
                (binstore:map-stored-objects (lambda (object)
                                               (declare (ignore object))
                                               (incf objects))
                                             (native file)
                                             :max-to-read max-to-read
                                             :max-depth max-depth
                                             :intern-symbols (not (getf options :no-intern)))
              ((or error storage-condition) (e)
                (return-from check-command (fail "~a: ~a" file (condition-text e)))))
            (if (zerop objects)
                (fail "~a: no record to restore: the file is empty" file)
                (let ((bytes (with-open-file (in (native file) :element-type '(unsigned-byte 8))
                               (file-length in))))
                  (format t "~a: ~d object~:p in ~d byte~:p restored~%" file objects bytes)
                  (finish-output)
                  0)))))))

(defparameter *commands*
  '(("explain" . explain-command) ("stats" . stats-command) ("check" . check-command))
  "Each command's name and the function that runs it on its arguments.")

(defun main (arguments)
  "Run the tool on ARGUMENTS, a list of strings (the command line after the
program's name): print what the command prints on *STANDARD-OUTPUT*, errors
on *ERROR-OUTPUT*, and return the exit status: 0 done, 1 the file cannot be
read or its data is not what the command needs (`binstore: <message>' on
*ERROR-OUTPUT*), 2 a usage error (the message and how to get help)."
  (let ((command nil))
    (handler-case
        (let ((first (first arguments)))
          (cond ((or (null arguments))
                 (usage nil "no command given"))
                ((member first '("--help" "-h" "help") :test #'string=)
                 (cond ((and (string= first "help") (second arguments))
                        (unless (command-help (second arguments))
                          (usage nil "no command ~s" (second arguments)))
                        (write-string (command-help (second arguments))))
                       ((cddr arguments) (usage nil "help takes one COMMAND at most"))
                       ((and (string/= first "help") (rest arguments))
                        (usage nil "--help takes no argument"))
                       (t (write-string *tool-help*)))
                 0)
                (t (let ((entry (assoc first *commands* :test #'string=)))
                     (unless entry
                       (usage nil "~:[unknown command ~s~;unknown option ~a~]"
                              (eql 0 (position #\- first)) first))
                     (setf command first)
                     (funcall (cdr entry) (rest arguments))))))
      (usage-error (e)
        (format *error-output* "binstore: ~@[~a: ~]~a~%Run `binstore ~@[~a ~]--help' for usage.~%"
                (usage-error-command e) (usage-error-message e) (usage-error-command e))
        (finish-output *error-output*)
        2)
      (binstore:binstore-error (e)
        (fail "~a" (condition-text e)))
      (stream-error (e)
        ;; standard output closed early (`binstore explain big.bin | head'):
        ;; stop quietly, as programs killed by SIGPIPE do
        (if (ignore-errors (output-stream-p (stream-error-stream e)))
            1
            (fail "~@[~a: ~]~a" command (condition-text e))))
      ((or error storage-condition) (e)
        (fail "~@[~a: ~]~a" command (condition-text e))))))

(defun toplevel ()
  "The entry point of bin/binstore: run MAIN on the command line's
arguments and exit with its status."
  (uiop:quit (main (uiop:command-line-arguments)) t))
