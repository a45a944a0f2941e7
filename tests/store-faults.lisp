;;;; Fault injection for the persistent store: writer processes killed with
;;;; SIGKILL at random moments, and processes racing for one counter.
;;;;
;;;; The writers are forked from this image (fork(2): a copy of it, started
;;;; at once), each opens the store afresh and commits states 1, 2, 3 ...
;;;; of a counter, each state with a blob whose size and contents follow
;;;; from the counter, so that a mix of two states cannot pass for one.
;;;; After each commit returns, the writer appends the counter's value and
;;;; a newline to an acknowledgement file: a value there is a commit the
;;;; writer was told is done.  The parent kills the writer after a random
;;;; delay, waits for it, and checks, from a store opened afresh:
;;;;   - the file restores (no STORE-CORRUPTED, no other error);
;;;;   - to exactly one committed state: the blob and the square are the
;;;;     ones of the counter;
;;;;   - no commit is lost: the counter is at least the last value known
;;;;     committed (acknowledged, or checked after the kill before), and
;;;;     at most one more (the commit under way when the kill came may have
;;;;     renamed its file before its acknowledgement was written).
;;;; These hold for any timing of the kills; the random delays only make
;;;; the kills land at many different points of a commit.  The kill of a
;;;; process leaves the operating system's cache intact, so :NONE and
;;;; :FSYNC must both pass; what :FSYNC adds (surviving a power cut) cannot
;;;; be shown by killing processes.
;;;;
;;;; The children leave with EXIT-PROCESS-NOW (_exit semantics), so they
;;;; never run this image's unwinding, exit hooks or stream flushing.
;;;; `make soak' runs RUN-STORE-SOAK: 1,000 kills and 4 processes x 500
;;;; increments; the test suite runs a smaller number of kills.

(in-package #:binstore-tests)

(defun fork-child (thunk)
  "Fork a child process that calls THUNK and ends with exit status 0 when it
returns, 1 when it signals (after printing the condition to its standard
error); return the child's process id in the parent."
  (finish-output *standard-output*)
  (finish-output *error-output*)
  (multiple-value-bind (pid errno) (binstore::system-fork)
    (cond ((null pid)
           (error "fork failed: ~a" (binstore::errno-text errno)))
          ((zerop pid)
           (binstore::exit-process-now
            (handler-case (progn (funcall thunk) 0)
              (serious-condition (condition)
                (ignore-errors
                 (format *error-output* "~&store child ~d: ~a~%" (binstore::process-id) condition)
                 (finish-output *error-output*))
                1))))
          (t pid))))

(defun wait-child (pid)
  "Wait for the child PID to end: :EXITED and its status, or :SIGNALLED and
the signal."
  (multiple-value-bind (how value) (binstore::system-wait-process pid)
    (unless how
      (error "waitpid ~d failed: ~a" pid (binstore::errno-text value)))
    (values how value)))

;;; The states a writer commits

(defun soak-blob (n)
  "The blob of state N: its length (1,000 to 20,999 characters) and its
letter both depend on N."
  (make-string (+ 1000 (mod (* n 7919) 20000))
               :initial-element (code-char (+ (char-code #\a) (mod n 26)))))

(defun commit-next-state (store)
  "Commit the state after STORE's current one in one transaction; return
its counter."
  (binstore:with-transaction (store)
    (let ((n (1+ (binstore:root store :counter 0))))
      (setf (binstore:root store :counter) n
            (binstore:root store :blob) (soak-blob n)
            (binstore:root store :square) (* n n))
      n)))

(defun run-writer (path ack-path durability &optional count)
  "The body of a writer process: commit the next state of the store PATH,
COUNT times (forever when NIL), appending each committed counter value
to the file ACK-PATH after its commit returned."
  (binstore:with-store (store path :durability durability)
    (with-open-file (ack ack-path :direction :output :if-exists :append
                                  :if-does-not-exist :create)
      (loop for i from 0
            until (and count (>= i count))
            do (format ack "~d~%" (commit-next-state store))
               (finish-output ack)))))

(defun last-acknowledged (ack-path)
  "The last value in the acknowledgement file ACK-PATH on a complete line
\(a line the kill cut short does not count), or NIL."
  (let* ((text (with-open-file (in ack-path :if-does-not-exist nil)
                 (if in
                     (let ((text (make-string (file-length in))))
                       (subseq text 0 (read-sequence text in)))
                     "")))
         (end (position #\Newline text :from-end t)))
    (and end
         (parse-integer text :start (1+ (or (position #\Newline text :end end :from-end t) -1))
                             :end end))))

(defun read-store-state (path)
  "The state of the store PATH, read by a store opened afresh: its counter
\(0 when no state was committed), and NIL, or a string saying why the
state is not exactly one committed state."
  (binstore:with-store (store path)
    (binstore:with-transaction (store :read-only t)
      (let ((n (binstore:root store :counter 0)))
        (values n
                (cond ((zerop n)
                       (and (binstore:root-keys store) "roots without a counter"))
                      ((not (equal (binstore:root store :blob) (soak-blob n)))
                       (format nil "the blob is not the one of state ~d" n))
                      ((not (eql (binstore:root store :square) (* n n)))
                       (format nil "the square is not the one of state ~d" n))))))))

(defun remove-temporary-files (directory)
  "Delete the temporary files killed writers left in DIRECTORY; return how
many there were."
  (let ((names (temporary-files directory)))
    (dolist (name names)
      (delete-file (merge-pathnames name directory)))
    (length names)))

(defun run-kills (directory kills &key (max-delay-ms 40) (random-state (make-random-state t)))
  "Kill KILLS writer processes of a store in DIRECTORY, each after a random
delay of up to MAX-DELAY-MS milliseconds, alternating :FSYNC and :NONE, and
check the store after each (see the file's comment).  Then let one writer
commit 5 states and end normally, which must advance the counter by
exactly 5.  Return a list of failures (strings; empty when every check
held), the number of states committed, and the number of temporary files
the killed writers left (which are never read, and are deleted here)."
  (let ((path (merge-pathnames "soak.store" directory))
        (ack-path (merge-pathnames "soak.ack" directory))
        (failures '())
        (previous 0)
        (leftovers 0))
    (flet ((check (what)
             (multiple-value-bind (n problem)
                 (handler-case (read-store-state path)
                   (error (condition) (values nil (princ-to-string condition))))
               ;; KNOWN: the last state known committed, checked after the
               ;; last kill or acknowledged since.  The writer killed now
               ;; may have committed one state more without acknowledging
               ;; it, never two: it acknowledges each before the next.
               (let ((known (max previous (or (last-acknowledged ack-path) 0))))
                 (cond (problem
                        (push (format nil "~a: ~a" what problem) failures))
                       ((< n known)
                        (push (format nil "~a: state ~d, but ~d was committed before"
                                      what n known)
                              failures))
                       ((> n (1+ known))
                        (push (format nil "~a: state ~d, more than one past the ~d known committed"
                                      what n known)
                              failures)))
                 (when n (setf previous n))))))
      (dotimes (i kills)
        (let* ((durability (if (evenp i) :fsync :none))
               (pid (fork-child (lambda () (run-writer path ack-path durability))))
               (delay (random (* 1000 max-delay-ms) random-state)))
          (sleep (/ delay 1000000))
          (binstore::system-kill pid binstore::+sigkill+)
          (multiple-value-bind (how value) (wait-child pid)
            (unless (and (eq how :signalled) (eql value binstore::+sigkill+))
              (push (format nil "kill ~d: the writer ended by itself (~(~a~) ~a) before it was killed"
                            i how value)
                    failures)))
          (incf leftovers (remove-temporary-files directory))
          (check (format nil "after kill ~d (~(~a~), ~d us)" i durability delay))))
      ;; the store still works after every kill: one writer to its end
      (let ((before previous)
            (pid (fork-child (lambda () (run-writer path ack-path :fsync 5)))))
        (multiple-value-bind (how value) (wait-child pid)
          (unless (and (eq how :exited) (eql value 0))
            (push (format nil "the last writer failed: ~(~a~) ~a" how value) failures)))
        (check "after the last writer")
        (unless (= previous (+ before 5))
          (push (format nil "the last writer's 5 commits took the counter from ~d to ~d"
                        before previous)
                failures))))
    (values (nreverse failures) previous leftovers)))

(defun run-counter-race (directory &key (processes 4) (increments 500) (durability :fsync))
  "Fork PROCESSES processes that each increment the root :COUNTER of one
store in DIRECTORY INCREMENTS times, one transaction per increment; wait
for them.  Return the final counter, and the list of the children's
endings that were not a normal exit with status 0."
  (let* ((path (merge-pathnames "race.store" directory))
         (pids (loop repeat processes
                     collect (fork-child
                              (lambda ()
                                (binstore:with-store (store path :durability durability)
                                  (dotimes (i increments)
                                    (binstore:with-transaction (store)
                                      (incf (binstore:root store :counter 0)))))))))
         (bad (loop for pid in pids
                    for (how value) = (multiple-value-list (wait-child pid))
                    unless (and (eq how :exited) (eql value 0))
                      collect (list pid how value))))
    (values (binstore:with-store (store path)
              (binstore:with-transaction (store :read-only t)
                (binstore:root store :counter 0)))
            bad)))

(defun run-store-soak (&key (kills 1000) (processes 4) (increments 500))
  "What `make soak' runs: RUN-KILLS with KILLS kills, then RUN-COUNTER-RACE
with PROCESSES processes of INCREMENTS increments; print what happened and
return true when every check held."
  (call-with-temporary-directory
   (lambda (directory)
     (let ((start (get-internal-real-time)))
       (multiple-value-bind (failures committed leftovers) (run-kills directory kills)
         (format t "~&store soak: ~d writers killed with SIGKILL, ~d states committed, ~
                    ~d temporary files left by killed writers (deleted), ~d failures~%"
                 kills committed leftovers (length failures))
         (dolist (failure (subseq failures 0 (min 20 (length failures))))
           (format t "  ~a~%" failure))
         (multiple-value-bind (counter bad) (run-counter-race directory :processes processes
                                                                        :increments increments)
           (format t "~&store race: ~d processes x ~d increments: counter ~d (expected ~d)~@[, ~
                      children failed: ~s~]~%"
                   processes increments counter (* processes increments) bad)
           (format t "~&store soak: ~,1f s~%"
                   (/ (- (get-internal-real-time) start) internal-time-units-per-second))
           (finish-output)
           (and (null failures) (null bad) (= counter (* processes increments)))))))))
