;;;; binstore: store any Common Lisp data to bytes and back.
;;;;
;;;; The modules mirror the architecture (see doc/FORMAT.md and README.md).
;;;; Each depends on the modules it uses directly, all of them below it:
;;;;   base       the package, the INDEX type, the conditions, the extension
;;;;              points (generic functions and the registry of user codecs)
;;;;   platform   (base) the only files that name SBCL's internals or call
;;;;              the operating system: raw memory, object layouts, the
;;;;              control stack, prefetching, system calls
;;;;   format     (base platform) the options; the grammar, the format as
;;;;              data, and the tags taken from it
;;;;   io         (base platform format) memory copies, working memory kept
;;;;              between calls, the staging vector, prefaulting, the heap's
;;;;              runway, UTF-8 windows, output and input buffers, the
;;;;              decoders of fixed-size payloads, files
;;;;   text       (base platform format io) the exported UTF-8 codec
;;;;              (UTF8-DECODE, UTF8-ENCODE ...) on io's UTF-8 kernels, and
;;;;              the line readers of text files (READ-LINES, MAP-LINES)
;;;;   state      (... io) the output region, the identity table, the store
;;;;              and restore states; protocol.lisp, which declares the
;;;;              engine's entry points; reading.lisp, READ-OBJECT, the
;;;;              inline object reader built on the restore state and
;;;;              READ-TAGGED
;;;;   codecs     (... state) one file per type family, and runs.lisp, the
;;;;              loops that read runs of elements of lists and vectors
;;;;   engine     (... codecs) the encoder and the decoder: the dispatch on
;;;;              type and on tag, the containers, the records
;;;;   api        (... engine) store, restore and the rest
;;;;   store      (base platform format io api) the persistent store: named
;;;;              roots in a file, changed in transactions; its checksum
;;;;              (CRC32C), its file's frame, its lock file, the store
;;;;              object and the transactions.  Built on STORE and RESTORE
;;;;              and on io's files: a commit is an atomic file replacement
;;;;   reference  (base platform format) the reference decoder, EXPLAIN and
;;;;              FILE-STATISTICS, from the grammar
;;;; One kind of call goes up: a codec writes and reads the parts of its
;;;; objects through the engine (WRITE-OBJECT, WRITE-CONTAINER-OBJECT,
;;;; READ-TAGGED), which src/core/protocol.lisp declares; no other file
;;;; declares a function it does not define.  Within a module each file names
;;;; the files it uses.  `make check-layers' (tools/check-layers.lisp)
;;;; compiles each file alone with only what this file says it depends on
;;;; loaded, and fails on anything undefined, or on a file outside
;;;; src/platform/ that names a symbol of SBCL's packages.

(defun call-with-quiet-binstore-compilation (compile)
  "The :AROUND-COMPILE hook of binstore's systems: call COMPILE (ASDF's
thunk that runs COMPILE-FILE on one of binstore's own files) without the
per-file banners and with SBCL's compiler notes (optimization hints, such as
\"doing float to pointer coercion\") muffled.  Warnings and style warnings
are still printed.  On ECL the file is compiled at safety 1, SBCL's default
and the policy binstore's code is written for, where ECL's own default is
2: a check of the C stack on entry to every function, and every CAR and
CDR a call, even of a declared cons (binstore's readers bound their depth
themselves, src/platform/ecl/stack.lisp); and ECL's C compiler refuses a
call of a C function no header declared (C takes its result for an int: a
pointer cut to 32 bits, as strerror's once was).  The bindings and the handler
last for that one file's compilation only, so nothing changes in the image
that loads binstore, nor for other systems' files."
  #+ecl (require :cmp)
  (let ((*compile-verbose* nil)
        (*compile-print* nil)
        (*load-verbose* nil)
        (*load-print* nil))
    (progv #+ecl (list (find-symbol "*SAFETY*" "C") (find-symbol "*CC-FLAGS*" "C")) #-ecl '()
           #+ecl (list 1 (concatenate 'string (symbol-value (find-symbol "*CC-FLAGS*" "C"))
                                      " -Werror=implicit-function-declaration"))
           #-ecl '()
      (handler-bind (#+sbcl (sb-ext:compiler-note
                              (lambda (note)
                                (let ((restart (find-restart 'muffle-warning note)))
                                  (when restart (invoke-restart restart))))))
        (funcall compile)))))

(defsystem "binstore"
  :description "Fast, safe binary serialization of any Common Lisp data."
  :around-compile call-with-quiet-binstore-compilation
  :version "0.1.0"
  :license "MIT"
  :depends-on ((:feature :sbcl (:require "sb-posix")))
  :in-order-to ((test-op (test-op "binstore/tests")))
  :components
  ((:module "base"
    :pathname "src"
    :components ((:file "package")
                 ;; ECL's arithmetic and DEFSTRUCT, which the package
                 ;; shadows there: open-coded shifts and sums, slots read
                 ;; in place; before the first file that uses them
                 (:file "platform/ecl/arithmetic" :if-feature :ecl :depends-on ("package"))
                 (:file "platform/ecl/structures" :if-feature :ecl
                  :depends-on ("package" "platform/ecl/arithmetic"))
                 (:file "types" :depends-on ("package" (:feature :ecl "platform/ecl/arithmetic")))
                 (:file "conditions" :depends-on ("package" (:feature :ecl "platform/ecl/structures")))
                 ;; the generic functions and the codec registry users extend
                 (:file "extensions" :depends-on ("package" (:feature :ecl "platform/ecl/structures")))))
   ;; the only files that name SBCL's internals or the operating system
   (:module "platform"
    :pathname "src/platform"
    :depends-on ("base")
    ;; SBCL's files, then ECL's (the same names over ECL's C), then the
    ;; portable ones, CLISP's and ABCL's, chosen by feature; prefetch.lisp,
    ;; cpu.lisp, crc32c.lisp and simd.lisp are for
    ;; every Lisp (their instructions are SBCL's; elsewhere there are none)
    :components ((:file "memory" :if-feature :sbcl)
                 (:file "os" :if-feature :sbcl :depends-on ("memory"))
                 (:file "runtime" :if-feature :sbcl :depends-on ("memory"))
                 (:file "objects" :if-feature :sbcl :depends-on ("memory"))
                 (:file "stack" :if-feature :sbcl :depends-on ("memory"))
                 (:file "threads" :if-feature :sbcl)
                 (:file "sbcl/types" :if-feature :sbcl)
                 ;; what SBCL, ECL and CLISP answer alike: the standard's
                 ;; simple arrays, a stack the readers check
                 (:file "standard-arrays" :if-feature (:not :abcl))
                 (:file "ecl/memory" :if-feature :ecl)
                 (:file "ecl/os" :if-feature :ecl :depends-on ("ecl/memory"))
                 (:file "ecl/runtime" :if-feature :ecl :depends-on ("ecl/memory"))
                 (:file "ecl/objects" :if-feature :ecl :depends-on ("ecl/memory"))
                 (:file "ecl/stack" :if-feature :ecl :depends-on ("ecl/memory"))
                 (:file "ecl/threads" :if-feature :ecl)
                 ;; memory as Lisp vectors (virtual addresses), IEEE bits and
                 ;; bignum digits in portable Common Lisp, for the Lisps whose
                 ;; collector moves vectors and gives no address of their data
                 (:file "portable/floats" :if-feature :clisp)
                 ;; ABCL converts floats to bits and back through the JVM,
                 ;; and copies octets through their java.nio buffers
                 (:file "abcl/floats" :if-feature :abcl)
                 (:file "abcl/octets" :if-feature :abcl)
                 (:file "portable/memory" :if-feature (:or :clisp :abcl)
                  :depends-on ((:feature :clisp "portable/floats")
                               (:feature :abcl "abcl/floats")
                               (:feature :abcl "abcl/octets")))
                 (:file "portable/integers" :if-feature (:or :clisp :abcl))
                 (:file "portable/objects" :if-feature (:or :clisp :abcl)
                  :depends-on ("portable/memory"))
                 ;; CLISP's: its FFI to the C library, its records and MOP
                 (:file "clisp/memory" :if-feature :clisp :depends-on ("portable/memory"))
                 (:file "clisp/os" :if-feature :clisp :depends-on ("portable/memory"))
                 (:file "clisp/runtime" :if-feature :clisp :depends-on ("portable/memory"))
                 (:file "clisp/objects" :if-feature :clisp :depends-on ("portable/memory" "portable/objects"))
                 (:file "clisp/stack" :if-feature :clisp :depends-on ("clisp/runtime"))
                 (:file "clisp/threads" :if-feature :clisp)
                 ;; ABCL's: the JVM through ABCL's Java interface (java.nio
                 ;; channels for descriptors), its structures and MOP
                 (:file "abcl/memory" :if-feature :abcl :depends-on ("portable/memory"))
                 (:file "abcl/os" :if-feature :abcl :depends-on ("portable/memory" "abcl/octets"))
                 (:file "abcl/runtime" :if-feature :abcl :depends-on ("portable/memory"))
                 (:file "abcl/objects" :if-feature :abcl :depends-on ("portable/memory" "portable/objects"))
                 (:file "abcl/stack" :if-feature :abcl)
                 (:file "abcl/threads" :if-feature :abcl)
                 ;; what ECL, CLISP and ABCL answer alike: no prefaulting,
                 ;; types by TYPEP, boxed structure slots, adjustable arrays
                 (:file "portable/without-internals" :if-feature (:or :ecl :clisp :abcl)
                  :depends-on ((:feature :ecl "ecl/os") (:feature :ecl "ecl/objects")
                               (:feature :clisp "clisp/os") (:feature :clisp "clisp/objects")
                               (:feature :abcl "abcl/os") (:feature :abcl "abcl/objects")))
                 ;; INLINE-FLET where local functions inline (ECL's is
                 ;; in ecl/memory.lisp)
                 (:file "local-functions" :if-feature (:not :ecl))
                 (:file "prefetch")
                 (:file "cpu" :depends-on ((:feature :sbcl "memory") (:feature :sbcl "runtime")
                                           (:feature :ecl "ecl/memory")
                                           (:feature :ecl "ecl/runtime")
                                           (:feature :clisp "clisp/memory")
                                           (:feature :clisp "clisp/runtime")
                                           (:feature :abcl "abcl/memory")
                                           (:feature :abcl "abcl/runtime")))
                 (:file "crc32c" :depends-on ("cpu"))
                 (:file "simd" :depends-on ("cpu"))))
   ;; the options, and the format as data (tags.lisp derives its constants
   ;; from the grammar)
   (:module "format"
    :pathname "src"
    :depends-on ("base" "platform")
    :components ((:file "options")
                 (:file "format/grammar" :depends-on ("options"))
                 (:file "format/tags" :depends-on ("format/grammar"))))
   (:module "io"
    :pathname "src/io"
    :depends-on ("base" "platform" "format")
    :components ((:file "copy")
                 (:file "scratch")
                 (:file "staging" :depends-on ("copy" "scratch"))
                 (:file "prefault" :depends-on ("copy"))
                 (:file "runway" :depends-on ("copy" "prefault"))
                 (:file "utf8" :depends-on ("copy"))
                 (:file "output" :depends-on ("copy" "staging"))
                 (:file "input" :depends-on ("copy" "staging" "prefault"))
                 (:file "sinks" :depends-on ("output" "staging"))
                 (:file "sources" :depends-on ("input" "staging"))
                 (:file "payloads" :depends-on ("input"))
                 (:file "files")))
   ;; the exported UTF-8 codec and the line readers
   (:module "text"
    :pathname "src/text"
    :depends-on ("base" "platform" "format" "io")
    :components ((:file "utf8-codec")
                 (:file "lines" :depends-on ("utf8-codec"))))
   (:module "state"
    :pathname "src/core"
    :depends-on ("base" "platform" "format" "io")
    :components ((:file "region")
                 (:file "identity-table")
                 (:file "store-state" :depends-on ("identity-table"))
                 (:file "restore-state")
                 (:file "protocol" :depends-on ("store-state" "restore-state"))
                 (:file "reading" :depends-on ("restore-state" "protocol"))))
   (:module "codecs"
    :pathname "src/codecs"
    :depends-on ("base" "platform" "format" "io" "state")
    :components ((:file "numbers")
                 (:file "characters")
                 (:file "strings")
                 ;; the loops over runs of elements of lists and vectors
                 (:file "runs" :depends-on ("numbers" "strings"))
                 (:file "lists" :depends-on ("numbers" "runs"))
                 (:file "arrays" :depends-on ("numbers" "strings" "runs"))
                 (:file "symbols" :depends-on ("strings"))
                 (:file "hash-tables")
                 (:file "pathnames")
                 (:file "objects" :depends-on ("numbers"))
                 (:file "dictionaries" :depends-on ("objects" "symbols"))))
   (:module "engine"
    :pathname "src/core"
    :depends-on ("base" "platform" "format" "io" "state" "codecs")
    :components ((:file "encoder")
                 (:file "decoder")))
   (:module "api"
    :pathname "src"
    :depends-on ("base" "platform" "format" "io" "state" "engine")
    :components ((:file "progress")
                 (:file "api" :depends-on ("progress"))))
   ;; the persistent store, on top of the API
   (:module "store"
    :pathname "src/store"
    :depends-on ("base" "platform" "format" "io" "api")
    :components ((:file "checksum")
                 (:file "framing" :depends-on ("checksum"))
                 (:file "locks")
                 (:file "kept-file")
                 (:file "store" :depends-on ("checksum" "framing" "locks" "kept-file"))
                 (:file "transactions" :depends-on ("framing" "locks" "kept-file" "store"))))
   ;; the reference decoder, EXPLAIN and FILE-STATISTICS, built on the
   ;; grammar alone
   (:module "reference"
    :pathname "src"
    :depends-on ("base" "platform" "format")
    :components ((:file "format/reference")
                 (:file "explain" :depends-on ("format/reference"))
                 (:file "stats" :depends-on ("format/reference" "explain"))))))

(defsystem "binstore/compression"
  :description "zstd and LZ4 compression for binstore: STORE's :compression
option (numeric array payloads byte-shuffled in the frame), and RESTORE of
compressed records, through libzstd and liblz4 (CFFI).
binstore itself needs no C library; without this system it recognises
compressed records and signals COMPRESSION-UNAVAILABLE."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore" "cffi")
  :pathname "src/compression"
  :components ((:file "ffi")
               (:file "filters")
               (:file "zstd" :depends-on ("ffi" "filters"))
               (:file "lz4" :depends-on ("ffi" "filters"))
               (:file "shuffle" :depends-on ("filters"))
               (:file "hook" :depends-on ("zstd" "lz4" "shuffle"))))

(defsystem "binstore/cli"
  :description "The command-line tool bin/binstore: explain, stats and check
on a file of binstore data.  `make cli' saves it as the executable
build/binstore, with binstore/compression when that loads."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore" "uiop")
  :pathname "src"
  :components ((:file "cli")))

