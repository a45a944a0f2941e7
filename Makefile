# binstore — the two commands a newcomer needs:
#   make test    installs what is missing, checks that binstore compiles
#                quietly (make quiet-build) and that each file compiles with
#                only what binstore.asd says it depends on (make
#                check-layers), runs the portable tests on SBCL, ECL and
#                CLISP (make test-sbcl-portable, test-ecl, test-clisp), runs
#                the whole suite on SBCL
#   make bench   installs what is missing, runs the benchmark, writes table and plot
# Also:
#   make cli                  saves the command-line tool bin/binstore runs,
#                             build/binstore (an SBCL executable)
#   make fuzz SECONDS=600     run the mutation fuzzer for that long
#   make fuzz-compressed SECONDS=600   the same on compressed inputs only
#   make bench-memory         restores of the array sets against fresh memory
#   make bench-messages       small messages with and without a dictionary
#   make bench-utf8           the UTF-8 codec and READ-LINES against SBCL's,
#                             babel, trivial-utf-8 and CPython (RUNS=n)
#   make bench-compression    binstore's zstd and LZ4 against the zstd and lz4
#                             tools (DATASETS="people" for part of it)
#   make test-all             make test, then the whole suite on ECL, ABCL and
#                             CLISP and the portable tests on ABCL
#                             (TEST_OTHER_LISPS)
#   make test-ecl-suite       the whole suite on ECL (20 to 30 minutes; CI
#                             runs it after make test)
#   make bench-portable       bench/portable.lisp on SBCL, ECL and CLISP
#                             (LISPS="sbcl ecl clisp abcl"); make bench
#                             LISP=ecl runs it on that Lisp alone
#   make test-abcl            the portable tests on ABCL (not part of make test)
#   make test-abcl-suite      the whole suite on ABCL (about half an hour)
#   make test-clisp-suite     the whole suite on CLISP
#   make bench-store          the persistent store against Ruby's PStore and
#                             the floor of a durable file replacement
#   make soak                 1,000 store writers killed with SIGKILL
#                             mid-commit, and 4 processes x 500 increments
#   make readme-results       put the last make bench's table in README.md
#   make bench DATASETS="tiny-integers people" MODES="none refs"
#   make bench PEERS=dir      peers' sources (default ../shared/peers-src when
#                             it exists; PEERS=none: transcribed figures only)
#   make bench RUNS=n         cold runs per figure (default 9 beside the peers,
#                             5 against their transcribed figures)

SBCL      ?= sbcl
SBCL_RUN   = $(SBCL) --dynamic-space-size 8GB --noinform --non-interactive --no-sysinit --no-userinit
SECONDS   ?= 60
DATASETS  ?=
MODES     ?=
PEERS     ?=
RUNS      ?=
# The benchmark's image: a larger control stack, as some peers recurse
# along long lists (the same for every contestant).
SBCL_BENCH = $(SBCL) --dynamic-space-size 8GB --control-stack-size 256MB --noinform --non-interactive --no-sysinit --no-userinit
# The peers' directory when there is one (PEERS=none: none), and the Debian
# packages the peers need (see its README.md): PACKAGE:PROBE.
PEERS_DIR  = $(if $(PEERS),$(filter-out none,$(PEERS)),$(wildcard $(CURDIR)/../shared/peers-src))
PEER_DEBS  = cl-alexandria:/usr/share/common-lisp/source/alexandria \
  cl-babel:/usr/share/common-lisp/source/babel \
  cl-cffi:/usr/share/common-lisp/source/cl-cffi \
  cl-trivial-features:/usr/share/common-lisp/source/trivial-features \
  cl-trivial-gray-streams:/usr/share/common-lisp/source/cl-trivial-gray-streams \
  cl-trivial-utf-8:/usr/share/common-lisp/source/trivial-utf-8 \
  cl-flexi-streams:/usr/share/common-lisp/source/cl-flexi-streams \
  cl-closer-mop:/usr/share/common-lisp/source/closer-mop \
  cl-ieee-floats:/usr/share/common-lisp/source/ieee-floats \
  cl-trivial-garbage:/usr/share/common-lisp/source/trivial-garbage \
  cl-bordeaux-threads:/usr/share/common-lisp/source/bordeaux-threads \
  cl-osicat:/usr/share/common-lisp/source/osicat

