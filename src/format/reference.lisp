;;;; A reference decoder: slow, simple and driven by the grammar
;;;; (src/format/grammar.lisp).  It reads a record from an octet vector by
;;;; the record rules of doc/FORMAT.md, builds the same objects as RESTORE
;;;; (with the same identity: one object per id) and signals the same
;;;; condition classes, so that tests/grammar.lisp can run it beside the fast
;;;; decoder on any input and require the same outcome.  It shares no code
;;;; with the fast decoder: its only inputs are the grammar and the
;;;; conditions.
;;;;
;;;; The first half, the cursor and READ-PARTS (the interpreter of the
;;;; grammar's parts), serves BINSTORE:EXPLAIN too; the second half builds
;;;; objects.
;;;;
;;;; Where binstore counts memory against max-to-read, the grammar says how
;;;; much with its :CHARGE parts and this decoder counts the same, at the
;;;; same points, so that both reach the limit on the same input.  One
;;;; difference is left: binstore charges a short ASCII uninterned symbol's
;;;; name n bytes, not 4n, when its input window holds it whole (under 200
;;;; bytes apart, which matters only that close to the limit).

(in-package #:binstore)

;;; The cursor: bytes read from an octet vector --------------------------------

(defstruct (cursor (:constructor make-cursor (octets pos end cut-by-limit limit)))
  "Reading position POS in OCTETS, which may be read below END.  When
CUT-BY-LIMIT, END is where max-to-read (LIMIT) stops the reader, not the end
of the data: reading past it is a limit, not a truncation."
  octets
  (pos 0 :type unsigned-byte)
  (end 0 :type unsigned-byte)
  (cut-by-limit nil)
  (limit nil))

(defun cursor-fail (cursor needed)
  "Signal that NEEDED more bytes are not there: RESTORE-LIMIT-EXCEEDED when
max-to-read cut the input, TRUNCATED-INPUT otherwise."
  (if (cursor-cut-by-limit cursor)
      (error 'restore-limit-exceeded :limit :max-to-read :value (cursor-limit cursor)
                                     :offset (cursor-pos cursor)
                                     :message "the input is longer than max-to-read allows")
      (error 'truncated-input :offset (cursor-pos cursor)
                              :message (format nil "the input ends ~d byte~:p short"
                                               (- (+ (cursor-pos cursor) needed)
                                                  (cursor-end cursor)))
                              :expected (format nil "~d more byte~:p" needed))))

(defun cursor-invalid (cursor message expected &optional (offset (cursor-pos cursor)))
  "Signal INVALID-INPUT at OFFSET (the reading position by default)."
  (error 'invalid-input :offset offset :message message :expected expected))

(defun cursor-at-end-p (cursor)
  "True when no byte is left below the cursor's end."
  (>= (cursor-pos cursor) (cursor-end cursor)))

(defun cursor-left (cursor)
  "The bytes left below the cursor's end."
  (- (cursor-end cursor) (cursor-pos cursor)))

(defun cursor-room (cursor count what)
  "Signal unless COUNT more bytes could follow (WHAT names them for the
message); return COUNT."
  (when (> count (cursor-left cursor))
    (if (cursor-cut-by-limit cursor)
        (error 'restore-limit-exceeded :limit :max-to-read :value (cursor-limit cursor)
                                       :offset (cursor-pos cursor)
                                       :message (format nil "~a of ~d bytes would need more ~
                                                             input than allowed" what count))
        (error 'truncated-input :offset (cursor-pos cursor)
                                :message (format nil "~a of ~d bytes cannot fit in the ~d ~
                                                      byte~:p left"
                                                 what count (cursor-left cursor))
                                :expected "a count the input can hold")))
  count)

(defun cursor-peek (cursor)
  "The next byte, not consumed."
  (when (cursor-at-end-p cursor)
    (cursor-fail cursor 1))
  (aref (cursor-octets cursor) (cursor-pos cursor)))

(defun cursor-u8 (cursor)
  "Read one byte."
  (prog1 (cursor-peek cursor)
    (incf (cursor-pos cursor))))

(defun octets-value (octets start end)
  "The bytes of OCTETS from START below END as an unsigned integer, least
significant first.  Halves are combined, so that a long magnitude takes
time n log n, not n^2."
  (if (<= (- end start) 8)
      (let ((value 0))
        (loop for i from (1- end) downto start
              do (setf value (logior (ash value 8) (aref octets i))))
        value)
      (let ((middle (+ start (floor (- end start) 2))))
        (logior (octets-value octets start middle)
                (ash (octets-value octets middle end) (* 8 (- middle start)))))))

(defun cursor-unsigned (cursor n)
  "Read N bytes, little-endian, as an unsigned integer."
  (when (> n (cursor-left cursor))
    (cursor-fail cursor n))
  (prog1 (octets-value (cursor-octets cursor) (cursor-pos cursor) (+ (cursor-pos cursor) n))
    (incf (cursor-pos cursor) n)))

(defun signed (value bits)
  "VALUE, an unsigned integer of BITS bits, read as two's complement."
  (if (logbitp (1- bits) value) (- value (ash 1 bits)) value))

(defun float-of-bits (bits width)
  "The IEEE 754 float whose WIDTH (32 or 64) bits, as an unsigned integer,
are BITS: every bit pattern, NaNs included, is kept."
  (if (= width 32)
      (single-float-from-bits (signed bits 32))
      (double-float-from-bits (signed (ldb (byte 32 32) bits) 32) (ldb (byte 32 0) bits))))

(defun cursor-varint (cursor)
  "Read a varint: LEB128, at most 64 bits, without a redundant zero group."
  (let ((start (cursor-pos cursor)) (value 0) (shift 0))
    (loop
      (let ((byte (cursor-u8 cursor)))
        (when (and (= shift 63) (> byte 1))
          (cursor-invalid cursor "varint does not fit in 64 bits" "a length or count" start))
        (setf value (logior value (ash (logand byte #x7F) shift)))
        (when (< byte 128)
          (when (and (zerop byte) (> shift 0))
            (cursor-invalid cursor "varint has a redundant trailing zero group"
                            "a minimal varint" start))
          (return value))
        (incf shift 7)))))

(defun cursor-utf8-char (cursor)
  "Read one UTF-8 sequence: the shortest form of a code point up to
#x10FFFF (surrogates included); return the character."
  (let* ((start (cursor-pos cursor))
         (b0 (cursor-u8 cursor)))
    (flet ((continuation ()
             (let ((b (cursor-u8 cursor)))
               (unless (= (logand b #xC0) #x80)
                 (cursor-invalid cursor (format nil "byte #x~2,'0x inside a UTF-8 sequence" b)
                                 "a UTF-8 continuation byte" start))
               (logand b #x3F)))
           (bad ()
             (cursor-invalid cursor (format nil "byte #x~2,'0x cannot start a UTF-8 sequence" b0)
                             "UTF-8" start)))
      (code-char
       (cond ((< b0 #x80) b0)
             ((< b0 #xC2) (bad))
             ((< b0 #xE0) (logior (ash (logand b0 #x1F) 6) (continuation)))
             ((< b0 #xF0)
              (let ((code (logior (ash (logand b0 #x0F) 12) (ash (continuation) 6)
                                  (continuation))))
                (when (< code #x800)
                  (cursor-invalid cursor "overlong UTF-8 sequence" "shortest-form UTF-8" start))
                code))
             ((< b0 #xF5)
              (let ((code (logior (ash (logand b0 #x07) 18) (ash (continuation) 12)
                                  (ash (continuation) 6) (continuation))))
                (unless (<= #x10000 code #x10FFFF)
                  (cursor-invalid cursor (format nil "UTF-8 sequence for code point #x~x" code)
                                  "a code point between #x10000 and #x10FFFF" start))
                code))
             (t (bad)))))))

;;; Raw payloads ----------------------------------------------------------------

(defstruct (raw-payload (:constructor make-raw-payload (code count start)))
  "COUNT elements of element type CODE, whose raw payload begins at START."
  code count start)

(defun payload-element (octets payload i)
  "Element I of PAYLOAD, a RAW-PAYLOAD of OCTETS, as an integer or a float
\(a complex for the complex types).  Elements narrower than a byte are
packed from the least significant bits.  Values outside the element type
are returned as they are: READ-PAYLOAD-INTO checks them."
  (let* ((code (raw-payload-code payload))
         (bits (payload-bits code))
         (type (second (element-type-entry code)))
         (start (raw-payload-start payload)))
    (flet ((unsigned-at (offset bytes)
             (let ((value 0))
               (dotimes (k bytes value)
                 (setf value (logior value (ash (aref octets (+ offset k)) (* 8 k))))))))
      (if (< bits 8)
          (ldb (byte bits (mod (* i bits) 8)) (aref octets (+ start (floor (* i bits) 8))))
          (let ((offset (+ start (* i (floor bits 8)))))
            (cond ((eq type 'single-float) (float-of-bits (unsigned-at offset 4) 32))
                  ((eq type 'double-float) (float-of-bits (unsigned-at offset 8) 64))
                  ((equal type '(complex single-float))
                   (float-complex (float-of-bits (unsigned-at offset 4) 32)
                                  (float-of-bits (unsigned-at (+ offset 4) 4) 32)))
                  ((equal type '(complex double-float))
                   (float-complex (float-of-bits (unsigned-at offset 8) 64)
                                  (float-of-bits (unsigned-at (+ offset 8) 8) 64)))
                  ((or (eq type 'fixnum) (eq (first type) 'signed-byte))
                   (signed (unsigned-at offset (floor bits 8)) bits))
                  (t (unsigned-at offset (floor bits 8)))))))))

;;; Reading the parts of a tag ------------------------------------------------

(defstruct walker
  "What READ-PARTS needs besides the grammar: the CURSOR, and a function per
part that depends on what the reader does with objects.  OBJECT-FN (walker
part fields index) reads one object (the INDEXth of an :OBJECTS part, or 0);
TAIL-FN (walker part fields) the :TAIL of a run; LATER-FN (walker part
fields) the container after a LATER; FILL-FN (walker part fields) the
contents a FILL completes; CHARGE-FN (walker kind bytes), when there is one,
counts memory: KIND is :CHARGE for a :CHARGE part, :NAME for the characters
of a symbol's name.  LENIENT, for a reader whose objects are not Lisp
objects (EXPLAIN): a :CHECK it cannot evaluate holds, and any other
expression it cannot evaluate makes the input invalid."
  cursor object-fn tail-fn later-fn fill-fn charge-fn lenient)

(defun field (fields name)
  "The value of the field NAME in FIELDS (an alist, newest first)."
  (cdr (assoc name fields)))

(defun read-parts (walker parts fields)
  "Read PARTS (see the top of src/format/grammar.lisp) with WALKER; return
FIELDS with each field read pushed on it (an alist, newest first)."
  (let ((cursor (walker-cursor walker)))
    (labels ((bind (name value) (push (cons name value) fields))
             (value (expression)
               (if (walker-lenient walker)
                   (handler-case (grammar-eval expression fields)
                     (grammar-expression-error ()
                       (cursor-invalid cursor (format nil "~s cannot be computed from what ~
                                                           was read" expression)
                                       "objects of the kinds the grammar names")))
                   (grammar-eval expression fields)))
             (holds (expression)
               (if (walker-lenient walker)
                   (handler-case (grammar-eval expression fields)
                     (grammar-expression-error () t))
                   (grammar-eval expression fields)))
             (charge (kind bytes)
               (when (walker-charge-fn walker)
                 (funcall (walker-charge-fn walker) walker kind bytes)))
             (read-count (&key (each 1) (min 0) (what "a count"))
               (let ((n (cursor-varint cursor)))
                 (cursor-room cursor (* n each) what)
                 (when (< n min)
                   (cursor-invalid cursor (format nil "~a of length ~d" what n)
                                   (format nil "a length of at least ~d" min)))
                 n))
             (characters (count reader &optional base)
               (let ((string (make-string count :element-type (if base 'base-char 'character))))
                 (dotimes (i count string)
                   (setf (char string i) (funcall reader)))))
             (ascii-char ()
               (let ((start (cursor-pos cursor))
                     (b (cursor-u8 cursor)))
                 (unless (< b 128)
                   (cursor-invalid cursor "a byte above 127 in a base string" "ASCII" start))
                 (code-char b)))
             (part (part)
               (destructuring-bind (kind &rest args) part
                 (ecase kind
                   ;; the byte just read: a :TAG part comes first
                   (:tag (bind (first args)
                               (aref (cursor-octets cursor) (1- (cursor-pos cursor)))))
                   (:u8 (bind (first args) (cursor-u8 cursor)))
                   (:int (bind (first args) (signed (cursor-unsigned cursor (second args))
                                                    (* 8 (second args)))))
                   (:uint (bind (first args) (cursor-unsigned cursor (second args))))
                   (:float (bind (first args)
                                 (float-of-bits (cursor-unsigned cursor (/ (second args) 8))
                                                (second args))))
                   (:varint (bind (first args) (cursor-varint cursor)))
                   (:varints (bind (first args)
                                   (loop repeat (value (second args))
                                         collect (cursor-varint cursor))))
                   (:count (bind (first args) (apply #'read-count (rest args))))
                   (:flags (let ((byte (cursor-u8 cursor)))
                             (bind (first args) byte)
                             (loop for (name position width) in (rest args)
                                   do (bind name (ldb (byte width position) byte)))))
                   (:element-type
                    (let ((code (cursor-u8 cursor)))
                      (unless (element-type-entry code)
                        (cursor-invalid cursor (format nil "array element type code ~d" code)
                                        "a code listed in doc/FORMAT.md"))
                      (bind (first args) code)))
                   (:magic (read-magic cursor (first args)))
                   (:let (bind (first args) (value (second args))))
                   (:room (cursor-room cursor (value (first args)) "a payload"))
                   (:check (destructuring-bind (expression expected &optional condition) args
                             (unless (holds expression)
                               (check-failed cursor part fields expected condition))))
                   (:charge (when (walker-charge-fn walker)
                              (charge :charge (value (first args)))))
                   (:object (bind (first args) (funcall (walker-object-fn walker) walker part
                                                        fields 0)))
                   (:objects (bind (first args)
                                   (loop for i below (value (second args))
                                         collect (funcall (walker-object-fn walker) walker part
                                                          fields i))))
                   (:tail (bind (first args) (funcall (walker-tail-fn walker) walker part fields)))
                   (:ints (bind (first args)
                                (loop repeat (value (second args))
                                      collect (signed (cursor-unsigned cursor (third args))
                                                      (* 8 (third args))))))
                   (:magnitude (bind (first args) (cursor-unsigned cursor (value (second args)))))
                   (:ascii (bind (first args)
                                 (characters (value (second args)) #'ascii-char t)))
                   (:utf8 (bind (first args)
                                (characters (value (second args))
                                            (lambda () (cursor-utf8-char cursor)))))
                   (:name (let ((n (read-count :what "a name")))
                            (charge :name n)
                            (bind (first args)
                                  (characters n (lambda () (cursor-utf8-char cursor))))))
                   (:payload (let* ((code (value (second args)))
                                    (count (value (third args)))
                                    (bytes (raw-bytes code count)))
                               (cursor-room cursor bytes "a payload")
                               (bind (first args) (make-raw-payload code count
                                                                    (cursor-pos cursor)))
                               (incf (cursor-pos cursor) bytes)))
                   ;; :IF and :CASE return the parts to read next
                   (:if (return-from part (if (value (first args)) (second args) (third args))))
                   (:case (let* ((key (value (first args)))
                                 (clause (assoc key (rest args))))
                            (unless clause
                              (cursor-invalid cursor (format nil "~(~a~) ~s" (first args) key)
                                              (format nil "one of ~{~s~^, ~}"
                                                      (mapcar #'first (rest args)))))
                            (return-from part (rest clause))))
                   (:later (bind (first args) (funcall (walker-later-fn walker) walker part fields)))
                   (:fill (bind (first args)
                                (funcall (walker-fill-fn walker) walker part fields))))
                 nil)))
      ;; a queue rather than recursion for :IF and :CASE: the reference
      ;; decoder recurses through here once per level of nesting, and its
      ;; frames bound how deep the data it can read may be
      (let ((queue parts))
        (loop while queue
              do (let ((next (part (pop queue))))
                   (when next
                     (setf queue (append next queue))))))
      fields)))

(defun referenced-id (walker spec last start)
  "The id the reference of SPEC whose tag was read at START names: its ID
field, read with WALKER, or for a NEXT-REF (:REFERS :NEXT) the id one above
LAST, the id the record's last reference to an object named; -1, no
reference before it, makes the NEXT-REF invalid."
  (if (eq (tag-spec-refers spec) :next)
      (if (< last 0)
          (cursor-invalid (walker-cursor walker) "next-ref before any reference"
                          "a reference before it" start)
          (1+ last))
      (field (read-parts walker (tag-spec-parts spec) '()) 'id)))

(defun record-tracking-flags (peek-is record-tag)
  "Read the tracking tag that may begin a record's contents, with the
reader's PEEK-IS (a tag's name -> true when that tag comes next) and
RECORD-TAG (a tag's name -> its fields, the tag read); return its flags, or
NIL when there is none.  The readers built on the grammar (this decoder,
EXPLAIN, FILE-STATISTICS) share it."
  (let ((tracking (find-if peek-is '(:tracking :no-tracking :full-tracking))))
    (and tracking (field (funcall record-tag tracking) 'flags))))

(defun read-magic (cursor octets)
  "Read OCTETS, binstore's magic number, and require a byte after them
\(the version); signal NOT-BINSTORE-DATA otherwise."
  (flet ((refuse (message)
           (error 'not-binstore-data
                  :offset (cursor-pos cursor) :message message
                  :expected "binstore's header, #x24 \"BST\" and a version")))
    (dolist (expected octets)
      (when (cursor-at-end-p cursor)
        (refuse "the input ends inside binstore's header"))
      (unless (= (cursor-peek cursor) expected)
        (refuse "the input begins with #x24 but not with binstore's magic number"))
      (cursor-u8 cursor))
    (when (cursor-at-end-p cursor)
      (refuse "the input ends inside binstore's header"))))

(defun check-failed (cursor part fields expected condition)
  "Signal that the :CHECK PART failed: CONDITION (an UNSUPPORTED-VERSION is
given the version) or INVALID-INPUT, saying what was EXPECTED."
  (let ((message (format nil "~{~(~a~) ~s~^, ~} fails ~s"
                         (loop for (name . value) in (reverse fields)
                               when (integerp value) append (list name value))
                         (second part))))
    (case condition
      (unsupported-version
       (error 'unsupported-version :version (field fields 'version) :offset (cursor-pos cursor)
                                   :message (format nil "format version ~d"
                                                    (field fields 'version))
                                   :expected expected))
      (t (cursor-invalid cursor message expected)))))

;;; The reference decoder -------------------------------------------------------

(defconstant +reference-stack-margin+ (* 256 1024)
  "Control stack the reference decoder leaves free below itself: when less
remains, it signals RESTORE-LIMIT-EXCEEDED (:nesting) rather than recurse.")

(defstruct (reference-descriptor (:include format-descriptor))
  "A class descriptor as the reference decoder resolves it: the class, and
per stored slot its effective slot definition."
  class
  (slots '() :type list))

(defstruct (run-continuation (:constructor make-run-continuation (spec run last fields)))
  "A run of conses that continues a list at a :TAIL: its tag's SPEC, the
fresh RUN, its LAST cons and its header's FIELDS."
  spec run last fields)

(defvar *unbound-slot-value* (make-symbol "UNBOUND-SLOT")
  "Stands for the unbound-slot tag, read as a slot's value.")

(defvar *reference-notes* :none
  "When bound to a list, REFERENCE-RESTORE pushes on it (kind offset) for
each construct it reads where binstore's fast decoder is known to read
otherwise (see tests/grammar.lisp): :INT64-LIST-CONTINUES-A-RUN, a run of
conses whose tail is an INT64-LIST.")

(defun note (kind offset)
  "Push (KIND OFFSET) on *REFERENCE-NOTES* when it is a list."
  (when (listp *reference-notes*)
    (push (list kind offset) *reference-notes*)))

(defstruct (reference-state (:conc-name rf-))
  "One reference restore: the cursor and its walker, the objects and conses
by id, the tracking flags, the depths, the allowance of memory, the
containers LATER announced that await their FILL, and the pairs of hash
tables whose insertion waits for them."
  cursor walker
  (objects (make-array 16 :adjustable t :fill-pointer 0))
  (conses (make-array 16 :adjustable t :fill-pointer 0))
  (last-ref -1)                         ; the id the last reference named
  (track-objects t)
  (track-conses nil)
  (depth 0)                             ; containers open in this part of the record
  (depth-base 0)                        ; the logical depth a FILL starts at
  max-depth
  alloc-left                            ; bytes of memory max-to-read still allows
  max-to-read
  (pending (make-hash-table))           ; LATER rank -> (spec object fields depth)
  (next-later 0)
  (postponed '())                       ; (table . pairs), newest first
  (name-room 0)                         ; the longest name binstore's buffer holds
  intern-symbols
  (stack-limit 0 :type word))

(defun rf-charge (rf bytes)
  "Count BYTES of memory against max-to-read's allowance."
  (let ((left (rf-alloc-left rf)))
    (when left
      (when (> bytes left)
        (error 'restore-limit-exceeded
               :limit :max-to-read :value left :offset (cursor-pos (rf-cursor rf))
               :message "restoring would allocate more memory than max-to-read allows"))
      (setf (rf-alloc-left rf) (- left bytes)))))

(defun rf-charge-part (rf kind bytes)
  "The walker's CHARGE-FN: a :CHARGE part counts BYTES; a name's characters
are read into binstore's buffer of names, charged when it grows."
  (ecase kind
    (:charge (rf-charge rf bytes))
    (:name (when (> bytes (rf-name-room rf))
             (rf-charge rf (* 4 bytes))
             (setf (rf-name-room rf) (max bytes (* 2 (rf-name-room rf))))))))

(defun rf-invalid (rf message expected)
  "Signal INVALID-INPUT at the reading position."
  (cursor-invalid (rf-cursor rf) message expected))

(defun rf-register (rf object)
  "Give OBJECT the next object id; return it."
  (vector-push-extend object (rf-objects rf))
  object)

(defun rf-give-ids (rf spec object)
  "Give OBJECT, just read by SPEC (or a run of conses just made), the ids
SPEC's rule gives it in this record."
  (ecase (tag-spec-ids spec)
    (:never)
    (:always (rf-register rf object))
    ((:tracked :container) (when (rf-track-objects rf) (rf-register rf object)))
    (:conses (when (rf-track-conses rf)
               (loop for c on object
                     do (vector-push-extend c (rf-conses rf))))))
  object)

(defun rf-check-stack (rf &optional deep)
  "Signal RESTORE-LIMIT-EXCEEDED (:nesting) rather than recurse into the
last +REFERENCE-STACK-MARGIN+ of the control stack: the input nests deeper
than this decoder can follow, and it must not crash.  With DEEP, signal
it whatever the stack: ABCL's count of levels (COUNTING-NESTING) is past
its limit."
  (when (or deep (stack-exhausted-p (rf-stack-limit rf)))
    (error 'restore-limit-exceeded
           :limit :nesting :value +max-physical-depth+ :offset (cursor-pos (rf-cursor rf))
           :message "the input nests deeper than the reference decoder's stack allows")))

(defun rf-enter (rf)
  "Go one level deeper, into a container's contents; signal
RESTORE-LIMIT-EXCEEDED (:max-depth) when that is deeper than max-depth
allows.  RF-LEAVE comes back (an error ends the restore: no cleanup)."
  (incf (rf-depth rf))
  (let ((max (rf-max-depth rf)))
    (when (and max (> (+ (rf-depth rf) (rf-depth-base rf)) max))
      (error 'restore-limit-exceeded :limit :max-depth :value max
                                     :offset (cursor-pos (rf-cursor rf))
                                     :message "the data nests deeper than max-depth"))))

(defun rf-leave (rf)
  "Come back from the contents RF-ENTER went into."
  (decf (rf-depth rf)))

(defun rf-read-object (rf &optional slot-value-p)
  "Read one object.  With SLOT-VALUE-P (an instance's slot) the
unbound-slot tag is read as *UNBOUND-SLOT-VALUE*."
  (rf-check-stack rf)
  (counting-nesting ((rf-check-stack rf t) :reference)
    (let* ((cursor (rf-cursor rf))
           (start (cursor-pos cursor))
           (tag (cursor-u8 cursor)))
      (cond ((>= tag +first-small-int-tag+) (- tag +small-int-bias+))
            ((>= tag +first-small-ref-tag+)
             (rf-object-by-id rf (- tag +first-small-ref-tag+) start))
            (t
             (let ((spec (tag-spec tag)))
               (cond ((and slot-value-p spec (eq (tag-spec-role spec) :slot))
                      *unbound-slot-value*)
                     ((or (null spec) (not (eq (tag-spec-role spec) :object)))
                      (cursor-invalid cursor (format nil "tag #x~2,'0x where an object should ~
                                                          start~@[ (~(~a~))~]"
                                                     tag (and spec (tag-spec-name spec)))
                                      "an object tag" start))
                     (t (rf-read-tagged rf spec start)))))))))

(defun rf-object-by-id (rf id start)
  "The object with ID, named by the reference at START, which becomes the
id named last."
  (unless (< id (length (rf-objects rf)))
    (cursor-invalid (rf-cursor rf) (format nil "reference to id ~d, which is not defined yet" id)
                    "an id defined earlier" start))
  (setf (rf-last-ref rf) id)
  (aref (rf-objects rf) id))

(defun rf-read-tagged (rf spec start)
  "Read the object whose tag, of SPEC, was just read at START."
  (ecase (tag-spec-kind spec)
    (:leaf
     (let ((fields (read-parts (rf-walker rf) (tag-spec-parts spec) '())))
       (rf-give-ids rf spec (build-leaf rf (tag-spec-name spec) fields))))
    (:reference
     (let ((id (referenced-id (rf-walker rf) spec (rf-last-ref rf) start)))
       (if (eq (tag-spec-refers spec) :conses)
           (if (< id (length (rf-conses rf)))
               (aref (rf-conses rf) id)
               (cursor-invalid (rf-cursor rf)
                               (format nil "reference to cons ~d, which is not defined yet" id)
                               "a cons id defined earlier" start))
           (rf-object-by-id rf id start))))
    (:container
     (multiple-value-bind (object fields) (rf-open-container rf spec)
       (rf-enter rf)
       (rf-fill-container rf spec object fields)
       (rf-leave rf)
       object))
    (:deferred
     (field (read-parts (rf-walker rf) (tag-spec-parts spec) '()) 'container))))

;;; Containers: header, then contents

(defun rf-open-container (rf spec)
  "Read the header of a container of SPEC, make it and give it its ids;
return it and the header's fields."
  (let* ((fields (read-parts (rf-walker rf) (tag-spec-parts spec) '()))
         (object (make-container rf (tag-spec-name spec) fields)))
    (rf-give-ids rf spec object)
    (values object fields)))

(defun make-container (rf name fields)
  "A fresh container of the tag NAME, from its header's FIELDS, its contents
not read yet (a list's cars NIL, a vector's elements 0)."
  (ecase name
    ((:list :dotted-list :cons :int64-list) (make-list (field fields 'n)))
    (:simple-vector (make-array (field fields 'n) :initial-element 0))
    (:array (make-reference-array rf fields))
    (:hash-table (make-reference-hash-table rf fields))
    (:instance
     (let ((descriptor (field fields 'descriptor)))
       (if (= (format-descriptor-kind descriptor) 3)
           (funcall (user-codec-allocate (reference-codec rf descriptor :fill)))
           (allocate-instance (reference-descriptor-class descriptor)))))))

(defun rf-fill-container (rf spec object fields)
  "Read the contents of OBJECT, a container of SPEC whose header gave FIELDS."
  (let ((walker (rf-walker rf)))
    (case (tag-spec-name spec)
      ((:list :dotted-list :cons :int64-list)
       ;; a run, and the runs that continue it at its :TAIL, in a loop
       (let ((run object) (last (last object)))
         (loop
           (let ((contents (read-parts walker (tag-spec-contents spec) fields)))
             (loop for c on run
                   for x in (field contents 'cars)
                   do (setf (car c) x))
             (let ((tail (assoc 'cdr contents)))
               (cond ((null tail) (return))
                     ((run-continuation-p (cdr tail))
                      (let ((next (cdr tail)))
                        (setf (cdr last) (run-continuation-run next)
                              spec (run-continuation-spec next)
                              run (run-continuation-run next)
                              last (run-continuation-last next)
                              fields (run-continuation-fields next))))
                     (t (setf (cdr last) (cdr tail))
                        (return))))))))
      (:simple-vector
       (replace object (field (read-parts walker (tag-spec-contents spec) fields) 'elements)))
      (:array (fill-reference-array rf object fields))
      (:hash-table (fill-reference-hash-table rf object fields))
      (:instance (fill-reference-instance rf object fields)))
    object))

(defun rf-tail (rf)
  "The TAIL-FN: a list tag continues the run (its header read, its conses
made and given ids: a RUN-CONTINUATION); anything else is the final cdr."
  (let* ((cursor (rf-cursor rf))
         (tag (cursor-peek cursor)))
    (if (cons-run-tag-p tag)
        (let ((spec (progn (cursor-u8 cursor) (tag-spec tag))))
          (when (eq (tag-spec-name spec) :int64-list)
            (note :int64-list-continues-a-run (1- (cursor-pos cursor))))
          (multiple-value-bind (run fields) (rf-open-container rf spec)
            (make-run-continuation spec run (last run) fields)))
        (rf-read-object rf))))

(defun rf-later (rf)
  "The LATER-FN: a container tag and its header; the container waits for a
FILL, which it is given the next LATER rank for."
  (let* ((cursor (rf-cursor rf))
         (tag (cursor-u8 cursor)))
    (unless (container-tag-p tag)
      (rf-invalid rf (format nil "LATER before tag #x~2,'0x" tag) "a container tag"))
    (let ((spec (tag-spec tag)))
      (multiple-value-bind (object fields) (rf-open-container rf spec)
        (setf (gethash (rf-next-later rf) (rf-pending rf))
              (list spec object fields (+ (rf-depth rf) (rf-depth-base rf))))
        (incf (rf-next-later rf))
        object))))

(defun rf-fill (rf n)
  "The FILL-FN: complete the Nth container LATER announced, at the depth it
was announced at."
  (let ((pending (gethash n (rf-pending rf))))
    (unless pending
      (rf-invalid rf (format nil "FILL for LATER container ~d, which awaits no contents" n)
                  "the rank of an unfilled LATER container"))
    (remhash n (rf-pending rf))
    (destructuring-bind (spec object fields depth) pending
      (setf (rf-depth-base rf) depth
            (rf-depth rf) 0)
      (rf-enter rf)
      (rf-fill-container rf spec object fields)
      (rf-leave rf)
      (setf (rf-depth-base rf) 0)
      object)))

;;; Objects of each tag

(defun typep-even-of-nan (object type)
  "TYPEP, a NaN OBJECT tested with the invalid-operation trap masked (see
PARSED-TYPEP): the reference decoder tests read values against types the
grammar and slots give."
  (if (and (floatp object) (float-nan-p object))
      (with-float-traps-masked (:invalid) (typep object type))
      (typep object type)))

(defun rf-object-part (rf part fields index)
  "The OBJECT-FN: object INDEX of an :OBJECT or :OBJECTS PART, which must be
of the part's :TYPE.  An instance's slot values (the part that allows the
unbound-slot tag) must each suit their slot, checked as each is read."
  (destructuring-bind (kind name &rest options) part
    (let* ((options (if (eq kind :objects) (rest options) options))
           (value (rf-read-object rf (getf options :unbound)))
           (type (getf options :type)))
      (when (and type (not (typep-even-of-nan value type)))
        (rf-invalid rf (format nil "~(~a~) is ~a, not of type ~s" name (brief value) type)
                    (format nil "an object of type ~s" type)))
      (when (getf options :unbound)
        (check-slot-value rf (field fields 'descriptor) index value))
      value)))

(defun check-slot-value (rf descriptor index value)
  "Signal unless VALUE may be the value of the INDEXth slot DESCRIPTOR
names: of the slot's type, or unbound (*UNBOUND-SLOT-VALUE*) when the class
is not a structure class."
  (let ((class (reference-descriptor-class descriptor))
        (slotd (nth index (reference-descriptor-slots descriptor))))
    (cond ((= (format-descriptor-kind descriptor) 3)
           (when (eq value *unbound-slot-value*)
             (rf-invalid rf "an unbound value of a user codec's object" "an object")))
          ((eq value *unbound-slot-value*)
           (when (typep class 'structure-class)
             (rf-invalid rf (format nil "an unbound slot in structure ~s" (class-name class))
                         "a value (structure slots are always bound)")))
          ((not (typep-even-of-nan value (slot-definition-type slotd)))
           (rf-invalid rf (format nil "a slot of ~s gets a ~s" (class-name class) (type-of value))
                       (format nil "a value of type ~s" (slot-definition-type slotd)))))))

(defun build-leaf (rf name fields)
  "The object of the leaf tag NAME whose parts gave FIELDS."
  (flet ((f (name) (field fields name)))
    (ecase name
      (:nil nil)
      (:t t)
      (:uint8 (f 'b))
      (:negint8 (- -1 (f 'b)))
      ((:int16 :int32 :int64 :single-float :double-float) (f 'value))
      (:bignum (if (logbitp 0 (f 'v)) (- (f 'magnitude)) (f 'magnitude)))
      (:ratio (/ (f 'numerator) (f 'denominator)))
      ((:complex-single :complex-double) (float-complex (f 'real) (f 'imag)))
      (:complex-rational (complex (f 'real) (f 'imag)))
      (:character (code-char (f 'code)))
      ((:base-string :string) (f 'chars))
      ((:specialized-vector :octet-vector :double-vector)
       (let ((payload (f 'elements)))
         (read-payload-into rf (make-array (f 'n) :element-type
                                           (second (element-type-entry (f 'code))))
                            payload)))
      (:symbol (let ((package (f 'package)))
                 (cond ((null package) (make-symbol (base-string-when-possible (f 'name))))
                       ((packagep package) (reference-symbol rf (f 'name) package))
                       (t (rf-invalid rf (format nil "a symbol's package is a ~s"
                                                 (type-of package))
                                      "a package")))))
      (:keyword (reference-symbol rf (f 'name) (find-package "KEYWORD")))
      (:uninterned-symbol (make-symbol (base-string-when-possible (f 'name))))
      (:package (or (find-package (f 'name))
                    (error 'missing-package :name (f 'name) :offset (cursor-pos (rf-cursor rf))
                                            :message "no such package")))
      (:pathname (reference-pathname rf fields))
      (:class-descriptor (reference-descriptor rf fields))
      (:codec-object (funcall (user-codec-decode (reference-codec rf (f 'descriptor) :decode))
                              (f 'value))))))

(defun base-string-when-possible (string)
  "STRING, or a base string of its characters when they are all base
characters (as the names of symbols SBCL makes are)."
  (if (every (lambda (c) (typep c 'base-char)) string)
      (coerce string 'simple-base-string)
      string))

(defun read-payload-into (rf array payload)
  "Store the elements of PAYLOAD (a RAW-PAYLOAD) into ARRAY in row-major
order, refusing a value outside ARRAY's element type; return ARRAY."
  (let ((octets (cursor-octets (rf-cursor rf)))
        (type (second (element-type-entry (raw-payload-code payload)))))
    (when (eq (element-form (raw-payload-code payload)) :none)
      (return-from read-payload-into array)) ; element type NIL: no elements
    (dotimes (i (raw-payload-count payload) array)
      (let ((x (payload-element octets payload i)))
        (unless (typep-even-of-nan x type)
          (cursor-invalid (rf-cursor rf) (format nil "element ~a does not fit ~s" x type)
                          "an element of the array's type"))
        (setf (row-major-aref array i) x)))))

(defun reference-symbol (rf name package)
  "The symbol NAME in PACKAGE: found there, else interned when allowed (the
package must not be locked), else MISSING-SYMBOL."
  (multiple-value-bind (symbol status) (find-symbol name package)
    (cond (status symbol)
          ((and (rf-intern-symbols rf) (not (package-locked-p package)))
           (intern name package))
          (t (error 'missing-symbol :name name :package package
                                    :offset (cursor-pos (rf-cursor rf))
                                    :message "symbol not present and not interned")))))

(defun reference-pathname (rf fields)
  "The pathname of a PATHNAME's FIELDS; invalid when CL cannot make it."
  (handler-case
      (ecase (field fields 'kind)
        (0 (destructuring-bind (device directory name type version) (field fields 'components)
             (make-pathname :device device :directory directory :name name :type type
                            :version version)))
        (1 (destructuring-bind (host device directory name type version)
               (field fields 'components)
             (make-pathname :host host :device device :directory directory :name name
                            :type type :version version)))
        (2 (parse-namestring (field fields 'namestring))))
    (error (e)
      (rf-invalid rf (format nil "cannot make the pathname: ~a" e) "valid pathname components"))))

(defun reference-descriptor (rf fields)
  "The class descriptor of a CLASS-DESCRIPTOR's FIELDS, resolved against the
classes of this image: MISSING-CLASS, MISSING-SLOT, or invalid when the
class is not of the stored kind.  A codec's descriptor names the registered
codec (MISSING-CODEC when there is none), in CLASS."
  (if (= (field fields 'kind) 3)
      (progn
        ;; its shape first, as the decoder checks it (CODEC-RESTORE-DESCRIPTOR)
        (unless (and (symbolp (field fields 'class-name))
                     (equal (field fields 'slot-names) '(:value)))
          (rf-invalid rf "a codec descriptor without a symbol for name and one slot :VALUE"
                      "a codec's name and the slot :VALUE"))
        (make-reference-descriptor
         :kind 3 :class-name (field fields 'class-name) :slot-names (field fields 'slot-names)
         :class (or (find-codec (field fields 'class-name))
                    (error 'missing-codec :name (field fields 'class-name)
                                          :offset (cursor-pos (rf-cursor rf))
                                          :message "is not registered"))))
      (reference-class-descriptor rf fields)))

(defun reference-codec (rf descriptor want)
  "The codec of DESCRIPTOR, a codec's, which must have WANT (:decode, or
:fill for one that allocates first): MISSING-CODEC otherwise."
  (let ((codec (reference-descriptor-class descriptor)))
    (unless (and (user-codec-p codec)
                 (if (eq want :decode) (user-codec-decode codec) (user-codec-fill codec)))
      (error 'missing-codec :name (format-descriptor-class-name descriptor)
                            :offset (cursor-pos (rf-cursor rf))
                            :message (if (eq want :decode)
                                         "has no DECODE for an object written by one"
                                         "has no ALLOCATE and FILL for an object written by one")))
    codec))

(defun reference-class-descriptor (rf fields)
  "REFERENCE-DESCRIPTOR for a class."
  (let* ((name (field fields 'class-name))
         (kind (field fields 'kind))
         (class (or (and (symbolp name) (find-class name nil))
                    (error 'missing-class :name name :offset (cursor-pos (rf-cursor rf))
                                          :message "no such class"))))
    (unless (typep class (ecase kind
                           (0 'structure-class)
                           (1 'standard-class)
                           (2 'condition-class)))
      (rf-invalid rf (format nil "class ~s is not of the stored kind" (class-name class))
                  "a class of the same kind"))
    (ensure-class-finalized class)
    (make-reference-descriptor
     :kind kind :class-name name :slot-names (field fields 'slot-names) :class class
     :slots (mapcar (lambda (slot-name)
                      (or (find slot-name (class-slots class)
                                :key #'slot-definition-name)
                          (error 'missing-slot :class (class-name class) :name slot-name
                                               :offset (cursor-pos (rf-cursor rf))
                                               :message "no such slot")))
                    (field fields 'slot-names)))))

(defun fill-reference-instance (rf object fields)
  "Read OBJECT's slot values and set them: each must be of its slot's type;
an unbound one stays unbound (not in a structure: see CHECK-SLOT-VALUE).
Slots of a standard class the descriptor leaves out get their initforms."
  (let* ((descriptor (field fields 'descriptor))
         (class (reference-descriptor-class descriptor))
         (spec (tag-spec-named :instance))
         (values (field (read-parts (rf-walker rf) (tag-spec-contents spec) fields) 'values)))
    (when (= (format-descriptor-kind descriptor) 3)
      ;; an object of a user codec that allocates first: FILL completes it
      (funcall (user-codec-fill (reference-codec rf descriptor :fill)) object (first values))
      (return-from fill-reference-instance object))
    ;; each value was checked as it was read (CHECK-SLOT-VALUE)
    (loop for slotd in (reference-descriptor-slots descriptor)
          for value in values
          unless (eq value *unbound-slot-value*)
            do (setf (slot-value object (slot-definition-name slotd)) value))
    (when (typep class 'standard-class)
      (let ((new (loop for slotd in (class-slots class)
                       when (and (eq (slot-definition-allocation slotd) :instance)
                                 (slot-definition-initfunction slotd)
                                 (not (member slotd (reference-descriptor-slots descriptor))))
                         collect (slot-definition-name slotd))))
        (when new
          (shared-initialize object new))))
    object))

(defun make-reference-array (rf fields)
  "The array of an ARRAY header's FIELDS: displaced to its target (which
must be an array of the same element type, large enough), or fresh."
  (flet ((f (name) (field fields name)))
    (let ((type (second (element-type-entry (f 'code))))
          (fill-pointer (and (= (f 'fill-pointer-p) 1) (f 'fill-pointer)))
          (adjustable (= (f 'adjustable-p) 1)))
      (if (= (f 'displaced-p) 1)
          (let ((target (f 'target)))
            (unless (and (arrayp target)
                         (or (equal (array-element-type target) (upgraded-array-element-type type))
                             ;; ABCL's array displaced to an (unsigned-byte
                             ;; 16) vector says T (READ-DISPLACED-ARRAY)
                             (equal (array-element-type-name target) type))
                         (<= (+ (f 'offset) (f 'total)) (array-total-size target)))
              (rf-invalid rf "an array displaced to something it cannot fit in"
                          "an array of the same element type, large enough"))
            (make-array (f 'dims) :element-type type :fill-pointer fill-pointer
                                  :adjustable adjustable :displaced-to target
                                  :displaced-index-offset (f 'offset)))
          (make-array (f 'dims) :element-type type :fill-pointer fill-pointer
                                :adjustable adjustable)))))

(defun fill-reference-array (rf array fields)
  "Read the contents of ARRAY (none when displaced), in row-major order."
  (let* ((spec (tag-spec-named :array))
         (elements (field (read-parts (rf-walker rf) (tag-spec-contents spec) fields)
                          'elements)))
    (cond ((raw-payload-p elements) (read-payload-into rf array elements))
          ((stringp elements)
           (dotimes (i (length elements))
             (setf (row-major-aref array i) (char elements i))))
          (t (loop for x in elements
                   for i from 0
                   do (setf (row-major-aref array i) x))))
    array))

(defun make-reference-hash-table (rf fields)
  "The empty hash table of a HASH-TABLE header's FIELDS; invalid when this
image cannot make it (a named test it does not know)."
  (flet ((f (name) (field fields name)))
    (let ((test (if (= (f 'test) 4)
                    (f 'test-name)
                    (nth (f 'test) '(eq eql equal equalp)))))
      (handler-case
          (make-hash-table-as-stored :test test :size (f 'size) :rehash-size (f 'rehash-size)
                                     :rehash-threshold (f 'rehash-threshold)
                                     :weakness (nth (f 'weakness) '(nil :key :value :key-and-value
                                                                    :key-or-value))
                                     :synchronized (= (f 'synchronized) 1))
        (error ()
          (rf-invalid rf (format nil "~s is not a hash table test here" test)
                      "a hash table test defined in this image"))))))

(defun fill-reference-hash-table (rf table fields)
  "Read TABLE's pairs.  A test that hashes contents (not EQ or EQL) waits
until no container of the record awaits its FILL: a key may be incomplete
until then (see RF-INSERT-POSTPONED)."
  (let* ((spec (tag-spec-named :hash-table))
         (pairs (field (read-parts (rf-walker rf) (tag-spec-contents spec) fields) 'pairs)))
    (if (and (not (identity-hashed-table-p table))
             (or (plusp (hash-table-count (rf-pending rf)))
                 ;; an EQ or EQL table that hashes contents (ABCL's): a
                 ;; key may be a cons still being read around it
                 (member (format-hash-table-test table) '(eq eql))))
        (push (cons table pairs) (rf-postponed rf))
        (insert-reference-pairs rf table pairs))))

(defun insert-reference-pairs (rf table pairs)
  "Add PAIRS (key value key value ...) to TABLE; a key its test cannot hash
\(a NaN under EQUALP, a key a custom test rejects) is invalid input."
  (let ((key nil))
    (handler-case
        (with-float-traps-masked (:invalid :overflow :divide-by-zero :inexact)
          (loop for (k value) on pairs by #'cddr
                do (setf key k
                         (gethash k table) value)))
      (error (e)
        (rf-invalid rf (format nil "the table's test ~s cannot hash key ~a: ~a"
                               (format-hash-table-test table) (brief key) e)
                    "a key the hash table test accepts")))))

(defun rf-insert-postponed (rf)
  "Insert the pairs postponed while containers awaited their FILL, the
tables read last first (they may be keys of the earlier ones)."
  (loop for (table . pairs) in (rf-postponed rf)
        do (insert-reference-pairs rf table pairs))
  (setf (rf-postponed rf) '()))

;;; Records

(defun make-reference-walker (rf)
  "The walker of RF: objects, tails, LATER and FILL as the reference decoder
reads them, and memory counted against max-to-read."
  (make-walker :cursor (rf-cursor rf)
               :object-fn (lambda (walker part fields index)
                            (declare (ignore walker))
                            (rf-object-part rf part fields index))
               :tail-fn (lambda (walker part fields)
                          (declare (ignore walker part fields))
                          (rf-tail rf))
               :later-fn (lambda (walker part fields)
                           (declare (ignore walker part fields))
                           (rf-later rf))
               :fill-fn (lambda (walker part fields)
                          (declare (ignore walker))
                          (rf-fill rf (field fields (second part))))
               :charge-fn (lambda (walker kind bytes)
                            (declare (ignore walker))
                            (rf-charge-part rf kind bytes))))

(defun rf-record-tag (rf name)
  "Read the tag NAME (just peeked) and its parts; return their fields."
  (cursor-u8 (rf-cursor rf))
  (read-parts (rf-walker rf) (tag-spec-parts (tag-spec-named name)) '()))

(defun rf-peek-is (rf name)
  "True when a byte is left and it is the tag NAME."
  (let ((cursor (rf-cursor rf)))
    (and (not (cursor-at-end-p cursor))
         (= (cursor-peek cursor) (tag-spec-code (tag-spec-named name))))))

(defun rf-top-level-object (rf)
  "Read one top-level object and the FILL records of the containers it
deferred; insert the pairs postponed; return the object."
  (let ((object (rf-read-object rf))
        (cursor (rf-cursor rf)))
    (loop while (plusp (hash-table-count (rf-pending rf)))
          do (let ((start (cursor-pos cursor)))
               (unless (= (cursor-u8 cursor) +tag-fill+)
                 (cursor-invalid cursor (format nil "~d container~:p announced by LATER not filled"
                                                (hash-table-count (rf-pending rf)))
                                 "a FILL record for each" start)))
             (read-parts (rf-walker rf) (tag-spec-parts (tag-spec-named :fill)) '()))
    (rf-insert-postponed rf)
    object))

(defun too-many-objects (rf count max-count)
  "Signal that the record holds COUNT objects, more than MAX-COUNT."
  (error 'restore-limit-exceeded
         :limit :values :value max-count :offset (cursor-pos (rf-cursor rf))
         :message (format nil "the record holds ~:d objects, more than ~d" count max-count)))

(defun rf-version-2-objects (rf max-count)
  "The objects of a record whose header names version 1 or 2: they run to
the end of the input or to an end marker, each followed by FILL records."
  (let ((objects '()) (count 0))
    (loop
      (when (cursor-at-end-p (rf-cursor rf)) (return))
      (when (rf-peek-is rf :end)
        (cursor-u8 (rf-cursor rf))
        (return))
      (when (and max-count (>= count max-count))
        (too-many-objects rf (1+ count) max-count))
      (let ((object (rf-read-object rf)))
        (loop while (rf-peek-is rf :fill)
              do (rf-record-tag rf :fill))
        (rf-insert-postponed rf)
        (push object objects)
        (incf count)))
    (when (plusp (hash-table-count (rf-pending rf)))
      (rf-invalid rf (format nil "~d container~:p announced by LATER never filled"
                             (hash-table-count (rf-pending rf)))
                  "a FILL record for each"))
    (when (zerop count)
      (rf-invalid rf "no object before the end marker" "an object"))
    (nreverse objects)))

(defun reference-restore (octets &key (max-to-read *max-to-read*) (max-depth *max-depth*)
                                      (intern-symbols *intern-symbols*)
                                      (require-header *require-header*)
                                      max-count (start 0))
  "Read the record at START in OCTETS (an octet vector, up to its fill
pointer) as RESTORE reads it, by the grammar, slowly; return the list of its
top-level objects and the offset after the record.  The keywords mean what
RESTORE's do (MAX-TO-READ bounds both the bytes read and the memory
allocated; MAX-DEPTH the nesting of containers); with MAX-COUNT, a record of
more objects signals RESTORE-LIMIT-EXCEEDED (RESTORE's is +MAX-VALUES+).
Signals the conditions RESTORE signals, in the same cases: END-OF-DATA,
NOT-BINSTORE-DATA, UNSUPPORTED-VERSION, TRUNCATED-INPUT, INVALID-INPUT,
RESTORE-LIMIT-EXCEEDED, MISSING-PACKAGE, MISSING-SYMBOL, MISSING-CLASS,
MISSING-SLOT (without restarts); never another error, whatever the bytes,
and never creates a package.  Input nested deeper than the control stack
allows signals RESTORE-LIMIT-EXCEEDED (:nesting)."
  (let* ((size (length octets))
         (cut (and max-to-read (> (- size start) max-to-read)))
         (cursor (make-cursor octets start (if cut (+ start max-to-read) size) cut
                              max-to-read))
         (rf (make-reference-state
              :cursor cursor :max-depth max-depth :alloc-left max-to-read
              :max-to-read max-to-read :intern-symbols intern-symbols
              :stack-limit (stack-limit +reference-stack-margin+))))
    (setf (rf-walker rf) (make-reference-walker rf))
    ;; end markers closing the record before
    (loop while (rf-peek-is rf :end)
          do (cursor-u8 cursor))
    (when (cursor-at-end-p cursor)
      (error 'end-of-data :offset (cursor-pos cursor) :message "no data left to restore"))
    (let ((version (cond ((rf-peek-is rf :header) (field (rf-record-tag rf :header) 'version))
                         (require-header
                          (error 'not-binstore-data
                                 :offset (cursor-pos cursor)
                                 :message "the input does not begin with binstore's header"
                                 :expected "binstore's header, #x24 \"BST\" and a version"))
                         (t +format-version+))))
      (when (cursor-at-end-p cursor)
        (error 'truncated-input :offset (cursor-pos cursor) :message "the record has no object"
                                :expected "an object"))
      (let ((flags (record-tracking-flags (lambda (name) (rf-peek-is rf name))
                                          (lambda (name) (rf-record-tag rf name)))))
        (when flags
          (setf (rf-track-objects rf) (logtest flags +track-objects+)
                (rf-track-conses rf) (logtest flags +track-conses+))))
      (when (rf-peek-is rf :dictionary)
        ;; the reference decoder is never given the dictionary's entries
        (let* ((start (cursor-pos cursor))
               (fields (rf-record-tag rf :dictionary)))
          (error 'dictionary-mismatch
                 :offset start :fingerprint (field fields 'fingerprint)
                 :message (format nil "the record was stored with a dictionary of ~d entr~:@p, ~
                                       fingerprint ~8,'0x; no dictionary was given"
                                  (field fields 'n) (field fields 'fingerprint)))))
      (values
       (if (< version 3)
           (rf-version-2-objects rf max-count)
           (let ((count (if (rf-peek-is rf :objects)
                            (field (rf-record-tag rf :objects) 'n)
                            1)))
             (when (and max-count (> count max-count))
               (too-many-objects rf count max-count))
             (prog1 (loop repeat count collect (rf-top-level-object rf))
               (when (rf-peek-is rf :end)
                 (cursor-u8 cursor)))))
       (cursor-pos cursor)))))
