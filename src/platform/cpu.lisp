;;;; What this processor has: the instructions binstore's kernels use when
;;;; they can (SSE4.2's CRC32 for the store's checksum, crc32c.lisp; AVX2
;;;; for the UTF-8 kernels, simd.lisp).
;;;;
;;;; Each is asked of the processor (CPUID) once per process and kept: the
;;;; kernels ask at each call, so the answer must cost a global's read.  A
;;;; saved image asks again when it starts, as it may run on another
;;;; processor.  Elsewhere than SBCL on x86-64 there are no such
;;;; instructions, and the answers are NIL.

(in-package #:binstore)

(eval-when (:compile-toplevel :load-toplevel :execute)
  (defun avx2-vops-p ()
    "Whether this SBCL can assemble AVX2 VOPs: a feature expression, true
or false, for #+."
    #+(and sbcl x86-64)
    (if (find-symbol "INT-AVX2-REG" "SB-VM") '(:and) '(:or))
    #-(and sbcl x86-64) '(:or)))

(defun cpuid-bit-p (leaf register bit)
  "True when bit BIT of REGISTER (1 for EBX, 2 for ECX, 3 for EDX) of the
processor's CPUID leaf LEAF is set, and the processor has that leaf."
  #+(and sbcl x86-64)
  (and (>= (sb-vm::%cpu-identification 0 0) leaf)
       (logbitp bit (nth-value register (sb-vm::%cpu-identification leaf 0))))
  #-(and sbcl x86-64) (progn leaf register bit nil))

(define-global **crc32c-instruction** :unknown
  "Whether this processor has SSE4.2's CRC32 instruction: T, NIL, or
:UNKNOWN until first asked in this process.")

(define-global **avx2-instructions** :unknown
  "Whether this processor and system run AVX2: T, NIL, or :UNKNOWN until
first asked in this process.")

(defmacro processor-fact (global test)
  "The value of GLOBAL (one of the facts above), unless it is :UNKNOWN:
then TEST, evaluated, true or false, kept in GLOBAL."
  `(let ((known ,global))
     (if (eq known :unknown)
         (setf ,global (and ,test t))
         known)))

(defun crc32c-instruction-p ()
  "True when CRC32C-WORD may be called: SBCL on an x86-64 processor with
SSE4.2 (CPUID leaf 1, ECX bit 20)."
  (processor-fact **crc32c-instruction** (cpuid-bit-p 1 2 20)))

(defun avx2-instructions-p ()
  "True when the AVX2 kernels of simd.lisp (ASCII-MASK-32, WIDEN-32,
NARROW-16, PUT-UTF8-NARROW-BLOCKS, DECODE-UTF8-BLOCKS, COUNT-UTF8-THRESHOLDS)
may be called: SBCL on
an x86-64 processor with AVX2 (CPUID leaf 7, EBX bit 5) whose system has
XSAVE on (leaf 1, ECX bit 27, OSXSAVE, as every Linux that knows AVX
does), and an SBCL that assembles AVX2."
  (processor-fact **avx2-instructions**
                  #+#.(binstore::avx2-vops-p) (and (cpuid-bit-p 1 2 27) (cpuid-bit-p 7 1 5))
                  #-#.(binstore::avx2-vops-p) nil))

(defun forget-processor-facts ()
  "Make the next question about this processor ask it again."
  (setf **crc32c-instruction** :unknown
        **avx2-instructions** :unknown))

(call-before-image-save 'forget-processor-facts)