.PHONY: test test-sbcl-portable test-ecl test-clisp test-clisp-suite test-abcl test-abcl-suite test-ecl-suite test-all compare-machine-code bench-portable cli quiet-build check-layers bench bench-memory bench-messages bench-utf8 bench-compression bench-store soak readme-results fuzz fuzz-compressed deps bench-deps clean

# Debian packages: fiveam for tests; CFFI and the zstd, LZ4 and xxHash
# runtime libraries for binstore/compression (which the tests load), and the zstd
# and lz4 tools the tests check its frames against; gnuplot for the plot,
# the peers' dependencies when the peers' sources are there.  Installed
# only when missing; as root directly, otherwise through sudo.
deps:
	@./tools/ensure-packages sbcl:sbcl cl-fiveam:/usr/share/common-lisp/source/fiveam \
	  cl-cffi:/usr/share/common-lisp/source/cl-cffi/cffi.asd \
	  libzstd1:'/usr/lib/*/libzstd.so.1' liblz4-1:'/usr/lib/*/liblz4.so.1' \
	  libxxhash0:'/usr/lib/*/libxxhash.so.0' zstd:zstd lz4:lz4

bench-deps: deps
	@./tools/ensure-packages gnuplot-nox:gnuplot
	@if [ -n "$(PEERS_DIR)" ] && [ -d "$(PEERS_DIR)" ]; then ./tools/ensure-packages $(PEER_DEBS); fi

test: deps quiet-build check-layers cli test-sbcl-portable test-ecl test-clisp
	$(SBCL_RUN) --load tools/load.lisp --eval '(binstore-tools:run-tests)'

# The portable tests on SBCL too: the golden bytes are SBCL's, and the
# other Lisps' files (tests/portable/golden-*.sexp) must restore here.
test-sbcl-portable: deps
	$(SBCL_RUN) --load tools/portable-tests.lisp

# bench/portable.lisp on each Lisp of LISPS (sbcl, ecl, clisp, abcl; the
# ones missing are installed), one table each: what a data set costs on each
# Lisp, measured the same way.  make bench LISP=ecl is make bench-portable
# LISPS=ecl.  CLISP takes one process per data set (it has stalled in a
# full GC after two sets in one) and one run of each (it is 300-800 times
# slower); ABCL one run of each set of ABCL_SETS (its complex-list takes
# minutes).
LISPS ?= sbcl ecl clisp
PORTABLE_SETS = random-fixnums random-double-floats complex-list ub8-vectors \
  double-vectors double-matrices structures base-strings
ABCL_SETS = random-fixnums ub8-vectors double-vectors structures base-strings
bench-portable:
	@for lisp in $(LISPS); do case $$lisp in \
	  sbcl) $(SBCL_RUN) --load bench/portable.lisp --eval '(binstore-portable-bench:run)' \
	          || exit 1;; \
	  ecl) ./tools/ensure-packages ecl:$(ECL) && \
	       $(ECL) --norc --load bench/portable.lisp --eval '(binstore-portable-bench:run)' \
	         --eval '(ext:quit)' </dev/null || exit 1;; \
	  clisp) ./tools/ensure-packages clisp:$(CLISP) || exit 1; \
	         title=t; for set in $(PORTABLE_SETS); do \
	           $(CLISP) -q -norc -i bench/portable.lisp \
	             -x "(progn (binstore-portable-bench:run :names (list \"$$set\") :runs 1 :title $$title) (values))" \
	             </dev/null || exit 1; title=nil; done;; \
	  abcl) ./tools/ensure-packages abcl:$(ABCL) && \
	        $(ABCL) --noinit --batch --load bench/portable.lisp \
	          --eval "(binstore-portable-bench:run :runs 1 :names (list $(foreach set,$(ABCL_SETS),\"$(set)\")))" \
	          </dev/null || exit 1;; \
	  *) echo "bench-portable: no Lisp $$lisp (sbcl, ecl, clisp or abcl)"; exit 2;; \
	esac; done

