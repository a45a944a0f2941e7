;;;; Sixteen and thirty-two bytes at a time: the AVX2 instructions under
;;;; the UTF-8 codec's ASCII runs.
;;;;
;;;; Widening ASCII bytes into a character string's 32-bit characters is
;;;; where decoding text spends its time; a machine word at a time it runs
;;;; at about 1 GB/s of input here.  AVX2 widens eight bytes into eight
;;;; characters with one instruction (VPMOVZXBD), and tells whether 32
;;;; bytes are all ASCII with two (VMOVDQU, VPMOVMSKB); encoding narrows
;;;; sixteen characters into sixteen bytes with three (VPACKUSDW twice,
;;;; VPACKUSWB) and tells whether they were all ASCII with four more.  On
;;;; SBCL x86-64 ASCII-MASK-32, WIDEN-32 and NARROW-16 are those
;;;; instructions (VOPs); AVX2-INSTRUCTIONS-P (cpu.lisp) says whether this
;;;; processor has them.  Elsewhere there are none, and the callers keep to
;;;; their word loops.

(in-package #:binstore)

#+#.(binstore::avx2-vops-p)
(eval-when (:compile-toplevel :load-toplevel :execute)
  (sb-c:defknown ascii-mask-32 ((unsigned-byte 64)) (unsigned-byte 32)
      (sb-c:flushable sb-c:always-translatable)
    :overwrite-fndb-silently t)
  (sb-c:defknown widen-32 ((unsigned-byte 64) (unsigned-byte 64)) (values)
      (sb-c:always-translatable)
    :overwrite-fndb-silently t)
  (sb-c:defknown narrow-16 ((unsigned-byte 64) (unsigned-byte 64)) (unsigned-byte 32)
      (sb-c:always-translatable)
    :overwrite-fndb-silently t))

#+#.(binstore::avx2-vops-p)
(eval-when (:compile-toplevel :load-toplevel :execute)
  ;; one bit per byte of the 32 at ADDRESS: its top bit.  Zero: all ASCII.
  (sb-c:define-vop (ascii-mask-32)
    (:translate ascii-mask-32)
    (:policy :fast-safe)
    (:args (address :scs (sb-vm::unsigned-reg)))
    (:arg-types sb-vm::unsigned-num)
    (:temporary (:sc sb-vm::int-avx2-reg) bytes)
    (:results (mask :scs (sb-vm::unsigned-reg)))
    (:result-types sb-vm::unsigned-num)
    (:generator 4
      (sb-assem:inst vmovdqu bytes (sb-vm::ea address))
      (sb-assem:inst vpmovmskb mask bytes)
      (sb-assem:inst vzeroupper)))
  ;; the 32 bytes at FROM, each zero-extended to 32 bits, to the 128 bytes
  ;; at TO: 32 ASCII bytes become 32 characters of a character string
  (sb-c:define-vop (widen-32)
    (:translate widen-32)
    (:policy :fast-safe)
    (:args (from :scs (sb-vm::unsigned-reg))
           (to :scs (sb-vm::unsigned-reg)))
    (:arg-types sb-vm::unsigned-num sb-vm::unsigned-num)
    (:temporary (:sc sb-vm::int-avx2-reg) a)
    (:temporary (:sc sb-vm::int-avx2-reg) b)
    (:generator 8
      (sb-assem:inst vpmovzxbd a (sb-vm::ea 0 from))
      (sb-assem:inst vpmovzxbd b (sb-vm::ea 8 from))
      (sb-assem:inst vmovdqu (sb-vm::ea 0 to) a)
      (sb-assem:inst vmovdqu (sb-vm::ea 32 to) b)
      (sb-assem:inst vpmovzxbd a (sb-vm::ea 16 from))
      (sb-assem:inst vpmovzxbd b (sb-vm::ea 24 from))
      (sb-assem:inst vmovdqu (sb-vm::ea 64 to) a)
      (sb-assem:inst vmovdqu (sb-vm::ea 96 to) b)
      (sb-assem:inst vzeroupper)))
  ;; the 16 32-bit integers at FROM, each saturated to 16 bits and then to
  ;; a byte, to the 16 bytes at TO; the result is #xFFFF when the 16 were
  ;; all below 128 (TO then holds them), less otherwise.  The test is made
  ;; on the 16-bit values (their OR shifted right by 7 is zero), as the
  ;; byte packing reads them signed.  128-bit operations only, which keep
  ;; the order and leave no upper state.
  (sb-c:define-vop (narrow-16)
    (:translate narrow-16)
    (:policy :fast-safe)
    (:args (from :scs (sb-vm::unsigned-reg))
           (to :scs (sb-vm::unsigned-reg)))
    (:arg-types sb-vm::unsigned-num sb-vm::unsigned-num)
    (:temporary (:sc sb-vm::int-sse-reg) a)
    (:temporary (:sc sb-vm::int-sse-reg) b)
    (:temporary (:sc sb-vm::int-sse-reg) high)
    (:results (mask :scs (sb-vm::unsigned-reg)))
    (:result-types sb-vm::unsigned-num)
    (:generator 10
      (sb-assem:inst vmovdqu a (sb-vm::ea 0 from))
      (sb-assem:inst vpackusdw a a (sb-vm::ea 16 from))
      (sb-assem:inst vmovdqu b (sb-vm::ea 32 from))
      (sb-assem:inst vpackusdw b b (sb-vm::ea 48 from))
      (sb-assem:inst vpor high a b)
      (sb-assem:inst vpsrlw-imm high high 7)
      (sb-assem:inst vpackuswb a a b)
      (sb-assem:inst vmovdqu (sb-vm::ea 0 to) a)
      (sb-assem:inst vpxor b b b)
      (sb-assem:inst vpcmpeqw high high b)
      (sb-assem:inst vpmovmskb mask high))))

(declaim (inline ascii-mask-32 widen-32))
(defun ascii-mask-32 (address)
  "A 32-bit mask of the top bits of the 32 bytes at ADDRESS (an integer:
memory the caller has pinned, 32 bytes of it readable): zero when all are
ASCII.  Only where AVX2-INSTRUCTIONS-P is true."
  (declare (type (unsigned-byte 64) address))
  #+#.(binstore::avx2-vops-p) (ascii-mask-32 address)
  #-#.(binstore::avx2-vops-p) (progn address (error "no AVX2 here")))

(defun widen-32 (from to)
  "Store the 32 bytes at the address FROM, each as a 32-bit integer, in the
128 bytes at the address TO (memory the caller has pinned and checked).
Only where AVX2-INSTRUCTIONS-P is true."
  (declare (type (unsigned-byte 64) from to))
  #+#.(binstore::avx2-vops-p) (widen-32 from to)
  #-#.(binstore::avx2-vops-p) (progn from to (error "no AVX2 here"))
  (values))

(declaim (inline narrow-16))
(defun narrow-16 (from to)
  "Store the 16 32-bit integers at the address FROM as 16 bytes at the
address TO, each saturated to 255 (memory the caller has pinned and
checked: 64 bytes readable, 16 writable); return #xFFFF exactly when all
16 were below 128 (the bytes stored are then those integers).  Only where
AVX2-INSTRUCTIONS-P is true."
  (declare (type (unsigned-byte 64) from to))
  #+#.(binstore::avx2-vops-p) (narrow-16 from to)
  #-#.(binstore::avx2-vops-p) (progn from to (error "no AVX2 here")))
