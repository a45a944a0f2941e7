;;;; The binstore package: the whole public interface is exported here.

(defpackage #:binstore
  (:use #:common-lisp)
  ;; ECL leaves the elements of a new array undefined where SBCL zeroes
  ;; them, and CLISP and ABCL fill T arrays with NIL; binstore relies on
  ;; zeros: the ECL, CLISP and ABCL platforms' MAKE-ARRAY zeroes them
  ;; (src/platform/{ecl,clisp,abcl}/memory.lisp)
  #+(or ecl clisp abcl) (:shadow #:make-array)
  ;; ECL calls its generic ASH, LOGTEST, LDB, + and - even on fixnums (and
  ;; its INCF and DECF expand to CL:+ and CL:-): its platform's compile
  ;; them as C's operators where it can
  ;; (src/platform/ecl/arithmetic.lisp)
  #+ecl (:shadow #:ash #:logtest #:logand #:ldb #:+ #:- #:1+ #:1- #:incf #:decf)
  ;; and calls a structure's slot readers out of line: its DEFSTRUCT gives
  ;; them compiler macros (src/platform/ecl/structures.lisp)
  #+ecl (:shadow #:defstruct)
  ;; and CLISP's makes wrong arrays of 2^24 elements or more: its
  ;; MAKE-ARRAY, MAKE-STRING and ADJUST-ARRAY check the size first
  #+clisp (:shadow #:make-string #:adjust-array)
  ;; CLISP does not evaluate a constant's value when it compiles DEFCONSTANT,
  ;; and binstore's files read constants with #. (CASE keys): see below
  #+clisp (:shadow #:defconstant)
  (:documentation "binstore: store any Common Lisp data to bytes and get it
back.  STORE writes a record to a place (an octet vector, a file, a stream,
raw memory); RESTORE reads one back with identity, sharing and circularity
intact; MAP-STORED-OBJECTS and DO-STORED-OBJECTS read every record of a
place.  OPEN-STORE and WITH-TRANSACTION keep named roots in a file,
changed in atomic, durable transactions.  Options are special variables, each overridden per call by the
keyword of the same name.  Every condition is a BINSTORE-ERROR.")
  (:export
   ;; Storing and restoring
   #:store
   #:restore
   #:store-to-sap
   #:restore-from-sap
   #:map-stored-objects
   #:do-stored-objects
   #:+max-values+
   ;; Reading the bytes
   #:explain
   #:file-statistics
   #:print-statistics
   ;; The persistent store: named roots in a file, changed in transactions
   #:persistent-store
   #:open-store
   #:close-store
   #:with-store
   #:store-path
   #:with-transaction
   #:root
   #:root-keys
   #:delete-root
   #:commit-transaction
   #:abort-transaction
   ;; Byte sinks and sources: places that take or give bytes in blocks,
   ;; and the filters that wrap them
   #:byte-sink #:sink-write #:sink-finish #:sink-abort
   #:make-octets-sink #:octets-sink #:octets-sink-vector
   #:filter-sink #:filter-sink-inner
   #:byte-source #:source-read #:source-greedy-p
   #:make-octets-source #:octets-source
   #:filter-source #:filter-source-inner
   ;; Compression: the option, and (defined by the system
   ;; binstore/compression) the filters that compress and decompress
   #:*compression*
   #:zstd-sink #:make-zstd-sink #:lz4-sink #:make-lz4-sink
   #:zstd-source #:make-zstd-source #:lz4-source #:make-lz4-source
   #:release-compression-context
   ;; Defaults, each overridable per call by the keyword of the same name
   #:*track-references*
   #:*support-shared-list-structures*
   #:*output-magic-number*
   #:*require-header*
   #:*output-end-marker*
   #:*max-to-write*
   #:*max-to-read*
   #:*max-depth*
   #:*store-class-slots*
   #:*intern-symbols*
   #:+format-version+
   ;; Working memory kept between calls
   #:*scratch-limit*
   #:*huge-pages*
   #:release-scratch
   ;; Extension points: per class, and user codecs per type
   #:stored-slots
   #:restore-construction
   #:after-restore
   #:upgrade-instance
   #:register-codec
   #:unregister-codec
   #:define-codec
   #:find-codec
   ;; Shared dictionaries
   #:make-dictionary
   #:dictionary
   #:*dictionary*
   ;; Progress of long calls
   #:*progress*
   ;; Conditions
   #:binstore-error
   #:binstore-error-message
   #:store-error
   #:unstorable-object
   #:unstorable-object-object
   #:unstorable-object-path
   #:out-of-space
   #:out-of-space-needed
   #:circular-list
   #:circular-list-list
   #:circular-list-path
   #:limit-exceeded
   #:store-limit-exceeded
   #:restore-limit-exceeded
   #:limit-exceeded-limit
   #:limit-exceeded-value
   #:limit-exceeded-offset
   #:restore-error
   #:restore-error-offset
   #:invalid-input
   #:invalid-input-expected
   #:truncated-input
   #:unsupported-version
   #:unsupported-version-version
   #:not-binstore-data
   #:end-of-data
   #:binstore-file-error
   #:compression-unavailable
   #:missing-codec
   #:dictionary-mismatch
   #:dictionary-mismatch-fingerprint
   #:missing-codec-name
   #:skip-codec
   #:use-other-codec
   #:compression-unavailable-method
   #:transaction-error
   #:transaction-error-place
   #:store-corrupted
   #:store-corrupted-offset
   #:store-corrupted-expected
   #:missing-package
   #:missing-package-name
   #:missing-symbol
   #:missing-symbol-name
   #:missing-symbol-package
   #:missing-class
   #:missing-class-name
   #:missing-slot
   #:missing-slot-class
   #:missing-slot-name
   #:invalid-utf8
   #:invalid-utf8-offset
   #:invalid-utf8-octets
   ;; Restarts
   #:create-package
   #:use-other-package
   #:make-uninterned
   #:intern-anyway
   #:use-other-class
   #:discard-slot
   #:use-other-slot
   #:use-larger-space
   #:use-replacement-character
   ;; UTF-8 and text files
   #:utf8-decode
   #:utf8-decode-into
   #:utf8-encode
   #:utf8-encode-into
   #:utf8-length
   #:read-lines
   #:map-lines))

;;; CLISP: DEFCONSTANT known at compile time too, as SBCL and ECL make it, so
;;; that the files after the one defining a constant may read it with #.
#+clisp
(defmacro binstore::defconstant (name value &optional (documentation nil documentation-p))
  "CL:DEFCONSTANT, evaluated at compile time as well."
  `(eval-when (:compile-toplevel :load-toplevel :execute)
     (cl:defconstant ,name ,value ,@(when documentation-p (list documentation)))))