# The portable tests (tests/portable/: each case stored gives the bytes
# written on SBCL in golden.sexp, and restores) on ECL, which is installed
# when missing.  ECL compiles binstore to C the first time (about 1.5 min).
# Passing is the summary line saying nothing failed, not ECL's status alone:
# an overflow of ECL's frame stack jumps to its top level, which ends the
# process with status 0 without running the rest.
ECL ?= ecl
test-ecl:
	@./tools/ensure-packages ecl:$(ECL)
	@mkdir -p build
	$(ECL) --norc --eval '(require :asdf)' --eval '(push (truename "./") asdf:*central-registry*)' \
	  --eval '(asdf:load-system "binstore/portable-tests")' \
	  --eval '(ext:quit (if (binstore-portable-tests:run) 0 1))' </dev/null | tee build/test-ecl.log
	@grep -q '^binstore portable tests on .*: [0-9]* passed, 0 failed$$' build/test-ecl.log

# The portable tests on CLISP, which is installed when missing.  CLISP
# compiles binstore to its bytecode the first time (about 10 s); the tests
# take a few seconds.
CLISP ?= clisp
test-clisp:
	@./tools/ensure-packages clisp:$(CLISP)
	$(CLISP) -q -norc tools/portable-tests.lisp </dev/null

# The fiveam suite on CLISP, without the files of SBCL by nature and the
# compression tests (binstore/compression needs C), and the tests CLISP
# cannot run (README.md lists them): CLISP runs it in about 40 minutes, most
# of it the 13,000 generated cases.  Passing is the count line saying
# nothing failed.
test-clisp-suite: deps
	@./tools/ensure-packages clisp:$(CLISP)
	@mkdir -p build
	$(CLISP) -q -norc tools/suite.lisp </dev/null | tee build/test-clisp-suite.log
	@grep -q '^binstore: [0-9]* passed, 0 failed$$' build/test-clisp-suite.log

# Every Lisp binstore runs on: SBCL's whole suite and the portable tests on
# ECL and CLISP (make test), then what is too slow to run at every change,
# listed in TEST_OTHER_LISPS: the whole suite on ECL, ABCL and CLISP, the
# portable tests on ABCL.  About an hour and a half in all.
TEST_OTHER_LISPS = test-ecl-suite test-abcl test-abcl-suite test-clisp-suite
test-all: test $(TEST_OTHER_LISPS)

# The fiveam suite (binstore/tests) on ECL, without the files and tests of
# SBCL by nature (README.md lists them): ECL compiles the suite to C and
# runs it in 20 to 30 minutes, too long for make test: make test-all and
# CI (.ci/run) run it.  Passing is the count line saying nothing failed
# (as for test-ecl).
test-ecl-suite: deps
	@./tools/ensure-packages ecl:$(ECL)
	@mkdir -p build
	$(ECL) --norc --eval '(require :asdf)' --eval '(push (truename "./") asdf:*central-registry*)' \
	  --eval '(handler-case (asdf:load-system "binstore/tests") (error (e) (format *error-output* "~&binstore/tests did not load: ~A~%" e) (ext:quit 2)))' \
	  --eval '(binstore-tests:run-all-and-exit)' </dev/null | tee build/test-ecl-suite.log
	@grep -q '^binstore: [0-9]* passed, 0 failed$$' build/test-ecl-suite.log

