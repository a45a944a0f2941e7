;;;; The frame of a persistent store's file: a 40-byte header, then the
;;;; payload, one binstore record (the root table).  doc/FORMAT.md, "Store
;;;; files", describes it byte by byte:
;;;;
;;;;    0  8  magic            89 42 53 54 4F 52 45 0A  ("\x89BSTORE\n")
;;;;    8  2  version          1, little-endian
;;;;   10  2  header bytes     40
;;;;   12  4  commit nonce     random, drawn at each commit
;;;;   16  8  generation       1 for the first commit, one more for each
;;;;   24  8  payload bytes
;;;;   32  4  payload CRC32C
;;;;   36  4  header CRC32C    of bytes 0-35
;;;;   40     payload
;;;;
;;;; Why each part: the magic tells a store from any other file (its first
;;;; byte is not ASCII, and its newline is changed by text-mode copies); the
;;;; version lets a newer format be refused by name rather than misread;
;;;; the length and the two checksums catch a file cut short or a changed
;;;; byte, so damage is reported, never read as data; the generation and
;;;; the nonce tell a reader, from the header alone, whether the file
;;;; changed since it last loaded it (the nonce tells apart two commits of
;;;; one generation: a store deleted and made again).  A file is read and checked whole before any root is
;;;; returned from it.

