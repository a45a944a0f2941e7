;;;; The worker of tools/check-layers.lisp, loaded into a fresh SBCL (with
;;;; no ASDF, no init files) for one file of binstore: load the fasls of the
;;;; files binstore.asd says it depends on, compile it, and write what the
;;;; compiler said about it.  Only this package is added to the image.

(defpackage #:binstore-compile-alone
  (:use #:common-lisp)
  (:export #:compile-alone))

(in-package #:binstore-compile-alone)

(defun condition-text (condition)
  "CONDITION's report on one line, runs of blanks made one space."
  (let ((text (handler-case (princ-to-string condition)
                (error () (format nil "(unprintable ~S)" (type-of condition)))))
        (blank nil))
    (with-output-to-string (out)
      (loop for char across text
            do (if (member char '(#\Space #\Newline #\Tab))
                   (setf blank t)
                   (progn (when blank (write-char #\Space out))
                          (setf blank nil)
                          (write-char char out)))))))

(defun undefined-reference (warning)
  "When WARNING is SBCL's \"undefined function/variable/type: NAME\" (or
\"N more uses of undefined KIND NAME\"), return the kind as a string and
NAME; otherwise NIL.  (The format control is not always a string: the
warning is recognized by its arguments and its text.)"
  (when (typep warning 'simple-condition)
    (let ((arguments (simple-condition-format-arguments warning)))
      (flet ((kind-p (x) (member x '(:function :variable :type))))
        (cond ((and (= (length arguments) 2) (kind-p (first arguments))
                    (eql 0 (search "undefined " (condition-text warning))))
               (values (string-downcase (first arguments)) (second arguments)))
              ((and (= (length arguments) 3) (kind-p (second arguments))
                    (search "of undefined " (condition-text warning)))
               (values (string-downcase (second arguments)) (third arguments))))))))

(defun name-strings (name)
  "NAME (a symbol, or (SETF symbol)) as a readable list of strings:
\(PACKAGE SYMBOL-NAME SETF-P), so that reading it needs no package."
  (let* ((setf-p (and (consp name) (eq (first name) 'setf)))
         (symbol (if setf-p (second name) name)))
    (if (symbolp symbol)
        (list (let ((package (symbol-package symbol)))
                (if package (package-name package) ""))
              (symbol-name symbol)
              setf-p)
        (list "" (prin1-to-string name) nil))))

(defun declared-undefined ()
  "The functions declared with an FTYPE proclamation but not defined in this
image, as names: what forward declarations have left open."
  (let ((names '()))
    (do-all-symbols (symbol)
      (when (and (eq (sb-int:info :function :where-from symbol) :declared)
                 (not (fboundp symbol)))
        (pushnew symbol names)))
    names))

(defun compile-alone (source fasl dependencies result)
  "In this fresh image: require SB-POSIX, load the fasls DEPENDENCIES in
order, compile the file SOURCE to FASL (compiler notes muffled, its output
discarded) and load it, then write to the file RESULT a list of what was
found, each one of
  (:undefined KIND NAME)   an undefined function, variable or type
  (:warning TEXT)          any other full warning
  (:style-warning TEXT)    any other style warning (shown, not counted)
  (:error TEXT)            an error while loading or compiling
  (:declares NAME)         SOURCE declares the function NAME (FTYPE) and
                           neither it nor its dependencies define it
  (:defines NAME)          SOURCE defines the function NAME, which its
                           dependencies declared
where NAME is (PACKAGE SYMBOL-NAME SETF-P), and quit."
  (let ((found '())
        (phase "loading SB-POSIX"))
    (flet ((note (&rest entry)
             (unless (member entry found :test #'equal)
               (push entry found))))
      (handler-case
          (let (open-before)
            (require :sb-posix)
            (dolist (dependency dependencies)
              (setf phase (format nil "loading ~A" dependency))
              (load dependency))
            (setf open-before (declared-undefined))
            (setf phase "compiling")
            (let ((output
                    (let ((*standard-output* (make-broadcast-stream))
                          (*error-output* (make-broadcast-stream))
                          (*compile-verbose* nil)
                          (*compile-print* nil))
                      (handler-bind ((sb-ext:compiler-note
                                       (lambda (note)
                                         (let ((restart (find-restart 'muffle-warning note)))
                                           (when restart (invoke-restart restart)))))
                                     (sb-c:compiler-error
                                       ;; an error in a form (or a read error, which
                                       ;; ends the file): noted, then left to
                                       ;; COMPILE-FILE, which reports it and goes on
                                       (lambda (e) (note :error (condition-text e))))
                                     (warning
                                       (lambda (warning)
                                         (multiple-value-bind (kind name) (undefined-reference warning)
                                           (cond (kind (note :undefined kind (name-strings name)))
                                                 ((typep warning 'style-warning)
                                                  (note :style-warning (condition-text warning)))
                                                 (t (note :warning (condition-text warning))))))))
                        (multiple-value-bind (output warnings-p failure-p)
                            (compile-file source :output-file fasl)
                          (declare (ignore warnings-p))
                          (cond ((null output)
                                 (note :error "COMPILE-FILE wrote no fasl"))
                                ((and failure-p
                                      (notany (lambda (entry)
                                                (member (first entry) '(:undefined :warning :error)))
                                              found))
                                 (note :error "COMPILE-FILE reported a failure")))
                          output)))))
              (when output
                (setf phase "loading the compiled file")
                (let ((*standard-output* (make-broadcast-stream))
                      (*error-output* (make-broadcast-stream)))
                  (handler-bind ((sb-kernel:redefinition-warning
                                   ;; macros (and EVAL-WHEN functions) that
                                   ;; compiling defined already
                                   #'muffle-warning)
                                 (warning
                                   (lambda (warning)
                                     (note (if (typep warning 'style-warning) :style-warning :warning)
                                           (format nil "when loaded: ~A" (condition-text warning)))
                                     (muffle-warning warning))))
                    (load output)))
                (let ((open-after (declared-undefined)))
                  (dolist (name (set-difference open-after open-before))
                    (note :declares (name-strings name)))
                  (dolist (name (set-difference open-before open-after))
                    (note :defines (name-strings name)))))))
        (error (e)
          (note :error (format nil "~A: ~A" phase (condition-text e))))))
    (with-open-file (out result :direction :output :if-exists :supersede)
      (with-standard-io-syntax
        (let ((*print-readably* nil))
          (prin1 (reverse found) out))))
    (sb-ext:exit :code 0)))
