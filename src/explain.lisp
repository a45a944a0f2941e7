;;;; BINSTORE:EXPLAIN: a readable account of every tag of every record of a
;;;; place, read by the grammar (src/format/grammar.lisp) with the cursor and
;;;; READ-PARTS of src/format/reference.lisp.  It makes no objects, interns
;;;; nothing and looks no class or package up, so it explains any data, from
;;;; any image, and it stops at the first malformed byte after printing what
;;;; it read.
;;;;
;;;; Each top-level object is read into a tree of lines (EX-NODE), within
;;;; the depth and item limits, and printed once complete (or at the error
;;;; that ends it): a line shows its offset, its first bytes, and, indented
;;;; by nesting, the tag's name, its fields, its value, the ids it takes
;;;; ("#id 3", "cons ids c0-c2") and what a reference names ("→ #3").

(in-package #:binstore)

(defconstant +explain-shown-bytes+ 8
  "The most bytes of an object a line shows.")

(defconstant +explain-shown-characters+ 40
  "The most characters of a string a line shows.")

(defconstant +explain-shown-elements+ 8
  "The most elements of a raw payload a line shows.")

(defstruct (ex-node (:constructor make-ex-node (offset prefix label)))
  "A line of EXPLAIN's output: the object at OFFSET (its bytes up to
HEAD-END shown), PREFIX (the field it is, or NIL), LABEL (what it is), its
CHILDREN (newest first), COUNT of them, and how many more were read but
not shown: MORE beyond max-items, DEEPER beyond max-depth."
  offset prefix label
  (head-end nil)
  (children '())
  (count 0)
  (more 0)
  (deeper 0))

(defstruct (explainer (:conc-name ex-))
  "One EXPLAIN: the cursor and its walker, where it prints, its limits, the
ids of the record being read (id -> (offset text value), cons id ->
(offset . index)), its tracking flags, the containers LATER announced, the
record's node, the node lines attach to (NIL: not shown) and their depth."
  cursor walker stream max-depth max-items
  (ids (make-array 64 :adjustable t :fill-pointer 0))
  (cons-ids (make-array 64 :adjustable t :fill-pointer 0))
  (last-ref -1)                         ; the id the last reference named
  (track-objects t)
  (track-conses nil)
  (pending (make-hash-table))           ; LATER rank -> (spec fields value text)
  (next-later 0)
  (root nil)                            ; the record's node: its lines are not limited
  (parent nil)
  (depth 0)                             ; of the lines made now: top-level objects 0
  (stack-limit 0 :type word))

;;; Text -------------------------------------------------------------------------

(defun ex-print (object)
  "OBJECT as PRIN1 prints it, not readably, on one line."
  (let ((*print-readably* nil) (*print-pretty* nil) (*print-length* 8) (*print-level* 3)
        (*print-circle* nil))
    (prin1-to-string object)))

(defun ex-string-text (string)
  "STRING quoted, its first +EXPLAIN-SHOWN-CHARACTERS+ characters, and how
many more it has."
  (let ((n (length string)))
    (if (<= n +explain-shown-characters+)
        (ex-print string)
        (format nil "~a… ~d more" (ex-print (subseq string 0 +explain-shown-characters+))
                (- n +explain-shown-characters+)))))

(defun ex-payload-text (octets payload)
  "The first elements of PAYLOAD (a RAW-PAYLOAD of OCTETS), and how many more."
  (let* ((n (raw-payload-count payload))
         (shown (if (eq (element-form (raw-payload-code payload)) :none)
                    0
                    (min n +explain-shown-elements+))))
    (format nil "#(~{~a~^ ~}~:[~;…~])~:[~*~; ~d more~]"
            (loop for i below shown collect (ex-print (payload-element octets payload i)))
            (< shown n) (< shown n) (- n shown))))

(defun ex-parts-text (spec fields &optional (parts (append (tag-spec-parts spec)
                                                           (tag-spec-contents spec))))
  "The integer fields of SPEC's PARTS that FIELDS holds, as name=value (a
flags byte as its named fields, an element type with its type), in order."
  (let ((words '()))
    (labels ((named (value names)
               (if (and names (< -1 value (length names)))
                   (string-downcase (nth value names))
                   value))
             (walk (parts)
               (dolist (part parts)
                 (let ((name (second part)))
                   (case (first part)
                     ((:u8 :varint :count)
                      (let ((entry (assoc name fields)))
                        (when (and entry (integerp (cdr entry)))
                          (push (format nil "~(~a~)=~a" name
                                        (named (cdr entry) (and (eq (first part) :u8)
                                                                (third part))))
                                words))))
                     (:varints
                      (let ((entry (assoc name fields)))
                        (when entry
                          (push (format nil "~(~a~)=~a" name (cdr entry)) words))))
                     (:element-type
                      (let ((entry (assoc name fields)))
                        (when entry
                          (push (format nil "~(~a~)=~d ~(~a~)" name (cdr entry)
                                        (second (element-type-entry (cdr entry))))
                                words))))
                     (:flags
                      (let ((entry (assoc name fields)))
                        (when entry
                          (push (format nil "~(~a~)=#x~2,'0x" name (cdr entry)) words)
                          (loop for (field nil nil names) in (cddr part)
                                do (push (format nil "~(~a~)=~a" field
                                                 (named (field fields field) names))
                                         words)))))
                     (:if (walk (third part)) (walk (fourth part)))
                     (:case (dolist (clause (cddr part)) (walk (rest clause)))))))))
      (walk parts))
    (format nil "~{~a~^ ~}" (nreverse words))))

(defun ex-id-text (ex id)
  "What the object with ID is, and where: for a reference's line."
  (destructuring-bind (offset text value) (aref (ex-ids ex) id)
    (declare (ignore value))
    (format nil "~a (at 0x~4,'0x)" text offset)))

;;; The tree of lines ------------------------------------------------------------

(defun ex-new-node (ex offset prefix label)
  "A line for the object at OFFSET under the current parent, or NIL when it
is not shown (the parent is not shown, is at max-depth, or has max-items
lines), which the parent then counts."
  (let ((parent (ex-parent ex)))
    (cond ((null parent) nil)
          ((> (ex-depth ex) (ex-max-depth ex))
           (incf (ex-node-deeper parent))
           nil)
          ((and (ex-max-items ex) (not (eq parent (ex-root ex)))
                (>= (ex-node-count parent) (ex-max-items ex)))
           (incf (ex-node-more parent))
           nil)
          (t (let ((node (make-ex-node offset prefix label)))
               (unless (ex-node-head-end parent)
                 (setf (ex-node-head-end parent) offset))
               (push node (ex-node-children parent))
               (incf (ex-node-count parent))
               node)))))

(defmacro with-ex-parent ((ex node) &body body)
  "Run BODY with NODE (or, when NIL, nothing: what BODY reads is not shown)
as the parent of the lines BODY makes, one level deeper."
  (let ((e (gensym "EX")) (saved (gensym "SAVED")) (depth (gensym "DEPTH")))
    `(let* ((,e ,ex) (,saved (ex-parent ,e)) (,depth (ex-depth ,e)))
       (setf (ex-parent ,e) ,node
             (ex-depth ,e) (1+ ,depth))
       (unwind-protect (progn ,@body)
         (setf (ex-parent ,e) ,saved
               (ex-depth ,e) ,depth)))))

(defun ex-print-node (ex node depth)
  "Print NODE's line and its children's, indented by DEPTH."
  (let* ((stream (ex-stream ex))
         (octets (cursor-octets (ex-cursor ex)))
         (start (ex-node-offset node))
         (end (min (length octets) (or (ex-node-head-end node) (cursor-pos (ex-cursor ex)))))
         (shown (min (max 0 (- end start)) +explain-shown-bytes+)))
    (format stream "0x~4,'0x ~7d  ~26a~va~@[~a: ~]~a~%"
            start start
            (format nil "~{~2,'0x~^ ~}~:[~; …~]"
                    (coerce (subseq octets start (+ start shown)) 'list)
                    (> (- end start) shown))
            (* 2 depth) "" (ex-node-prefix node) (ex-node-label node))
    (dolist (child (reverse (ex-node-children node)))
      (ex-print-node ex child (1+ depth)))
    (flet ((elided (count what)
             (when (plusp count)
               (format stream "~37a~va… ~d ~a~%" "" (* 2 (1+ depth)) "" count what))))
      (elided (ex-node-deeper node) "more nested deeper than max-depth")
      (elided (ex-node-more node) "more (max-items)"))))

(defun ex-flush (ex root)
  "Print the lines under ROOT and forget them."
  (dolist (child (reverse (ex-node-children root)))
    (ex-print-node ex child 0))
  (setf (ex-node-children root) '()
        (ex-node-count root) 0))

;;; Reading ------------------------------------------------------------------------

(defun ex-check-stack (ex &optional deep)
  "Signal RESTORE-LIMIT-EXCEEDED (:nesting) rather than recurse into the
last +REFERENCE-STACK-MARGIN+ of the control stack.  With DEEP, signal it
whatever the stack: ABCL's count of levels (COUNTING-NESTING) is past
its limit."
  (when (or deep (stack-exhausted-p (ex-stack-limit ex)))
    (error 'restore-limit-exceeded
           :limit :nesting :value +max-physical-depth+ :offset (cursor-pos (ex-cursor ex))
           :message "the input nests deeper than EXPLAIN's stack allows")))

(defun ex-take-id (ex offset text value)
  "Give the object at OFFSET the next id; return its text for the line."
  (vector-push-extend (list offset text value) (ex-ids ex))
  (format nil "#id ~d" (1- (length (ex-ids ex)))))

(defun ex-ids-text (ex spec offset text value)
  "Give the object of SPEC at OFFSET (VALUE, TEXT for references to it) the
ids SPEC's rule gives it; return the words for its line, or NIL.  A run of
conses is given its cons ids by EX-RUN-IDS."
  (ecase (tag-spec-ids spec)
    ((:never :conses) nil)
    (:always (ex-take-id ex offset text value))
    ((:tracked :container) (when (ex-track-objects ex) (ex-take-id ex offset text value)))))

(defun ex-run-ids (ex offset n)
  "Give the N conses of the run at OFFSET their cons ids when the record
tracks conses; return the words for its line, or NIL."
  (when (and (ex-track-conses ex) (plusp n))
    (let ((first (length (ex-cons-ids ex))))
      (dotimes (i n)
        (vector-push-extend (cons offset i) (ex-cons-ids ex)))
      (if (= n 1)
          (format nil "cons id c~d" first)
          (format nil "cons ids c~d–c~d" first (+ first n -1))))))

(defun ex-part-prefix (part fields index)
  "The name EXPLAIN gives object INDEX of PART: its :LABEL, or its :LABELS
\(a list used in turn, or an expression giving one), or NIL."
  (let* ((options (if (eq (first part) :objects) (cdddr part) (cddr part)))
         (label (getf options :label))
         (labels (getf options :labels)))
    (cond (label label)
          ((and labels (stringp (first labels)))
           (nth (mod index (length labels)) labels))
          (labels (let ((names (ignore-errors (grammar-eval labels fields))))
                    (and (listp names) (nth index names)))))))

(defun ex-read-object (ex &optional prefix slot-value-p)
  "Read one object (with SLOT-VALUE-P, the unbound-slot tag too) into a
line under the current parent, labelled PREFIX; return its value for the
grammar's expressions: the number, character or string it is, an
uninterned symbol named as the symbol it is printed, a FORMAT-DESCRIPTOR
for a class descriptor, else a list (kind offset)."
  (ex-check-stack ex)
  (counting-nesting ((ex-check-stack ex t) :reference)
    (let* ((cursor (ex-cursor ex))
           (start (cursor-pos cursor))
           (tag (cursor-u8 cursor))
           (spec (and (< tag +first-small-ref-tag+) (tag-spec tag)))
           (node (ex-new-node ex start prefix (if spec (string-downcase (tag-spec-name spec)) ""))))
      (flet ((done (value label)
               (when node
                 (setf (ex-node-label node) label)
                 (unless (ex-node-head-end node)
                   (setf (ex-node-head-end node) (cursor-pos cursor))))
               value))
        (cond ((>= tag +first-small-int-tag+)
               (let ((n (- tag +small-int-bias+)))
                 (done n (format nil "integer ~d" n))))
              ((>= tag +first-small-ref-tag+)
               (let ((id (- tag +first-small-ref-tag+)))
                 (unless (< id (length (ex-ids ex)))
                   (cursor-invalid cursor (format nil "reference to id ~d, which is not defined yet" id)
                                   "an id defined earlier" start))
                 (setf (ex-last-ref ex) id)
                 (done (third (aref (ex-ids ex) id))
                       (format nil "→ #~d ~a" id (ex-id-text ex id)))))
              ((and slot-value-p spec (eq (tag-spec-role spec) :slot))
               (done '(:unbound) "unbound-slot"))
              ((or (null spec) (not (eq (tag-spec-role spec) :object)))
               (cursor-invalid cursor (format nil "tag #x~2,'0x where an object should start~@[ (~(~a~))~]"
                                              tag (and spec (tag-spec-name spec)))
                               "an object tag" start))
              (t (multiple-value-bind (value label)
                     (with-ex-parent (ex node) (ex-read-tagged ex spec start node))
                   (done value label))))))))

(defun ex-read-tagged (ex spec start node)
  "Read the object of SPEC whose tag was read at START, its lines under
NODE; return its value and its label."
  (ecase (tag-spec-kind spec)
    (:leaf (ex-read-leaf ex spec start))
    (:reference
     (let ((id (referenced-id (ex-walker ex) spec (ex-last-ref ex) start)))
       (if (eq (tag-spec-refers spec) :conses)
           (if (< id (length (ex-cons-ids ex)))
               (destructuring-bind (offset . index) (aref (ex-cons-ids ex) id)
                 (values (list :cons offset)
                         (format nil "~(~a~) id=~d → c~d, cons ~d of the run at 0x~4,'0x"
                                 (tag-spec-name spec) id id index offset)))
               (cursor-invalid (ex-cursor ex)
                               (format nil "reference to cons ~d, which is not defined yet" id)
                               "a cons id defined earlier" start))
           (if (< id (length (ex-ids ex)))
               (values (progn (setf (ex-last-ref ex) id)
                              (third (aref (ex-ids ex) id)))
                       (format nil "~(~a~) id=~d → #~d ~a"
                               (tag-spec-name spec) id id (ex-id-text ex id)))
               (cursor-invalid (ex-cursor ex)
                               (format nil "reference to id ~d, which is not defined yet" id)
                               "an id defined earlier" start)))))
    (:container
     (multiple-value-bind (value text ids fields) (ex-open-container ex spec start)
       (setf (ex-node-label-of node) (format nil "~a~@[  ~a~]" text ids))
       (ex-fill-container ex spec fields node)
       (values value (format nil "~a~@[  ~a~]" text ids))))
    (:deferred
     (let* ((fields (read-parts (ex-walker ex) (tag-spec-parts spec) '()))
            (later (field fields 'container)))
       (values (first later) (second later))))))

(defun (setf ex-node-label-of) (label node)
  "Set NODE's label, when NODE is shown."
  (when node
    (setf (ex-node-label node) label)))

(defun ex-open-container (ex spec start)
  "Read the header of the container of SPEC whose tag was read at START and
give it its ids; return its value, its text, the words on its ids, and
the header's fields."
  (let* ((fields (read-parts (ex-walker ex) (tag-spec-parts spec) '()))
         (text (format nil "~(~a~)~@[  ~a~]" (tag-spec-name spec)
                       (let ((words (ex-parts-text spec fields (tag-spec-parts spec))))
                         (and (plusp (length words)) words))))
         (value (list (tag-spec-name spec) start))
         (ids (if (eq (tag-spec-ids spec) :conses)
                  (ex-run-ids ex start (field fields 'n))
                  (ex-ids-text ex spec start text value))))
    (values value text ids fields)))

(defun ex-fill-container (ex spec fields node)
  "Read the contents of the container of SPEC (header FIELDS) under NODE,
the current parent.  The runs that continue a list at its tail are read in
a loop: each is a line \"tail:\" under NODE, its cars under that line."
  (let ((walker (ex-walker ex)))
    (if (not (eq (tag-spec-ids spec) :conses))
        (read-parts walker (tag-spec-contents spec) fields)
        (let ((depth (ex-depth ex))
              (run-node node))
          (loop
            (let* ((contents (read-parts walker (tag-spec-contents spec) fields))
                   (tail (field contents 'cdr)))
              (when (and run-node (find :ints (tag-spec-contents spec) :key #'first))
                ;; packed integers are no objects, so no lines: the run's shows them
                (setf (ex-node-label run-node)
                      (format nil "~a  ~a" (ex-node-label run-node)
                              (ex-elements-text (field contents 'cars)))))
              (if (and (consp tail) (eq (first tail) :continuation))
                  (destructuring-bind (next-spec next-fields start label) (rest tail)
                    (setf (ex-parent ex) node
                          (ex-depth ex) depth
                          run-node (ex-new-node ex start "tail" label)
                          (ex-parent ex) run-node
                          (ex-depth ex) (1+ depth)
                          spec next-spec
                          fields next-fields))
                  (return))))))))

(defun ex-elements-text (elements)
  "The first elements of the list ELEMENTS, and how many more."
  (let ((n (length elements)))
    (format nil "(~{~a~^ ~}~:[~;…~])~:[~*~; ~d more~]"
            (mapcar #'ex-print (subseq elements 0 (min n +explain-shown-elements+)))
            (> n +explain-shown-elements+) (> n +explain-shown-elements+)
            (- n +explain-shown-elements+))))

(defun ex-tail (ex)
  "The TAIL-FN: a list tag continues the run: its header is read and its
conses given ids, and EX-FILL-CONTAINER reads its contents (the value is
(:continuation spec fields offset label)); anything else is the final cdr,
a line \"tail:\"."
  (let* ((cursor (ex-cursor ex))
         (start (cursor-pos cursor))
         (tag (cursor-peek cursor)))
    (if (cons-run-tag-p tag)
        (let ((spec (progn (cursor-u8 cursor) (tag-spec tag))))
          (multiple-value-bind (value text ids fields) (ex-open-container ex spec start)
            (declare (ignore value))
            (list :continuation spec fields start (format nil "~a~@[  ~a~]" text ids))))
        (ex-read-object ex "tail"))))

(defun ex-later (ex)
  "The LATER-FN: a container tag and its header, waiting for its FILL;
return (value label)."
  (let* ((cursor (ex-cursor ex))
         (start (cursor-pos cursor))
         (tag (cursor-u8 cursor)))
    (unless (container-tag-p tag)
      (cursor-invalid cursor (format nil "LATER before tag #x~2,'0x" tag) "a container tag"))
    (let ((spec (tag-spec tag))
          (rank (ex-next-later ex)))
      (multiple-value-bind (value text ids fields) (ex-open-container ex spec start)
        (setf (gethash rank (ex-pending ex)) (list spec fields value text))
        (incf (ex-next-later ex))
        (list value (format nil "later ~a~@[  ~a~], contents in fill ~d" text ids rank))))))

(defun ex-fill (ex n)
  "The FILL-FN: the contents of the container LATER numbered N, under the
FILL's line."
  (let ((pending (gethash n (ex-pending ex))))
    (unless pending
      (cursor-invalid (ex-cursor ex)
                      (format nil "FILL for LATER container ~d, which awaits no contents" n)
                      "the rank of an unfilled LATER container"))
    (remhash n (ex-pending ex))
    (destructuring-bind (spec fields value text) pending
      (let ((node (ex-parent ex)))
        (when node
          (setf (ex-node-label node)
                (format nil "fill n=~d: contents of ~a (at 0x~4,'0x)" n text (second value)))))
      (ex-fill-container ex spec fields (ex-parent ex))
      value)))

(defun ex-read-leaf (ex spec start)
  "Read the leaf of SPEC whose tag was read at START; return its value and
its label (with the ids it took)."
  (let* ((fields (read-parts (ex-walker ex) (tag-spec-parts spec) '()))
         (octets (cursor-octets (ex-cursor ex)))
         (name (tag-spec-name spec)))
    (flet ((f (name) (field fields name)))
      (multiple-value-bind (value shown)
          (case name
            (:nil (values nil nil))
            (:t (values t nil))
            (:uint8 (values (f 'b) (f 'b)))
            (:negint8 (values (- -1 (f 'b)) (- -1 (f 'b))))
            ((:int16 :int32 :int64) (values (f 'value) (f 'value)))
            (:bignum (let ((x (if (logbitp 0 (f 'v)) (- (f 'magnitude)) (f 'magnitude))))
                       (values x (if (< (integer-length x) 200)
                                     x
                                     (format nil "an integer of ~d bits" (integer-length x))))))
            ((:single-float :double-float) (values (f 'value) (ex-print (f 'value))))
            (:ratio (let ((x (/ (f 'numerator) (f 'denominator)))) (values x x)))
            ((:complex-single :complex-double :complex-rational)
             (let ((x (complex (f 'real) (f 'imag)))) (values x (ex-print x))))
            (:character (let ((c (code-char (f 'code)))) (values c (ex-print c))))
            ((:base-string :string) (values (f 'chars) (ex-string-text (f 'chars))))
            ((:specialized-vector :octet-vector :double-vector)
             (values (list name start) (ex-payload-text octets (f 'elements))))
            ((:symbol :keyword :uninterned-symbol)
             (let ((text (ex-symbol-text name (f 'name) (f 'package))))
               (values (make-symbol text) text)))
            (:package (values (list :package (f 'name)) (ex-print (f 'name))))
            (:pathname (values (list :pathname start) nil))
            (:class-descriptor
             (values (make-format-descriptor :kind (f 'kind) :class-name (f 'class-name)
                                             :slot-names (f 'slot-names))
                     (format nil "~a (~{~a~^ ~})" (f 'class-name) (f 'slot-names))))
            (t (values (list name start) nil)))
        (let* ((words (ex-parts-text spec fields))
               (text (format nil "~(~a~)~:[~;  ~:*~a~]~@[  ~a~]" name
                             (and (plusp (length words)) words) shown)))
          (values value (format nil "~a~@[  ~a~]" text
                                (ex-ids-text ex spec start text value))))))))

(defun ex-object-part (ex part fields index)
  "The OBJECT-FN: object INDEX of an :OBJECT or :OBJECTS PART.  Of the
parts' types EXPLAIN checks the one its values can have: a class
descriptor, an instance's first object."
  (let* ((options (if (eq (first part) :objects) (cdddr part) (cddr part)))
         (value (ex-read-object ex (ex-part-prefix part fields index) (getf options :unbound))))
    (when (and (eq (getf options :type) 'format-descriptor)
               (not (format-descriptor-p value)))
      (cursor-invalid (ex-cursor ex) "an instance whose descriptor is not a class descriptor"
                      "a class descriptor"))
    value))

(defun ex-symbol-text (kind name package)
  "How a symbol of the tag KIND named NAME is printed: PACKAGE::NAME (the
package as EXPLAIN's value for it), :NAME, or #:NAME."
  (case kind
    (:keyword (format nil ":~a" name))
    (:symbol (if (and (consp package) (eq (first package) :package))
                 (format nil "~a::~a" (second package) name)
                 (format nil "#:~a" name)))
    (t (format nil "#:~a" name))))

;;; Records ---------------------------------------------------------------------------

(defun make-explain-walker (ex)
  "The walker of EX: objects, tails, LATER and FILL as EXPLAIN reads them."
  (make-walker :cursor (ex-cursor ex)
               :lenient t
               :object-fn (lambda (walker part fields index)
                            (declare (ignore walker))
                            (ex-object-part ex part fields index))
               :tail-fn (lambda (walker part fields)
                          (declare (ignore walker part fields))
                          (ex-tail ex))
               :later-fn (lambda (walker part fields)
                           (declare (ignore walker part fields))
                           (ex-later ex))
               :fill-fn (lambda (walker part fields)
                          (declare (ignore walker))
                          (ex-fill ex (field fields (second part))))))

(defun ex-record-tag (ex name &optional (label-fn #'identity))
  "Read the record tag NAME (just peeked) and its parts into a line under
the current parent (the record's node); return the fields.  LABEL-FN makes
the line's label from its words."
  (let* ((cursor (ex-cursor ex))
         (start (cursor-pos cursor))
         (spec (tag-spec-named name))
         (node (ex-new-node ex start nil (string-downcase name))))
    (cursor-u8 cursor)
    (let ((fields (with-ex-parent (ex node)
                    (read-parts (ex-walker ex) (tag-spec-parts spec) '()))))
      ;; a FILL's line was labelled as its contents were read (EX-FILL)
      (when (and node (string= (ex-node-label node) (string-downcase name)))
        (setf (ex-node-label node)
              (funcall label-fn (format nil "~(~a~)~:[~;  ~:*~a~]" name
                                        (let ((words (ex-parts-text spec fields)))
                                          (and (plusp (length words)) words))))))
      fields)))

(defun ex-peek-is (ex name)
  "True when a byte is left and it is the tag NAME."
  (let ((cursor (ex-cursor ex)))
    (and (not (cursor-at-end-p cursor))
         (= (cursor-peek cursor) (tag-spec-code (tag-spec-named name))))))

(defun ex-record (ex root number)
  "Explain the record at the cursor, the NUMBERth of the place: its lines,
then a summary line.  Signals at malformed bytes, after printing the lines
of what was read."
  (let* ((cursor (ex-cursor ex))
         (start (cursor-pos cursor))
         (stream (ex-stream ex))
         (objects 0))
    (setf (fill-pointer (ex-ids ex)) 0
          (fill-pointer (ex-cons-ids ex)) 0
          (ex-last-ref ex) -1
          (ex-track-objects ex) t
          (ex-track-conses ex) nil
          (ex-next-later ex) 0)
    (clrhash (ex-pending ex))
    (format stream "record ~d at 0x~4,'0x (~d)~%" number start start)
    (let ((version (if (ex-peek-is ex :header)
                       (field (ex-record-tag ex :header) 'version)
                       (progn (format stream "~37a(no header: read as version ~d)~%" ""
                                      +format-version+)
                              +format-version+))))
      (ex-flush ex root)
      (when (cursor-at-end-p cursor)
        (error 'truncated-input :offset (cursor-pos cursor) :message "the record has no object"
                                :expected "an object"))
      (let ((flags (record-tracking-flags
                    (lambda (name) (ex-peek-is ex name))
                    (lambda (tracking)
                      (ex-record-tag
                       ex tracking
                       (lambda (text)
                         (let ((flags (cond ((eq tracking :no-tracking) 0)
                                            ((eq tracking :full-tracking) 3))))
                           (format nil "~a~@[: ~a~]" text
                                   (and flags (tracking-flags-text flags))))))))))
        (when flags
          (setf (ex-track-objects ex) (logtest flags +track-objects+)
                (ex-track-conses ex) (logtest flags +track-conses+))))
      (when (ex-peek-is ex :dictionary)
        ;; the entries take the first ids; EXPLAIN does not know what they are
        (let* ((offset (cursor-pos cursor))
               (n (field (ex-record-tag ex :dictionary
                                        (lambda (text)
                                          (format nil "~a  (the entries take ids from #0)" text)))
                         'n)))
          (dotimes (i n)
            (ex-take-id ex offset (format nil "dictionary entry ~d" i) nil))))
      (ex-flush ex root)
      (flet ((top-level-object ()
               (progn
                 (ex-read-object ex)
                 (incf objects)
                 (loop while (if (< version 3)
                                 (ex-peek-is ex :fill)
                                 (plusp (hash-table-count (ex-pending ex))))
                       do (let ((fill-start (cursor-pos cursor)))
                            (unless (= (cursor-u8 cursor) +tag-fill+)
                              (cursor-invalid cursor
                                              (format nil "~d container~:p announced by LATER not filled"
                                                      (hash-table-count (ex-pending ex)))
                                              "a FILL record for each" fill-start))
                            (setf (cursor-pos cursor) fill-start)
                            (ex-record-tag ex :fill)))
                 (ex-flush ex root))))
        (if (< version 3)
            (loop
              (when (cursor-at-end-p cursor) (return))
              (when (ex-peek-is ex :end)
                (ex-record-tag ex :end)
                (return))
              (top-level-object))
            (let ((count (if (ex-peek-is ex :objects)
                             (field (ex-record-tag ex :objects) 'n)
                             1)))
              (ex-flush ex root)
              (dotimes (i count)
                (top-level-object))
              (when (ex-peek-is ex :end)
                (ex-record-tag ex :end))))
        (ex-flush ex root)
        (when (plusp (hash-table-count (ex-pending ex)))
          (cursor-invalid cursor (format nil "~d container~:p announced by LATER never filled"
                                         (hash-table-count (ex-pending ex)))
                          "a FILL record for each"))
        (let ((ids (length (ex-ids ex)))
              (cons-ids (length (ex-cons-ids ex))))
          (flet ((range (count prefix)
                   (case count
                     (0 "")
                     (1 (format nil " (~a0)" prefix))
                     (t (format nil " (~a0-~a~d)" prefix prefix (1- count))))))
            (format stream "record ~d: ~d bytes (0x~4,'0x-0x~4,'0x), version ~d, ~d object~:p, ~
                            ~d id~:p~a, ~d cons id~:p~a~%"
                    number (- (cursor-pos cursor) start) start (max start (1- (cursor-pos cursor)))
                    version objects ids (range ids "#") cons-ids (range cons-ids "c"))))))))

(defun tracking-flags-text (flags)
  "What the tracking FLAGS mean."
  (case flags
    (0 "no ids but symbols, packages and descriptors")
    (1 "objects get ids")
    (2 "conses get ids (objects do not)")
    (3 "objects and conses get ids")
    (t "invalid flags")))

(defun frame-magic-at-cursor (cursor)
  "The compression (:ZSTD or :LZ4) whose frame begins at CURSOR, or NIL."
  (and (>= (cursor-left cursor) 4)
       (let ((octets (cursor-octets cursor))
             (pos (cursor-pos cursor)))
         (frame-magic-method (logior (aref octets pos) (ash (aref octets (+ pos 1)) 8)
                                     (ash (aref octets (+ pos 2)) 16)
                                     (ash (aref octets (+ pos 3)) 24))))))

(defun explain-octets (octets stream start max-depth max-items)
  "EXPLAIN's work on OCTETS: every record from START; return the number of
records and the condition that stopped it, or NIL."
  (let* ((cursor (make-cursor octets start (length octets) nil nil))
         (ex (make-explainer :cursor cursor :stream stream
                             :max-depth max-depth :max-items max-items
                             :stack-limit (stack-limit +reference-stack-margin+)))
         (root (make-ex-node start nil "record"))
         (records 0))
    (setf (ex-walker ex) (make-explain-walker ex)
          (ex-root ex) root)
    (handler-case
        (loop
          (setf (ex-parent ex) root
                (ex-depth ex) 0)
          (loop while (ex-peek-is ex :end)
                do (ex-record-tag ex :end (lambda (text)
                                                 (format nil "~a (before a record)" text))))
          (ex-flush ex root)
          (when (cursor-at-end-p cursor)
            (format stream "end of input at 0x~4,'0x (~d): ~d record~:p~%"
                    (cursor-pos cursor) (cursor-pos cursor) records)
            (return (values records nil)))
          (let ((method (frame-magic-at-cursor cursor)))
            (when method
              (format stream "0x~4,'0x (~d): ~:[a zstd~;an LZ4~] frame, a record stored with ~
                              :compression; EXPLAIN reads binstore's own bytes only (RESTORE ~
                              decompresses it)~%"
                      (cursor-pos cursor) (cursor-pos cursor) (eq method :lz4))
              (return (values records nil))))
          (ex-record ex root (incf records)))
      ((or error storage-condition) (condition)
        (ignore-errors (ex-flush ex root))
        (let ((offset (or (and (typep condition 'restore-error)
                               (integerp (restore-error-offset condition))
                               (restore-error-offset condition))
                          (cursor-pos cursor))))
          (format stream "error at 0x~4,'0x (~d): ~a~%" offset offset
                  (or (ignore-errors (princ-to-string condition))
                      (format nil "a ~s" (type-of condition)))))
        (values records condition)))))

(defun explain (place &key (stream *standard-output*) (max-depth 8) (max-items 20) (start 0))
  "Print to STREAM an account of every tag of every record in PLACE, an
octet vector (up to its fill pointer) or a file name (a string or
pathname), from byte START: one line per object and per record tag, with
its offset in hex and decimal, its first bytes, the tag's name and fields
\(counts, element types, flags decoded), its value (strings and payloads
shortened, \"… N more\"), the ids it takes (\"#id 3\", \"cons ids c0-c2\")
and what a reference names (\"→ #3\"), nested objects indented; then a
summary line per record (its bytes, objects and ids).  Lines deeper than
MAX-DEPTH, and past MAX-ITEMS objects in one container, are read but not
shown (counted on a \"…\" line; MAX-ITEMS NIL shows all).

EXPLAIN makes no object, interns no symbol and looks no package or class
up.  It does not decompress: at a compressed record (a zstd or LZ4 frame,
see *COMPRESSION*) it says so and stops.  At malformed bytes it prints what it read, then a line \"error at\"
with the offset and the condition, and stops.  It never signals for the
data (a file that cannot be read signals BINSTORE-FILE-ERROR as RESTORE
would).  Returns the number of records it began and the condition that
stopped it, or NIL."
  (check-type max-depth (integer 0))
  (check-type max-items (or null (integer 0)))
  (let ((octets (if (or (stringp place) (pathnamep place))
                    (explain-file-octets place)
                    place)))
    (unless (typep octets '(vector (unsigned-byte 8)))
      (error 'restore-error :message (format nil "cannot explain ~a: expected an octet vector ~
                                                   or a file name" (brief place))))
    (explain-octets octets stream start max-depth max-items)))

(defun explain-file-octets (place)
  "The bytes of the file PLACE; BINSTORE-FILE-ERROR when it cannot be read."
  (handler-case
      (with-open-file (in place :element-type '(unsigned-byte 8))
        (let ((octets (make-array (file-length in) :element-type '(unsigned-byte 8))))
          (read-sequence octets in)
          octets))
    (file-error (e)
      (error 'binstore-file-error :pathname place
                                  :message (format nil "cannot read it: ~a" e)))))
