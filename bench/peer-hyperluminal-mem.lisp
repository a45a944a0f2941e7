;;;; Benchmark adapter for hyperluminal-mem (loaded by LOAD-PEERS in
;;;; bench.lisp only when the system loaded; not part of binstore).  Our own
;;;; code calling its public API: MSIZE, MWRITE, MREAD on the pinned data of
;;;; an octet vector (WITH-VECTOR-MEM), and the per-type methods it needs for
;;;; structures and standard objects (MSIZE-OBJECT, MWRITE-OBJECT,
;;;; MREAD-OBJECT), written here for the data sets' types.  It tracks no
;;;; references: it takes part in mode none only.

(in-package #:binstore-bench)

(defmacro define-hlmem-type (type make (&rest slots))
  "hyperluminal-mem methods for TYPE: the values of SLOTS (names, read with
SLOT-VALUE), written in order and read back into (MAKE slot-values...)."
  (let ((vars (loop for slot in slots collect (gensym (symbol-name slot)))))
    `(progn
       (defmethod hlmem:msize-object ((object ,type) index)
         (hlmem:msize* index ,@(loop for slot in slots collect `(slot-value object ',slot))))
       (defmethod hlmem:mwrite-object ((object ,type) ptr index end-index)
         (hlmem:mwrite* ptr index end-index
                        ,@(loop for slot in slots collect `(slot-value object ',slot))))
       (defmethod hlmem:mread-object ((type (eql ',type)) ptr index end-index &key)
         (hlmem:with-mread* (,@vars new-index) (ptr index end-index)
           (values (,make ,@vars) new-index))))))

(define-hlmem-type bench-blarg (lambda (a b) (make-bench-blarg :a a :b b)) (a b))
(define-hlmem-type c-blarg (lambda (a b) (make-instance 'c-blarg :a a :b b)) (a b))
(define-hlmem-type address
    (lambda (street state zip) (make-address :street street :state state :zip zip))
  (street state zip))
(define-hlmem-type person
    (lambda (first second age addresses telephone email)
      (make-person :first first :second second :age age :addresses addresses
                   :telephone telephone :email email))
  (first second age addresses telephone email))
(define-hlmem-type typed-item
    (lambda (d s f w c str u8 l any)
      (make-typed-item :d d :s s :f f :w w :c c :str str :u8 u8 :l l :any any))
  (d s f w c str u8 l any))

(defun hlmem-write (data vector words)
  "Write DATA into VECTOR's first WORDS words; the index after it."
  (hlmem:with-vector-mem (ptr vector)
    (hlmem:mwrite ptr 0 words data)))

(register-peer
 (make-contestant
  :name "hyperluminal-mem"
  :how "mode none only (no reference tracking); store: `(hlmem:msize 0 data)` words, a new octet vector of that many words, `(hlmem:mwrite ptr 0 words data)` on its pinned data (`hlmem:with-vector-mem`); store-into: `msize` + `mwrite` into an octet vector allocated beforehand; restore: `(hlmem:mread ptr 0 words)`; per-type `msize-object`/`mwrite-object`/`mread-object` methods for the data sets' structures and classes"
  :unsupported (lambda (dataset mode)
                 (declare (ignore dataset))
                 (and (mode-tracks-p mode) "n/a (no reference tracking)"))
  :store (lambda (data mode)
           (declare (ignore mode))
           (lambda ()
             (let* ((words (hlmem:msize 0 data))
                    (vector (make-array (* words hlmem:+msizeof-word+)
                                        :element-type '(unsigned-byte 8))))
               (hlmem-write data vector words)
               vector)))
  :restore (lambda (input mode)
             (declare (ignore mode))
             (let ((words (floor (length input) hlmem:+msizeof-word+)))
               (lambda ()
                 (hlmem:with-vector-mem (ptr input)
                   (values (hlmem:mread ptr 0 words))))))
  :into (lambda (data mode bytes)
          (declare (ignore mode))
          (let ((vector (make-array (+ bytes 4096) :element-type '(unsigned-byte 8))))
            (lambda ()
              (* hlmem:+msizeof-word+ (hlmem-write data vector (hlmem:msize 0 data))))))))
