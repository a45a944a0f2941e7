;;;; The extension points (src/extensions.lisp): slot selection and
;;;; transformation, construction and the after-restore hook, schema
;;;; evolution, and user codecs, with identity and cycles through them.

(in-package #:binstore-tests)

(def-suite extensions :in all
  :description "Extension points: stored slots, construction, hooks, upgrades, user codecs.")
(in-suite extensions)

;;; A class with a cache, a lock and a secret ----------------------------------

(defclass ext-connection ()
  ((host :initarg :host :accessor ext-host)
   (port :initarg :port :accessor ext-port)
   (password :initarg :password :accessor ext-password)
   (cache :initarg :cache :accessor ext-cache)
   (lock :initform (list :fresh-lock) :accessor ext-lock)))

(defmethod binstore:stored-slots ((object ext-connection))
  ;; the cache and the lock stay out; the password is stored reversed
  `(host port (password :store ,#'reverse :restore ,#'reverse)))

(test stored-slots-leave-out-and-transform
  (let* ((c (make-instance 'ext-connection :host "db.example" :port 5432 :password "hunter2"
                                           :cache (make-string 1000 :initial-element #\Z)))
         (bytes (binstore:store nil c)))
    (setf (ext-lock c) (list :held-lock))
    ;; the cache is not written, nor the password as it is
    (is (null (search (map '(vector (unsigned-byte 8)) #'char-code "ZZZZ") bytes)))
    (is (null (search (map '(vector (unsigned-byte 8)) #'char-code "hunter2") bytes)))
    (is (search (map '(vector (unsigned-byte 8)) #'char-code "2retnuh") bytes))
    (let ((back (binstore:restore bytes)))
      (is (equal "db.example" (ext-host back)))
      (is (= 5432 (ext-port back)))
      (is (equal "hunter2" (ext-password back)))
      (is (not (slot-boundp back 'cache)))
      ;; a slot left out gets its initform, as a slot a class gains
      (is (equal '(:fresh-lock) (ext-lock back))))))

(defclass ext-bad-slots () ((a :initform 1)))
(defmethod binstore:stored-slots ((object ext-bad-slots)) '(a no-such-slot))

(test stored-slots-naming-no-slot
  (signals binstore:store-error (binstore:store nil (make-instance 'ext-bad-slots))))

(defstruct ext-point x y (memo nil))
(defmethod binstore:stored-slots ((object ext-point)) '(x y))

(test stored-slots-of-a-structure
  (let* ((p (make-ext-point :x 1 :y 2 :memo (make-list 100 :initial-element :memo)))
         (bytes (binstore:store nil p))
         (back (binstore:restore bytes)))
    ;; the memo's 100 elements would take 100 bytes more
    (is (< (length bytes) 60))
    (is (= 1 (ext-point-x back)))
    (is (= 2 (ext-point-y back)))
    ;; a structure's slot left out keeps what ALLOCATE-INSTANCE gave it
    ;; (on CLISP no value: reading it signals UNBOUND-SLOT)
    (is (not (consp (handler-case (ext-point-memo back)
                      (unbound-slot () nil)))))))

;;; Construction and the hook after restore -------------------------------------

(defvar *ext-log* '())

(defclass ext-node ()
  ((name :initarg :name :accessor ext-node-name)
   (next :initarg :next :accessor ext-node-next)
   (derived :accessor ext-node-derived)))

(defmethod binstore:stored-slots ((object ext-node)) '(name next))
(defmethod binstore:restore-construction ((object ext-node)) :initialize)

(defmethod initialize-instance :after ((node ext-node) &key)
  ;; derived from the stored slots: with :INITIALIZE it runs on restore too,
  ;; once the whole record is complete
  (when (and (slot-boundp node 'next) (slot-boundp (ext-node-next node) 'name))
    (setf (ext-node-derived node) (ext-node-name (ext-node-next node)))))

(defmethod binstore:after-restore ((node ext-node))
  (push (list (ext-node-name node) (ext-node-derived node)
              (ext-node-name (ext-node-next (ext-node-next node))))
        *ext-log*))

(test construction-and-after-restore-with-a-cycle
  (let* ((a (make-instance 'ext-node :name "a"))
         (b (make-instance 'ext-node :name "b" :next a)))
    (setf (ext-node-next a) b)
    (let* ((*ext-log* '())
           (back (binstore:restore (binstore:store nil a))))
      (is (eq back (ext-node-next (ext-node-next back))))
      (is (equal "b" (ext-node-derived back)))
      (is (equal "a" (ext-node-derived (ext-node-next back))))
      ;; called once per instance, oldest first, every object complete
      (is (equal '(("a" "b" "a") ("b" "a" "b")) (reverse *ext-log*))))))

(defstruct ext-struct-initialize a)
(defmethod binstore:restore-construction ((object ext-struct-initialize)) :initialize)

(test initialize-refused-for-a-structure
  (signals binstore:invalid-input
    (binstore:restore (binstore:store nil (make-ext-struct-initialize :a 1)))))

;;; Schema evolution -------------------------------------------------------------

(defun define-ext-person (slots)
  (eval `(defclass ext-person () ,(mapcar (lambda (s) `(,s :initarg ,(intern (string s) :keyword)))
                                          slots))))

(defun ext-upgrade (object values)
  ;; FULL-NAME became FIRST and LAST; AGE kept; NICK dropped
  (let ((full (getf values 'full-name)))
    (when full
      (let ((space (position #\Space full)))
        (setf (slot-value object 'first) (subseq full 0 space)
              (slot-value object 'last) (subseq full (1+ space)))))
    (setf (slot-value object 'age) (getf values 'age))
    (setf (slot-value object 'self) (getf values 'self))))

(test upgrade-instance-for-a-renamed-slot
  (define-ext-person '(full-name age nick self))
  (let* ((old (make-instance 'ext-person :full-name "Ada Lovelace" :age 36 :nick "A")))
    (setf (slot-value old 'self) old)
    (let ((bytes (binstore:store nil (list old old))))
      (define-ext-person '(first last age self))
      (let ((method (eval `(defmethod binstore:upgrade-instance ((object ext-person) values)
                             (ext-upgrade object values)))))
        (unwind-protect
             (destructuring-bind (p q) (binstore:restore bytes)
               (is (eq p q))
               (is (equal "Ada" (slot-value p 'first)))
               (is (equal "Lovelace" (slot-value p 'last)))
               (is (= 36 (slot-value p 'age)))
               ;; the instance had its id before its values were read
               (is (eq p (slot-value p 'self))))
          (remove-method #'binstore:upgrade-instance method)))
      ;; without the method, the missing slot is the restarts' business
      (signals binstore:missing-slot (binstore:restore bytes)))))

;;; User codecs ------------------------------------------------------------------

(defstruct (ext-handle (:constructor make-ext-handle (path function)))
  path function)                        ; a function: binstore refuses it

(defun open-ext-handle (path)
  (make-ext-handle path (lambda () path)))

(defmacro with-codecs ((&rest names) &body body)
  `(unwind-protect (progn ,@body)
     (dolist (name ',names) (binstore:unregister-codec name))))

(test codec-for-a-type-binstore-refuses
  (signals binstore:unstorable-object (binstore:store nil (open-ext-handle "/dev/null")))
  (with-codecs (ext-handle)
    (binstore:define-codec ext-handle (ext-handle)
      :encode #'ext-handle-path
      :decode #'open-ext-handle)
    (let* ((h (open-ext-handle "/tmp/x"))
           (back (binstore:restore (binstore:store nil (list h h "after")))))
      (is (eq (first back) (second back)))
      (is (equal "/tmp/x" (ext-handle-path (first back))))
      (is (equal "/tmp/x" (funcall (ext-handle-function (first back)))))
      (is (equal "after" (third back))))))

(test codec-for-functions
  (with-codecs (ext-named-function)
    (binstore:define-codec ext-named-function (function)
      :encode (lambda (f) (if (eq f #'car) 'car 'cdr))
      :decode #'symbol-function)
    (let ((back (binstore:restore (binstore:store nil (vector #'car #'cdr #'car)))))
      (is (eq #'car (svref back 0)))
      (is (eq #'cdr (svref back 1)))
      (is (eq #'car (svref back 2))))))

(defstruct ext-ring label next)

(test codec-with-a-cycle
  (with-codecs (ext-ring)
    (binstore:define-codec ext-ring (ext-ring)
      :encode (lambda (r) (list (ext-ring-label r) (ext-ring-next r)))
      :allocate (lambda () (make-ext-ring))
      :fill (lambda (r value)
              (setf (ext-ring-label r) (first value) (ext-ring-next r) (second value))))
    (let* ((a (make-ext-ring :label "a"))
           (b (make-ext-ring :label "b" :next a)))
      (setf (ext-ring-next a) b)
      (dolist (options '(() (:track-references t :support-shared-list-structures nil)))
        (let ((back (binstore:restore (apply #'binstore:store nil (list a b) options))))
          (is (eq (first back) (ext-ring-next (second back))))
          (is (eq (second back) (ext-ring-next (first back))))
          (is (equal '("a" "b") (mapcar #'ext-ring-label back))))))))

(test codec-that-decodes-refuses-a-cycle
  (with-codecs (ext-ring-decoded)
    (binstore:define-codec ext-ring-decoded (ext-ring)
      :encode (lambda (r) (list (ext-ring-label r) (ext-ring-next r)))
      :decode (lambda (value) (make-ext-ring :label (first value) :next (second value))))
    (let ((a (make-ext-ring :label "a")))
      (setf (ext-ring-next a) a)
      (signals binstore:store-error (binstore:store nil a))
      (signals binstore:store-error (binstore:store nil a :track-references nil)))))

(test missing-codec-and-its-restarts
  (let ((bytes (with-codecs (ext-handle)
                 (binstore:define-codec ext-handle (ext-handle)
                   :encode #'ext-handle-path :decode #'open-ext-handle)
                 (binstore:store nil (list (open-ext-handle "/a") 42)))))
    (let ((condition (handler-case (binstore:restore bytes)
                       (binstore:missing-codec (c) c))))
      (is (typep condition 'binstore:missing-codec))
      (is (eq 'ext-handle (binstore:missing-codec-name condition))))
    (is (equal '(nil 42)
               (handler-bind ((binstore:missing-codec
                                (lambda (c) (declare (ignore c))
                                  (invoke-restart 'binstore:skip-codec))))
                 (binstore:restore bytes))))
    (with-codecs (ext-other)
      (binstore:define-codec ext-other (ext-handle)
        :encode #'ext-handle-path :decode (lambda (path) (list :reopened path)))
      (is (equal '((:reopened "/a") 42)
                 (handler-bind ((binstore:missing-codec
                                  (lambda (c) (declare (ignore c))
                                    (invoke-restart 'binstore:use-other-codec 'ext-other))))
                   (binstore:restore bytes)))))))

(test codec-objects-explained-and-read-by-the-reference-decoder
  (with-codecs (ext-ring)
    (binstore:define-codec ext-ring (ext-ring)
      :encode (lambda (r) (list (ext-ring-label r) (ext-ring-next r)))
      :allocate (lambda () (make-ext-ring))
      :fill (lambda (r value)
              (setf (ext-ring-label r) (first value) (ext-ring-next r) (second value))))
    (let* ((a (make-ext-ring :label "a")))
      (setf (ext-ring-next a) a)
      (let* ((bytes (binstore:store nil a))
             (back (first (binstore::reference-restore bytes)))
             (text (with-output-to-string (s) (binstore:explain bytes :stream s))))
        (is (eq back (ext-ring-next back)))
        (is (equal "a" (ext-ring-label back)))
        (is (search "codec" text))))))

;;; Shared dictionaries -----------------------------------------------------------

(defstruct ext-message-body id text)

(defun ext-dictionary ()
  (binstore:make-dictionary (list :get :put :user (find-class 'ext-message-body) "ok")))

(test dictionary-makes-small-messages-smaller
  (let* ((dictionary (ext-dictionary))
         ;; the dictionary's own "ok": ABCL does not make two literals one
         (ok (svref (binstore::dictionary-entries dictionary) 4))
         (message (list :get :user (make-ext-message-body :id 42 :text ok) ok))
         (plain (binstore:store nil message))
         (small (binstore:store nil message :dictionary dictionary)))
    (is (<= (* 3 (length small)) (length plain)) "~d bytes with the dictionary, ~d without"
        (length small) (length plain))
    (let ((back (binstore:restore small :dictionary dictionary)))
      (is (equal '(:get :user) (subseq back 0 2)))
      (is (= 42 (ext-message-body-id (third back))))
      (is (eq (fourth back) (svref (binstore::dictionary-entries dictionary) 4))))
    (let ((binstore:*dictionary* dictionary))
      (is (= 42 (ext-message-body-id (third (binstore:restore (binstore:store nil message))))))))
  ;; without any tracking the entries are still referred to
  (let* ((dictionary (ext-dictionary))
         (message (list :put :put (make-ext-message-body :id 1 :text "x"))))
    (is (equalp message (binstore:restore (binstore:store nil message :dictionary dictionary
                                                                      :track-references nil)
                                          :dictionary dictionary)))))

(test dictionary-mismatch-is-refused
  (let* ((dictionary (ext-dictionary))
         (other (binstore:make-dictionary (list :get :put :users)))
         (bytes (binstore:store nil (list :get 1) :dictionary dictionary)))
    (signals binstore:dictionary-mismatch (binstore:restore bytes))
    (signals binstore:dictionary-mismatch (binstore:restore bytes :dictionary other))
    (signals binstore:dictionary-mismatch (first (binstore::reference-restore bytes)))
    (is (search "dictionary entry"
                (with-output-to-string (s) (binstore:explain bytes :stream s))))))

(test dictionary-entries-checked
  (signals binstore:store-error (binstore:make-dictionary (list :a :a)))
  (signals binstore:store-error (binstore:make-dictionary (list (make-symbol "X"))))
  (signals binstore:store-error (binstore:make-dictionary (list 42))))

;;; Progress -----------------------------------------------------------------------

(test progress-reports-end-with-the-bytes
  (let* ((data (loop for i below 20000 collect (format nil "item ~d" i)))
         (reports '())
         (lock (make-test-lock)))
    (flet ((report (done total)
             (with-test-lock (lock) (push (list done total) reports))))
      (let ((bytes (binstore:store nil data :progress #'report)))
        ;; the last report, made when the store has finished, has every byte
        (is (equal (list (length bytes) nil) (first reports)))
        (is (every (lambda (r) (<= (first r) (length bytes))) reports))
        (setf reports '())
        (is (equal data (binstore:restore bytes :progress #'report)))
        (is (equal (list (length bytes) (length bytes)) (first reports)))
        (setf reports '())
        (let ((count 0))
          (binstore:map-stored-objects (lambda (x) (declare (ignore x)) (incf count)) bytes
                                       :progress #'report)
          (is (= 1 count)))
        (is (equal (list (length bytes) (length bytes)) (first reports)))))))

(test progress-line-and-errors
  (let ((text (let ((*error-output* (make-string-output-stream)))
                (binstore:store nil (list 1 2 3) :progress t)
                (get-output-stream-string *error-output*))))
    (is (search "binstore: stored" text)))
  (signals binstore:store-error
    (binstore:store nil (list 1 2 3)
                    :progress (lambda (done total)
                                (declare (ignore done total))
                                (error 'binstore:store-error :message "from the report")))))
