;;;; binstore: store any Common Lisp data to bytes and back.
;;;;
;;;; The modules mirror the architecture (see doc/FORMAT.md and README.md):
;;;;   base   -> io -> state -> codecs -> engine -> api
;;;; Each file names what it depends on, so a wrong-way arrow stands out.

(defsystem "binstore"
  :description "Fast, safe binary serialization of any Common Lisp data."
  :version "0.1.0"
  :license "MIT"
  :depends-on ((:require "sb-posix"))
  :in-order-to ((test-op (test-op "binstore/tests")))
  :components
  ((:module "base"
    :pathname "src"
    :components ((:file "package")
                 (:file "conditions" :depends-on ("package"))
                 (:file "options" :depends-on ("package"))
                 (:file "tags" :depends-on ("package"))
                 (:file "prefetch" :depends-on ("package"))
                 (:file "scratch" :depends-on ("package"))))
   (:module "io"
    :pathname "src/io"
    :depends-on ("base")
    :components ((:file "copy")
                 (:file "staging")
                 (:file "prefault")
                 (:file "runway" :depends-on ("prefault"))
                 (:file "utf8")
                 (:file "output" :depends-on ("copy" "staging"))
                 (:file "input" :depends-on ("copy" "staging" "prefault"))
                 (:file "files")))
   (:module "state"
    :pathname "src/core"
    :depends-on ("io")
    :components ((:file "region")
                 (:file "identity-table")
                 (:file "store-state" :depends-on ("identity-table"))
                 (:file "restore-state")))
   (:module "codecs"
    :pathname "src/codecs"
    :depends-on ("state")
    :components ((:file "numbers")
                 (:file "characters")
                 (:file "strings")
                 (:file "lists" :depends-on ("numbers"))
                 (:file "arrays" :depends-on ("numbers" "strings"))
                 (:file "symbols" :depends-on ("strings"))
                 (:file "hash-tables")
                 (:file "pathnames")
                 (:file "objects" :depends-on ("symbols"))))
   (:module "engine"
    :pathname "src/core"
    :depends-on ("codecs")
    :components ((:file "encoder")
                 (:file "decoder")))
   (:module "api"
    :pathname "src"
    :depends-on ("engine")
    :components ((:file "api")))))

(defsystem "binstore/fuzz"
  :description "Mutation fuzzer for binstore's restore side."
  :depends-on ("binstore")
  :pathname "fuzz"
  :components ((:file "fuzzer")))

(defsystem "binstore/tests"
  :description "FiveAM test suite for binstore."
  :depends-on ("binstore" "binstore/fuzz" "fiveam")
  :pathname "tests"
  :components ((:file "package")
               (:file "compare" :depends-on ("package" "generator"))
               (:file "generator" :depends-on ("package"))
               (:file "roundtrip" :depends-on ("compare" "generator"))
               (:file "identity" :depends-on ("compare" "generator"))
               (:file "random" :depends-on ("compare" "generator"))
               (:file "golden" :depends-on ("package"))
               (:file "places" :depends-on ("compare" "generator"))
               (:file "list-output" :depends-on ("places"))
               (:file "hostile" :depends-on ("package" "places"))
               (:file "scratch" :depends-on ("compare" "places"))
               (:file "prefetch" :depends-on ("compare" "generator"))
               (:file "fuzz" :depends-on ("package"))
               (:file "run" :depends-on ("package")))
  :perform (test-op (o c) (symbol-call :binstore-tests :run-all-and-exit)))

(defsystem "binstore/bench"
  :description "Benchmarks on the standard data sets."
  :depends-on ("binstore")
  :pathname "bench"
  :components ((:file "datasets")
               (:file "peers" :depends-on ("datasets"))
               (:file "bench" :depends-on ("datasets" "peers"))
               (:file "fresh-memory" :depends-on ("bench"))))
