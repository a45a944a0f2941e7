;;;; The compression benchmark's own data sets (bench/compression.lisp): a
;;;; smooth signal, where the shuffle pays most, and two seed workloads of
;;;; the Python serializer comparison, which bench/blosc-reference.py makes
;;;; again, of the same shape, in Python.  Every one from a fixed seed.

(in-package #:binstore-bench)

(defun noisy-sine (n)
  "N doubles of a sine of period 2000 pi samples plus uniform noise of
amplitude 0.005, in one (simple-array double-float (*))."
  (let ((state (sb-ext:seed-random-state 7))
        (v (make-array n :element-type 'double-float)))
    (dotimes (i n v)
      (setf (aref v i) (+ (sin (* i 0.001d0)) (* 0.01d0 (- (random 1d0 state) 0.5d0)))))))

(defun uuid4 (state)
  "A random (version 4, variant 1) UUID as its 36-character lower-case string."
  (let ((bytes (loop repeat 16 collect (random 256 state))))
    (setf (nth 6 bytes) (logior #x40 (logand (nth 6 bytes) #x0F))
          (nth 8 bytes) (logior #x80 (logand (nth 8 bytes) #x3F)))
    (format nil "~(~{~2,'0x~}-~{~2,'0x~}-~{~2,'0x~}-~{~2,'0x~}-~{~2,'0x~}~)"
            (subseq bytes 0 4) (subseq bytes 4 6) (subseq bytes 6 8) (subseq bytes 8 10)
            (subseq bytes 10 16))))

(defun uuid-table (n)
  "An EQUAL hash table of N random UUID4 strings, each mapped to a small
integer below 100."
  (let ((state (sb-ext:seed-random-state 11))
        (table (make-hash-table :test 'equal :size n)))
    (loop while (< (hash-table-count table) n)
          do (setf (gethash (uuid4 state) table) (random 100 state)))
    table))

(defparameter *first-names*
  #("James" "Mary" "Robert" "Patricia" "John" "Jennifer" "Michael" "Linda" "David" "Elizabeth"
    "William" "Barbara" "Richard" "Susan" "Joseph" "Jessica" "Thomas" "Sarah" "Charles" "Karen"
    "Ana" "Luis" "Mei" "Hiroshi" "Olga" "Pierre" "Fatima" "Ahmed" "Ingrid" "Giulia"))

(defparameter *last-names*
  #("Smith" "Johnson" "Williams" "Brown" "Jones" "Garcia" "Miller" "Davis" "Rodriguez" "Martinez"
    "Hernandez" "Lopez" "Gonzalez" "Wilson" "Anderson" "Thomas" "Taylor" "Moore" "Jackson" "Martin"
    "Nakamura" "Rossi" "Dubois" "Ivanova" "Khan" "Larsen" "Novak" "Silva" "Kowalski" "Meyer"))

(defparameter *streets*
  #("Oak" "Maple" "Cedar" "Pine" "Elm" "Washington" "Lake" "Hill" "Park" "Main" "Church" "Mill"
    "River" "Sunset" "Highland" "Forest" "Meadow" "Spring" "Valley" "Ridge"))

(defparameter *street-kinds* #("Street" "Avenue" "Road" "Lane" "Drive" "Court" "Place" "Way"))

(defparameter *cities*
  #("Springfield" "Riverside" "Franklin" "Greenville" "Bristol" "Clinton" "Fairview" "Salem"
    "Madison" "Georgetown" "Arlington" "Ashland" "Burlington" "Manchester" "Oxford" "Dayton"))

(defparameter *countries* #("US" "CA" "GB" "DE" "FR" "IT" "ES" "JP" "BR" "IN"))

(defparameter *domains* #("example.com" "mail.com" "post.org" "inbox.net" "company.io" "uni.edu"))

(defparameter *tags*
  #("family" "friend" "work" "client" "supplier" "vip" "school" "sports" "neighbor" "doctor"
    "emergency" "book-club" "travel" "music" "volunteer" "alumni" "gym" "church" "band" "chess"))

(defparameter *words*
  #("call" "back" "about" "the" "meeting" "next" "week" "prefers" "email" "after" "six" "pm"
    "birthday" "in" "march" "met" "at" "conference" "owes" "book" "likes" "coffee" "ask"
    "project" "status" "moved" "to" "new" "office" "kids" "school" "holiday" "plans" "send"
    "invoice" "contract" "renewal" "due" "remind" "of" "dinner" "on" "friday" "allergic" "nuts"))

(defun phone-record (i state)
  "Record I of the phone book: an EQUAL hash table of string keys, as a
JSON object would be read, with lists for arrays."
  (flet ((pick (vector) (aref vector (random (length vector) state)))
         (table (&rest pairs)
           (let ((h (make-hash-table :test 'equal)))
             (loop for (k v) on pairs by #'cddr do (setf (gethash k h) v))
             h))
         (digits (n) (format nil "~v,'0d" n (random (expt 10 n) state))))
    (let ((first (pick *first-names*)) (last (pick *last-names*)))
      (table "id" i
             "first_name" first
             "last_name" last
             "addresses" (loop repeat (+ 1 (random 3 state))
                               collect (table "street" (format nil "~d ~a ~a" (+ 1 (random 9999 state))
                                                               (pick *streets*) (pick *street-kinds*))
                                              "city" (pick *cities*)
                                              "zip" (digits 5)
                                              "country" (pick *countries*)))
             "phones" (loop repeat (+ 1 (random 4 state))
                            collect (table "kind" (pick #("home" "work" "mobile" "fax"))
                                           "number" (format nil "+~d-~a-~a-~a" (+ 1 (random 99 state))
                                                            (digits 3) (digits 3) (digits 4))))
             "emails" (loop repeat (+ 1 (random 3 state))
                            collect (format nil "~(~a.~a~)~d@~a" first last (random 100 state)
                                            (pick *domains*)))
             "tags" (loop repeat (+ 2 (random 8 state)) collect (pick *tags*))
             "notes" (format nil "~{~a~^ ~}" (loop repeat (+ 165 (random 220 state))
                                                   collect (pick *words*)))
             "history" (loop repeat (+ 3 (random 12 state))
                             collect (table "date" (format nil "20~2,'0d-~2,'0d-~2,'0d" (random 25 state)
                                                           (+ 1 (random 12 state)) (+ 1 (random 28 state)))
                                            "event" (pick #("called" "emailed" "met" "wrote" "visited"))))))))

(defun phone-book (n)
  "A list of N phone-book records (PHONE-RECORD)."
  (let ((state (sb-ext:seed-random-state 13)))
    (loop for i below n collect (phone-record i state))))