# The fiveam suite (binstore/tests) on ABCL, without the files of SBCL by
# nature and the compression tests (binstore/compression needs C), and the
# tests ABCL cannot run (README.md lists them): about half an hour.
# Passing is the count line saying nothing failed.
test-abcl-suite: deps
	@./tools/ensure-packages abcl:$(ABCL)
	@mkdir -p build
	$(ABCL) --noinit --batch --eval '(require "asdf")' --eval '(push (truename "./") asdf:*central-registry*)' \
	  --eval '(handler-case (handler-bind ((warning (function muffle-warning))) (asdf:load-system "binstore/tests")) (error (e) (format *error-output* "~&binstore/tests did not load: ~A~%" e) (uiop:quit 2)))' \
	  --eval '(binstore-tests:run-all-and-exit)' </dev/null | tee build/test-abcl-suite.log
	@grep -q '^binstore: [0-9]* passed, 0 failed$$' build/test-abcl-suite.log

# The portable tests on ABCL, which is installed when missing: too slow for
# make test (ABCL compiles binstore to JVM classes the first time, about a
# minute, and runs the tests in about 15 s), so in TEST_OTHER_LISPS.
# Passing is the summary line saying nothing failed: a Java exception in
# ABCL's interpreter thread ends the process with status 0.
ABCL ?= abcl
test-abcl:
	@./tools/ensure-packages abcl:$(ABCL)
	@mkdir -p build
	$(ABCL) --noinit --batch --load tools/portable-tests.lisp </dev/null | tee build/test-abcl.log
	@grep -q '^binstore portable tests on .*: [0-9]* passed, 0 failed$$' build/test-abcl.log

# SBCL's machine code for every function of binstore, in this checkout and
# at BASE (a commit): the functions whose code differs.  A change made for
# another Lisp should list none it did not mean to change on SBCL.
compare-machine-code: deps
	@test -n "$(BASE)" || { echo "usage: make compare-machine-code BASE=<commit>"; exit 2; }
	rm -rf build/machine-code && mkdir -p build/machine-code/base
	git archive $(BASE) | tar -x -C build/machine-code/base
	cd build/machine-code/base && $(SBCL_RUN) --load tools/load.lisp --eval '(asdf:load-system "binstore")' \
	  --load ../../../tools/machine-code.lisp \
	  --eval '(binstore-machine-code:write-machine-code "../base.txt")' >/dev/null
	$(SBCL_RUN) --load tools/load.lisp --eval '(asdf:load-system "binstore")' --load tools/machine-code.lisp \
	  --eval '(binstore-machine-code:write-machine-code "build/machine-code/now.txt")' >/dev/null
	$(SBCL_RUN) --load tools/machine-code.lisp \
	  --eval '(binstore-machine-code:compare-machine-code "build/machine-code/base.txt" "build/machine-code/now.txt")'

# The command-line tool's executable, which bin/binstore runs when it is newer
# than every source file (else bin/binstore loads binstore from the checkout):
# binstore/cli, and binstore/compression when it loads (CFFI and the C
# libraries), saved with SBCL's runtime.  Written beside and renamed, so that
# a failed build leaves no half-written file.
cli: build/binstore

build/binstore: binstore.asd $(wildcard src/*.lisp src/*/*.lisp)
	@mkdir -p build
	$(SBCL_RUN) --eval '(require :asdf)' --eval '(asdf:load-asd (truename "binstore.asd"))' \
	  --eval '(asdf:load-system "binstore/cli")' \
	  --eval '(handler-case (asdf:load-system "binstore/compression") (error (e) (format *error-output* "~&make cli: without compression: ~a~%" e)))' \
	  --eval '(setf uiop:*image-entry-point* (function binstore-cli:toplevel))' \
	  --eval '(uiop:dump-image "build/binstore.new" :executable t)'
	mv build/binstore.new build/binstore

# Compiles binstore in a fresh SBCL with an empty fasl cache (a new
# XDG_CACHE_HOME, removed after) and fails if the compiler printed notes or
# per-file banners; warnings and style warnings are shown, not counted.
quiet-build: deps
	@tmp=$$(mktemp -d) && XDG_CACHE_HOME=$$tmp $(SBCL_RUN) --load tools/load.lisp \
	  --eval '(binstore-tools:check-quiet-build)'; status=$$?; rm -rf "$$tmp"; exit $$status

