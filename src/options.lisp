;;;; Defaults for every option.  Each STORE / RESTORE keyword of the same name
;;;; overrides the variable for one call.

(in-package #:binstore)

(defconstant +format-version+ 2
  "The format version binstore writes in a header and the newest it reads.")

(defvar *track-references* t
  "When true (the default), every non-immediate object that occurs more than
once in the stored data (strings, arrays, numbers that are heap objects,
structures, standard objects, hash tables, pathnames ...) is written once and
restored as one object, so EQ-ness, sharing and cycles survive.  When false,
storing is faster, data without sharing still round-trips, and shared parts
come back as separate copies.  Symbols, packages and class descriptions are
always written once per store whatever this says.")

(defvar *support-shared-list-structures* nil
  "When true, identity is also kept for every cons: shared tails, conses
referenced from several places and circular lists round-trip.  Costs a
reference-table entry per cons on store.  Only meaningful with
*TRACK-REFERENCES*.")

(defvar *output-magic-number* nil
  "When true, STORE begins its output with the binstore magic number and the
format version, which RESTORE then checks.")

(defvar *output-end-marker* nil
  "When true, STORE ends its output with an end marker; RESTORE stops there
even when more bytes follow (useful on streams).")

(defun default-size-limit ()
  "2 GiB, or half the dynamic space when that is smaller, so a hostile input
signals LIMIT-EXCEEDED before it can exhaust the heap."
  (min (expt 2 31)
       (floor (sb-ext:dynamic-space-size) 2)))

(defvar *max-to-write* (default-size-limit)
  "Upper bound on the number of bytes one STORE may produce (NIL: no bound).
Reaching it signals LIMIT-EXCEEDED.")

(defvar *max-to-read* (default-size-limit)
  "Upper bound on the bytes of input one RESTORE consumes and, separately, on
the bytes of memory it allocates for restored objects (NIL: no bound).
Reaching either signals LIMIT-EXCEEDED.")

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
