;;;; Pathnames.
;;;;
;;;;   PATHNAME 0 device directory name type version     a physical pathname
;;;;   PATHNAME 1 host device directory name type version  a logical pathname
;;;;   PATHNAME 2 namestring                             anything else (wild
;;;;                                                     patterns such as "foo*")
;;;; Components are ordinary objects: NIL, strings, keywords, integers and
;;;; lists of those.

(in-package #:binstore)

(defun plain-component-p (x)
  "True for NIL, a string, a keyword, an integer, or a proper (acyclic) list
of strings and keywords."
  (or (null x) (stringp x) (keywordp x) (integerp x)
      (and (consp x)
           (ignore-errors (list-length x))   ; NIL for a circular or dotted list
           (every (lambda (e) (or (stringp e) (keywordp e))) x))))

(defun write-pathname (ss p)
  ;; The reader builds the pathname from complete components, so a directory
  ;; list must not be deferred, however deep the pathname sits.
  (let ((saved (ss-no-defer ss)))
    (setf (ss-no-defer ss) t)
    (unwind-protect (write-pathname-parts ss p)
      (setf (ss-no-defer ss) saved))))

(defun write-pathname-parts (ss p)
  (let ((ob (ss-obuf ss))
        (parts (list (pathname-device p) (pathname-directory p) (pathname-name p)
                     (pathname-type p) (pathname-version p))))
    (write-u8 ob +tag-pathname+)
    (cond ((not (every #'plain-component-p parts))
           (write-u8 ob +pathname-namestring+)
           (write-object ss (namestring p)))
          ((typep p 'logical-pathname)
           (write-u8 ob +pathname-logical+)
           (write-object ss (host-namestring p))
           (dolist (x parts) (write-object ss x)))
          (t
           (write-u8 ob +pathname-physical+)
           (dolist (x parts) (write-object ss x))))))

(defun read-pathname (rs)
  (let ((kind (read-u8 (rs-ibuf rs))))
    (flet ((component ()
             (let ((x (read-object rs)))
               (unless (plain-component-p x)
                 (restore-invalid rs (format nil "a pathname component of type ~s" (type-of x))
                                  "NIL, a string, a keyword, an integer or a list of those"))
               x))
           (build (thunk)
             (handler-case (funcall thunk)
               (error (e)
                 (restore-invalid rs (format nil "cannot make the pathname: ~a" e)
                                  "valid pathname components")))))
      (register
       rs
       (case kind
         (#.+pathname-physical+
          (let* ((device (component)) (directory (component)) (name (component))
                 (type (component)) (version (component)))
            (build (lambda ()
                     (make-pathname :device device :directory directory :name name
                                    :type type :version version)))))
         (#.+pathname-logical+
          (let* ((host (component)) (device (component)) (directory (component))
                 (name (component)) (type (component)) (version (component)))
            (build (lambda ()
                     (make-pathname :host host :device device :directory directory
                                    :name name :type type :version version)))))
         (#.+pathname-namestring+
          (let ((namestring (read-object rs)))
            (unless (stringp namestring)
              (restore-invalid rs "a pathname namestring that is not a string" "a string"))
            (build (lambda () (parse-namestring namestring)))))
         (t (restore-invalid rs (format nil "pathname kind ~d" kind) "0, 1 or 2")))))))
