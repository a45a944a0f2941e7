;;;; Transactions on a persistent store, and the roots they read and write.
;;;;
;;;; A transaction holds the store's lock from its start to its end:
;;;; shared when read-only, exclusive otherwise.  So the roots it sees are
;;;; one committed state, which no other process or thread changes meanwhile,
;;;; and a commit is the only writer of the file.  A read-write transaction
;;;; works on its own copy of the root table, restored from the committed
;;;; bytes: whatever it changes, in the table or inside the roots, reaches
;;;; the file only by its commit, and is dropped by its abort.
;;;;
;;;; The transactions a thread is inside are in *TRANSACTIONS*, a special
;;;; variable, so each thread has its own: a root is looked up in the
;;;; innermost transaction on that store, nesting is seen before the lock is
;;;; waited for (a second lock on the same file would wait for the first
;;;; forever), and threads need no other coordination than the file lock.

(in-package #:binstore)

(defstruct (transaction (:constructor make-transaction
                            (store read-only table snapshot holder))
                        (:copier nil) (:predicate nil))
  "One transaction on STORE: READ-ONLY or not, the root TABLE it reads and
writes, the SNAPSHOT it began from, the HOLDER of the descriptor it
commits through (see CALL-WITH-STORE-FILE), and whether it is still OPEN."
  (store nil :type persistent-store :read-only t)
  (read-only nil :read-only t)
  (table nil :type hash-table :read-only t)
  (snapshot nil :type snapshot :read-only t)
  (holder nil :type cons :read-only t)
  (open t))

(defvar *transactions* '()
  "The transactions the current thread is inside, innermost first.")

(defun misuse (store control &rest arguments)
  "Signal TRANSACTION-ERROR about STORE: CONTROL applied to ARGUMENTS says
what was done wrong."
  (error 'transaction-error :place (persistent-store-place store)
                            :message (apply #'format nil control arguments)))

(defun check-open (store)
  "Signal TRANSACTION-ERROR unless STORE (a PERSISTENT-STORE) is open."
  (unless (persistent-store-p store)
    (error 'transaction-error :place store
                              :message (format nil "~a is not a persistent store" (brief store))))
  (unless (persistent-store-open store)
    (misuse store "the store is closed")))

(defun current-transaction (store operation &key write)
  "The open transaction of this thread on STORE, for OPERATION (a name, for
the message); when WRITE, it must be a read-write one.  Signals
TRANSACTION-ERROR when there is none, or it is read-only and WRITE."
  (check-open store)
  (let ((transaction (find store *transactions* :key #'transaction-store)))
    (unless (and transaction (transaction-open transaction))
      (misuse store "~(~a~) outside a transaction" operation))
    (when (and write (transaction-read-only transaction))
      (misuse store "~(~a~) in a read-only transaction" operation))
    transaction))

(defun finish-transaction (transaction)
  "End TRANSACTION: a read-write one commits its root table (writing the
file only when its bytes differ from the state it began from)."
  (unless (transaction-read-only transaction)
    (let ((store (transaction-store transaction)))
      (commit-payload store (transaction-snapshot transaction)
                      (serialize-roots (transaction-table transaction))
                      (transaction-holder transaction))))
  (setf (transaction-open transaction) nil))

(defun call-with-transaction (store read-only fn)
  "Run FN, of no arguments, in a transaction on STORE (read-only when
READ-ONLY or when STORE is); see WITH-TRANSACTION."
  (check-open store)
  (let ((read-only (or read-only (persistent-store-read-only store)))
        (lock-file (persistent-store-lock-file store)))
    (let ((outer (find lock-file *transactions*
                       :key (lambda (transaction)
                              (persistent-store-lock-file (transaction-store transaction)))
                       :test #'string=)))
      (when outer
        (if (eq (transaction-store outer) store)
            (misuse store "a transaction was begun inside a transaction on the same store")
            (misuse store "a transaction was begun inside a transaction on another store ~
                           of the same file, ~a (it would wait for its own lock)" lock-file))))
    (call-with-store-lock
     lock-file (if read-only :shared :exclusive) (persistent-store-place store)
     (lambda ()
       (call-with-store-file store (lambda (holder) (transact store read-only holder fn)))))))

(defun transact (store read-only holder fn)
  "CALL-WITH-TRANSACTION's work once the lock is held: load the state
through HOLDER (see CALL-WITH-STORE-FILE), run FN, commit."
  (let* ((snapshot (load-snapshot store holder))
         (place (persistent-store-place store))
         (table (if read-only
                    (snapshot-shared-roots snapshot place)
                    (deserialize-roots (snapshot-payload snapshot) place
                                       (snapshot-offset snapshot))))
         (transaction (make-transaction store read-only table snapshot holder))
         (*transactions* (cons transaction *transactions*)))
    (unwind-protect
         ;; COMMIT-TRANSACTION and ABORT-TRANSACTION throw to the
         ;; transaction itself: NIL from here, the body's values otherwise
         (catch transaction
           (multiple-value-prog1 (funcall fn)
             (finish-transaction transaction)))
      (setf (transaction-open transaction) nil))))

(defmacro with-transaction ((store &key read-only) &body body)
  "Run BODY in a transaction on STORE, a PERSISTENT-STORE, and return its
values.  BODY sees one committed state of the roots (ROOT, ROOT-KEYS)
which no other process or thread changes while it runs: a read-only
transaction (READ-ONLY true, or a store opened read-only) holds a shared
lock on the store, others an exclusive one, waiting as long as it takes.

When BODY returns, the transaction commits: its roots, stored as one
object graph (identity and sharing between roots kept), replace the file
atomically, unless their bytes equal the file's, when nothing is written.
When BODY leaves by a non-local exit (an error, a THROW, a RETURN-FROM),
the transaction aborts: the file is untouched.  COMMIT-TRANSACTION and
ABORT-TRANSACTION end it early; WITH-TRANSACTION then returns NIL.

A transaction inside another on the same store (or on another store of
the same file) signals TRANSACTION-ERROR.  A failed commit (a full disk)
signals, and leaves the file as it was."
  (let ((function (gensym "TRANSACTION-BODY")))
    `(flet ((,function () ,@body))
       (declare (dynamic-extent #',function))
       (call-with-transaction ,store ,read-only #',function))))

(defun commit-transaction (store)
  "Commit the current transaction on STORE now and leave its
WITH-TRANSACTION, which returns NIL.  In a read-only transaction it just
ends it.  Outside a transaction it signals TRANSACTION-ERROR."
  (let ((transaction (current-transaction store 'commit-transaction)))
    (finish-transaction transaction)
    (throw transaction nil)))

(defun abort-transaction (store)
  "Abort the current transaction on STORE now, writing nothing, and leave
its WITH-TRANSACTION, which returns NIL.  Outside a transaction it signals
TRANSACTION-ERROR."
  (let ((transaction (current-transaction store 'abort-transaction)))
    (setf (transaction-open transaction) nil)
    (throw transaction nil)))

;;; Roots --------------------------------------------------------------------

(defun root (store key &optional default)
  "The root named KEY (compared with EQUAL) in the current transaction on
STORE, and T; or DEFAULT and NIL when there is none.  In a read-only
transaction the value may be shared with later read-only transactions:
do not modify it.  Outside a transaction it signals TRANSACTION-ERROR."
  (multiple-value-bind (value found)
      (gethash key (transaction-table (current-transaction store 'root)))
    (if found (values value t) (values default nil))))

(defun (setf root) (value store key &optional default)
  "Make VALUE, any value STORE can store, the root named KEY in the current
transaction on STORE (committed with it); return VALUE.  DEFAULT is
ignored: it is there so that (INCF (ROOT STORE KEY 0)) works.  In a
read-only transaction, or outside one, it signals TRANSACTION-ERROR."
  (declare (ignore default))
  (setf (gethash key (transaction-table (current-transaction store '(setf root) :write t)))
        value))

(defun root-keys (store)
  "A fresh list of the keys of every root in the current transaction on
STORE, in no particular order.  Outside a transaction it signals
TRANSACTION-ERROR."
  (loop for key being the hash-keys of (transaction-table (current-transaction store 'root-keys))
        collect key))

(defun delete-root (store key)
  "Remove the root named KEY from the current transaction on STORE; true
when there was one.  In a read-only transaction, or outside one, it
signals TRANSACTION-ERROR."
  (remhash key (transaction-table (current-transaction store 'delete-root :write t))))

(defun close-store (store)
  "Close STORE: it forgets the state it kept, and any later transaction on
it signals TRANSACTION-ERROR.  Nothing is written (commits wrote already);
closing a closed store does nothing.  Inside a transaction on STORE it
signals TRANSACTION-ERROR."
  (when (and (persistent-store-p store)
             (find store *transactions* :key #'transaction-store))
    (misuse store "close-store inside a transaction on the store"))
  (when (persistent-store-open store)
    (setf (persistent-store-open store) nil
          (persistent-store-snapshot store) nil)
    (release-kept-file (persistent-store-kept store)))
  nil)

(defmacro with-store ((store path &rest options) &body body)
  "Bind STORE to (OPEN-STORE PATH . OPTIONS) around BODY, closing it however
BODY exits, and return BODY's values."
  `(let ((,store (open-store ,path ,@options)))
     (unwind-protect (progn ,@body)
       (close-store ,store))))
