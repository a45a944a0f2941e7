;;;; Small messages with and without a shared dictionary (make
;;;; bench-messages): the bytes of a few typical messages stored by binstore
;;;; plainly, with its 5-byte header or without, and with a dictionary; and,
;;;; when cl-conspack is among the peers' sources, by conspack plainly and
;;;; with an index of the same symbols (its "indexes" are what binstore's
;;;; dictionaries are to it).  Bytes only: deterministic, one run.

(defpackage #:binstore-messages
  (:use #:common-lisp)
  (:export #:main))

(in-package #:binstore-messages)

(defstruct reading sensor value unit)

(defparameter *symbols* '(:get :put :ok :error :reading reading sensor value unit)
  "What both sides agree on: the dictionary's symbols (and conspack's index).")

(defun messages ()
  "(name message) of each message measured."
  (list (list "three keywords" (list :get :ok :error))
        (list "three keywords and a struct"
              (list :put :reading :ok (make-reading :sensor 12 :value 21.5d0 :unit "C")))
        (list "a list of 10 structs"
              (cons :reading (loop for i below 10
                                   collect (make-reading :sensor i :value (* i 1.5d0) :unit "C"))))))

(defun binstore-sizes (message dictionary)
  "Bytes of MESSAGE stored by binstore: plain with its header, plain without,
with DICTIONARY without the header."
  (flet ((size (&rest options) (length (apply #'binstore:store nil message options))))
    (list (size) (size :output-magic-number nil)
          (size :output-magic-number nil :dictionary dictionary))))

(defun load-conspack (peers)
  "Load cl-conspack from the directory PEERS; true when it loaded."
  (when (and peers (probe-file peers))
    (asdf:initialize-source-registry
     `(:source-registry (:tree ,(namestring (truename peers))) :inherit-configuration))
    (handler-case
        (let ((*standard-output* (make-broadcast-stream)))
          (handler-bind ((warning #'muffle-warning))
            (asdf:load-system "cl-conspack"))
          (eval `(,(find-symbol "DEFENCODING" "CONSPACK") reading sensor value unit))
          (eval `(,(find-symbol "DEFINE-INDEX" "CONSPACK") binstore-messages ,@*symbols*))
          t)
      (serious-condition () nil))))

(defun conspack-sizes (message)
  "Bytes of MESSAGE encoded by conspack plainly and with the index."
  (let ((encode (find-symbol "ENCODE" "CONSPACK"))
        (index (find-symbol "*INDEX*" "CONSPACK"))
        (find-index (find-symbol "FIND-INDEX" "CONSPACK")))
    (list (length (funcall encode message))
          (progv (list index) (list (funcall find-index 'binstore-messages))
            (length (funcall encode message))))))

(defun main (&optional peers)
  "Print the table of message sizes; PEERS is the peers' sources directory
\(NIL or missing: binstore only)."
  (let ((dictionary (binstore:make-dictionary (append *symbols* (list (find-class 'reading)))))
        (conspack (load-conspack peers)))
    (format t "~&| message | binstore | binstore, no header | binstore + dictionary | ratio ~
               ~:[~;| conspack | conspack + index ~]|~%" conspack)
    (format t "|---|---|---|---|---~:[~;|---|---~]|~%" conspack)
    (loop for (name message) in (messages)
          do (destructuring-bind (plain bare small) (binstore-sizes message dictionary)
               (format t "| ~a | ~d | ~d | ~d | ~,1fx / ~,1fx " name plain bare small
                       (/ plain small) (/ bare small))
               (when conspack
                 (format t "| ~{~d | ~d ~}" (conspack-sizes message)))
               (format t "|~%")))
    (format t "~&ratio: bytes with the header / with the dictionary, and without the header / ~
               with the dictionary (which never has one here)~%")))
