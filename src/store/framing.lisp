;;;; The frame of a persistent store's file: a 56-byte header, then the
;;;; payload, one binstore record (the root table), at the offset the header
;;;; names.  doc/FORMAT.md, "Store files", describes it byte by byte:
;;;;
;;;;    0  8  magic            89 42 53 54 4F 52 45 0A  ("\x89BSTORE\n")
;;;;    8  2  version          2, little-endian
;;;;   10  2  header bytes     56
;;;;   12  4  commit nonce     random, drawn at each commit
;;;;   16  8  generation       1 for the first commit, one more for each
;;;;   24  8  payload offset   56 or more
;;;;   32  8  payload bytes
;;;;   40  8  longest file     the file's size is from offset + bytes to this
;;;;                           (2^64 - 1 after a commit in place: any size)
;;;;   48  4  payload CRC32C
;;;;   52  4  header CRC32C    of bytes 0-51
;;;;   56     the payload, or bytes of an earlier one no header names
;;;;
;;;; Why each part: the magic tells a store from any other file (its first
;;;; byte is not ASCII, and its newline is changed by text-mode copies); the
;;;; version lets a newer format be refused by name rather than misread;
;;;; the length and the two checksums catch a file cut short or a changed
;;;; byte, so damage is reported, never read as data; the generation and
;;;; the nonce tell a reader, from the header alone, whether the file
;;;; changed since it last loaded it (the nonce tells apart two commits of
;;;; one generation: a store deleted and made again).  The offset and the
;;;; longest size are for commits made in place (durability :NONE): the new
;;;; payload is written where the live one is not, then the header, in one
;;;; write(2) of one page, names it; the file is cut to size after that.
;;;; A commit in place that fails or is killed before its header leaves the
;;;; file longer than the live state needs, so a header written in place
;;;; allows any length.  A file
;;;; written whole (a commit with :FSYNC, through a temporary file) has its
;;;; payload at 56 and is exactly 56 + P bytes.  Version 1 files (a 40-byte
;;;; header, no offset, exactly 40 + P bytes) are still read.  A file is
;;;; read and checked whole before any root is returned from it.

