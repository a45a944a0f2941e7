;;;; Symbols and packages.
;;;;
;;;;   KEYWORD name        SYMBOL package name        UNINTERNED-SYMBOL name
;;;;   PACKAGE name
;;;; Each symbol and package gets an id in every mode, so it is written once
;;;; per store and referenced after: uninterned symbols keep their identity
;;;; and repeated symbols cost one or two bytes.
;;;;
;;;; Restoring never creates a package silently: a missing one signals
;;;; MISSING-PACKAGE.  With *intern-symbols* nil it never interns either: a
;;;; symbol not already present signals MISSING-SYMBOL.

(in-package #:binstore)

(defun write-symbol (ss symbol)
  "Write SYMBOL (not NIL or T): a reference when it was written before."
  (unless (written-recurring-before-p ss symbol)
    (write-symbol-body ss symbol)
    (remember-recurring ss symbol)))

(defun write-symbol-body (ss symbol)
  (declare (type symbol symbol))
  (let ((ob (ss-obuf ss))
        (package (symbol-package symbol)))
    (cond ((null package)
           (write-u8 ob +tag-uninterned-symbol+))
          ((eq package #.(find-package "KEYWORD"))
           (write-u8 ob +tag-keyword+))
          (t
           (write-u8 ob +tag-symbol+)
           (write-package-object ss package)))
    (write-string-payload ob (symbol-name symbol))))

(defun write-package-object (ss package)
  "Write PACKAGE, or a reference to it when it was written before.  The
last package written is kept with its id: the symbols of one package tend
to come together, and then need no look in the table."
  (let ((ob (ss-obuf ss)))
    (if (eq package (ss-last-package ss))
        (write-ref ob (ss-last-package-id ss) (ss-refs ss))
        (let ((id (identity-table-get-recurring (ss-refs ss) package)))
          (if (>= id 0)
              (write-ref ob id (ss-refs ss))
              (progn (write-u8 ob +tag-package+)
                     (write-string-payload ob (package-name package))
                     (setf id (remember-recurring ss package))))
          (setf (ss-last-package ss) package
                (ss-last-package-id ss) id)))))

;;; Decoding -----------------------------------------------------------

(defun find-or-ask-package (rs name)
  "The package named NAME, or what a MISSING-PACKAGE restart provides:
a package, or NIL meaning 'make the symbols uninterned'."
  (or (find-package name)
      (restart-case
          (error 'missing-package :name name :offset (ibuf-offset (rs-ibuf rs))
                                  :message (format nil "package ~s does not exist" name))
        (create-package ()
          :report (lambda (s) (format s "Create package ~s (using no other package)." name))
          (make-package name :use '()))
        (use-other-package (package)
          :report "Use another package instead."
          :interactive (lambda ()
                         (format *query-io* "Package name: ")
                         (list (read-line *query-io*)))
          (or (find-package package)
              (error 'missing-package :name package :offset (ibuf-offset (rs-ibuf rs))
                                      :message "the replacement package does not exist either")))
        (make-uninterned ()
          :report "Restore its symbols as uninterned symbols."
          nil))))

(defun read-package (rs)
  (let ((name (read-string-payload rs)))
    (register-always rs (find-or-ask-package rs name))))

(defun find-or-intern (rs name length package)
  "The symbol named by the first LENGTH characters of NAME (a scratch string)
in PACKAGE, interning it only when allowed."
  (multiple-value-bind (symbol status) (find-symbol-prefix name length package)
    (if status
        symbol
        (let ((name (subseq name 0 length)))
          (if (and (rs-intern-symbols rs) (not (package-locked-p package)))
              (intern name package)
              (restart-case
                  (error 'missing-symbol :name name :package package
                                         :offset (ibuf-offset (rs-ibuf rs))
                                         :message (if (rs-intern-symbols rs)
                                                      "symbol not present and its package is locked"
                                                      "symbol not present and interning is off"))
                (intern-anyway ()
                  :report "Intern the symbol."
                  (intern name package))
                (make-uninterned ()
                  :report "Restore it as an uninterned symbol."
                  (make-symbol (base-string-if-possible name)))))))))

(defun read-keyword (rs)
  (multiple-value-bind (name length) (read-name rs)
    (register-always rs (find-or-intern rs name length #.(find-package "KEYWORD")))))

(defun read-symbol (rs)
  (let ((package (read-object rs)))
    (unless (or (packagep package) (null package))
      (restore-invalid rs (format nil "a symbol's package is a ~s" (type-of package))
                       "a package"))
    (multiple-value-bind (name length) (read-name rs)
      (register-always rs (if package
                              (find-or-intern rs name length package)
                              (make-symbol (base-string-if-possible
                                            (subseq name 0 length))))))))

(defun read-uninterned-symbol (rs)
  "Read an uninterned symbol whose tag was just consumed.  Its name is a
base string when its characters allow, as the names SBCL makes are: a short
ASCII name the window holds is read straight into one."
  (register-always rs (make-symbol (or (take-window-string rs #'window-ascii-string)
                                       (base-string-if-possible
                                        (read-string-payload rs))))))

(defun base-string-if-possible (string)
  "STRING, a fresh simple string, or a base string of its characters when
they are all base characters."
  (if (every (lambda (c) (typep c 'base-char)) string)
      (coerce string 'simple-base-string)
      string))
