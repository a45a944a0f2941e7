;;;; `make check-layers': every file of the system "binstore" compiles with
;;;; only what binstore.asd says it depends on.
;;;;
;;;; ASDF compiles a whole system in one compilation unit and in one image,
;;;; so a file that uses a function, macro, variable or type of a file it
;;;; does not depend on in binstore.asd still builds: the use is resolved by
;;;; whatever happened to be compiled first, or at the end of the unit.
;;;; This check takes binstore.asd at its word instead.  For each file, in an
;;;; order the declared dependencies allow, a fresh SBCL (no ASDF, no init
;;;; files, SB-POSIX required) loads the fasls of exactly the files it
;;;; depends on, directly or not (a file's :DEPENDS-ON siblings, and every
;;;; file of the modules its modules depend on), compiles the file into a
;;;; temporary directory (tools/compile-alone.lisp), and reports what the
;;;; compiler said.  Each file is compiled once; its fasl serves the files
;;;; after it.  Two files are compiled at a time.
;;;;
;;;; It fails on an undefined function, macro, variable or type, a full
;;;; warning, an error, or a cycle in the declared dependencies, and names
;;;; the file, the undefined name and the file of binstore that defines it.
;;;; As a function declared with an FTYPE proclamation is not undefined to
;;;; the compiler, the image also loads the fasl it compiled and looks for
;;;; functions declared but still not defined: only the files of
;;;; *PROTOCOL-FILES* may declare those (the calls that go up, to the
;;;; engine), and each one must be defined by a file of the system.  Other
;;;; style warnings are shown, not counted.
;;;;
;;;; It also keeps the platform seam: outside the platform module
;;;; (src/platform/), no file's code (comments and strings aside) names a
;;;; symbol of one of SBCL's own packages (SB-SYS, SB-KERNEL, SB-POSIX...),
;;;; so that everything a port to another Lisp must provide lives there.
;;;; The files of binstore/compression are read for that too (not compiled
;;;; alone: they need CFFI).
;;;;
;;;; Usage: sbcl --non-interactive --load tools/check-layers.lisp \
;;;;             --eval '(binstore-layers:check-layers)'
;;;; which exits 0 when every file is clean, 1 otherwise.

(require :asdf)

(defpackage #:binstore-layers
  (:use #:common-lisp)
  (:export #:check-layers #:file-dependencies))

(in-package #:binstore-layers)

(defparameter *root*
  (truename (merge-pathnames "../" (make-pathname :name nil :type nil :version nil
                                                  :defaults *load-truename*)))
  "The checkout this file belongs to.")

(defparameter *worker*
  (merge-pathnames "compile-alone.lisp" (make-pathname :name nil :type nil :version nil
                                                       :defaults *load-truename*))
  "The file each fresh image loads to do its part.")

(defparameter *protocol-files* '("src/core/protocol.lisp")
  "The files that may declare (with an FTYPE proclamation) functions defined
in files above them: the protocol through which lower layers call upward.
Any other file that declares a function it neither defines nor depends on
a definition of fails the check.")

(asdf:load-asd (merge-pathnames "binstore.asd" *root*))

;;; The graph binstore.asd declares -------------------------------------------

(defun files-of (component)
  "The file components of COMPONENT that this Lisp builds (its :IF-FEATURE
holds: SBCL's platform files, not another Lisp's): itself when it is one,
else those of its children, in order."
  (cond ((let ((feature (asdf::component-if-feature component)))
           (and feature (not (uiop:featurep feature))))
         '())
        ((typep component 'asdf:parent-component)
         (loop for child in (asdf:component-children component) append (files-of child)))
        (t (list component))))

(defun sibling (component name)
  "The component NAME that COMPONENT's :DEPENDS-ON names: a sibling."
  (or (and (or (stringp name) (symbolp name))
           (asdf:find-component (asdf:component-parent component) name))
      (error "~A depends on ~S, which is not a component beside it"
             (asdf:component-find-path component) name)))

(defun direct-dependencies (file)
  "The files FILE may use according to binstore.asd, its transitive ones
aside: the files its own :DEPENDS-ON names, and all the files of the modules
that each module enclosing it names in its :DEPENDS-ON."
  (remove-duplicates
   (loop for component = file then (asdf:component-parent component)
         until (typep component 'asdf:system)
         append (loop for name in (asdf:component-sideway-dependencies component)
                      ;; (:FEATURE expression name): a dependency on this
                      ;; Lisp only when the expression holds
                      append (if (and (consp name) (eq (first name) :feature))
                                 (and (uiop:featurep (second name))
                                      (files-of (sibling component (third name))))
                                 (files-of (sibling component name)))))))

(defun relative-name (file)
  "FILE's source, relative to the checkout: src/core/decoder.lisp."
  (enough-namestring (asdf:component-pathname file) *root*))

(defun file-order (system)
  "The files of SYSTEM in an order where each comes after all it depends on,
and a hash table from each file to the list of all files it depends on,
directly or not, in that order.  A cycle signals an error naming it."
  (let ((state (make-hash-table))
        (order '()))
    (labels ((visit (file path)
               (case (gethash file state)
                 (:done)
                 (:visiting
                  (let ((cycle (append (reverse (subseq path 0 (1+ (position file path))))
                                       (list file))))
                    (error "binstore.asd declares a cycle: ~{~A~^ -> ~}"
                           (mapcar #'relative-name cycle))))
                 (t (setf (gethash file state) :visiting)
                    (dolist (dependency (direct-dependencies file))
                      (visit dependency (cons file path)))
                    (setf (gethash file state) :done)
                    (push file order)))))
      (dolist (file (files-of (asdf:find-system system)))
        (visit file '())))
    (setf order (nreverse order))
    (let ((closure (make-hash-table)))
      (dolist (file order)
        (let ((all (make-hash-table)))
          (dolist (dependency (direct-dependencies file))
            (setf (gethash dependency all) t)
            (dolist (indirect (gethash dependency closure))
              (setf (gethash indirect all) t)))
          (setf (gethash file closure) (remove-if-not (lambda (f) (gethash f all)) order))))
      (values order closure))))

(defun file-dependencies (&optional (system "binstore"))
  "For reading: an alist from each file of SYSTEM (its relative name) to the
files it depends on according to binstore.asd, directly or not."
  (multiple-value-bind (order closure) (file-order system)
    (loop for file in order
          collect (cons (relative-name file) (mapcar #'relative-name (gethash file closure))))))

;;; Running the fresh images --------------------------------------------------

(defun fasl-for (file directory)
  "Where FILE is compiled to, in DIRECTORY: its relative name made flat."
  (merge-pathnames (concatenate 'string (substitute #\- #\/ (relative-name file)) ".fasl")
                   directory))

(defun start-worker (file dependencies directory)
  "Start a fresh SBCL compiling FILE with the fasls of DEPENDENCIES loaded;
return the process and the files it writes its result and its output to."
  (let* ((fasl (fasl-for file directory))
         (result (make-pathname :type "result" :defaults fasl))
         (log (make-pathname :type "log" :defaults fasl))
         (form (with-standard-io-syntax
                 (format nil "(binstore-compile-alone:compile-alone ~S ~S '~S ~S)"
                         (namestring (asdf:component-pathname file))
                         (namestring fasl)
                         (mapcar (lambda (d) (namestring (fasl-for d directory))) dependencies)
                         (namestring result)))))
    (values (uiop:launch-program
             (list (namestring sb-ext:*runtime-pathname*)
                   "--core" (namestring sb-ext:*core-pathname*)
                   "--noinform" "--non-interactive" "--no-sysinit" "--no-userinit"
                   "--load" (namestring *worker*)
                   "--eval" form)
             :output (namestring log) :error-output :output
             :if-output-exists :supersede)
            result
            log)))

(defun read-result (result log)
  "What a worker found, read from RESULT; when it wrote none, an error
entry quoting its output LOG."
  (or (ignore-errors
       (with-open-file (in result)
         (with-standard-io-syntax
           (let ((*read-eval* nil)) (list (read in))))))
      (list (list (list :error (format nil "the compiling image wrote no result; its output:~%~A"
                                       (ignore-errors (uiop:read-file-string log))))))))

(defun skipped-p (entries)
  "True for what CHECK-FILES found for a file it could not check."
  (eq (first entries) :skipped))

(defun check-files (order closure directory jobs)
  "Compile each file of ORDER alone, JOBS at a time, a file starting once
all it depends on are compiled.  Return a hash table from each file to
what its compilation found, or (:SKIPPED . FILES) when FILES, which it
depends on, wrote no fasl."
  (let ((found (make-hash-table))
        (pending (copy-list order))
        (running '()))
    (loop while (or pending running)
          do ;; reap
             (setf running
                   (remove-if (lambda (run)
                                (destructuring-bind (file process result log) run
                                  (unless (uiop:process-alive-p process)
                                    (uiop:wait-process process)
                                    (setf (gethash file found) (first (read-result result log)))
                                    t)))
                              running))
             ;; skip what cannot be checked
             (setf pending
                   (remove-if (lambda (file)
                                (let ((causes
                                        (loop for d in (gethash file closure)
                                              for (entries done) = (multiple-value-list (gethash d found))
                                              when done
                                                append (cond ((skipped-p entries) (rest entries))
                                                             ((not (probe-file (fasl-for d directory)))
                                                              (list d))))))
                                  (when causes
                                    (setf (gethash file found)
                                          (cons :skipped (remove-duplicates causes)))
                                    t)))
                              pending))
             ;; start what is ready
             (loop
               (let ((ready (and (< (length running) jobs)
                                 (find-if (lambda (file)
                                            (every (lambda (d) (nth-value 1 (gethash d found)))
                                                   (gethash file closure)))
                                          pending))))
                 (unless ready (return))
                 (setf pending (remove ready pending))
                 (multiple-value-bind (process result log)
                     (start-worker ready (gethash ready closure) directory)
                   (push (list ready process result log) running))))
             (cond (running (sleep 0.02))
                   (pending (error "nothing to start, nothing running: ~A is waiting"
                                   (relative-name (first pending))))))
    found))

;;; Naming where an undefined thing is defined --------------------------------

(defun load-compiled (order directory)
  "Load into this image the fasls the check wrote, so that the names the
check found undefined can be looked up.  Errors are ignored: this only
serves the messages."
  (require :sb-posix)
  (require :sb-introspect)
  (let ((*standard-output* (make-broadcast-stream))
        (*error-output* (make-broadcast-stream)))
    (dolist (file order)
      (let ((fasl (fasl-for file directory)))
        (when (probe-file fasl)
          (handler-bind ((warning #'muffle-warning))
            (ignore-errors (load fasl))))))))

(defun find-name (strings)
  "The name (PACKAGE SYMBOL-NAME SETF-P) of a worker's result, or NIL when
its package does not exist here."
  (destructuring-bind (package name setf-p) strings
    (let ((symbol (and (find-package package) (find-symbol name package))))
      (when symbol
        (if setf-p (list 'setf symbol) symbol)))))

(defun defining-files (name order)
  "The files of ORDER that define NAME, in any namespace."
  (let ((paths '()))
    (dolist (type '(:function :macro :generic-function :compiler-macro :setf-expander
                    :variable :constant :type :structure :condition :class))
      (dolist (source (ignore-errors
                       (uiop:symbol-call :sb-introspect :find-definition-sources-by-name
                                         name type)))
        (let ((path (ignore-errors
                     (uiop:symbol-call :sb-introspect :definition-source-pathname source))))
          (when path (pushnew (ignore-errors (truename path)) paths :test #'equal)))))
    (remove-if-not (lambda (file)
                     (member (truename (asdf:component-pathname file)) paths :test #'equal))
                   order)))

(defun name-text (strings)
  (destructuring-bind (package name setf-p) strings
    (format nil (if setf-p "(SETF ~A::~A)" "~A::~A") package name)))

;;; The platform seam ---------------------------------------------------------

(defparameter *platform-directory* "src/platform/"
  "The only directory whose files may name SBCL's internal symbols.")

(defun code-text (text)
  "TEXT, a Lisp source file's contents, with its comments and strings
blanked out (each replaced by spaces, newlines kept), so that what remains
is code: a crude reader that knows ; comments, #| |# comments, strings with
backslash escapes and #\\ character names, which is all binstore uses."
  (let ((out (copy-seq text)) (i 0) (n (length text)))
    (flet ((blank (from to)
             (loop for k from from below (min to n)
                   unless (char= (char out k) #\Newline) do (setf (char out k) #\Space))))
      (loop while (< i n)
            do (let ((c (char text i)))
                 (cond ((and (char= c #\#) (< (1+ i) n) (char= (char text (1+ i)) #\\))
                        (incf i 3))       ; a character: #\x, #\; or #\"
                       ((char= c #\;)
                        (let ((end (or (position #\Newline text :start i) n)))
                          (blank i end) (setf i end)))
                       ((and (char= c #\#) (< (1+ i) n) (char= (char text (1+ i)) #\|))
                        (let ((end (or (search "|#" text :start2 i) n)))
                          (blank i (+ end 2)) (setf i (+ end 2))))
                       ((char= c #\")
                        (let ((k (1+ i)))
                          (loop while (and (< k n) (char/= (char text k) #\"))
                                do (incf k (if (char= (char text k) #\\) 2 1)))
                          (blank i (1+ k)) (setf i (1+ k))))
                       (t (incf i))))))
    out))

(defun sbcl-package-uses (file)
  "A list of (line token) for each place FILE's code names a symbol of one
of SBCL's packages (a token SB-...: or SB-...::)."
  (let* ((text (uiop:read-file-string (asdf:component-pathname file)))
         (code (code-text text))
         (uses '()))
    (loop with line = 1
          for i from 0 below (length code)
          for c = (char code i)
          do (cond ((char= c #\Newline) (incf line))
                   ((and (char-equal c #\s) (< (+ i 3) (length code))
                         (char-equal (char code (1+ i)) #\b)
                         (char= (char code (+ i 2)) #\-)
                         (or (zerop i)
                             (not (or (alphanumericp (char code (1- i)))
                                      (find (char code (1- i)) "-*+%:/")))))
                    (let* ((end (position-if (lambda (ch) (or (find ch " ()'`,#\"")
                                                              (member ch '(#\Newline #\Tab))))
                                             code :start i))
                           (token (subseq code i end)))
                      (when (find #\: token)
                        (push (list line token) uses))))))
    (nreverse uses)))