(in-package #:binstore)

(defconstant +store-header-bytes+ 56
  "The length of a store file's header (version 2), the least offset of its
payload.")

(defconstant +store-version+ 2
  "The version of the store file format this binstore writes, the newest
it reads.")

(defconstant +any-file-length+ #xFFFFFFFFFFFFFFFF
  "The longest file size of a header written in place: any size.")

(defconstant +store-version-1-header-bytes+ 40
  "The length of a version 1 store file's header, the offset of its payload.")

(define-load-time-global **store-magic**
    (coerce #(#x89 #x42 #x53 #x54 #x4F #x52 #x45 #x0A) '(simple-array (unsigned-byte 8) (8)))
  "The eight bytes a store file begins with: \\x89 BSTORE \\n.")

(defun store-magic-text ()
  "The magic in words, for messages."
  (format nil "the store magic~{ ~2,'0X~}" (coerce **store-magic** 'list)))

;;; Little-endian fields -----------------------------------------------------

(declaim (inline octets-le (setf octets-le)))
(defun octets-le (octets offset bytes)
  "The unsigned integer of BYTES (1 to 8) bytes at OFFSET in OCTETS, an
octet vector, little-endian."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets)
           (type index offset) (type (integer 1 8) bytes))
  (let ((value 0))
    (declare (type (unsigned-byte 64) value))
    (loop for k from (1- bytes) downto 0
          do (setf value (logior (logand (ash value 8) #xFFFFFFFFFFFFFFFF)
                                 (aref octets (+ offset k)))))
    value))

(defun (setf octets-le) (value octets offset bytes)
  "Write VALUE, an (unsigned-byte 64) under 2^(8 BYTES), as BYTES (1 to 8)
bytes at OFFSET in OCTETS, an octet vector, little-endian."
  (declare (type (unsigned-byte 64) value)
           (type (simple-array (unsigned-byte 8) (*)) octets)
           (type index offset) (type (integer 1 8) bytes))
  (loop for k below bytes
        do (setf (aref octets (+ offset k)) (ldb (byte 8 (* 8 k)) value)))
  value)

;;; The header ---------------------------------------------------------------

(defstruct (store-header (:constructor make-store-header
                             (version generation nonce offset length longest crc))
                         (:copier nil) (:predicate nil))
  "What a store file's header says about its payload: the file's format
VERSION, the commit's GENERATION and NONCE, where the payload is (OFFSET,
LENGTH), the LONGEST the file may be, and the payload's CRC."
  (version +store-version+ :type (unsigned-byte 16) :read-only t)
  (generation 0 :type (unsigned-byte 64) :read-only t)
  (nonce 0 :type (unsigned-byte 32) :read-only t)
  (offset +store-header-bytes+ :type (unsigned-byte 64) :read-only t)
  (length 0 :type (unsigned-byte 64) :read-only t)
  (longest 0 :type (unsigned-byte 64) :read-only t)
  (crc 0 :type (unsigned-byte 32) :read-only t))

(defun encode-store-header (generation nonce offset payload longest)
  "The 56 bytes of the header of a store file whose payload, the octet
vector PAYLOAD, is at OFFSET, with GENERATION and the commit nonce NONCE;
the file is to be at most LONGEST bytes long.  Its payload CRC is at 48."
  (let ((octets (make-array +store-header-bytes+ :element-type '(unsigned-byte 8)
                                                  :initial-element 0)))
    (replace octets **store-magic**)
    (setf (octets-le octets 8 2) +store-version+
          (octets-le octets 10 2) +store-header-bytes+
          (octets-le octets 12 4) nonce
          (octets-le octets 16 8) generation
          (octets-le octets 24 8) offset
          (octets-le octets 32 8) (length payload)
          (octets-le octets 40 8) longest
          (octets-le octets 48 4) (crc32c payload)
          (octets-le octets 52 4) (crc32c octets :end 52))
    octets))

(defun header-payload-crc (header-octets)
  "The payload CRC in the header octets ENCODE-STORE-HEADER made."
  (octets-le header-octets 48 4))

(defun corrupted (place offset expected control &rest arguments)
  "Signal STORE-CORRUPTED about the store file PLACE at byte OFFSET, where
EXPECTED (a string or NIL) should have been: CONTROL applied to ARGUMENTS
says what is wrong."
  (error 'store-corrupted :pathname place :offset offset :expected expected
                          :message (apply #'format nil control arguments)))

(defun decode-store-header (octets count file-size place)
  "Check the header of a store file of FILE-SIZE bytes, of which OCTETS
holds the first COUNT (at most +STORE-HEADER-BYTES+), and return its
STORE-HEADER.  Anything but a valid header of version 1 or 2, for a file
of a size it allows, signals STORE-CORRUPTED about PLACE."
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
        ((zerop (octets-le octets 8 2))
         (corrupted place 8 (format nil "version ~d" +store-version+)
                    "invalid format version ~d" (octets-le octets 8 2)))
        (t
         (let* ((version (octets-le octets 8 2))
                (header-bytes (if (= version 1) +store-version-1-header-bytes+ +store-header-bytes+))
                (crc-at (- header-bytes 4)))
           (cond ((< count header-bytes)
                  (corrupted place count "a complete header" "the file ends inside its header"))
                 ((/= (crc32c octets :end crc-at) (octets-le octets crc-at 4))
                  (corrupted place crc-at
                             (format nil "the header's CRC32C ~8,'0X" (crc32c octets :end crc-at))
                             "the header is damaged: its checksum does not match"))
                 ((/= (octets-le octets 10 2) header-bytes)
                  (corrupted place 10 (format nil "~d" header-bytes)
                             "invalid header length ~d" (octets-le octets 10 2)))
                 ((= version 1)
                  (check-store-file-size (make-store-header 1 (octets-le octets 16 8)
                                                            (octets-le octets 12 4)
                                                            header-bytes (octets-le octets 24 8)
                                                            (+ header-bytes (octets-le octets 24 8))
                                                            (octets-le octets 32 4))
                                         file-size place))
                 ((< (octets-le octets 24 8) header-bytes)
                  (corrupted place 24 (format nil "an offset of ~d or more" header-bytes)
                             "the payload offset ~d is inside the header" (octets-le octets 24 8)))
                 ((< (octets-le octets 40 8) (+ (octets-le octets 24 8) (octets-le octets 32 8)))
                  (corrupted place 40 "a size no less than the payload's end"
                             "the longest size ~d is less than the payload's end ~d"
                             (octets-le octets 40 8)
                             (+ (octets-le octets 24 8) (octets-le octets 32 8))))
                 (t
                  (check-store-file-size (make-store-header 2 (octets-le octets 16 8)
                                                            (octets-le octets 12 4)
                                                            (octets-le octets 24 8)
                                                            (octets-le octets 32 8)
                                                            (octets-le octets 40 8)
                                                            (octets-le octets 48 4))
                                         file-size place)))))))

(defun check-store-file-size (header file-size place)
  "HEADER, when FILE-SIZE is a size it allows (from the payload's end to its
longest); otherwise STORE-CORRUPTED about PLACE: the file is cut short, or
bytes follow."
  (let ((end (+ (store-header-offset header) (store-header-length header))))
    (cond ((< file-size end)
           (corrupted place file-size (format nil "~d bytes" end)
                      "the file is cut short: ~d bytes of payload announced, ~d present"
                      (store-header-length header)
                      (max 0 (- file-size (store-header-offset header)))))
          ((> file-size (store-header-longest header))
           (corrupted place (store-header-longest header) "the end of the file"
                      "~d bytes follow the payload" (- file-size (store-header-longest header))))
          (t header))))

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
  "Read the payload HEADER announces from FD and check its CRC32C: the
payload, a fresh octet vector, or STORE-CORRUPTED."
  (let* ((offset (store-header-offset header))
         (length (store-header-length header))
         (payload (make-array length :element-type '(unsigned-byte 8))))
    (multiple-value-bind (ok errno) (system-seek fd offset)
      (unless ok (errno-fail place errno "cannot read the store file")))
    (let ((count (read-fully fd payload 0 length place)))
      (when (< count length)
        ;; the file shrank under us: only a program that ignores the lock does that
        (corrupted place (+ offset count) (format nil "~d bytes" length)
                   "the file is cut short")))
    (let ((crc (crc32c payload)))
      (unless (= crc (store-header-crc header))
        (corrupted place offset
                   (format nil "a payload whose CRC32C is ~8,'0X" (store-header-crc header))
                   "the payload is damaged: its CRC32C is ~8,'0X" crc)))
    payload))

(defvar *commit-write-fault* nil
  "For tests only: NIL, or a function called with no arguments in the middle
of a commit's writes (between the header and the payload of a new file,
between the payload and the header of a commit in place), as a failing
write(2) would interrupt it; it signals to stand for the failure (a full
disk).")

(defun write-octets-at (fd octets offset place)
  "pwrite(2) all of OCTETS to FD at the file OFFSET, retried on EINTR and
after short writes.  A failing write signals BINSTORE-FILE-ERROR about
PLACE (a full disk: ENOSPC)."
  (declare (type (simple-array (unsigned-byte 8) (*)) octets))
  (with-pinned-objects (octets)
    (let ((address (pointer-address (vector-pointer octets)))
          (done 0))
      (loop while (< done (length octets))
            do (multiple-value-bind (count errno)
                   (system-pwrite fd (address-pointer (+ address done))
                                  (- (length octets) done) (+ offset done))
                 (cond (count (incf done count))
                       ((eql errno +eintr+))
                       (t (errno-fail place errno "cannot write the store file"))))))))

(defun write-store-frame (fd header payload)
  "write(2) the HEADER octets and the PAYLOAD octets to FD, a new file.  A
failing write signals STORE-ERROR (a full disk)."
  (flet ((write-octets (octets)
           (declare (type (simple-array (unsigned-byte 8) (*)) octets))
           (with-pinned-objects (octets)
             (write-fully fd (pointer-address (vector-pointer octets)) (length octets)))))
    (write-octets header)
    (when *commit-write-fault*
      (funcall *commit-write-fault*))
    (write-octets payload)))

(defun write-store-in-place (fd header payload offset new-size old-size place)
  "Commit in place to the store file open on FD, OLD-SIZE bytes long: write
PAYLOAD at OFFSET, where no byte of the live payload is, then the HEADER
octets (which name it) at 0, then cut the file to NEW-SIZE when it is
longer (NEW-SIZE is at least the payload's end).  The header is
the commit: 56 bytes in one page, written by one pwrite(2) that a killed
process either completes or never starts, so a crash leaves the old state
or the new one.  Failures signal BINSTORE-FILE-ERROR about PLACE, before
the header is written: the old state stays."
  (write-octets-at fd payload offset place)
  (when *commit-write-fault*
    (funcall *commit-write-fault*))
  (multiple-value-bind (count errno)
      (with-pinned-objects (header)
        (loop (multiple-value-bind (count errno)
                  (system-pwrite fd (vector-pointer header) (length header) 0)
                (unless (eql errno +eintr+) (return (values count errno))))))
    (unless (eql count (length header))
      ;; a regular file's write of a few bytes is never short: if one was,
      ;; the header may be torn, and the next reader will say so
      (errno-fail place (or errno +einval+) "cannot write the store file's header")))
  (when (> old-size new-size)
    ;; the commit is done: a failure here only leaves the file longer,
    ;; which its header allows
    (system-ftruncate fd new-size)))
