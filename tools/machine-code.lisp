;;;; What SBCL compiles binstore's functions to, for comparing two builds:
;;;; changes made for other Lisps must leave SBCL's code as it was, and
;;;; the same machine code is the same speed, where a benchmark run on a
;;;; shared machine can only say "within its noise".
;;;;
;;;; make compare-machine-code BASE=<commit> loads this file in an image of
;;;; the checkout and in one of BASE (a temporary worktree), each writing
;;;; every function of the binstore package, disassembled, with what
;;;; differs between two builds of the same code taken out (addresses,
;;;; offsets, label numbers, the bytes of each instruction); then lists the
;;;; functions whose code differs, is new or is gone.

(defpackage #:binstore-machine-code
  (:use #:common-lisp)
  (:export #:write-machine-code #:compare-machine-code))

(in-package #:binstore-machine-code)

(defun split-words (string)
  "The words of STRING, separated by spaces."
  (loop with start = 0
        for space = (position #\Space string :start start)
        for word = (subseq string start space)
        when (plusp (length word)) collect word
        while space
        do (setf start (1+ space))))

(defun generic-token (token)
  "TOKEN with what differs between builds of the same code made generic:
label numbers (L12 -> L), hexadecimal constants, and decimal numbers of
256 or more (addresses, offsets from RIP, the ids of structure layouts,
which follow the order of definition)."
  (with-output-to-string (out)
    (loop with i = 0
          with n = (length token)
          while (< i n)
          do (let ((c (char token i)))
               (cond ((and (char= c #\L) (< (1+ i) n) (digit-char-p (char token (1+ i)))
                           (or (= i 0) (not (alphanumericp (char token (1- i))))))
                      (write-char #\L out)
                      (incf i)
                      (loop while (and (< i n) (digit-char-p (char token i))) do (incf i)))
                     ((and (char= c #\#) (< (1+ i) n) (char-equal (char token (1+ i)) #\x))
                      (write-string "#x" out)
                      (incf i 2)
                      (loop while (and (< i n) (digit-char-p (char token i) 16)) do (incf i)))
                     ((and (digit-char-p c) (or (= i 0) (not (alphanumericp (char token (1- i))))))
                      (let ((end (or (position-if-not #'digit-char-p token :start i) n)))
                        (if (>= (parse-integer token :start i :end end) 256)
                            (write-char #\N out)
                            (write-string token out :start i :end end))
                        (setf i end)))
                     (t (write-char c out) (incf i)))))))

(defun instruction-text (line)
  "The instruction of a line of DISASSEMBLE's output, with what differs
between builds of the same code taken out; NIL for a line without one."
  (let* ((line (string-left-trim "; " line))
         (colon (search ": " line)))
    (when (and colon (< colon 8))
      (let ((tokens (split-words (subseq line (+ colon 2)))))
        ;; a label (L12:), then the instruction's bytes, then the instruction
        (when (and tokens (char= #\: (char (first tokens) (1- (length (first tokens))))))
          (pop tokens))
        (pop tokens)
        (let ((comment (position-if (lambda (token) (char= (char token 0) #\;)) tokens)))
          (format nil "~{~a~^ ~}" (mapcar #'generic-token (subseq tokens 0 comment))))))))

(defun function-code (function)
  "The instructions of FUNCTION, one string each."
  (let ((text (with-output-to-string (*standard-output*)
                (disassemble function))))
    (with-input-from-string (in text)
      (loop for line = (read-line in nil)
            while line
            for instruction = (instruction-text line)
            when (and instruction (plusp (length instruction)))
              collect instruction))))

(defun binstore-functions ()
  "Every function named by a symbol of the binstore package (not macros or
generic functions), sorted by name."
  (let ((package (find-package "BINSTORE"))
        (names '()))
    (do-symbols (symbol package)
      (when (and (eq (symbol-package symbol) package)
                 (fboundp symbol)
                 (not (macro-function symbol))
                 (not (special-operator-p symbol))
                 (typep (fdefinition symbol) 'compiled-function)
                 (not (typep (fdefinition symbol) 'generic-function)))
        (pushnew symbol names)))
    (sort names #'string< :key #'symbol-name)))

(defun write-machine-code (path)
  "Write to PATH, for each function of the binstore package, its name and
its instructions' digest, one line each."
  (with-open-file (out path :direction :output :if-exists :supersede)
    (dolist (name (binstore-functions))
      ;; SXHASH of a string is the same in every image of one SBCL
      (format out "~a ~d~%" (symbol-name name)
              (sxhash (format nil "~{~a~%~}" (function-code name)))))))

(defun read-machine-code (path)
  "The table of a file WRITE-MACHINE-CODE wrote: name -> digest."
  (let ((table (make-hash-table :test 'equal)))
    (with-open-file (in path)
      (loop for line = (read-line in nil)
            while line
            do (let ((space (position #\Space line)))
                 (setf (gethash (subseq line 0 space) table) (subseq line (1+ space))))))
    table))

(defun compare-machine-code (base-path path)
  "Print the functions whose code differs between the files BASE-PATH and
PATH wrote; return true when none does (new and removed functions are
listed too, and do not count as differing)."
  (let ((base (read-machine-code base-path))
        (now (read-machine-code path))
        (differ '()) (new '()) (gone '()))
    (maphash (lambda (name digest)
               (let ((old (gethash name base)))
                 (cond ((null old) (push name new))
                       ((string/= old digest) (push name differ)))))
             now)
    (maphash (lambda (name digest)
               (declare (ignore digest))
               (unless (gethash name now) (push name gone)))
             base)
    (format t "~&machine code: ~d functions compared, ~d differ~@[: ~{~a~^ ~}~]~%"
            (hash-table-count now) (length differ) (sort differ #'string<))
    (format t "~&new: ~d~@[ (~{~a~^ ~})~]; gone: ~d~@[ (~{~a~^ ~})~]~%"
            (length new) (sort new #'string<) (length gone) (sort gone #'string<))
    (null differ)))