(defparameter *seam-only-systems* '("binstore/compression")
  "Systems of binstore.asd beside binstore whose files are checked for the
platform seam only: they depend on libraries a fresh image without ASDF
cannot load (CFFI), so they are not compiled alone, but they too name no
symbol of SBCL's packages.")

(defun check-platform-seam (order)
  "Print each use of an SBCL package outside *PLATFORM-DIRECTORY* among the
files of ORDER; return how many there are."
  (let ((count 0))
    (dolist (file order count)
      (let ((name (relative-name file)))
        (unless (eql 0 (search *platform-directory* name))
          (loop for (line token) in (sbcl-package-uses file)
                do (incf count)
                   (format t "~&check-layers: ~A:~D names ~A: SBCL's internals are used only ~
                              through src/platform/~%" name line token)))))))

;;; The check -----------------------------------------------------------------

(defun check-layers (&key (system "binstore") (jobs 2))
  "Run the check on SYSTEM's files (see the top of this file), print what it
found, and exit 0 when every file compiled cleanly with only its declared
dependencies loaded, 1 otherwise."
  (let* ((start (get-internal-real-time))
         (directory (uiop:ensure-directory-pathname
                     (merge-pathnames (format nil "binstore-layers-~36R-~D"
                                              (random (expt 36 8) (make-random-state t))
                                              (sb-unix:unix-getpid))
                                      (uiop:temporary-directory))))
         (failures 0))
    (multiple-value-bind (order closure)
        (handler-case (file-order system)
          (error (e)
            (format *error-output* "~&check-layers: ~A~%" e)
            (uiop:quit 1)))
      (ensure-directories-exist directory)
      (unwind-protect
           (let ((found (check-files order closure directory jobs))
                 (loaded nil)
                 (declared '())         ; (name protocol-file)
                 (defined '()))         ; (name file) for names declared before
             (dolist (file order)
               (let ((entries (gethash file found)))
                 (if (skipped-p entries)
                     (progn
                       (incf failures)
                       (format t "~&check-layers: ~A: not checked, as ~{~A~^ and ~}, which it depends on, ~
                                  did not compile~%"
                               (relative-name file) (mapcar #'relative-name (rest entries))))
                     (dolist (entry entries)
                       (destructuring-bind (kind &rest details) entry
                         (case kind
                           (:undefined
                            (incf failures)
                            (destructuring-bind (what strings) details
                              (unless loaded
                                (load-compiled order directory)
                                (setf loaded t))
                              (let* ((name (find-name strings))
                                     (definers (and name (remove file (defining-files name order)))))
                                (format t "~&check-layers: ~A uses the ~A ~A, ~A~%"
                                        (relative-name file) what (name-text strings)
                                        (cond ((null definers)
                                               (format nil "which no file of ~A defines" system))
                                              ((some (lambda (d) (member file (gethash d closure)))
                                                     definers)
                                               (format nil "defined in ~{~A~^ and ~}, which depends on it: ~
                                                            a call up, to make through ~{~A~^ or ~} ~
                                                            (or move the definition down)"
                                                       (mapcar #'relative-name definers)
                                                       *protocol-files*))
                                              (t
                                               (format nil "defined in ~{~A~^ and ~}, which binstore.asd ~
                                                            does not make it depend on"
                                                       (mapcar #'relative-name definers))))))))
                           ((:warning :error)
                            (incf failures)
                            (format t "~&check-layers: ~A: ~(~A~): ~A~%"
                                    (relative-name file) kind (first details)))
                           (:style-warning
                            (format t "~&check-layers: ~A: style warning (not counted): ~A~%"
                                    (relative-name file) (first details)))
                           (:declares
                            (let ((name (name-text (first details))))
                              (if (member (relative-name file) *protocol-files* :test #'string=)
                                  (push (list name (relative-name file)) declared)
                                  (progn
                                    (incf failures)
                                    (format t "~&check-layers: ~A declares the function ~A, which neither it ~
                                               nor a file it depends on defines: a forward declaration, ~
                                               which only ~{~A~^ or ~} may make~%"
                                            (relative-name file) name *protocol-files*)))))
                           (:defines
                            (push (list (name-text (first details)) (relative-name file)) defined))))))))
             (dolist (declaration (reverse declared))
               (destructuring-bind (name protocol) declaration
                 (let ((definers (loop for (n file) in defined
                                       when (string= n name) collect file)))
                   (if definers
                       (format t "~&check-layers: ~A declares ~A, defined in ~{~A~^ and ~}~%"
                               protocol name definers)
                       (progn
                         (incf failures)
                         (format t "~&check-layers: ~A declares ~A, which no file checked ~
                                    defines~%" protocol name))))))
             (incf failures (check-platform-seam order))
             (let ((others (loop for name in *seam-only-systems*
                                 append (files-of (asdf:find-system name)))))
               (incf failures (check-platform-seam others))
               (format t "~&check-layers: ~D file~:P of ~{~A~^, ~} read for SBCL's packages: ~
                          SB- symbols are named only in src/platform/~%"
                       (length others) *seam-only-systems*))
             (format t "~&check-layers: ~D file~:P of ~A, each compiled alone with what binstore.asd ~
                        says it depends on, in ~,1F s: ~:[~D problem~:P~;clean~*~].~%"
                     (length order) system
                     (/ (- (get-internal-real-time) start) internal-time-units-per-second)
                     (zerop failures) failures)
             (finish-output))
        (uiop:delete-directory-tree directory :validate t :if-does-not-exist :ignore)))
    (uiop:quit (if (zerop failures) 0 1))))
