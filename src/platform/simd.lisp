;;;; Sixteen and thirty-two bytes at a time: the AVX2 instructions under
;;;; the UTF-8 codec.
;;;;
;;;; Widening ASCII bytes into a character string's 32-bit characters is
;;;; where decoding text spends its time; a machine word at a time it runs
;;;; at about 1 GB/s of input here.  AVX2 widens eight bytes into eight
;;;; characters with one instruction (VPMOVZXBD), and tells whether 32
;;;; bytes are all ASCII with two (VMOVDQU, VPMOVMSKB); encoding narrows
;;;; sixteen characters into sixteen bytes with three (VPACKUSDW twice,
;;;; VPACKUSWB) and tells whether they were all ASCII with four more.  On
;;;; SBCL x86-64 ASCII-MASK-32, WIDEN-32 and NARROW-16 are those
;;;; instructions (VOPs).  Text that is not ASCII has three more, each a
;;;; loop of its own: PUT-UTF8-NARROW-BLOCKS encodes eight characters below
;;;; #x10000 a step, packing each block's bytes with one table-chosen
;;;; shuffle (VPSHUFB); DECODE-UTF8-BLOCKS decodes four characters of 1 to
;;;; 3 bytes a step, the same way backwards, and checks them; and
;;;; COUNT-UTF8-THRESHOLDS counts the bytes a string encodes into.
;;;; AVX2-INSTRUCTIONS-P (cpu.lisp) says whether this processor has them.
;;;; Elsewhere there are none, and the callers keep to their word loops.

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
    :overwrite-fndb-silently t)
  (sb-c:defknown put-utf8-narrow-blocks ((unsigned-byte 64) (unsigned-byte 64) (unsigned-byte 64)
                                         (unsigned-byte 64) (unsigned-byte 64))
      (values (unsigned-byte 64) (unsigned-byte 64))
      (sb-c:always-translatable)
    :overwrite-fndb-silently t)
  (sb-c:defknown decode-utf8-blocks ((unsigned-byte 64) (unsigned-byte 64) (unsigned-byte 64)
                                     (unsigned-byte 64) (unsigned-byte 64))
      (values (unsigned-byte 64) (unsigned-byte 64))
      (sb-c:always-translatable)
    :overwrite-fndb-silently t)
  (sb-c:defknown count-utf8-thresholds ((unsigned-byte 64) (unsigned-byte 64) (unsigned-byte 64))
      (values)
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
      (sb-assem:inst vpmovmskb mask high)))
  ;; Two checks the UTF-8 loops below make again and again.
  (defun emit-jump-if-past (temporary base bytes limit label)
    "Emit a jump to LABEL when the address BASE + BYTES is above LIMIT
\(registers), through the register TEMPORARY."
    (sb-assem:inst lea temporary (sb-vm::ea bytes base))
    (sb-assem:inst cmp temporary limit)
    (sb-assem:inst jmp :a label))
  (defun emit-jump-unless-all (temporary lanes label)
    "Emit a jump to LABEL unless every byte of the 128-bit register LANES
has its top bit set (a comparison true in every lane), through the register
TEMPORARY."
    (sb-assem:inst vpmovmskb temporary lanes)
    (sb-assem:inst cmp temporary #xFFFF)
    (sb-assem:inst jmp :ne label))
  ;; The two UTF-8 loops below share their interface: five addresses in
  ;; (FROM, FROM-END, TO, TO-END, TABLE), two out (where FROM and TO got
  ;; to), the unsigned temporaries P and Q (the two addresses as they go)
  ;; and R and LEN.
  (defmacro define-utf8-stream-vop (name (&rest xmm-temporaries) &body generator)
    "Define the VOP NAME, translating NAME, of the arguments FROM, FROM-END,
TO, TO-END and TABLE (unsigned words) and the results FROM-OUT and TO-OUT:
P and Q start as FROM and TO, GENERATOR (which may also use R, LEN and the
128-bit XMM-TEMPORARIES) moves them on, and their last values are the
results.  The names are the VOP's own, as DEFINE-VOP binds them."
    `(sb-c:define-vop (,name)
       (:translate ,name)
       (:policy :fast-safe)
       (:args (from :scs (sb-vm::unsigned-reg))
              (from-end :scs (sb-vm::unsigned-reg))
              (to :scs (sb-vm::unsigned-reg))
              (to-end :scs (sb-vm::unsigned-reg))
              (table :scs (sb-vm::unsigned-reg)))
       (:arg-types sb-vm::unsigned-num sb-vm::unsigned-num sb-vm::unsigned-num
                   sb-vm::unsigned-num sb-vm::unsigned-num)
       (:temporary (:sc sb-vm::unsigned-reg :from (:argument 0) :to :result) p)
       (:temporary (:sc sb-vm::unsigned-reg :from (:argument 2) :to :result) q)
       (:temporary (:sc sb-vm::unsigned-reg) r)
       (:temporary (:sc sb-vm::unsigned-reg) len)
       ,@(loop for xmm in xmm-temporaries
               collect `(:temporary (:sc sb-vm::int-sse-reg) ,xmm))
       (:results (from-out :scs (sb-vm::unsigned-reg))
                 (to-out :scs (sb-vm::unsigned-reg)))
       (:result-types sb-vm::unsigned-num sb-vm::unsigned-num)
       (:generator 30
         (sb-vm::move p from)
         (sb-vm::move q to)
         ,@generator
         (sb-vm::move from-out p)
         (sb-vm::move to-out q))))
  ;; UTF-8 of blocks of eight characters below #x10000, from the address
  ;; FROM (below FROM-END) to TO, while the block's writes stay below
  ;; TO-END.  A block of characters all below #x800 is written as 16 bytes
  ;; of which its encoding is the first 8 to 16: narrow the eight to 16
  ;; bits (VPACKUSDW saturates, so a code above #xFFFF stays above #x7FF);
  ;; make each 16-bit lane its 2-byte form (#xC0|c>>6, then #x80|c&#x3F),
  ;; or the code itself for the ASCII lanes (VPBLENDVB); then the mask of
  ;; ASCII lanes picks a shuffle from TABLE (its 16 bytes at 16*mask) that
  ;; drops each ASCII lane's second byte and packs the rest, and the
  ;; block's length (the byte at 4096+mask).  Any other block of the Basic
  ;; Multilingual Plane goes four characters at a time: each 32-bit lane
  ;; made its 1-, 2- or 3-byte form, the masks of lanes below #x80 and
  ;; below #x800 (4 bits each) pick a shuffle and a length in the table's
  ;; second half (at 4352), 16 bytes written of which 4 to 12 are kept.
  ;; Returns the addresses after the characters and the bytes encoded.
  (define-utf8-stream-vop put-utf8-narrow-blocks
      (x ascii tt lead cont zero low6 c0 h80 d3f d80 dc0 de0 narrow)
      (let ((top (sb-assem:gen-label))
            (wide (sb-assem:gen-label))
            (done (sb-assem:gen-label)))
        (sb-assem:inst vpxor zero zero zero)
        (sb-assem:inst vpcmpeqw tt tt tt)       ; all ones
        (sb-assem:inst vpsrlw-imm low6 tt 10)   ; #x003F in each 16-bit lane
        (sb-assem:inst vpsllw-imm h80 tt 15)    ; #x8000
        (sb-assem:inst vpsllw-imm c0 tt 6)      ; #xFFC0
        (sb-assem:inst vpsrld-imm d3f tt 26)    ; #x3F in each 32-bit lane
        (sb-assem:inst vpsrld-imm de0 tt 24)    ; #xFF
        (sb-assem:inst vpsrlw-imm tt tt 8)      ; #x00FF in each 16-bit lane
        (sb-assem:inst vpand c0 c0 tt)          ; #x00C0
        (sb-assem:inst vpslld-imm d80 de0 7)    ; #x7F80
        (sb-assem:inst vpand d80 d80 de0)       ; #x80
        (sb-assem:inst vpslld-imm dc0 de0 6)    ; #x3FC0
        (sb-assem:inst vpand dc0 dc0 de0)       ; #xC0
        (sb-assem:inst vpsrld-imm tt dc0 1)     ; #x60
        (sb-assem:inst vpor de0 dc0 tt)         ; #xE0
        (sb-assem:emit-label top)
        (emit-jump-if-past r p 32 from-end done)
        (emit-jump-if-past r q 16 to-end done)
        (sb-assem:inst vmovdqu x (sb-vm::ea 0 p))
        (sb-assem:inst vpackusdw x x (sb-vm::ea 16 p))
        (sb-assem:inst vpsrlw-imm tt x 11)
        (sb-assem:inst vpcmpeqw tt tt zero)
        (emit-jump-unless-all r tt wide)
        (sb-assem:inst vpsrlw-imm ascii x 7)
        (sb-assem:inst vpcmpeqw ascii ascii zero)
        (sb-assem:inst vpsrlw-imm lead x 6)
        (sb-assem:inst vpor lead lead c0)
        (sb-assem:inst vpand cont x low6)
        (sb-assem:inst vpsllw-imm cont cont 8)
        (sb-assem:inst vpor cont cont h80)
        (sb-assem:inst vpor lead lead cont)
        (sb-assem:inst vpblendvb lead lead x ascii)
        (sb-assem:inst vpacksswb tt ascii ascii)
        (sb-assem:inst vpmovmskb r tt)
        (sb-assem:inst and r #xFF)
        (sb-assem:inst movzx '(:byte :dword) len (sb-vm::ea 4096 table r))
        (sb-assem:inst shl r 4)
        (sb-assem:inst vpshufb lead lead (sb-vm::ea 0 table r))
        (sb-assem:inst vmovdqu (sb-vm::ea 0 q) lead)
        (sb-assem:inst add q len)
        (sb-assem:inst add p 32)
        (sb-assem:inst jmp top)
        ;; not all below #x800: all below #x10000, and room for 32 bytes?
        (sb-assem:emit-label wide)
        (emit-jump-if-past r q 32 to-end done)
        (sb-assem:inst vmovdqu x (sb-vm::ea 0 p))
        (sb-assem:inst vpor tt x (sb-vm::ea 16 p))
        (sb-assem:inst vpsrld-imm tt tt 16)
        (sb-assem:inst vpcmpeqd tt tt zero)
        (emit-jump-unless-all r tt done)
        (dolist (half '(0 16))
          (unless (zerop half)
            (sb-assem:inst vmovdqu x (sb-vm::ea half p)))
          ;; LEAD: the 3-byte form; CONT: the 2-byte form
          (sb-assem:inst vpsrld-imm tt x 12)
          (sb-assem:inst vpor lead tt de0)
          (sb-assem:inst vpsrld-imm tt x 6)
          (sb-assem:inst vpor cont tt dc0)
          (sb-assem:inst vpand tt tt d3f)
          (sb-assem:inst vpor tt tt d80)
          (sb-assem:inst vpslld-imm tt tt 8)
          (sb-assem:inst vpor lead lead tt)
          (sb-assem:inst vpand ascii x d3f)
          (sb-assem:inst vpor ascii ascii d80)
          (sb-assem:inst vpslld-imm tt ascii 16)
          (sb-assem:inst vpor lead lead tt)
          (sb-assem:inst vpslld-imm tt ascii 8)
          (sb-assem:inst vpor cont cont tt)
          ;; lanes below #x800, then below #x80
          (sb-assem:inst vpsrld-imm narrow x 11)
          (sb-assem:inst vpcmpeqd narrow narrow zero)
          (sb-assem:inst vpblendvb lead lead cont narrow)
          (sb-assem:inst vpsrld-imm ascii x 7)
          (sb-assem:inst vpcmpeqd ascii ascii zero)
          (sb-assem:inst vpblendvb lead lead x ascii)
          (sb-assem:inst vmovmskps r ascii)
          (sb-assem:inst vmovmskps len narrow)
          (sb-assem:inst shl len 4)
          (sb-assem:inst or r len)
          (sb-assem:inst movzx '(:byte :dword) len (sb-vm::ea (+ 4352 4096) table r))
          (sb-assem:inst shl r 4)
          (sb-assem:inst vpshufb lead lead (sb-vm::ea 4352 table r))
          (sb-assem:inst vmovdqu (sb-vm::ea 0 q) lead)
          (sb-assem:inst add q len))
        (sb-assem:inst add p 32)
        (sb-assem:inst jmp top)
        (sb-assem:emit-label done)))
  ;; Decode UTF-8 from the address FROM (below FROM-END) into 32-bit
  ;; characters at TO (below TO-END), four characters of 1 to 3 bytes a
  ;; step, while they are valid.  A step loads 16 bytes (FROM + 16 <=
  ;; FROM-END) and stores 16 (TO + 16 <= TO-END).  The bytes that are not
  ;; continuation bytes start characters: their mask over bytes 1 to 12
  ;; picks, in TABLE (see MAKE-UTF8-DECODING-TABLE), the bytes the first
  ;; four characters take (0: not four of at most 3 bytes each in those
  ;; 12, or byte 0 a continuation byte) and the shuffle that puts each
  ;; character's last, second-last and third-last bytes and its first
  ;; byte into bytes 0 to 3 of its 32-bit lane (zeros where it has none).
  ;; The code point is then (b0 & #x7F) | (b1 & #x3F) << 6 | (b2 & #x0F)
  ;; << 12, and the characters are valid exactly when, in every lane, the
  ;; number of bytes the character takes, the one its first byte announces
  ;; (#xC0-#xDF two, #xE0-#xEF three, #xF0 and over none of these) and the
  ;; one its code point needs (no overlong form) are the same: each is
  ;; counted as minus the comparisons that hold (the first from which of
  ;; its last two bytes are continuation bytes, as the mask made them).  Returns the addresses
  ;; after the bytes decoded and the characters stored.
  (define-utf8-stream-vop decode-utf8-blocks (x lane code tt width other)
      (flet ((k (n) (sb-vm::ea (* 16 n) table)))
        (let ((top (sb-assem:gen-label))
              (done (sb-assem:gen-label)))
          (sb-assem:emit-label top)
          (emit-jump-if-past r p 16 from-end done)
          (emit-jump-if-past r q 16 to-end done)
          (sb-assem:inst vmovdqu x (sb-vm::ea 0 p))
          ;; continuation bytes: below #xC0 as signed bytes, #x80-#xBF
          (sb-assem:inst vmovdqu tt (k 7))
          (sb-assem:inst vpcmpgtb tt tt x)
          (sb-assem:inst vpmovmskb r tt)
          (sb-assem:inst test r 1)
          (sb-assem:inst jmp :nz done)
          (sb-assem:inst not r)
          (sb-assem:inst shr r 1)
          (sb-assem:inst and r #xFFF)
          (sb-assem:inst movzx '(:byte :dword) len (sb-vm::ea (+ 128 65536) table r))
          (sb-assem:inst test len len)
          (sb-assem:inst jmp :z done)
          (sb-assem:inst shl r 4)
          (sb-assem:inst vpshufb lane x (sb-vm::ea 128 table r))
          ;; the code points
          (sb-assem:inst vpand code lane (k 0))          ; #x7F
          (sb-assem:inst vpsrld-imm tt lane 2)
          (sb-assem:inst vpand tt tt (k 1))              ; #xFC0
          (sb-assem:inst vpor code code tt)
          (sb-assem:inst vpsrld-imm tt lane 4)
          (sb-assem:inst vpand tt tt (k 2))              ; #xF000
          (sb-assem:inst vpor code code tt)
          ;; WIDTH: minus the bytes beyond the first: a character's last
          ;; byte is a continuation byte when it has two or more, its
          ;; second-last when it has three
          (sb-assem:inst vmovdqu tt (k 7))
          (sb-assem:inst vpcmpgtb other tt lane)
          (sb-assem:inst vpslld-imm width other 24)
          (sb-assem:inst vpsrad-imm width width 31)
          (sb-assem:inst vpslld-imm tt other 16)
          (sb-assem:inst vpsrad-imm tt tt 31)
          (sb-assem:inst vpaddd width width tt)
          ;; what the code point needs
          (sb-assem:inst vpcmpgtd other code (k 0))      ; > #x7F
          (sb-assem:inst vpcmpgtd tt code (k 3))         ; > #x7FF
          (sb-assem:inst vpaddd other other tt)
          (sb-assem:inst vpcmpeqd other other width)
          (emit-jump-unless-all r other done)
          ;; what the first byte announces
          (sb-assem:inst vpsrld-imm lane lane 24)
          (sb-assem:inst vpcmpgtd other lane (k 4))      ; > #xBF
          (sb-assem:inst vpcmpgtd tt lane (k 5))         ; > #xDF
          (sb-assem:inst vpaddd other other tt)
          (sb-assem:inst vpcmpgtd tt lane (k 6))         ; > #xEF: none
          (sb-assem:inst vpslld-imm tt tt 2)
          (sb-assem:inst vpaddd other other tt)
          (sb-assem:inst vpcmpeqd other other width)
          (emit-jump-unless-all r other done)
          (sb-assem:inst vmovdqu (sb-vm::ea 0 q) code)
          (sb-assem:inst add q 16)
          (sb-assem:inst add p len)
          (sb-assem:inst jmp top)
          (sb-assem:emit-label done))))
  ;; over BLOCKS blocks of eight 32-bit integers from FROM, count in each
  ;; of the eight lanes how many of the three thresholds at LANES (32-bit
  ;; integers at offsets 0, 4 and 8, each compared as "above") its integers
  ;; pass; store the eight counts at LANES.  A comparison's true is -1, so
  ;; subtracting it counts one
  (sb-c:define-vop (count-utf8-thresholds)
    (:translate count-utf8-thresholds)
    (:policy :fast-safe)
    (:args (from :scs (sb-vm::unsigned-reg) :target p)
           (blocks :scs (sb-vm::unsigned-reg) :target n)
           (lanes :scs (sb-vm::unsigned-reg)))
    (:arg-types sb-vm::unsigned-num sb-vm::unsigned-num sb-vm::unsigned-num)
    (:temporary (:sc sb-vm::unsigned-reg :from (:argument 0)) p)
    (:temporary (:sc sb-vm::unsigned-reg :from (:argument 1)) n)
    (:temporary (:sc sb-vm::int-avx2-reg) counts)
    (:temporary (:sc sb-vm::int-avx2-reg) t1)
    (:temporary (:sc sb-vm::int-avx2-reg) t2)
    (:temporary (:sc sb-vm::int-avx2-reg) t3)
    (:temporary (:sc sb-vm::int-avx2-reg) x)
    (:temporary (:sc sb-vm::int-avx2-reg) above)
    (:generator 20
      (let ((top (sb-assem:gen-label))
            (done (sb-assem:gen-label)))
        (sb-vm::move p from)
        (sb-vm::move n blocks)
        (sb-assem:inst vpbroadcastd t1 (sb-vm::ea 0 lanes))
        (sb-assem:inst vpbroadcastd t2 (sb-vm::ea 4 lanes))
        (sb-assem:inst vpbroadcastd t3 (sb-vm::ea 8 lanes))
        (sb-assem:inst vpxor counts counts counts)
        (sb-assem:inst test n n)
        (sb-assem:inst jmp :z done)
        (sb-assem:emit-label top)
        (sb-assem:inst vmovdqu x (sb-vm::ea 0 p))
        (sb-assem:inst vpcmpgtd above x t1)
        (sb-assem:inst vpsubd counts counts above)
        (sb-assem:inst vpcmpgtd above x t2)
        (sb-assem:inst vpsubd counts counts above)
        (sb-assem:inst vpcmpgtd above x t3)
        (sb-assem:inst vpsubd counts counts above)
        (sb-assem:inst add p 32)
        (sb-assem:inst sub n 1)
        (sb-assem:inst jmp :nz top)
        (sb-assem:emit-label done)
        (sb-assem:inst vmovdqu (sb-vm::ea 0 lanes) counts)
        (sb-assem:inst vzeroupper)))))

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

(defconstant +count-blocks-limit+ (expt 2 24)
  "The most blocks one COUNT-UTF8-THRESHOLDS call may count: each lane's
count stays below 2^26, and the eight lanes' sum below 2^29.")

(defun count-utf8-thresholds (from blocks lanes)
  "For the BLOCKS (at most +COUNT-BLOCKS-LIMIT+) blocks of eight 32-bit
integers at the address FROM, count in each lane how many of the three
32-bit thresholds at the address LANES (offsets 0, 4 and 8) its integers
are above, and store the eight counts at LANES (memory the caller has
pinned and checked: 32 * BLOCKS bytes readable, 32 writable).  Only where
AVX2-INSTRUCTIONS-P is true."
  (declare (type (unsigned-byte 64) from blocks lanes))
  #+#.(binstore::avx2-vops-p) (count-utf8-thresholds from blocks lanes)
  #-#.(binstore::avx2-vops-p) (progn from blocks lanes (error "no AVX2 here"))
  (values))

(defun make-narrow-utf8-table ()
  "The table of PUT-UTF8-NARROW-BLOCKS.  Its first half, for blocks of
eight characters below #x800: for each 8-bit mask of the lanes of a block
that are ASCII, at 16 times the mask, the byte shuffle that takes the first
byte of each ASCII lane and both bytes of every other, in order (#x80,
which stores zero, for the bytes left over); at 4096 plus the mask, the
number of bytes taken.  Its second half, from 4352, for four characters
below #x10000 in 32-bit lanes each holding its 1-, 2- or 3-byte form: the
same for each mask of lanes below #x80 (bits 0-3) and below #x800 (bits
4-7), taking 1, 2 or 3 bytes of each lane."
  (let ((table (make-array (* 2 (+ 4096 256)) :element-type '(unsigned-byte 8)
                                                :initial-element #x80)))
    (dotimes (mask 256 table)
      (flet ((fill-entry (base lanes lane-bytes width)
               (let ((n 0))
                 (dotimes (lane lanes)
                   (dotimes (i (funcall width lane))
                     (setf (aref table (+ base (* 16 mask) n)) (+ (* lane-bytes lane) i))
                     (incf n)))
                 (setf (aref table (+ base 4096 mask)) n))))
        (fill-entry 0 8 2 (lambda (lane) (if (logbitp lane mask) 1 2)))
        (fill-entry 4352 4 4 (lambda (lane)
                               (cond ((logbitp lane mask) 1)
                                     ((logbitp (+ 4 lane) mask) 2)
                                     (t 3))))))))

(define-load-time-global **narrow-utf8-table**
    #+#.(binstore::avx2-vops-p) (make-narrow-utf8-table)
    #-#.(binstore::avx2-vops-p) nil
  "The shuffles and lengths PUT-UTF8-NARROW-BLOCKS reads, made once (NIL
where there is no such VOP).")

(declaim (inline put-utf8-narrow-blocks))
(defun put-utf8-narrow-blocks (from from-end to to-end table)
  "Encode blocks of eight characters (32-bit codes) from the address FROM
as UTF-8 at the address TO while every character of the block is below
#x10000, FROM + 32 <= FROM-END and the block's writes stay below TO-END
(TO + 16 for a block below #x800, of which its encoding is the first 8 to
16; TO + 32 for others, of which it is the first 8 to 24).  TABLE is the address of the
pinned **NARROW-UTF8-TABLE**; the caller has pinned the rest and checked
that those bounds are inside its memory.  Returns the address after the
characters encoded and the one after their bytes.  Only where
AVX2-INSTRUCTIONS-P is true."
  (declare (type (unsigned-byte 64) from from-end to to-end table))
  #+#.(binstore::avx2-vops-p) (put-utf8-narrow-blocks from from-end to to-end table)
  #-#.(binstore::avx2-vops-p) (progn from-end to-end table (error "no AVX2 here") (values from to)))

(defun make-utf8-decoding-table ()
  "The table of DECODE-UTF8-BLOCKS.  At 0, eight 16-byte constants: the
32-bit lanes #x7F, #xFC0, #xF000, #x7FF, #xBF, #xDF, #xEF, then 16 bytes
#xC0.  At 128, for each 12-bit mask of the bytes 1 to 12 of a 16-byte
window that start characters (byte 0 starts one), 16 bytes: the shuffle
putting the first four characters in four 32-bit lanes, each lane's bytes
0, 1 and 2 the character's last, second-last and third-last bytes (#x80,
which stores zero, where it has fewer) and byte 3 its first byte.  At
65664, for each mask, the bytes those four characters take: 0 when they
are not four of 1 to 3 bytes each."
  (let ((table (make-array (+ 128 65536 4096) :element-type '(unsigned-byte 8)
                                                :initial-element #x80)))
    (loop for constant in '(#x7F #xFC0 #xF000 #x7FF #xBF #xDF #xEF)
          for at from 0 by 16
          do (dotimes (lane 4)
               (dotimes (byte 4)
                 (setf (aref table (+ at (* 4 lane) byte)) (ldb (byte 8 (* 8 byte)) constant)))))
    (fill table #xC0 :start 112 :end 128)
    (dotimes (mask 4096 table)
      (let ((starts (cons 0 (loop for position from 1 to 12
                                  when (logbitp (1- position) mask) collect position))))
        (setf (aref table (+ 128 65536 mask))
              (if (and (>= (length starts) 5)
                       (loop for (a b) on starts repeat 4 always (<= (- b a) 3)))
                  (progn
                    (loop for lane below 4
                          for first = (nth lane starts)
                          for after = (nth (1+ lane) starts)
                          for at = (+ 128 (* 16 mask) (* 4 lane))
                          do (loop for byte below 3
                                   for index = (- after 1 byte)
                                   when (>= index first)
                                     do (setf (aref table (+ at byte)) index))
                             (setf (aref table (+ at 3)) first))
                    (nth 4 starts))
                  0))))))

(define-load-time-global **utf8-decoding-table**
    #+#.(binstore::avx2-vops-p) (make-utf8-decoding-table)
    #-#.(binstore::avx2-vops-p) nil
  "The constants, shuffles and lengths DECODE-UTF8-BLOCKS reads, made once
\(NIL where there is no such VOP).")

(declaim (inline decode-utf8-blocks))
(defun decode-utf8-blocks (from from-end to to-end table)
  "Decode the UTF-8 at the address FROM into 32-bit characters at the
address TO, four characters of 1 to 3 bytes a step, while they are valid
UTF-8 (no overlong form; surrogates are decoded), FROM + 16 <= FROM-END and
TO + 16 <= TO-END.  TABLE is the address of the pinned
**UTF8-DECODING-TABLE**; the caller has pinned the rest and checked those
bounds.  Returns the address after the bytes decoded and the one after the
characters stored.  Only where AVX2-INSTRUCTIONS-P is true."
  (declare (type (unsigned-byte 64) from from-end to to-end table))
  #+#.(binstore::avx2-vops-p) (decode-utf8-blocks from from-end to to-end table)
  #-#.(binstore::avx2-vops-p) (progn from-end to-end table (error "no AVX2 here") (values from to)))
