# binstore — the two commands a newcomer needs:
#   make test    installs what is missing, checks that binstore compiles
#                quietly (make quiet-build) and that each file compiles with
#                only what binstore.asd says it depends on (make
#                check-layers), runs the whole suite
#   make bench   installs what is missing, runs the benchmark, writes table and plot
# Also:
#   make fuzz SECONDS=600     run the mutation fuzzer for that long
#   make fuzz-compressed SECONDS=600   the same on compressed inputs only
#   make bench-memory         restores of the array sets against fresh memory
#   make bench-compression    binstore's zstd and LZ4 against the zstd and lz4
#                             tools (DATASETS="people" for part of it)
#   make readme-results       put the last make bench's table in README.md
#   make bench DATASETS="tiny-integers people" MODES="none refs"
#   make bench PEERS=dir      peers' sources (default ../shared/peers-src when
#                             it exists; PEERS=none: transcribed figures only)
#   make bench RUNS=n         cold runs per figure (default 5)

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

.PHONY: test quiet-build check-layers bench bench-memory bench-compression readme-results fuzz fuzz-compressed deps bench-deps clean

# Debian packages: fiveam for tests; CFFI and the zstd and LZ4 runtime
# libraries for binstore/compression (which the tests load), and the zstd
# and lz4 tools the tests check its frames against; gnuplot for the plot,
# the peers' dependencies when the peers' sources are there.  Installed
# only when missing; as root directly, otherwise through sudo.
deps:
	@./tools/ensure-packages sbcl:sbcl cl-fiveam:/usr/share/common-lisp/source/fiveam \
	  cl-cffi:/usr/share/common-lisp/source/cl-cffi/cffi.asd \
	  libzstd1:'/usr/lib/*/libzstd.so.1' liblz4-1:'/usr/lib/*/liblz4.so.1' \
	  zstd:zstd lz4:lz4

bench-deps: deps
	@./tools/ensure-packages gnuplot-nox:gnuplot
	@if [ -n "$(PEERS_DIR)" ] && [ -d "$(PEERS_DIR)" ]; then ./tools/ensure-packages $(PEER_DEBS); fi

test: deps quiet-build check-layers
	$(SBCL_RUN) --load tools/load.lisp --eval '(binstore-tools:run-tests)'

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
	$(SBCL_BENCH) --load tools/load.lisp \
	  --eval '(binstore-tools:run-bench :datasets "$(DATASETS)" :modes "$(MODES)" :peers "$(PEERS)" :runs "$(RUNS)")'

bench-memory: deps
	$(SBCL_RUN) --load tools/load.lisp --eval '(binstore-tools:run-memory-bench)'

bench-compression: deps
	@./tools/ensure-packages gzip:gzip python3-blosc:/usr/lib/python3/dist-packages/blosc
	$(SBCL_RUN) --load tools/load.lisp \
	  --eval '(binstore-tools:run-compression-bench :datasets "$(DATASETS)")'

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
	rm -rf ~/.cache/common-lisp/*/$(CURDIR)