# Compiles each file of binstore in a fresh SBCL with only the fasls of the
# files binstore.asd says it depends on loaded, and fails on an undefined
# function, variable or type, a warning or an error, a cycle, or a function
# declared ahead of its definition outside src/core/protocol.lisp (see
# tools/check-layers.lisp).  Works in a temporary directory, removed after.
check-layers: deps
	$(SBCL_RUN) --load tools/check-layers.lisp --eval '(binstore-layers:check-layers)'

bench: bench-deps
ifeq ($(or $(LISP),sbcl),sbcl)
	$(SBCL_BENCH) --load tools/load.lisp \
	  --eval '(binstore-tools:run-bench :datasets "$(DATASETS)" :modes "$(MODES)" :peers "$(PEERS)" :runs "$(RUNS)")'
else
	$(MAKE) bench-portable LISPS="$(LISP)"
endif

bench-memory: deps
	$(SBCL_RUN) --load tools/load.lisp --eval '(binstore-tools:run-memory-bench)'

# Bytes of small messages with and without a shared dictionary, beside
# cl-conspack with and without an index when the peers' sources are there.
bench-messages: deps
	@mkdir -p bench/results
	$(SBCL_RUN) --load tools/load.lisp --eval '(asdf:load-system "binstore")' \
	  --load bench/messages.lisp --eval '(binstore-messages:main "$(PEERS_DIR)")' \
	  | tee bench/results/messages.md

# babel and trivial-utf-8 are installed when missing, and left out of the
# figures when they cannot be (the benchmark says so).
bench-utf8: deps
	@./tools/ensure-packages cl-babel:/usr/share/common-lisp/source/babel \
	  cl-trivial-utf-8:/usr/share/common-lisp/source/trivial-utf-8 \
	  || echo "bench-utf8: babel or trivial-utf-8 missing; measuring without them"
	$(SBCL_RUN) --load tools/load.lisp --eval '(asdf:load-system "binstore/bench-utf8")' \
	  --eval '(binstore-bench-utf8:main :runs "$(RUNS)")'

bench-compression: deps
	@./tools/ensure-packages gzip:gzip python3-blosc:/usr/lib/python3/dist-packages/blosc
	$(SBCL_RUN) --load tools/load.lisp \
	  --eval '(binstore-tools:run-compression-bench :datasets "$(DATASETS)")'

# Ruby (for its PStore) is installed when missing.
bench-store: deps
	@./tools/ensure-packages ruby:ruby
	$(SBCL_RUN) --load tools/load.lisp --eval '(asdf:load-system "binstore/bench-store")' \
	  --eval '(binstore-bench-store:main)'

# Exits non-zero when a killed writer lost or mixed a state, or an
# increment was lost (tests/store-faults.lisp).
soak: deps
	$(SBCL_RUN) --load tools/load.lisp --eval '(asdf:load-system "binstore/tests")' \
	  --eval '(uiop:quit (if (uiop:symbol-call :binstore-tests :run-store-soak) 0 1))'

readme-results:
	$(SBCL_RUN) --load tools/load.lisp --eval '(binstore-tools:update-readme-results)'

fuzz: deps
	$(SBCL_RUN) --load tools/load.lisp --eval '(binstore-tools:run-fuzz $(SECONDS))'

# The fuzzer on compressed inputs only: frames mutated, and frames of
# mutated contents (shuffle containers among them); see doc/FUZZING.md.
fuzz-compressed: deps
	$(SBCL_RUN) --load tools/load.lisp --eval '(asdf:load-system "binstore/compression")' \
	  --eval '(asdf:load-system "binstore/fuzz")' \
	  --eval '(uiop:quit (if (binstore-fuzz:fuzz :seconds $(SECONDS) :compressed-only t) 0 1))'

clean:
	rm -rf ~/.cache/common-lisp/*/$(CURDIR) build
