;;;; The types every layer counts with.

(in-package #:binstore)

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defconstant +largest-index+
    #-ecl (- most-positive-fixnum 16)
    ;; ECL open-codes a sum only when its operands' declared ranges keep it
    ;; a fixnum: counts below 2^48 (256 TiB) add, double and sum in C, where
    ;; ones up to a fixnum made most of a store's arithmetic generic calls
    #+ecl (expt 2 48)
    "The largest INDEX: as a limit on a count, no limit."))

(deftype index ()
  "A count of bytes or elements, or an offset: a fixnum with room to add a
few bytes without leaving the fixnums."
  `(integer 0 ,+largest-index+))

