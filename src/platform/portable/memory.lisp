;;;; The platform's raw memory in portable Common Lisp: the names of
;;;; src/platform/memory.lisp (SBCL's) over Lisp vectors, for Lisps whose
;;;; collector moves objects and that give no address of a vector's data
;;;; (CLISP; ABCL later).
;;;;
;;;; Virtual addresses.  A pointer is an integer that names a segment and an
;;;; offset in it: (segment << +SEGMENT-SHIFT+) + offset.  A segment is a
;;;; live Lisp vector in the segment table, seen as bytes:
;;;;   octets         an (unsigned-byte 8) vector, byte for byte;
;;;;   base chars     a string whose character I is the byte at I (the
;;;;                  layout of an SBCL base string: for ASCII strings);
;;;;   UTF-32         a string whose character I is the 32-bit integer at 4I
;;;;                  (the layout of an SBCL character string, which the
;;;;                  UTF-8 kernels read and write a word at a time);
;;;;   16/32-bit      an (unsigned-byte 16) or (unsigned-byte 32) vector,
;;;;                  little-endian;
;;;;   chunks         a simple vector of octet vectors of 1 MiB each (the
;;;;                  last may be shorter), one memory of their bytes in
;;;;                  order: MAKE-OCTET-MEMORY's, which may be larger than a
;;;;                  Lisp's longest vector (CLISP's arrays hold fewer than
;;;;                  2^24 elements);
;;;;   opaque         any other vector (a T vector): it has no bytes to read,
;;;;                  and reading or writing one is a bug, which signals.
;;;; Integer arithmetic on pointers (POINTER+, adding an offset to a
;;;; POINTER-ADDRESS) stays within a segment, as it stays within an object
;;;; on SBCL.  VECTOR-POINTER registers a vector as a segment and
;;;; WITH-PINNED-OBJECTS releases, when it returns, the segments registered
;;;; inside it, unless an enclosing form pins their vector too: a pointer is
;;;; valid while its vector is pinned, as on SBCL.  MAKE-OCTET-MEMORY's
;;;; segments (chunks, for the platform's MAP-MEMORY) live until
;;;; FREE-OCTET-MEMORY.
;;;;
;;;; The MEM- accessors look the segment up and read or write its vector
;;;; with AREF; wider ones compose bytes, little-endian, and floats go
;;;; through their IEEE 754 bits (portable/floats.lisp).  An access that
;;;; straddles two chunks goes byte by byte; block copies (MOVE-MEMORY,
;;;; MAP-OCTET-RUNS) go a run of one vector at a time.  Slow, a table
;;;; lookup per access, but exact, and nothing outside src/platform/ changes.

(in-package #:binstore)

(deftype pointer ()
  "A virtual address: a segment of the segment table and an offset in it,
an integer (see above)."
  '(integer 0))

(deftype word ()
  "An unsigned machine word."
  '(unsigned-byte 64))

(deftype signed-word ()
  "A signed machine word."
  '(signed-byte 64))

(defconstant +word-bytes+ 8
  "Bytes in a machine word (the format's; SBCL's on x86-64).")

(defconstant +machine-addresses-p+ nil
  "True where binstore's pointers are the machine's addresses, which C
may be given (binstore/compression gives them to libzstd and liblz4).
Not here: a pointer names a segment of Lisp vectors and an offset.")

(defconstant +segment-shift+ 36
  "Bits of a pointer that are its offset in its segment: a segment holds up
to 64 GiB, and CLISP's fixnums (48 bits) hold 4096 segments.")

(defconstant +offset-mask+ (1- (ash 1 +segment-shift+))
  "The offset bits of a pointer.")

;;; Segment kinds (known at read time: CASE keys below are #. of them).
(eval-when (:compile-toplevel :load-toplevel :execute)
  (defconstant +segment-octets+ 0)
  (defconstant +segment-base-chars+ 1)
  (defconstant +segment-utf32+ 2)
  (defconstant +segment-u16+ 3)
  (defconstant +segment-u32+ 4)
  (defconstant +segment-opaque+ 5)
  (defconstant +segment-chunks+ 6))

(defconstant +memory-chunk-shift+ 20
  "A chunks segment's chunk holds 2^+MEMORY-CHUNK-SHIFT+ bytes (1 MiB): large
enough that block copies go in long runs, small enough for any Lisp's
octet vectors, and for growing a memory to copy little (its last chunk).")

(defconstant +memory-chunk-bytes+ (ash 1 +memory-chunk-shift+)
  "The bytes of a chunk (the last chunk of a memory may hold fewer).")

;;; The segment table -------------------------------------------------------

(defvar *segment-vectors* (cl:make-array 64 :initial-element nil)
  "Segment I's vector at I; NIL for a free segment.  Segment 0 is never
used, so that no valid pointer is 0.")

(defvar *segment-kinds* (cl:make-array 64 :initial-element +segment-opaque+)
  "Segment I's kind (+SEGMENT-OCTETS+ ...) at I.")

(defvar *free-segments* '()
  "Segments released, to be used again (so the table stays small).")

(defvar *next-segment* 1
  "The lowest segment never used.")

(defvar *segments-by-vector* (make-hash-table :test 'eq)
  "For each vector registered, a list of (kind segment thread): a string
may be seen both as base characters and as UTF-32, and two threads may pin
one vector at once, each with a segment of its own that it releases.")

(defvar *registered* '()
  "Segments registered by VECTOR-POINTER, newest first: WITH-PINNED-OBJECTS
releases those registered in its extent.  Each thread's outermost
WITH-PINNED-OBJECTS binds a list of its own.")

;;; Threads (ABCL's; CLISP has none) share the table: it changes under a
;;; lock.  Reading a segment's vector takes none: a thread reads only
;;; segments it registered, and a table that grows keeps every entry.

(defvar *segment-table-lock* #+abcl (threads:make-mutex) #-abcl nil
  "Held while the segment table changes.")

(defmacro with-segment-table-locked (&body body)
  "BODY holding *SEGMENT-TABLE-LOCK* (which is not recursive)."
  #+abcl `(threads:with-mutex (*segment-table-lock*) ,@body)
  #-abcl `(progn ,@body))

(defun current-thread-or-nil ()
  "The current thread, or NIL on a Lisp without threads."
  #+abcl (threads:current-thread)
  #-abcl nil)

(defvar *pinned* '()
  "The objects the active WITH-PINNED-OBJECTS forms pin, innermost first.")

(defun vector-segment-kind (vector)
  "The kind of segment VECTOR is seen as by VECTOR-POINTER."
  (cond ((typep vector '(simple-array (unsigned-byte 8) (*))) +segment-octets+)
        ((stringp vector) +segment-base-chars+)
        ((typep vector '(simple-array (unsigned-byte 16) (*))) +segment-u16+)
        ((typep vector '(simple-array (unsigned-byte 32) (*))) +segment-u32+)
        (t +segment-opaque+)))

(defun new-segment (vector kind)
  "Register VECTOR as a segment of KIND; return the segment's number."
  (let ((segment (or (pop *free-segments*)
                     (prog1 *next-segment* (incf *next-segment*)))))
    (when (>= segment (length *segment-vectors*))
      (let ((n (* 2 (length *segment-vectors*))))
        (setf *segment-vectors* (replace (cl:make-array n :initial-element nil) *segment-vectors*)
              *segment-kinds* (replace (cl:make-array n :initial-element +segment-opaque+)
                                       *segment-kinds*))))
    (setf (svref *segment-vectors* segment) vector
          (svref *segment-kinds* segment) kind)
    segment))

(defun free-segment (segment)
  "Forget SEGMENT: its vector may be collected, its number used again."
  (let ((vector (svref *segment-vectors* segment)))
    (when vector
      (let ((entries (remove segment (gethash vector *segments-by-vector*) :key #'second)))
        (if entries
            (setf (gethash vector *segments-by-vector*) entries)
            (remhash vector *segments-by-vector*)))
      (setf (svref *segment-vectors* segment) nil)
      (push segment *free-segments*))))

(defun segment-pointer (vector kind)
  "The pointer to the first byte of VECTOR seen as a segment of KIND,
registering it unless it is."
  (let ((thread (current-thread-or-nil)))
    (with-segment-table-locked
      (let ((segment (second (find-if (lambda (entry)
                                        (and (eql (first entry) kind) (eq (third entry) thread)))
                                      (gethash vector *segments-by-vector*)))))
        (unless segment
          (setf segment (new-segment vector kind))
          (push (list kind segment thread) (gethash vector *segments-by-vector*))
          (push segment *registered*))
        (ash segment +segment-shift+)))))

(defun release-segments (mark objects)
  "Release the segments registered since *REGISTERED* was MARK, but keep,
for the enclosing pinning form, those of vectors it pins too (OBJECTS are
the ones the form ending pinned)."
  (declare (ignore objects))
  (let ((kept '()))
    (with-segment-table-locked
      (loop until (eq *registered* mark)
            do (let ((segment (pop *registered*)))
                 (if (member (svref *segment-vectors* segment) *pinned* :test #'eq)
                     (push segment kept)
                     (free-segment segment)))))
    (setf *registered* (nconc (nreverse kept) *registered*))))

(defun pin-and-call (objects function)
  "Call FUNCTION with OBJECTS pinned, within this thread's *REGISTERED*."
  (let ((mark *registered*))
    (unwind-protect
         (let ((*pinned* (append objects *pinned*)))
           (funcall function))
      (release-segments mark objects))))

(defun call-with-pinned-objects (objects function)
  "Call FUNCTION with OBJECTS pinned (see WITH-PINNED-OBJECTS)."
  (if *pinned*
      (pin-and-call objects function)
      ;; this thread's outermost pinning form: a list of its own, which
      ;; another thread's forms neither push onto nor release from
      (let ((*registered* '()))
        (pin-and-call objects function))))

(defmacro with-pinned-objects ((&rest objects) &body body)
  "Run BODY with OBJECTS pinned: pointers into them (VECTOR-POINTER) are
valid until BODY returns, when the segments registered inside it are
released (those whose vectors an enclosing form pins are kept for it)."
  `(call-with-pinned-objects (list ,@objects) (lambda () ,@body)))

(defun vector-pointer (vector)
  "A pointer to the first element of the simple VECTOR, valid while VECTOR
is pinned (WITH-PINNED-OBJECTS): an octet vector's bytes; a string's
characters one byte each (its base characters, which are ASCII: see
CHARACTER-STRING-POINTER for four bytes each); a 16- or 32-bit vector's
elements, little-endian; any other vector's elements cannot be read."
  (segment-pointer vector (vector-segment-kind vector)))

(defun call-with-octets-copy (vector function)
  "Call FUNCTION with a pointer to a simple copy of the elements of VECTOR,
an octet vector (up to its total size), and copy them back into VECTOR
however FUNCTION exits (as SBCL leaves what a failed store wrote in place).
For the Lisps that give no pointer into a vector that is not simple."
  (let* ((n (array-total-size vector))
         (whole (cl:make-array n :element-type '(unsigned-byte 8) :displaced-to vector))
         (copy (cl:make-array n :element-type '(unsigned-byte 8))))
    (replace copy whole)
    (unwind-protect
         (with-pinned-objects (copy)
           (funcall function (vector-pointer copy)))
      (replace whole copy))))

(defun character-string-pointer (string)
  "A pointer to the characters of the simple STRING as 32-bit integers,
their codes, little-endian (SBCL's layout of a character string, which the
UTF-8 kernels read and write), valid while STRING is pinned."
  (segment-pointer string +segment-utf32+))

;;; Pointers ---------------------------------------------------------------

(defmacro pointer+ (pointer offset)
  "The pointer OFFSET bytes after POINTER."
  `(+ ,pointer ,offset))

(defmacro pointer- (pointer base)
  "The signed distance in bytes from BASE to POINTER."
  `(- ,pointer ,base))

(defmacro pointer= (a b)
  "True when the pointers A and B are the same address."
  `(= ,a ,b))

(defmacro pointer-address (pointer)
  "POINTER's address, an unsigned integer (the pointer itself)."
  pointer)

(defmacro address-pointer (address)
  "The pointer to the unsigned integer ADDRESS (the address itself)."
  address)

;;; Bytes of a segment -------------------------------------------------------

(define-condition invalid-memory-access (binstore-error) ()
  (:documentation "binstore read or wrote memory no segment holds: a bug in
binstore's platform, never a problem with the data."))

(defun bad-access (pointer)
  (error 'invalid-memory-access
         :message (format nil "binstore internal error: no readable memory at ~
                               segment ~d, offset ~d"
                          (ash pointer (- +segment-shift+)) (logand pointer +offset-mask+))))

(defun segment-byte (address)
  "The byte at the virtual ADDRESS."
  (let* ((segment (ash address (- +segment-shift+)))
         (i (logand address +offset-mask+))
         (v (and (< segment (length *segment-vectors*)) (svref *segment-vectors* segment))))
    (case (and v (svref *segment-kinds* segment))
      (#.+segment-octets+ (aref (the (simple-array (unsigned-byte 8) (*)) v) i))
      (#.+segment-chunks+ (aref (the (simple-array (unsigned-byte 8) (*))
                                     (svref v (ash i (- +memory-chunk-shift+))))
                                (logand i (1- +memory-chunk-bytes+))))
      (#.+segment-base-chars+ (char-code (schar v i)))
      (#.+segment-utf32+ (ldb (byte 8 (* 8 (logand i 3))) (char-code (schar v (ash i -2)))))
      (#.+segment-u16+ (ldb (byte 8 (* 8 (logand i 1))) (aref v (ash i -1))))
      (#.+segment-u32+ (ldb (byte 8 (* 8 (logand i 3))) (aref v (ash i -2))))
      (t (bad-access address)))))

(defun set-segment-byte (address byte)
  "Store BYTE at the virtual ADDRESS; return BYTE."
  (let* ((segment (ash address (- +segment-shift+)))
         (i (logand address +offset-mask+))
         (v (and (< segment (length *segment-vectors*)) (svref *segment-vectors* segment))))
    (case (and v (svref *segment-kinds* segment))
      (#.+segment-octets+ (setf (aref (the (simple-array (unsigned-byte 8) (*)) v) i) byte))
      (#.+segment-chunks+ (setf (aref (the (simple-array (unsigned-byte 8) (*))
                                           (svref v (ash i (- +memory-chunk-shift+))))
                                      (logand i (1- +memory-chunk-bytes+)))
                                byte))
      (#.+segment-base-chars+ (setf (schar v i) (code-char byte)))
      (#.+segment-utf32+
       ;; one byte of a code: the code's other bytes stay (a code written
       ;; byte by byte is a valid one at every step when it ends valid)
       (let ((k (ash i -2)))
         (setf (schar v k) (code-char (dpb byte (byte 8 (* 8 (logand i 3)))
                                           (char-code (schar v k)))))))
      (#.+segment-u16+ (let ((k (ash i -1)))
                         (setf (aref v k) (dpb byte (byte 8 (* 8 (logand i 1))) (aref v k)))))
      (#.+segment-u32+ (let ((k (ash i -2)))
                         (setf (aref v k) (dpb byte (byte 8 (* 8 (logand i 3))) (aref v k)))))
      (t (bad-access address)))
    byte))

(declaim (inline octet-run))
(defun octet-run (address)
  "The octet vector that holds the byte at the virtual ADDRESS, and the
byte's index in it, when ADDRESS lies in an octets or chunks segment; NIL
otherwise.  The bytes from the index to the vector's end follow ADDRESS in
order: a run a block copy may take at once."
  (let* ((segment (ash address (- +segment-shift+)))
         (i (logand address +offset-mask+))
         (v (and (< segment (length *segment-vectors*)) (svref *segment-vectors* segment))))
    (case (and v (svref *segment-kinds* segment))
      (#.+segment-octets+ (values v i))
      (#.+segment-chunks+ (values (svref v (ash i (- +memory-chunk-shift+)))
                                  (logand i (1- +memory-chunk-bytes+))))
      (t nil))))

(defun utf32-segment-vector (address bytes)
  "The string of ADDRESS's segment when it is seen as UTF-32 and the BYTES
bytes at ADDRESS (4 or 8) are whole characters; NIL otherwise."
  (let* ((segment (ash address (- +segment-shift+)))
         (v (and (< segment (length *segment-vectors*)) (svref *segment-vectors* segment))))
    (and v
         (eql (svref *segment-kinds* segment) +segment-utf32+)
         (zerop (logand address 3))
         (>= bytes 4)
         v)))

(defun memory-unsigned (address bytes)
  "The unsigned integer of BYTES bytes at the virtual ADDRESS, little-endian."
  (multiple-value-bind (v i) (octet-run address)
    (if (and v (<= (+ i bytes) (length v)))
        ;; within one octet vector (an access that straddles two chunks
        ;; goes byte by byte, below)
        (let ((v v) (value 0))
          (declare (type (simple-array (unsigned-byte 8) (*)) v))
          (loop for k from (1- bytes) downto 0
                do (setf value (logior (ash value 8) (aref v (+ i k)))))
          value)
        (let ((string (utf32-segment-vector address bytes)))
          (if string
              ;; whole characters of a UTF-32 string: one or two codes
              (let ((k (ash (logand address +offset-mask+) -2)))
                (if (= bytes 4)
                    (char-code (schar string k))
                    (logior (char-code (schar string k))
                            (ash (char-code (schar string (1+ k))) 32))))
              (let ((value 0))
                (loop for k from (1- bytes) downto 0
                      do (setf value (logior (ash value 8) (segment-byte (+ address k)))))
                value))))))

(defun set-memory-unsigned (address bytes value)
  "Store the low BYTES bytes of the integer VALUE at the virtual ADDRESS,
little-endian; return VALUE."
  (multiple-value-bind (v i) (octet-run address)
    (if (and v (<= (+ i bytes) (length v)))
        (let ((v v))
          (declare (type (simple-array (unsigned-byte 8) (*)) v))
          (dotimes (k bytes)
            (setf (aref v (+ i k)) (ldb (byte 8 (* 8 k)) value))))
        (let ((string (utf32-segment-vector address bytes)))
          (if string
              (let ((k (ash (logand address +offset-mask+) -2)))
                (setf (schar string k) (code-char (ldb (byte 32 0) value)))
                (when (= bytes 8)
                  (setf (schar string (1+ k)) (code-char (ldb (byte 32 32) value)))))
              (dotimes (k bytes)
                (set-segment-byte (+ address k) (ldb (byte 8 (* 8 k)) value)))))))
  value)

(declaim (inline signed-of))
(defun signed-of (value bits)
  "The unsigned VALUE of BITS bits read as two's complement."
  (if (logbitp (1- bits) value) (- value (ash 1 bits)) value))

;;; The accessors: macros, each a place (DEFSETF), as on SBCL.

(defmacro define-memory-accessor (name bytes &key signed float)
  (let ((reader (intern (format nil "%~a" name)))
        (writer (intern (format nil "%SET-~a" name))))
    `(progn
       (defun ,reader (pointer offset)
         ,(cond (float `(,(if (= bytes 4) 'single-float-from-bits 'double-float-from-bits*)
                          (memory-unsigned (+ pointer offset) ,bytes)))
                (signed `(signed-of (memory-unsigned (+ pointer offset) ,bytes) ,(* 8 bytes)))
                (t `(memory-unsigned (+ pointer offset) ,bytes))))
       (defun ,writer (pointer offset value)
         (set-memory-unsigned (+ pointer offset) ,bytes
                              ,(cond ((not float) 'value)
                                     ((= bytes 4) '(single-float-bits value))
                                     (t '(double-float-bits value))))
         value)
       (defmacro ,name (pointer offset)
         ,(format nil "The ~a at OFFSET bytes after POINTER (a place)."
                  (string-downcase (symbol-name name)))
         (list ',reader pointer offset))
       (defsetf ,name ,writer))))

(define-memory-accessor mem-u8 1)
(define-memory-accessor mem-u16 2)
(define-memory-accessor mem-u32 4)
(define-memory-accessor mem-u64 8)
(define-memory-accessor mem-s16 2 :signed t)
(define-memory-accessor mem-s32 4 :signed t)
(define-memory-accessor mem-s64 8 :signed t)
(define-memory-accessor mem-single 4 :float t)
(define-memory-accessor mem-double 8 :float t)

;;; Octets to octets: REPLACE-OCTETS.  ABCL's platform defines it over its
;;; vectors' ByteBuffers (src/platform/abcl/octets.lisp), as ABCL's REPLACE
;;; checks the type of each element; elsewhere it is REPLACE.
#-abcl
(progn
  (declaim (inline replace-octets))
  (defun replace-octets (to to-start from from-start count)
    "Copy COUNT bytes of the octet vector FROM at FROM-START to TO at
TO-START, as memmove(3) does (REPLACE copies overlapping ranges so)."
    (replace to from :start1 to-start :end1 (+ to-start count) :start2 from-start)))

(defun map-octet-runs (function address count)
  "Call FUNCTION with (VECTOR START END DONE) for each run of the COUNT
bytes at the virtual ADDRESS, in order: the run's bytes are VECTOR's from
START to END, and DONE bytes of the COUNT came before them.  True when
ADDRESS lies in an octets or chunks segment; NIL (and FUNCTION not called)
when it lies in another kind, whose bytes are read by the MEM- accessors."
  (cond ((zerop count) t)
        ((null (octet-run address)) nil)
        (t (let ((done 0))
             (loop while (< done count)
                   do (multiple-value-bind (v i) (octet-run (+ address done))
                        (let ((n (min (- count done) (- (length v) i))))
                          (funcall function v i (+ i n) done)
                          (incf done n))))
             t))))

(defun move-octet-runs (to from count)
  "MOVE-MEMORY between two octets or chunks segments: REPLACE-OCTETS a run
at a time, each run as long as both the source's and the destination's vectors
allow.  Overlapping ranges with the destination after the source are
copied from the end, a run at a time, as memmove would; within one vector
REPLACE copies overlapping ranges correctly."
  (if (and (< from to) (< to (+ from count)))
      (let ((left count))               ; bytes not yet copied, at the start
        (loop while (plusp left)
              do (multiple-value-bind (tv ti) (octet-run (+ to left -1))
                   (multiple-value-bind (fv fi) (octet-run (+ from left -1))
                     ;; the runs end at TI and FI (included) and begin at
                     ;; their vector's start at the earliest
                     (let ((n (min left (1+ ti) (1+ fi))))
                       (replace-octets tv (- (1+ ti) n) fv (- (1+ fi) n) n)
                       (decf left n))))))
      (let ((done 0))
        (loop while (< done count)
              do (multiple-value-bind (tv ti) (octet-run (+ to done))
                   (multiple-value-bind (fv fi) (octet-run (+ from done))
                     (let ((n (min (- count done) (- (length tv) ti) (- (length fv) fi))))
                       (replace-octets tv ti fv fi n)
                       (incf done n))))))))

(defun move-memory (to from count)
  "Copy COUNT bytes from the pointer FROM to the pointer TO (memmove: the
ranges may overlap); the caller has checked both ranges.  Octets to octets
with REPLACE-OCTETS, a run of one vector at a time (which copies overlapping
ranges as memmove does), any other byte by byte."
  (cond ((zerop count))
        ((and (octet-run to) (octet-run from))
         (move-octet-runs to from count))
        ((and (< from to) (< to (+ from count)))
         ;; overlapping, the destination after: from the end
         (loop for k from (1- count) downto 0
               do (set-segment-byte (+ to k) (segment-byte (+ from k)))))
        (t
         (dotimes (k count)
           (set-segment-byte (+ to k) (segment-byte (+ from k))))))
  (values))

;;; Memory of its own: chunks -------------------------------------------------

(defun make-chunks (bytes &optional (chunks (cl:make-array 0)))
  "A simple vector of octet vectors holding BYTES bytes, +MEMORY-CHUNK-BYTES+ each
but the last: CHUNKS' full ones kept, its last one copied into a larger one
when it grows, and new ones zero."
  (let* ((n (ceiling bytes +memory-chunk-bytes+))
         (new (cl:make-array n :initial-element nil))
         (kept (min n (length chunks))))
    (replace new chunks :end2 kept)
    (dotimes (k n new)
      (let ((size (if (= k (1- n)) (- bytes (* k +memory-chunk-bytes+)) +memory-chunk-bytes+))
            (old (svref new k)))
        (unless (and old (= (length old) size))
          (setf (svref new k)
                (let ((chunk (cl:make-array size :element-type '(unsigned-byte 8)
                                                 :initial-element 0)))
                  (if old (replace chunk old) chunk))))))))

(defun make-octet-memory (bytes)
  "BYTES bytes of fresh memory, zero, as a chunks segment of its own until
FREE-OCTET-MEMORY, whatever is pinned: the memory the platform's MAP-MEMORY
gives, of any size below 2^+SEGMENT-SHIFT+.  Returns its pointer.  Its
vectors are as long as +MEMORY-CHUNK-BYTES+ at most, so it may hold more bytes
than the Lisp's longest vector.  A STORAGE-CONDITION when the heap cannot
hold it."
  (let ((chunks (make-chunks bytes)))
    (ash (with-segment-table-locked (new-segment chunks +segment-chunks+)) +segment-shift+)))

(defun resize-octet-memory (pointer bytes)
  "Make the memory MAKE-OCTET-MEMORY gave at POINTER hold BYTES bytes,
keeping its contents up to BYTES (the new bytes zero), at the same pointer:
whole chunks are kept, never copied.  Returns POINTER."
  (let ((segment (ash pointer (- +segment-shift+))))
    (setf (svref *segment-vectors* segment)
          (make-chunks bytes (svref *segment-vectors* segment)))
    pointer))

(defun free-octet-memory (pointer)
  "End the memory MAKE-OCTET-MEMORY gave at POINTER: its chunks may be
collected and its segment number used again."
  (let ((segment (ash pointer (- +segment-shift+))))
    (with-segment-table-locked
      (setf (svref *segment-vectors* segment) nil)
      (push segment *free-segments*))
    (values)))
