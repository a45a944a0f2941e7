;;;; README.md's Lisp examples, run by `make test' as they are written.
;;;;
;;;; Every fenced code block of README.md whose info string (the word after
;;;; the opening ```) is exactly `lisp' is read and evaluated, form after form,
;;;; and block after block in document order, in one fresh package that uses
;;;; only COMMON-LISP: examples do not leak symbols into the tests, and a block
;;;; may use what an earlier block defined.  Each block must run without
;;;; signalling an error.  A README with no such block fails.
;;;;
;;;; For README authors:
;;;;   ```lisp           run.
;;;;   ```lisp norun     NOT run (GitHub still highlights it as Lisp, as it
;;;;                     looks at the first word only); ```lisp-norun too.
;;;;                     For fragments, REPL transcripts, code that needs a
;;;;                     path or a machine of your own.
;;;;   ```lisp <other>   (or ```Lisp, ```lisp-<other>) fails the suite, so
;;;;                     that no example goes unrun by a typo.
;;;;   ```sh, ```, ...   not Lisp: ignored.
;;;;   (form) ;; => TEXT   checks the value of a top-level FORM: the
;;;;   or (form)           comment (two semicolons or more, one line) ends
;;;;      ;; => TEXT       the form's last line or is alone on the next one.
;;;;                     The value's printed representation (PRIN1 of the
;;;;                     first value, standard syntax, not pretty, in the
;;;;                     examples' package) must equal TEXT up to case
;;;;                     (EQUALP): write what the REPL would print.  A
;;;;                     one-semicolon comment (`; an equal copy') is prose
;;;;                     and not checked.
;;;; `(require :asdf)' and `(asdf:load-system "binstore")' do nothing harmful
;;;; here: the system is loaded already.  Files an example writes go in /tmp.

(in-package #:binstore-tests)

(def-suite readme :in all
  :description "README.md's ```lisp blocks run as written.")

(in-suite readme)

;;; Markdown fences

(defun text-lines (text)
  (with-input-from-string (in text)
    (loop for line = (read-line in nil) while line collect line)))

(defun blank-char-p (char)
  (member char '(#\Space #\Tab #\Return)))

(defun fence-run (line)
  "The start and end of the run of backticks that begins LINE after its
leading spaces (equal when there is none)."
  (let* ((start (or (position #\Space line :test-not #'char=) (length line)))
         (end (or (position #\` line :start start :test-not #'char=) (length line))))
    (values start end)))

(defun fence-opening (line)
  "When LINE opens a backtick-fenced code block, its indentation, the number
of backticks and the info string (trimmed)."
  (multiple-value-bind (start end) (fence-run line)
    (let ((info (string-trim '(#\Space #\Tab #\Return) (subseq line end))))
      (when (and (>= (- end start) 3) (not (find #\` info)))
        (values start (- end start) info)))))

(defun fence-closing-p (line length)
  "Whether LINE closes a block opened by LENGTH backticks."
  (multiple-value-bind (start end) (fence-run line)
    (and (>= (- end start) length)
         (every #'blank-char-p (subseq line end)))))

(defun fenced-blocks (text)
  "The backtick-fenced code blocks of the Markdown TEXT in document order,
each as (INFO LINE CODE): its info string, the number (from 1) of the line
of its opening fence, and the lines between the fences, less the fence's
indentation.  A block left open runs to the end of TEXT (as in CommonMark)."
  (let ((blocks '())
        (open nil))                     ; (indent length info line lines)
    (flet ((close-block ()
             (destructuring-bind (indent length info line lines) open
               (declare (ignore indent length))
               (push (list info line (format nil "~{~A~%~}" (reverse lines))) blocks)
               (setf open nil))))
      (loop for line in (text-lines text)
            for number from 1
            do (cond ((and open (fence-closing-p line (second open)))
                      (close-block))
                     (open
                      (let ((indent (min (first open)
                                         (or (position #\Space line :test-not #'char=)
                                             (length line)))))
                        (push (subseq line indent) (fifth open))))
                     (t
                      (multiple-value-bind (indent length info) (fence-opening line)
                        (when length
                          (setf open (list indent length info number '())))))))
      (when open (close-block)))
    (nreverse blocks)))

(defun block-disposition (info)
  "What the suite does with a block whose info string is INFO: :RUN, :SKIP,
:UNKNOWN (a Lisp block with a marker this file does not know), or NIL (not
Lisp)."
  (let ((word (subseq info 0 (position-if #'blank-char-p info)))
        (marker (string-trim '(#\Space #\Tab)
                             (subseq info (or (position-if #'blank-char-p info) (length info))))))
    (cond ((string= info "lisp") :run)
          ((or (and (string= word "lisp") (string= marker "norun"))
               (string= info "lisp-norun"))
           :skip)
          ((or (string-equal word "lisp")
               (and (> (length word) 5) (string-equal "lisp-" word :end2 5)))
           :unknown)
          (t nil))))

;;; Running a block

(defun lacked-here-p (code)
  "True when the block CODE needs what this Lisp lacks, so that the suite
does not run it here: binstore/compression (which loads on SBCL and ECL
only), character strings apart from base strings (its expected values
name the \"string\" family, which ABCL, whose strings are all base
strings, writes ASCII text as), or OPEN's external format :UTF-8 (CLISP
names it CHARSET:UTF-8)."
  (or (and (search "binstore/compression" code)
           (not (asdf:component-loaded-p "binstore/compression")))
      (and (search "\"string\"" code)
           (not (specialized-here-p 'base-char)))
      (and (search ":external-format :utf-8" code)
           (not (eq *utf-8* :utf-8)))))

(defun arrow-comment (line)
  "The TEXT of LINE when LINE, less leading blanks, is a `;; => TEXT'
comment (two semicolons or more), or NIL."
  (let ((tail (string-left-trim '(#\Space #\Tab) line)))
    (when (and (>= (length tail) 2) (string= ";;" tail :end2 2))
      (let ((comment (string-left-trim '(#\; #\Space #\Tab) tail)))
        (when (and (>= (length comment) 2) (string= "=>" comment :end2 2))
          (string-trim '(#\Space #\Tab #\Return) (subseq comment 2)))))))

(defun expected-value (code start)
  "The TEXT of the `;; => TEXT' comment that states the value of the form of
CODE that ends at START: on the rest of that line, or, when the rest is
blank, alone on the next line.  NIL when there is none."
  (let* ((eol (or (position #\Newline code :start start) (length code)))
         (rest (subseq code start eol)))
    (if (every #'blank-char-p rest)
        (when (< eol (length code))
          (let ((next-eol (or (position #\Newline code :start (1+ eol)) (length code))))
            (arrow-comment (subseq code (1+ eol) next-eol))))
        (arrow-comment rest))))

(defun printed (value)
  "VALUE as PRIN1 prints it with standard syntax in the current package."
  (let ((package *package*))
    (with-standard-io-syntax
      (let ((*package* package) (*print-readably* nil) (*print-pretty* nil))
        (prin1-to-string value)))))

(defun read-next-form (code start eof)
  "The form of CODE at START, read with standard syntax in the current
package, and the position after it."
  (let ((package *package*))
    (with-standard-io-syntax
      (let ((*package* package))
        (read-from-string code nil eof :start start :preserve-whitespace t)))))

(defun run-block (code line)
  "Read and evaluate CODE, the block at LINE of README.md, one top-level form
after another in the current package, up to the first error: one check that
it ran without signalling an error, and one for each `;; =>' comment met."
  (let ((eof '#:eof)
        (start 0)
        (checks '())                    ; (form printed expected), last first
        (failure nil))
    (handler-case
        ;; Inside (asdf:test-system "binstore") an example's load-system is an
        ;; ASDF operation within another, which ASDF warns about; run from a
        ;; top level, as the README means it, it would not be.
        (handler-bind (#+sbcl (asdf/operate:recursive-operate #'muffle-warning))
          (loop
            (multiple-value-bind (form end) (read-next-form code start eof)
              (when (eq form eof) (return))
              (let ((value (eval form))
                    (expected (expected-value code end)))
                (when expected
                  (push (list form (printed value) expected) checks)))
              (setf start end))))
      (error (e) (setf failure e)))
    (loop for (form got expected) in (reverse checks)
          do (is (equalp got expected)
                 "README.md, block at line ~D: ~S~%  printed ~A~%  its ;; => says ~A"
                 line form got expected))
    (is (null failure) "README.md, block at line ~D signalled ~S:~%  ~A"
        line (type-of failure) failure)))

(defun readme-pathname ()
  (asdf:system-relative-pathname "binstore" "README.md"))

(test readme-lisp-blocks
  "Every ```lisp block of README.md runs without error, in document order, in
one fresh package; ;; => comments hold."
  (let* ((blocks (fenced-blocks (uiop:read-file-string (readme-pathname)
                                                       :external-format *utf-8*)))
         ;; a fixed name: a record holding a symbol of the package spells
         ;; its name, and the examples' byte counts hold on every Lisp
         (package (progn (when (find-package "BINSTORE-README")
                           (delete-package "BINSTORE-README"))
                         (make-package "BINSTORE-README" :use '(#:common-lisp))))
         (run 0))
    (unwind-protect
         (let ((*package* package))
           (loop for (info line code) in blocks
                 do (ecase (block-disposition info)
                      (:run (unless (lacked-here-p code)
                              (incf run)
                              (run-block code line)))
                      (:skip)
                      (:unknown
                       (fail "README.md, block at line ~D: info string ~S is neither lisp nor lisp norun"
                             line info))
                      ((nil)))))
      (delete-package package))
    (is (plusp run) "README.md (~A) has no ```lisp block to run" (readme-pathname))))

;;; The reading of the Markdown itself

(test readme-fences
  "Fences, info strings and markers are read as the conventions above say."
  (let ((blocks (fenced-blocks (format nil "~{~A~%~}"
                                       '("# Title"           ; 1
                                         "```lisp"           ; 2
                                         "(a)"
                                         "```"
                                         "```lisp norun"     ; 5
                                         "(b)"
                                         "```"
                                         "```sh"             ; 8
                                         "make test"
                                         "```"
                                         "  ```lisp"         ; 11
                                         "  (d)"
                                         "    (e)"
                                         "  ```"
                                         "````md"            ; 15
                                         "```lisp"
                                         "(f)"
                                         "```"
                                         "````"
                                         "```"               ; 20
                                         "plain"
                                         "```"
                                         "```lisp-norun"     ; 23
                                         "```"
                                         "```Lisp"           ; 25
                                         "```"
                                         "```lisp"           ; 27, never closed
                                         "(g)")))))
    (is (equal '(("lisp" 2 "(a)
")
                 ("lisp norun" 5 "(b)
")
                 ("sh" 8 "make test
")
                 ("lisp" 11 "(d)
  (e)
")
                 ("md" 15 "```lisp
(f)
```
")
                 ("" 20 "plain
")
                 ("lisp-norun" 23 "")
                 ("Lisp" 25 "")
                 ("lisp" 27 "(g)
"))
               blocks))
    (is (equal '(:run :skip nil :run nil nil :skip :unknown :run)
               (mapcar (lambda (b) (block-disposition (first b))) blocks)))
    (is (equal '(:unknown :unknown nil nil)
               (mapcar #'block-disposition '("lisp repl" "lisp-session" "lispy" "common-lisp"))))))

(test readme-expected-values
  "Only a comment of two semicolons or more, at the end of a top-level form's
last line or alone on the next line, states its value."
  (let ((code (format nil "(+ 1 2) ;; => 3~%(list 1) ; => prose~%(f) ;;; => (1 :A)~%~
                           (g)~%;; => 4~%(h)~%~%;; => 5~%(i)~%; => prose~%(j)")))
    (flet ((after (form) (+ (search form code) (length form))))
      (is (equal "3" (expected-value code (after "(+ 1 2)"))))
      (is (null (expected-value code (after "(list 1)"))))
      (is (equal "(1 :A)" (expected-value code (after "(f)"))))
      (is (equal "4" (expected-value code (after "(g)"))))
      (is (null (expected-value code (after "(h)"))))
      (is (null (expected-value code (after "(i)"))))
      (is (null (expected-value code (after "(j)")))))))
