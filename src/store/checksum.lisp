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

;;; Three lanes at once.  The CRC32 instruction takes three cycles to give
;;; its result and can start one every cycle, so one chain of steps, each
;;; waiting on the last, uses a third of it.  A long input is therefore
;;; taken in stripes of three lanes of +CRC32C-LANE-BYTES+, each lane's CRC
;;; computed in the same loop (the first lane's from the CRC so far, the
;;; others' from zero), and the three put together at the stripe's end:
;;; the CRC register is linear over GF(2), so the register after lanes A,
;;; B, C is A's pushed through 2L zero bytes, XOR B's pushed through L, XOR
;;; C's.  Pushing a register through a fixed number of zero bytes is itself
;;; linear, so it is four table lookups (CRC32C-SHIFT).  Measured here on
;;; 384 KB: 79 us in one chain, 20 in three (the registers kept untagged,
;;; see CRC32C-WORD).

(defconstant +crc32c-lane-bytes+ 4096
  "The bytes of one lane of a stripe: a stripe is three lanes.")

(deftype crc32c-shift-tables () '(simple-array (unsigned-byte 32) (1024)))

(defun apply-crc32c-images (images crc)
  "The linear map whose IMAGES (of each of the 32 bits) are given, applied
to the register CRC."
  (loop with result = 0
        for bit below 32
        when (logbitp bit crc)
          do (setf result (logxor result (aref images bit)))
        finally (return result)))

(defun make-crc32c-shift-tables (bytes tables)
  "Four 256-entry tables, one after the other, that together push a CRC32C
register through BYTES zero bytes, a power of two: entry N of table K is
what the register holding N in its byte K becomes.  TABLES are the CRC's
\(MAKE-CRC32C-TABLES).  The map is linear, so the images of the 32 single
bits define it; those for one zero byte are one table step, and the map
for 2B bytes is the map for B applied twice."
  (assert (= 1 (logcount bytes)))
  (let ((images (make-array 32)))
    (dotimes (bit 32)
      (let ((crc (ash 1 bit)))
        (setf (aref images bit) (logxor (ash crc -8) (aref tables (logand crc #xFF))))))
    (loop for n = 1 then (* 2 n)
          while (< n bytes)
          do (setf images (map 'vector
                               (lambda (image) (apply-crc32c-images images image))
                               images)))
    (let ((shift (make-array 1024 :element-type '(unsigned-byte 32))))
      (dotimes (k 4 shift)
        (dotimes (n 256)
          (setf (aref shift (+ (* 256 k) n))
                (apply-crc32c-images images (ash n (* 8 k)))))))))

(define-load-time-global **crc32c-tables** (make-crc32c-tables)
  "The tables of CRC32C, made once when binstore is loaded.")

(define-load-time-global **crc32c-one-lane** (make-crc32c-shift-tables +crc32c-lane-bytes+ **crc32c-tables**)
  "CRC32C-SHIFT's tables for one lane of zero bytes.")

(define-load-time-global **crc32c-two-lanes** (make-crc32c-shift-tables (* 2 +crc32c-lane-bytes+) **crc32c-tables**)
  "CRC32C-SHIFT's tables for two lanes of zero bytes.")

(declaim (inline crc32c-shift))
(defun crc32c-shift (crc shift)
  "The CRC32C register CRC pushed through the zero bytes SHIFT's tables were
made for (MAKE-CRC32C-SHIFT-TABLES)."
  (declare (type (unsigned-byte 64) crc) (type crc32c-shift-tables shift)
           (optimize speed (safety 0)))
  (logxor (aref shift (ldb (byte 8 0) crc))
          (aref shift (+ 256 (ldb (byte 8 8) crc)))
          (aref shift (+ 512 (ldb (byte 8 16) crc)))
          (aref shift (+ 768 (ldb (byte 8 24) crc)))))

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
      ;; the processor's CRC32 instruction, eight bytes a step: stripes of
      ;; three lanes, then one lane; the bytes left over go through the
      ;; tables below
      (let ((one **crc32c-one-lane**)
            (two **crc32c-two-lanes**)
            (c crc))
        (declare (type crc32c-shift-tables one two) (type (unsigned-byte 64) c))
        (with-pinned-objects (octets)
          (let ((base (vector-pointer octets)))
            (loop while (<= (+ i (* 3 +crc32c-lane-bytes+)) end)
                  do (let ((a c) (b 0) (d 0))
                       (declare (type (unsigned-byte 64) a b d))
                       (loop for j of-type index from i below (+ i +crc32c-lane-bytes+) by 8
                             do (setf a (crc32c-word a (mem-u64 base j))
                                      b (crc32c-word b (mem-u64 base (+ j +crc32c-lane-bytes+)))
                                      d (crc32c-word d (mem-u64 base (+ j (* 2 +crc32c-lane-bytes+))))))
                       (setf c (logxor (crc32c-shift a two) (crc32c-shift b one) d))
                       (incf i (* 3 +crc32c-lane-bytes+))))
            (loop while (<= (+ i 8) end)
                  do (setf c (crc32c-word c (mem-u64 base i)))
                     (incf i 8))))
        (setf crc (ldb (byte 32 0) c))))
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
