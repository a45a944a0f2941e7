;;;; Byte sinks and sources (src/io/sinks.lisp, sources.lisp): a filter
;;;; wraps any of them, and STORE and RESTORE take them as places.

(in-package #:binstore-tests)

(def-suite sinks :in all
  :description "Byte sinks, byte sources and the filters that wrap them.")

(in-suite sinks)

;;; A filter that adds a constant to every byte (mod 256) on the way out
;;; and subtracts it on the way in, counting the blocks: enough to show
;;; that every byte goes through the filter, in order, and comes back.

;;; (Keyword constructors: ECL matches a positional INNER to the slot
;;; BINSTORE::INNER by symbol, so it would leave the slot unset.)
(defstruct (shift-sink (:include binstore:filter-sink)
                       (:constructor %make-shift-sink))
  (shift 0)
  (blocks 0)
  (finished nil)
  (aborted nil))

(defmethod binstore:sink-write ((sink shift-sink) octets start end)
  (let ((out (make-array (- end start) :element-type '(unsigned-byte 8))))
    (loop for i from start below end
          for k from 0
          do (setf (aref out k) (ldb (byte 8 0) (+ (aref octets i) (shift-sink-shift sink)))))
    (incf (shift-sink-blocks sink))
    (binstore:sink-write (binstore:filter-sink-inner sink) out 0 (length out))))

(defmethod binstore:sink-finish ((sink shift-sink))
  (setf (shift-sink-finished sink) t)
  (call-next-method))

(defmethod binstore:sink-abort ((sink shift-sink))
  (setf (shift-sink-aborted sink) t)
  (call-next-method))

(defstruct (unshift-source (:include binstore:filter-source)
                           (:constructor %make-unshift-source))
  (shift 0))

(defun make-shift-sink (inner shift)
  (%make-shift-sink :inner inner :shift shift))

(defun make-unshift-source (inner shift)
  (%make-unshift-source :inner inner :shift shift))

(defmethod binstore:source-read ((source unshift-source) octets start end)
  (let ((new-end (binstore:source-read (binstore:filter-source-inner source) octets start end)))
    (loop for i from start below new-end
          do (setf (aref octets i) (ldb (byte 8 0) (- (aref octets i) (unshift-source-shift source)))))
    new-end))

(defun big-data ()
  "Data whose record spans several staging windows (64 KiB each)."
  (list (make-array 200000 :element-type '(unsigned-byte 8) :initial-element 7)
        (loop for i below 20000 collect (format nil "s~d" i))
        :end))

(test filter-sink-around-octets-sink
  ;; every byte goes through the filter, block by block, in order; the
  ;; value of STORE is the inner sink's SINK-FINISH value, its vector
  (let* ((data (big-data))
         (plain (binstore:store nil data))
         (sink (make-shift-sink (binstore:make-octets-sink) 3))
         (out (binstore:store sink data)))
    (is (eq out (binstore:octets-sink-vector (binstore:filter-sink-inner sink))))
    (is (= (length plain) (length out)))
    (is (every (lambda (a b) (= b (ldb (byte 8 0) (+ a 3)))) plain out))
    (is (< 1 (shift-sink-blocks sink)))
    (is-true (shift-sink-finished sink))
    (is-false (shift-sink-aborted sink))
    ;; and a filter source around an octets source undoes it
    (is (same-data-p data (binstore:restore (make-unshift-source (binstore:make-octets-source
                                                                   (coerce out '(simple-array (unsigned-byte 8) (*))))
                                                                  3))))))

(test failing-store-aborts-the-sink
  ;; an unstorable object: SINK-ABORT runs through the filter, never FINISH
  (let ((sink (make-shift-sink (binstore:make-octets-sink) 1)))
    (signals binstore:unstorable-object (binstore:store sink (list 1 #'car)))
    (is-true (shift-sink-aborted sink))
    (is-false (shift-sink-finished sink))))

(test octets-source-reads-records-in-turn
  ;; a greedy source in memory gives every record of a vector to
  ;; MAP-STORED-OBJECTS, and a record cut short (here the first, after 100
  ;; of its bytes) is TRUNCATED-INPUT
  (let ((vector (make-array 0 :element-type '(unsigned-byte 8) :adjustable t :fill-pointer 0)))
    (dotimes (i 5) (binstore:store vector (list i (make-string 30000 :initial-element #\x))))
    (let ((all (coerce vector '(simple-array (unsigned-byte 8) (*))))
          (seen '()))
      (binstore:map-stored-objects (lambda (x) (push (first x) seen))
                                   (binstore:make-octets-source all))
      (is (equal '(4 3 2 1 0) seen))
      (signals binstore:truncated-input
        (binstore:restore (binstore:make-octets-source all 0 100))))))
