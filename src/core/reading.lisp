;;;; Reading an object, as the codecs and the decoder do: by its tag, the
;;;; in-tag cases inline, every other tag through READ-TAGGED, the decoder's
;;;; dispatch.  Split from restore-state.lisp, whose state it reads: it calls
;;;; up into the engine (READ-TAGGED), which the state itself never does.
;;;; Here, below the codecs, because every codec reads its parts with it;
;;;; the loops that read runs of elements straight from the window are with
;;;; the codecs (src/codecs/runs.lisp and the readers it names).

(in-package #:binstore)

;;; Reading an object: the in-tag cases (small integers, small references)
;;; are handled here, inline in every caller's loop; every other tag goes to
;;; the dispatch in decoder.lisp, through the protocol (protocol.lisp).

(declaim (inline object-from-tag read-object))
(defun object-from-tag (rs tag)
  "Read the object whose tag TAG was just consumed."
  (declare (type restore-state rs) (type (unsigned-byte 8) tag) (optimize speed))
  (cond ((>= tag +first-small-int-tag+) (small-int-value tag))
        ((>= tag +first-small-ref-tag+)
         (object-by-id rs (- tag +first-small-ref-tag+) 1))
        ;; the commonest boxed leaf, allocated here without a call
        ((= tag +tag-double-float+)
         (register rs (read-fixed-float (rs-ibuf rs) +tag-double-float+)))
        (t (read-tagged rs tag))))

(defun read-object (rs)
  "Read the next object."
  (declare (type restore-state rs) (optimize speed))
  (object-from-tag rs (read-u8 (rs-ibuf rs))))