(defsystem "binstore/fuzz"
  :description "Mutation fuzzer for binstore's restore side."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore")
  :pathname "fuzz"
  :components ((:file "fuzzer")))

(defsystem "binstore/tests"
  :description "FiveAM test suite for binstore.  On SBCL, all of it; on ECL,
every file but those testing SBCL by nature (marked :if-feature :sbcl below
and listed in README.md)."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore" (:feature (:or :sbcl :ecl) "binstore/compression") "fiveam"
               (:feature :sbcl "binstore/fuzz") (:feature :sbcl "binstore/cli"))
  :pathname "tests"
  :components ((:file "package")
               (:file "platform" :depends-on ("package"))
               (:file "compare" :depends-on ("platform" "generator"))
               (:file "generator" :depends-on ("platform"))
               (:file "roundtrip" :depends-on ("compare" "generator"))
               (:file "identity" :depends-on ("compare" "generator"))
               (:file "random" :depends-on ("compare" "generator"))
               (:file "golden" :depends-on ("package" "compare"))
               (:file "places" :depends-on ("compare" "generator"))
               ;; SBCL's prefaulting and huge pages, SBCL's prefetches
               (:file "kernel" :depends-on ("compare" "places") :if-feature :sbcl)
               (:file "list-output" :depends-on ("places"))
               (:file "hostile" :depends-on ("package" "places"))
               ;; working memory mapped outside SBCL's heap
               (:file "scratch" :depends-on ("compare" "places") :if-feature :sbcl)
               (:file "prefetch" :depends-on ("compare" "generator") :if-feature :sbcl)
               ;; files, the UTF-8 codec and the store: their tests call
               ;; SB-POSIX, fork, and check against SBCL's own codec
               (:file "files" :depends-on ("places") :if-feature :sbcl)
               ;; the fuzzer maps pages with no access behind its inputs
               (:file "fuzz" :depends-on ("platform") :if-feature :sbcl)
               (:file "grammar" :depends-on ("compare" "generator" "random"))
               (:file "defaults" :depends-on ("compare" "places"))
               (:file "run" :depends-on ("platform"))
               (:file "readme" :depends-on ("platform"))
               (:file "sinks" :depends-on ("compare"))
               (:file "extensions" :depends-on ("compare"))
               ;; binstore/compression loads on SBCL and ECL only
               (:file "compression" :depends-on ("compare" "generator" "places")
                :if-feature (:or :sbcl :ecl))
               ;; the command-line tool is an SBCL executable
               (:file "cli" :depends-on ("package" "places" "grammar") :if-feature :sbcl)
               (:file "utf8" :depends-on ("package" "places") :if-feature :sbcl)
               ;; the persistent store; store-faults.lisp forks and kills writers
               (:file "store-faults" :depends-on ("places" "files") :if-feature :sbcl)
               (:file "store" :depends-on ("compare" "places" "files" "store-faults")
                :if-feature :sbcl)
               ;; an image saved after binstore was used, in child processes
               (:file "saved-image" :depends-on ("places") :if-feature :sbcl))
  ;; Returns, or signals an error when a test failed; never exits the image
  ;; (see RUN-FROM-ASDF in tests/run.lisp).  `make test' exits instead.
  :perform (test-op (o c) (symbol-call :binstore-tests :run-from-asdf)))

(defsystem "binstore/portable-tests"
  :description "The tests every Lisp binstore runs on passes: the same bytes
as golden.sexp (written on SBCL) for the same data, and round trips.  Plain
Common Lisp, no test framework: (binstore-portable-tests:run)."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore")
  :pathname "tests/portable"
  :components ((:file "portable")))

(defsystem "binstore/bench"
  :description "Benchmarks on the standard data sets."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore")
  :pathname "bench"
  :components ((:file "datasets")
               (:file "peers" :depends-on ("datasets"))
               (:file "bench" :depends-on ("datasets" "peers"))
               (:file "fresh-memory" :depends-on ("bench"))))

(defsystem "binstore/bench-utf8"
  :description "binstore's UTF-8 codec and line reader against SBCL's, babel,
trivial-utf-8 (when found) and CPython (bench/utf8-python.py): make
bench-utf8."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore")
  :pathname "bench"
  :components ((:file "utf8")))

(defsystem "binstore/bench-store"
  :description "The persistent store against Ruby's PStore (bench/pstore.rb)
and against the floor of a durable file replacement, on PStore's seed
workload; read-only transactions and a big commit."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore")
  :pathname "bench"
  :components ((:file "store")))

(defsystem "binstore/bench-compression"
  :description "binstore's zstd and LZ4 against its plain output piped through
the zstd and lz4 tools, on some of the standard data sets."
  :around-compile call-with-quiet-binstore-compilation
  :depends-on ("binstore/bench" "binstore/compression")
  :pathname "bench"
  :components ((:file "compression-data")
               (:file "compression" :depends-on ("compression-data"))))
