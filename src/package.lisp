;;;; The binstore package: the whole public interface is exported here.

(defpackage #:binstore
  (:use #:common-lisp)
  (:export
   ;; Storing and restoring
   #:store
   #:restore
   #:store-to-sap
   #:restore-from-sap
   ;; Defaults, each overridable per call by the keyword of the same name
   #:*track-references*
   #:*support-shared-list-structures*
   #:*output-magic-number*
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
   ;; Conditions
   #:binstore-error
   #:binstore-error-message
   #:store-error
   #:unstorable-object
   #:unstorable-object-object
   #:unstorable-object-path
   #:out-of-space
   #:out-of-space-needed
   #:limit-exceeded
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
   ;; Restarts
   #:create-package
   #:use-other-package
   #:make-uninterned
   #:intern-anyway
   #:use-other-class
   #:discard-slot
   #:use-other-slot
   #:use-larger-space))
