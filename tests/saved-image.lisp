;;;; An image saved after binstore was used: what binstore keeps between
;;;; calls (an output region mapped outside the heap, facts about the
;;;; processor and the kernel, the size limit derived from the heap) must
;;;; not be carried into the process the image starts, where the region's
;;;; address is not mapped (a store there used to fault), and the machine
;;;; and the heap may differ.
;;;;
;;;; Two child SBCL processes: the first loads binstore, stores, restores,
;;;; commits a store and compresses (so that every kind of kept memory is
;;;; held), then saves its image; the second starts from that image with a
;;;; smaller heap and does it all again.

(in-package #:binstore-tests)

(def-suite saved-image :in all
  :description "An image saved after binstore was used works.")

(in-suite saved-image)

(defun child-sbcl (arguments)
  "Run this SBCL's runtime with ARGUMENTS (a list of strings), no init
files, standard input empty: its exit code and its output (standard output
and error together)."
  (multiple-value-bind (output error-output status)
      (uiop:run-program (list* (uiop:native-namestring sb-ext:*runtime-pathname*) arguments)
                        :output :string :error-output :output :ignore-error-status t
                        :input nil)
    (declare (ignore error-output))
    (values status output)))

(defparameter *image-work*
  "(let* ((data (list (make-list 20000 :initial-element 7) \"text\" 1.5d0
                      (make-array 3000 :element-type 'double-float :initial-element 2d0)))
          (octets (binstore:store nil data))
          (squeezed (binstore:store nil data :compression :zstd))
          (fast (binstore:store nil data :compression :lz4))
          (path (merge-pathnames \"image.store\" (uiop:getenv \"IMAGE_DIRECTORY\"))))
     (binstore:with-store (s path :durability :none)
       (binstore:with-transaction (s) (incf (binstore:root s :n 0))))
     (assert (equalp data (binstore:restore octets)))
     (assert (equalp data (binstore:restore squeezed)))
     (assert (equalp data (binstore:restore fast)))
     (format t \"~&work done: ~d ~d~%\" (length octets)
             (binstore:with-store (s path) (binstore:with-transaction (s) (binstore:root s :n)))))"
  "A form that stores, restores, compresses and commits, and says so.")

(test saved-image-works
  "A process started from an image saved after binstore stored, restored,
compressed and committed does all of it again (it used to fault on the
output region kept from before the save), and its default size limit is
half its own heap, not the saving process's."
  (call-with-temporary-directory
   (lambda (directory)
     (let ((core (uiop:native-namestring (merge-pathnames "binstore.core" directory)))
           (load (uiop:native-namestring (asdf:system-relative-pathname "binstore" "tools/load.lisp"))))
       (setf (uiop:getenv "IMAGE_DIRECTORY") (uiop:native-namestring directory))
       (multiple-value-bind (status output)
           (child-sbcl (list "--dynamic-space-size" "2GB" "--non-interactive"
                             "--no-sysinit" "--no-userinit"
                             "--load" load
                             "--eval" "(asdf:load-system \"binstore/compression\")"
                             "--eval" *image-work*
                             "--eval" (format nil "(sb-ext:save-lisp-and-die ~s)" core)))
         (is (eql 0 status) "saving: ~a" output)
         (is (search "work done: " output) "saving: ~a" output)
         (is (search " 1" output :start2 (or (search "work done: " output) 0))))
       (when (probe-file core)
         (multiple-value-bind (status output)
             (child-sbcl (list "--core" core "--dynamic-space-size" "512MB"
                               "--non-interactive" "--no-sysinit" "--no-userinit"
                               "--eval" *image-work*
                               "--eval" "(format t \"~&limit: ~d~%\" binstore:*max-to-read*)"))
           (is (eql 0 status) "the saved image: ~a" output)
           (is (search "work done: " output) "the saved image: ~a" output)
           ;; the same store, committed once in each process
           (is (search " 2" output :start2 (or (search "work done: " output) 0)))
           (is (search (format nil "limit: ~d" (floor (* 512 1024 1024) 2)) output)
               "the size limit: ~a" output)))))))
