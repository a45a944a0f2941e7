;;;; The types every layer counts with.

(in-package #:binstore)

(deftype index ()
  "A count of bytes or elements, or an offset: a fixnum with room to add a
few bytes without leaving the fixnums."
  '(integer 0 #.(- most-positive-fixnum 16)))

(defconstant +largest-index+ (- most-positive-fixnum 16)
  "The largest INDEX: as a limit on a count, no limit.")