(in-package #:binstore)

(defconstant +store-header-bytes+ 40
  "The length of a store file's header, the offset of its payload.")

(defconstant +store-version+ 1
  "The version of the store file format this binstore writes and reads.")

(define-load-time-global **store-magic**
    (coerce #(#x89 #x42 #x53 #x54 #x4F #x52 #x45 #x0A) '(simple-array (unsigned-byte 8) (8)))
  "The eight bytes a store file begins with: \\x89 BSTORE \\n.")

(defun store-magic-text ()
  "The magic in words, for messages."
  (format nil "the store magic~{ ~2,'0X~}" (coerce **store-magic** 'list)))

;;; Little-endian fields -----------------------------------------------------

(defun octets-le (octets offset bytes)
  "The unsigned integer of BYTES bytes at OFFSET in OCTETS, little-endian."
  (loop for k below bytes
        sum (ash (aref octets (+ offset k)) (* 8 k))))

(defun (setf octets-le) (value octets offset bytes)
  "Write VALUE as BYTES bytes at OFFSET in OCTETS, little-endian."
  (loop for k below bytes
        do (setf (aref octets (+ offset k)) (ldb (byte 8 (* 8 k)) value)))
  value)

;;; The header ---------------------------------------------------------------

(defstruct (store-header (:constructor make-store-header (generation nonce length crc))
                         (:copier nil) (:predicate nil))
  "What a store file's header says about its payload."
  (generation 0 :type (unsigned-byte 64) :read-only t)
  (nonce 0 :type (unsigned-byte 32) :read-only t)
  (length 0 :type (unsigned-byte 64) :read-only t)
  (crc 0 :type (unsigned-byte 32) :read-only t))

(defun encode-store-header (generation nonce payload)
  "The 40 bytes of the header of a store file whose payload is the octet
vector PAYLOAD, with GENERATION and the commit nonce NONCE."
  (let ((octets (make-array +store-header-bytes+ :element-type '(unsigned-byte 8)
                                                  :initial-element 0)))
    (replace octets **store-magic**)
    (setf (octets-le octets 8 2) +store-version+
          (octets-le octets 10 2) +store-header-bytes+
          (octets-le octets 12 4) nonce
          (octets-le octets 16 8) generation
          (octets-le octets 24 8) (length payload)
          (octets-le octets 32 4) (crc32c payload)
          (octets-le octets 36 4) (crc32c octets :end 36))
    octets))

(defun corrupted (place offset expected control &rest arguments)
  "Signal STORE-CORRUPTED about the store file PLACE at byte OFFSET, where
EXPECTED (a string or NIL) should have been: CONTROL applied to ARGUMENTS
says what is wrong."
  (error 'store-corrupted :pathname place :offset offset :expected expected
                          :message (apply #'format nil control arguments)))

(defun decode-store-header (octets count file-size place)
  "Check the header of a store file of FILE-SIZE bytes, of which OCTETS
holds the first COUNT (at most +STORE-HEADER-BYTES+), and return its
STORE-HEADER.  Anything but a valid header of this version, for a file of
exactly the size it announces, signals STORE-CORRUPTED about PLACE."
  (cond ((zerop file-size)
         ;; never written by a store: a commit renames a complete file in.
         ;; An empty file is what a power cut can leave after an unsynced
         ;; replacement, so it is reported, not read as an empty store.
         (corrupted place 0 (store-magic-text) "the file is empty"))
        ((or (< count 8) (mismatch **store-magic** octets :end2 8))
         (corrupted place 0 (store-magic-text) "not a store file"))
        ((< count 12)
         (corrupted place count "a complete header" "the file ends inside its header"))
        ((> (octets-le octets 8 2) +store-version+)
         (corrupted place 8 (format nil "version ~d" +store-version+)
                    "the store has format version ~d, newer than this binstore reads"
                    (octets-le octets 8 2)))
        ((/= (octets-le octets 8 2) +store-version+)
         (corrupted place 8 (format nil "version ~d" +store-version+)
                    "invalid format version ~d" (octets-le octets 8 2)))
        ((< count +store-header-bytes+)
         (corrupted place count "a complete header" "the file ends inside its header"))
        ((/= (crc32c octets :end 36) (octets-le octets 36 4))
         (corrupted place 36 (format nil "the header's CRC32C ~8,'0X" (crc32c octets :end 36))
                    "the header is damaged: its checksum does not match"))
        ((/= (octets-le octets 10 2) +store-header-bytes+)
         (corrupted place 10 (format nil "~d" +store-header-bytes+)
                    "invalid header length ~d" (octets-le octets 10 2)))
        (t
         (let ((length (octets-le octets 24 8)))
           (cond ((< file-size (+ +store-header-bytes+ length))
                  (corrupted place file-size (format nil "~d bytes" (+ +store-header-bytes+ length))
                             "the file is cut short: ~d bytes of payload announced, ~d present"
                             length (- file-size +store-header-bytes+)))
                 ((> file-size (+ +store-header-bytes+ length))
                  (corrupted place (+ +store-header-bytes+ length) "the end of the file"
                             "~d bytes follow the payload" (- file-size +store-header-bytes+ length)))
                 (t (make-store-header (octets-le octets 16 8) (octets-le octets 12 4)
                                       length (octets-le octets 32 4))))))))

;;; Reading and writing through descriptors -----------------------------------

(defun read-fully (fd octets start end place)
  "read(2) from FD into OCTETS from START until END or the end of the file;
return the index after the last byte read.  A failing read signals
BINSTORE-FILE-ERROR about PLACE."
  (read-fd-into fd octets start end
                (lambda (errno pos)
                  (declare (ignore pos))
                  (errno-fail place errno "cannot read the store file"))))

(defun read-store-header (fd file-size place)
  "Read and check the header of the store file open on FD (at its start),
FILE-SIZE bytes long: its STORE-HEADER, or STORE-CORRUPTED."
  (let* ((octets (make-array +store-header-bytes+ :element-type '(unsigned-byte 8)))
         (count (read-fully fd octets 0 (min file-size +store-header-bytes+) place)))
    (decode-store-header octets count file-size place)))

(defun read-store-payload (fd header place)
  "Read the payload HEADER announces from FD (just after the header) and
check its CRC32C: the payload, a fresh octet vector, or STORE-CORRUPTED."
  (let* ((length (store-header-length header))
         (payload (make-array length :element-type '(unsigned-byte 8)))
         (count (read-fully fd payload 0 length place)))
    (when (< count length)
      ;; the file shrank under us: only a program that ignores the lock does that
      (corrupted place (+ +store-header-bytes+ count) (format nil "~d bytes" length)
                 "the file is cut short"))
    (let ((crc (crc32c payload)))
      (unless (= crc (store-header-crc header))
        (corrupted place +store-header-bytes+
                   (format nil "a payload whose CRC32C is ~8,'0X" (store-header-crc header))
                   "the payload is damaged: its CRC32C is ~8,'0X" crc)))
    payload))

(defvar *commit-write-fault* nil
  "For tests only: NIL, or a function called with no arguments between the
header and the payload of a commit's write, as a failing write(2) would
interrupt it; it signals to stand for the failure (a full disk).")

(defun write-store-frame (fd header payload)
  "write(2) the HEADER octets and the PAYLOAD octets to FD.  A failing write
signals STORE-ERROR (a full disk)."
  (flet ((write-octets (octets)
           (declare (type (simple-array (unsigned-byte 8) (*)) octets))
           (with-pinned-objects (octets)
             (write-fully fd (pointer-address (vector-pointer octets)) (length octets)))))
    (write-octets header)
    (when *commit-write-fault*
      (funcall *commit-write-fault*))
    (write-octets payload)))
