;;;; Test package and the root suite every test file hangs its suite under.

;; ABCL's Gray streams are a module of its own, loaded on request
#+abcl (eval-when (:compile-toplevel :load-toplevel :execute) (require :gray-streams))

(defpackage #:binstore-tests
  (:use #:common-lisp #:fiveam)
  ;; Gray streams: the tests' octet streams (places.lisp) and the streams that
  ;; watch a store's writes
  (:import-from #+sbcl #:sb-gray #+(or ecl clisp) #:gray #+abcl #:gray-streams
                #-clisp #:fundamental-binary-input-stream #-clisp #:fundamental-binary-output-stream
                #:stream-read-byte #-clisp #:stream-read-sequence
                #:stream-write-byte #-clisp #:stream-write-sequence)
  ;; CLISP's Gray streams move octets in bulk through generic functions of
  ;; other names and lambda lists: tests/platform.lisp defines these names
  ;; over them
  #+clisp (:shadow #:fundamental-binary-input-stream #:fundamental-binary-output-stream
                   #:stream-read-sequence #:stream-write-sequence)
  ;; ECL's Gray streams answer the element type through a generic function
  ;; of their own; SBCL's CL:STREAM-ELEMENT-TYPE is generic already
  #+ecl (:shadowing-import-from #:gray #:stream-element-type)
  ;; ECL, ABCL: TEST compiles its body with the file (tests/platform.lisp)
  #-sbcl (:shadow #:test)
  (:export #:run-all #:run-all-and-exit #:run-from-asdf #:tests-failed #:all))

(in-package #:binstore-tests)

(def-suite all :description "Every binstore test.")

(defun varint-octets (n)
  "The unsigned LEB128 encoding of N (the format's varint) as a list of
octets, built here rather than by binstore, for tests that spell out bytes."
  (loop collect (if (< n 128) n (logior #x80 (ldb (byte 7 0) n)))
        do (setf n (ash n -7))
        until (zerop n)))
