;;;; Defaults for every option.  Each STORE / RESTORE keyword of the same name
;;;; overrides the variable for one call.

(in-package #:binstore)

(defconstant +format-version+ 5
  "The format version binstore writes in a header and the newest it reads.")

(defvar *track-references* t
  "When true (the default), every non-immediate object that occurs more than
once in the stored data (strings, arrays, numbers that are heap objects,
structures, standard objects, hash tables, pathnames ...) is written once and
restored as one object, so EQ-ness, sharing and cycles survive.  When false,
storing is faster, data without sharing still round-trips, and shared parts
come back as separate copies (a cycle signals STORE-LIMIT-EXCEEDED on
:MAX-DEPTH, or on :MAX-TO-WRITE where sharing multiplies the output).
Symbols, packages and class descriptions are always written once per store
whatever this says.")

(defvar *support-shared-list-structures* t
  "When true (the default, with *TRACK-REFERENCES*), identity is also kept
for every cons: shared tails, conses referenced from several places and
circular lists round-trip.  When false, storing lists is faster (no table
entry per cons), but a list met twice is written, and restored, twice, and
a circular list signals CIRCULAR-LIST.  Only meaningful with
*TRACK-REFERENCES*.")

(defvar *output-magic-number* t
  "When true (the default), STORE begins its output with binstore's header:
the magic number and the format version, 5 bytes, which RESTORE requires by
default (see *REQUIRE-HEADER*).  NIL leaves it out, for tiny messages whose
reader knows they are binstore data.")

(defvar *require-header* t
  "When true (the default), RESTORE refuses input that does not begin with
binstore's header with NOT-BINSTORE-DATA, so a text file or another
program's file is never taken for data.  NIL also accepts headerless input
\(stored with :OUTPUT-MAGIC-NUMBER NIL).")

(defvar *output-end-marker* nil
  "When true, STORE ends its output with an end marker.  Records delimit
themselves (since format version 3), so the marker is only for readers of
older versions; RESTORE skips it.")

(defun default-size-limit ()
  "2 GiB, or half the dynamic space when that is smaller, so a hostile input
signals LIMIT-EXCEEDED before it can exhaust the heap."
  (min (expt 2 31)
       (floor (heap-size) 2)))

(defvar *max-to-write* nil
  "Upper bound on the number of bytes one STORE may produce, or NIL (the
default) for none: data already in memory is not limited.  Reaching it
signals STORE-LIMIT-EXCEEDED.  With NIL, a store that does not keep the
identity of every object (TRACK-REFERENCES or SUPPORT-SHARED-LIST-STRUCTURES
false) still stops when its output passes twice the heap in use, which data
without sharing never reaches: shared structure written again and again.")

(defvar *max-to-read* (default-size-limit)
  "Upper bound on the bytes of input one RESTORE consumes and, separately, on
the bytes of memory it allocates for restored objects (NIL: no bound).
Reaching either signals LIMIT-EXCEEDED.")

;;; An image saved and started again may have another heap: the default
;;; limit follows it, a limit the program set stays.
(define-global **max-to-read-is-default** nil
  "Whether *MAX-TO-READ* held the default when the image was saved.")

(defun note-size-limit-default ()
  "Remember, as the image is saved, whether *MAX-TO-READ* is the default."
  (setf **max-to-read-is-default** (eql *max-to-read* (default-size-limit))))

(defun renew-size-limit-default ()
  "In a process started from a saved image, make *MAX-TO-READ* this heap's
default if it held the saved one's."
  (when **max-to-read-is-default**
    (setf *max-to-read* (default-size-limit))))

(call-before-image-save 'note-size-limit-default)
(call-when-image-starts 'renew-size-limit-default)

(defvar *max-depth* 1000000
  "Upper bound on how deeply data may nest (a list in the car of a list, a
vector in a vector ...), on store and on restore.  Deep data never uses deep
recursion (see doc/FORMAT.md, deferred contents), so this guards only against
runaway data; reaching it signals LIMIT-EXCEEDED.")

(defvar *store-class-slots* nil
  "When true, standard objects are stored with the values of their
class-allocated slots too, and restoring sets those shared slots.")

(defvar *intern-symbols* t
  "When false, RESTORE does not intern new symbols: a symbol not already
present in its package signals MISSING-SYMBOL.  Use NIL for untrusted input.")

(defvar *compression* nil
  "How STORE compresses its record: NIL (the default) for not at all, the
bytes exactly as without this option; :ZSTD or :LZ4 for a zstd or LZ4
frame at the library's default level; or a list (:ZSTD :LEVEL n :WORKERS
n) or (:LZ4 :LEVEL n) to choose the level (zstd -131072 to 22, default 3;
LZ4 0 to 12, default 0, negative values trade ratio for speed) and the
number of zstd's worker threads (default 0: none).  Needs the system
binstore/compression loaded, else COMPRESSION-UNAVAILABLE.  RESTORE does not
need to be told: it recognises either frame at the start of a record.")
