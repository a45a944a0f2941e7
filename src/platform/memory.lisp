;;;; The platform's raw memory: pointers, the bytes at them, pinning, copying,
;;;; machine words, and the few control primitives binstore's kernels need.
;;;;
;;;; Everything outside src/platform/ reads and writes memory through these
;;;; names and names no SB- symbol (`make check-layers' checks it).  On SBCL
;;;; each is the SB-SYS or SB-EXT operator of the same meaning, given here as
;;;; a macro or an inline function so that the code compiled is exactly what
;;;; it was: (setf (mem-u8 p k) x) expands to (setf (sb-sys:sap-ref-8 p k) x),
;;;; which SBCL compiles to one store.  A port to another Lisp defines these
;;;; names over its own foreign memory (CFFI's MEM-REF, pinned vectors or
;;;; static vectors); the rest of binstore does not change.

(in-package #:binstore)

;;; The byte order is checked once, here: every multi-byte MEM- accessor
;;; below reads the host's order, and binstore's format is little-endian
;;; (doc/FORMAT.md), so on a big-endian host every fixed-width field would
;;; be read reversed.  Refusing to load is better than writing files that
;;; no other machine reads.
(eval-when (:compile-toplevel :load-toplevel :execute)
  (unless (eq sb-c:*backend-byte-order* :little-endian)
    (error "binstore needs a little-endian host: its fixed-width fields are ~
            read and written in the host's byte order, and the format is ~
            little-endian.  This host is ~(~a~)." sb-c:*backend-byte-order*)))

(deftype pointer ()
  "An address in memory, unboxed in compiled code (SBCL's SAP)."
  'sb-sys:system-area-pointer)

(deftype word ()
  "An unsigned machine word."
  'sb-ext:word)

(deftype signed-word ()
  "A signed machine word."
  'sb-vm:signed-word)

(defconstant +word-bytes+ sb-vm:n-word-bytes
  "Bytes in a machine word.")

(defconstant +machine-addresses-p+ t
  "True where binstore's pointers are the machine's addresses, which C
may be given (binstore/compression gives them to libzstd and liblz4).")

;;; Pointers.

(defmacro pointer+ (pointer offset)
  "The pointer OFFSET bytes after POINTER."
  `(sb-sys:sap+ ,pointer ,offset))

(defmacro pointer- (pointer base)
  "The signed distance in bytes from BASE to POINTER."
  `(sb-sys:sap- ,pointer ,base))

(defmacro pointer= (a b)
  "True when the pointers A and B are the same address."
  `(sb-sys:sap= ,a ,b))

(defmacro pointer-address (pointer)
  "POINTER's address, an unsigned integer (a fixnum on 64-bit SBCL)."
  `(sb-sys:sap-int ,pointer))

(defmacro address-pointer (address)
  "The pointer to the unsigned integer ADDRESS."
  `(sb-sys:int-sap ,address))

(defmacro vector-pointer (vector)
  "A pointer to the first element of the specialized simple VECTOR, valid
only while VECTOR is pinned (WITH-PINNED-OBJECTS)."
  `(sb-sys:vector-sap ,vector))

(defmacro with-pinned-objects ((&rest objects) &body body)
  "Run BODY with OBJECTS kept where they are: the collector moves none of
them until BODY returns, so pointers into them stay valid."
  `(sb-sys:with-pinned-objects ,objects ,@body))

;;; The bytes at a pointer, in the host's (little-endian) order.  Each is a
;;; place: (setf (mem-u32 p k) x) stores.

(defmacro mem-u8 (pointer offset)
  "The octet OFFSET bytes after POINTER."
  `(sb-sys:sap-ref-8 ,pointer ,offset))

(defmacro mem-u16 (pointer offset)
  "The unsigned 16-bit integer OFFSET bytes after POINTER."
  `(sb-sys:sap-ref-16 ,pointer ,offset))

(defmacro mem-u32 (pointer offset)
  "The unsigned 32-bit integer OFFSET bytes after POINTER."
  `(sb-sys:sap-ref-32 ,pointer ,offset))

(defmacro mem-u64 (pointer offset)
  "The unsigned 64-bit integer OFFSET bytes after POINTER."
  `(sb-sys:sap-ref-64 ,pointer ,offset))

(defmacro mem-s16 (pointer offset)
  "The signed 16-bit integer OFFSET bytes after POINTER."
  `(sb-sys:signed-sap-ref-16 ,pointer ,offset))

(defmacro mem-s32 (pointer offset)
  "The signed 32-bit integer OFFSET bytes after POINTER."
  `(sb-sys:signed-sap-ref-32 ,pointer ,offset))

(defmacro mem-s64 (pointer offset)
  "The signed 64-bit integer OFFSET bytes after POINTER."
  `(sb-sys:signed-sap-ref-64 ,pointer ,offset))

(defmacro mem-single (pointer offset)
  "The IEEE single float OFFSET bytes after POINTER."
  `(sb-sys:sap-ref-single ,pointer ,offset))

(defmacro mem-double (pointer offset)
  "The IEEE double float OFFSET bytes after POINTER."
  `(sb-sys:sap-ref-double ,pointer ,offset))

(defmacro move-memory (to from count)
  "Copy COUNT bytes from the pointer FROM to the pointer TO (memmove: the
ranges may overlap); the caller has checked both ranges."
  `(sb-sys:memmove ,to ,from ,count))

;;; Compiler and control primitives.

(defmacro truly-the (type form)
  "FORM's value, which the compiler takes to be of TYPE without a check:
only where the surrounding code has proved it (a comment says how)."
  `(sb-ext:truly-the ,type ,form))

(defmacro define-global (name value &optional documentation)
  "Define NAME as a global variable, never bound dynamically (so read
without a thread-local lookup), set to VALUE when first defined."
  `(sb-ext:defglobal ,name ,value ,@(when documentation (list documentation))))

(defmacro define-load-time-global (name value &optional documentation)
  "Define NAME as a global variable, never bound dynamically, whose value
is VALUE from load time on (so it may not be read at compile time)."
  `(sb-ext:define-load-time-global ,name ,value ,@(when documentation (list documentation))))

(defmacro without-interrupts (&body body)
  "Run BODY with asynchronous interrupts (timeouts, C-c, INTERRUPT-THREAD)
deferred until it returns."
  `(sb-sys:without-interrupts ,@body))

(defmacro with-local-interrupts (&body body)
  "Inside WITHOUT-INTERRUPTS, run BODY with interrupts allowed again."
  `(sb-sys:with-local-interrupts ,@body))

(defmacro compare-and-swap (place old new)
  "Atomically set PLACE to NEW if it holds OLD (EQ); return what it held."
  `(sb-ext:compare-and-swap ,place ,old ,new))

(defmacro atomic-incf (place &optional (delta 1))
  "Atomically add DELTA to the word-sized PLACE; return its old value."
  `(sb-ext:atomic-incf ,place ,delta))

(defmacro with-float-traps-masked ((&rest traps) &body body)
  "Run BODY with the floating-point TRAPS (:invalid, :overflow, ...)
masked, so that they give infinities and NaNs instead of errors."
  `(sb-int:with-float-traps-masked ,traps ,@body))
