;;;; Prefetching the next objects of a collection.
;;;;
;;;; Writing a list or vector of heap objects (symbols, structures, strings)
;;;; spends most of its time waiting for memory: each element's first cache
;;;; line, and then the lines it leads to (a symbol's name, the element's
;;;; slot in the identity table).  The writer's work per element is long
;;;; enough that the processor cannot run ahead to the next element's loads
;;;; by itself, so the misses are taken one after another.  Asking for those
;;;; lines a few elements early lets them overlap.
;;;;
;;;; On SBCL x86-64 each function here is one PREFETCHT0 instruction.  A
;;;; prefetch never faults, whatever the address, so any object is a harmless
;;;; argument (an immediate such as a fixnum gives a meaningless address).
;;;; Elsewhere they do nothing.

(in-package #:binstore)

#+(and sbcl x86-64)
(eval-when (:compile-toplevel :load-toplevel :execute)
  (sb-c:defknown prefetch-object (t) (values) (sb-c:always-translatable)
    :overwrite-fndb-silently t)
  (sb-c:defknown prefetch-svref (simple-vector (and fixnum unsigned-byte)) (values) (sb-c:always-translatable)
    :overwrite-fndb-silently t))

#+(and sbcl x86-64)
(eval-when (:compile-toplevel :load-toplevel :execute)
  ;; the tagged address lies within the object's first 16 bytes, so within
  ;; the line of its header
  (sb-c:define-vop (prefetch-object)
    (:translate prefetch-object)
    (:policy :fast-safe)
    (:args (object :scs (sb-vm::descriptor-reg sb-vm::any-reg)))
    (:generator 1
      (sb-assem:inst :prefetch :t0 (sb-vm::ea object))))
  ;; the address SVREF would load from; the index is not checked, which a
  ;; prefetch does not need
  (sb-c:define-vop (prefetch-svref)
    (:translate prefetch-svref)
    (:policy :fast-safe)
    (:args (vector :scs (sb-vm::descriptor-reg))
           (index :scs (sb-vm::unsigned-reg)))
    (:arg-types simple-vector sb-vm::positive-fixnum)
    (:generator 1
      (sb-assem:inst :prefetch :t0
                     (sb-vm::ea (- (* sb-vm:vector-data-offset sb-vm:n-word-bytes)
                                   sb-vm:other-pointer-lowtag)
                                vector index sb-vm:n-word-bytes)))))

#-(and sbcl x86-64)
(declaim (inline prefetch-object prefetch-svref))

(defun prefetch-object (object)
  "Ask for the cache line holding OBJECT's start; return no values."
  #+(and sbcl x86-64) (prefetch-object object)
  #-(and sbcl x86-64) (declare (ignore object))
  (values))

(defun prefetch-svref (vector index)
  "Ask for the cache line holding element INDEX of the simple vector VECTOR
(any index: nothing is read); return no values."
  (declare (type simple-vector vector) (type (and fixnum unsigned-byte) index))
  #+(and sbcl x86-64) (prefetch-svref vector index)
  #-(and sbcl x86-64) (declare (ignore vector index))
  (values))
