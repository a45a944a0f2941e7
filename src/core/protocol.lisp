;;;; The protocol: the engine's entry points that the layers below it call.
;;;;
;;;; A codec writes and reads the parts of its objects through the engine,
;;;; which sends each part to its own codec: a list's elements, a hash
;;;; table's keys, an instance's slots can be anything.  So the codecs (and
;;;; reading.lisp, the inline reader they and the decoder share) call up into
;;;; encoder.lisp and decoder.lisp, which are compiled after them.  These
;;;; calls are the only ones that go up; each function they use is declared
;;;; here, and no other file declares a function that another file defines.
;;;; `make check-layers' holds the layers to it (tools/check-layers.lisp).
;;;;
;;;; The types are the contracts.  READ-TAGGED's is the one restore-state.lisp
;;;; declared; WRITE-OBJECT (declared untyped in numbers.lisp before) and
;;;; WRITE-CONTAINER-OBJECT (not declared at all) now name their arguments'
;;;; types, which changes no compiled code.

(in-package #:binstore)

;;; WRITE-OBJECT ss x -> (ignored)                          encoder.lisp
;;;   Write X, any object, to the store SS: a reference when it was written
;;;   before, else its tag and its parts, each through WRITE-OBJECT again.
;;;   Signals UNSTORABLE-OBJECT, CIRCULAR-LIST, STORE-LIMIT-EXCEEDED.
;;;   Called by the codecs for the parts of what they write.
(declaim (ftype (function (store-state t) *) write-object))

;;; WRITE-CONTAINER-OBJECT ss x -> (ignored)                encoder.lisp
;;;   Write the container X (a cons, simple vector, array, hash table or
;;;   instance) as WRITE-OBJECT would, with the container protocol: a
;;;   reference, or deferred to a FILL record when too deep, or header then
;;;   contents.  Called by WRITE-INSTANCE (objects.lisp) for an instance
;;;   it does not write in one function (its class's first, or one to defer).
(declaim (ftype (function (store-state t) *) write-container-object))

;;; WRITE-DISPLACED-TARGET ss target -> (ignored)           encoder.lisp
;;;   Write TARGET, the array a displaced array is displaced to: a
;;;   container with objects not written before is deferred (LATER), so
;;;   that the displaced array has its id before the target's contents are
;;;   written.  Called by WRITE-ARRAY-HEADER (arrays.lisp).
(declaim (ftype (function (store-state t) *) write-displaced-target))

;;; READ-TAGGED rs tag -> object                            decoder.lisp
;;;   Read the object whose type tag TAG (not an in-tag small integer or
;;;   small reference: OBJECT-FROM-TAG handles those inline) was just
;;;   consumed from the restore RS: the decoder's one dispatch on the tag.
;;;   Signals the RESTORE-ERRORs.  Called by OBJECT-FROM-TAG (reading.lisp),
;;;   so by READ-OBJECT in every codec.
(declaim (ftype (function (restore-state (unsigned-byte 8)) t) read-tagged))
