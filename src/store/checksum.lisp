;;;; CRC32C (Castagnoli), the checksum of a persistent store's file.
;;;;
;;;; Why CRC32C: it detects every burst of up to 32 flipped bits and every
;;;; odd number of flipped bits, which is what a torn sector or a flaky
;;;; disk does; iSCSI, ext4's metadata and Btrfs use it.  It is not for
;;;; deciding whether two states are equal: the store compares bytes for
;;;; that (see transactions.lisp).
;;;;
;;;; How: the processor's CRC32 instruction where there is one (SSE4.2,
;;;; src/platform/crc32c.lisp), eight bytes a step, the last few through
;;;; the tables; otherwise "slicing by 8".  The classic table-driven CRC
;;;; consumes one byte per step, each step waiting on the one before.
;;;; Eight tables let one step consume eight bytes with eight independent
;;;; lookups XORed together: table K maps a byte to its contribution to the
;;;; CRC when K more bytes follow it.  Plain Lisp, byte loads only, so it
;;;; does not depend on the machine's byte order.

(in-package #:binstore)

(defconstant +crc32c-polynomial+ #x82F63B78
  "The Castagnoli polynomial #x1EDC6F41, bit-reversed: the CRC is computed
least significant bit first, as iSCSI and SSE4.2's CRC32 instruction do.")

(deftype crc32c-tables () '(simple-array (unsigned-byte 32) (2048)))

(defun make-crc32c-tables ()
  "The eight 256-entry tables of slicing by 8, one after the other.  Table
0 is the byte-at-a-time table: the CRC of one byte.  Entry N of table K is
entry N of table K-1 pushed through one more zero byte."
  (let ((tables (make-array 2048 :element-type '(unsigned-byte 32))))
    (dotimes (n 256)
      (let ((crc n))
        (dotimes (bit 8)
          (setf crc (if (logbitp 0 crc)
                        (logxor (ash crc -1) +crc32c-polynomial+)
                        (ash crc -1))))
        (setf (aref tables n) crc)))
    (loop for k from 1 below 8
          do (dotimes (n 256)
               (let ((previous (aref tables (+ (* 256 (1- k)) n))))
                 (setf (aref tables (+ (* 256 k) n))
                       (logxor (ash previous -8)
                               (aref tables (logand previous #xFF)))))))
    tables))

(define-load-time-global **crc32c-tables** (make-crc32c-tables)
  "The tables of CRC32C, made once when binstore is loaded.")

(defun crc32c (octets &key (start 0) (end (length octets)))
  "The CRC32C of the bytes of OCTETS, a (simple-array (unsigned-byte 8) (*)),
from START below END: an (unsigned-byte 32).  The CRC32C of the ASCII
bytes of \"123456789\" is #xE3069283."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets)
           (type index start end))
  (assert (<= 0 start end (length octets)) (start end)
          "The bounds ~d and ~d do not fit a vector of ~d bytes." start end (length octets))
  (let ((tables **crc32c-tables**)
        (crc #xFFFFFFFF)
        (i start))
    (declare (type crc32c-tables tables)
             (type (unsigned-byte 32) crc)
             (type index i)
             (optimize speed (safety 0)))
    (when (crc32c-instruction-p)
      ;; the processor's CRC32 instruction, eight bytes a step; the bytes
      ;; left over go through the tables below
      (with-pinned-objects (octets)
        (let ((base (vector-pointer octets)))
          (loop while (<= (+ i 8) end)
                do (setf crc (crc32c-word crc (mem-u64 base i)))
                   (incf i 8)))))
    (macrolet ((entry (table byte)
                 `(aref tables (+ ,(* 256 table) ,byte)))
               (octet (k) `(aref octets (+ i ,k))))
      ;; eight bytes a step: the four that overlap the CRC are XORed into it
      (loop while (<= (+ i 8) end)
            do (setf crc (logxor (entry 7 (logxor (ldb (byte 8 0) crc) (octet 0)))
                                 (entry 6 (logxor (ldb (byte 8 8) crc) (octet 1)))
                                 (entry 5 (logxor (ldb (byte 8 16) crc) (octet 2)))
                                 (entry 4 (logxor (ldb (byte 8 24) crc) (octet 3)))
                                 (entry 3 (octet 4))
                                 (entry 2 (octet 5))
                                 (entry 1 (octet 6))
                                 (entry 0 (octet 7))))
               (incf i 8))
      ;; the last few bytes one at a time
      (loop while (< i end)
            do (setf crc (logxor (ash crc -8)
                                 (entry 0 (logxor (ldb (byte 8 0) crc) (octet 0)))))
               (incf i)))
    (logxor crc #xFFFFFFFF)))
