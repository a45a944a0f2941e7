;;;; Characters: any code point, as a varint.

(in-package #:binstore)

(defun write-character (ob c)
  (write-u8 ob +tag-character+)
  (write-varint ob (char-code c)))

(defun read-character (rs)
  (let ((code (read-varint (rs-ibuf rs))))
    (unless (< code char-code-limit)
      (restore-invalid rs (format nil "character code ~d" code)
                       (format nil "a code below ~d" char-code-limit)))
    (code-char code)))
