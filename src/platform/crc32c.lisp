;;;; CRC32C by the processor: SSE4.2's CRC32 instruction, eight bytes a step.
;;;;
;;;; The store checksums every file it reads and every payload it commits
;;;; with CRC32C (src/store/checksum.lisp).  Table-driven in Lisp it runs at
;;;; about 1.3 GB/s here; the instruction takes eight bytes per step with a
;;;; latency of three cycles, several times that.  On SBCL x86-64 CRC32C-WORD
;;;; is that one instruction (a VOP); CRC32C-INSTRUCTION-P (cpu.lisp) says
;;;; whether this processor has it.  Elsewhere there is no instruction and
;;;; the caller keeps to its tables.

(in-package #:binstore)

#+(and sbcl x86-64)
(eval-when (:compile-toplevel :load-toplevel :execute)
  ;; The result is declared (UNSIGNED-BYTE 64), though it is always under
  ;; 2^32 (the instruction clears the upper half): a variable SBCL sees
  ;; holding only (UNSIGNED-BYTE 32) values it keeps as a tagged fixnum,
  ;; which puts a shift before and after each CRC32 of a loop, on the
  ;; chain of dependent instructions the loop's speed is.
  (sb-c:defknown crc32c-word ((unsigned-byte 64) (unsigned-byte 64)) (unsigned-byte 64)
      (sb-c:foldable sb-c:flushable sb-c:movable sb-c:always-translatable)
    :overwrite-fndb-silently t))

#+(and sbcl x86-64)
(eval-when (:compile-toplevel :load-toplevel :execute)
  ;; CRC is not reflected nor inverted here: the caller does both, as the
  ;; instruction expects.  RESULT gets CRC first, so it must not share a
  ;; register with WORD, which is read after: RESULT lives from the first
  ;; argument on.
  (sb-c:define-vop (crc32c-word)
    (:translate crc32c-word)
    (:policy :fast-safe)
    (:args (crc :scs (sb-vm::unsigned-reg) :target result)
           (word :scs (sb-vm::unsigned-reg)))
    (:arg-types sb-vm::unsigned-num sb-vm::unsigned-num)
    (:results (result :scs (sb-vm::unsigned-reg) :from (:argument 0)))
    (:result-types sb-vm::unsigned-num)
    (:generator 3
      (sb-vm::move result crc)
      (sb-assem:inst crc32 :qword result word))))

(defun crc32c-word (crc word)
  "CRC, a CRC32C register (not inverted) in its low 32 bits, advanced over
the eight bytes of WORD, least significant first: an integer under 2^32.
Only where CRC32C-INSTRUCTION-P is true."
  (declare (type (unsigned-byte 64) crc word))
  #+(and sbcl x86-64) (crc32c-word crc word)
  #-(and sbcl x86-64) (progn crc word (error "no CRC32 instruction here")))
