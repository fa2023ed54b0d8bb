# kvx: the two commands a newcomer needs (see README.md).
#   make demo   build, boot the Soft-RoCE VM, run kvx-bench between two kvxd, compare with ib_write_bw
#   make bench  build, one VM boot: each shape of scripts/bench.sh, kvx-bench and perftest
#               interleaved BENCH_RUNS times each; one line per shape, every run in build/bench.json;
#               before the VM, the polling cores' software ceiling on the host (kvx-ceiling)
#   make bench-ceiling  only that ceiling: no VM, no RDMA, any machine (build/bench-ceiling.json)
#   make bench-rails  one VM boot with two rails: kvx striped over both against both rails'
#               ib_write_bw at once, interleaved BENCH_RUNS times (scripts/bench-rails.sh)
#   make test   unit and VM tests under ASan+UBSan, unit tests under TSan, a short run of each
#               fuzz target, then plain with the mutants; ctest's summary last
#   make fuzz   each libFuzzer target for FUZZ_SECONDS (default 300), one after the other
#   make package   build, then the .deb (CPack): build/kvx_VERSION_ARCH.deb
#   make install   build, then cmake --install (PREFIX=/usr/local by default; DESTDIR honoured)
# They install what is missing (Debian 12, root).

BUILD      ?= build
BUILD_ASAN ?= build-asan
BUILD_TSAN ?= build-tsan
BUILD_FUZZ ?= build-fuzz
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?= fuzz_wire fuzz_config fuzz_engine fuzz_peer fuzz_etcd
JOBS       ?= 2
# make bench: whole seconds per run (kvx-bench --duration, ib_write_bw -D; both leave SECONDS/4
# out at each end), runs per tool and shape, ib_write_lat exchanges, shapes (empty: all), and the
# limit for the whole VM boot.  The defaults took under 7 minutes on this 2-core host.
BENCH_SECONDS    ?= 10
BENCH_RUNS       ?= 3
BENCH_LAT_ITERS  ?= 2000
BENCH_SHAPES     ?=
BENCH_VM_TIMEOUT ?= 1800
# BENCH_ONLY: ceiling (host only) or vm (VM only); empty: both.  BENCH_CEILING_SECONDS: seconds
# per kvx-ceiling run (BENCH_RUNS runs of each of its shapes).
BENCH_ONLY       ?=
BENCH_CEILING_SECONDS ?= 2

.PHONY: all deps build build-asan build-tsan build-fuzz test unit fuzz demo bench bench-rails bench-ceiling scale \
	format format-check package install clean

all: build

deps:
	@scripts/install-deps.sh

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKVX_UNIT_ONLY=OFF >/dev/null
	@cmake --build $(BUILD) -j$(JOBS)

build-asan: deps
	@cmake -S . -B $(BUILD_ASAN) -DCMAKE_BUILD_TYPE=Debug -DKVX_UNIT_ONLY=OFF \
		-DKVX_SANITIZE=address,undefined -DKVX_MUTANTS=OFF >/dev/null
	@cmake --build $(BUILD_ASAN) -j$(JOBS)

# ThreadSanitizer over the unit tests (the VM tier stays ASan+UBSan and plain): suppressions
# for liburcu's own internals only, each with its reason in tests/tsan.supp.
build-tsan: deps
	@cmake -S . -B $(BUILD_TSAN) -DCMAKE_BUILD_TYPE=Debug -DKVX_UNIT_ONLY=ON \
		-DKVX_SANITIZE=thread -DKVX_MUTANTS=OFF >/dev/null
	@cmake --build $(BUILD_TSAN) -j$(JOBS)

# libFuzzer targets (tests/fuzz/): clang, every library with -fsanitize=fuzzer-no-link,address,undefined
build-fuzz: deps
	@cmake -S . -B $(BUILD_FUZZ) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
		-DKVX_FUZZ=ON >/dev/null
	@cmake --build $(BUILD_FUZZ) -j$(JOBS)

fuzz: build-fuzz
	@scripts/fuzz.sh $(BUILD_FUZZ) $(FUZZ_SECONDS) $(FUZZ_TARGETS)

format-check:
	@scripts/format-check.sh

# The sanitizer runs first (unit tests, and the VM tests with kvxd, libkvx and kvx-bench built
# with ASan+UBSan; the unit tests under TSan), then a short run of each fuzz target over its
# seeds (ctest -L fuzz, about 10 s each), then the plain build's unit and VM tests, so that
# ctest's summary is last.  The mutants (negative controls, unit.*_must_fail) are built and run
# in the plain build only.  Unit tests run JOBS at a time; a VM test runs alone (RUN_SERIAL).
test: build build-asan build-tsan build-fuzz format-check
	@echo "== unit and VM tests under ASan+UBSan"
	@ctest --test-dir $(BUILD_ASAN) -j$(JOBS) --output-on-failure
	@echo "== unit tests under ThreadSanitizer"
	@TSAN_OPTIONS="suppressions=$(CURDIR)/tests/tsan.supp halt_on_error=1" \
		ctest --test-dir $(BUILD_TSAN) -j$(JOBS) -L unit -E must_fail --output-on-failure
	@echo "== fuzz targets, briefly"
	@ctest --test-dir $(BUILD_FUZZ) -j$(JOBS) -L fuzz --output-on-failure
	@echo "== unit and VM integration tests"
	@ctest --test-dir $(BUILD) -j$(JOBS) --output-on-failure

unit: build
	@ctest --test-dir $(BUILD) -j$(JOBS) -L unit --output-on-failure

demo: build
	@scripts/demo.sh $(BUILD)

bench: build
	@KVX_BENCH_SECONDS=$(BENCH_SECONDS) KVX_BENCH_RUNS=$(BENCH_RUNS) \
		KVX_BENCH_LAT_ITERS=$(BENCH_LAT_ITERS) KVX_BENCH_SHAPES="$(BENCH_SHAPES)" \
		KVX_BENCH_VM_TIMEOUT=$(BENCH_VM_TIMEOUT) KVX_BENCH_ONLY=$(BENCH_ONLY) \
		KVX_BENCH_CEILING_SECONDS=$(BENCH_CEILING_SECONDS) \
		scripts/bench.sh $(BUILD)

bench-rails: build
	@KVX_BENCH_SECONDS=$(BENCH_SECONDS) KVX_BENCH_RUNS=$(BENCH_RUNS) scripts/bench-rails.sh $(BUILD)

bench-ceiling: build
	@KVX_BENCH_ONLY=ceiling KVX_BENCH_RUNS=$(BENCH_RUNS) \
		KVX_BENCH_CEILING_SECONDS=$(BENCH_CEILING_SECONDS) scripts/bench.sh $(BUILD)

# Membership at scale (tests/vm/scale_membership.sh, not part of make test): SCALE_NODES kvxd
# find each other through etcd in one VM, take rooms, lose half of them and find them again.
# SCALE_CONNECT=on_demand: sessions only where rooms need them, closed when idle.
SCALE_NODES ?= 12
SCALE_CONNECT ?= always
scale: build
	@KVX_VM_PASSENV="KVX_SCALE_NODES KVX_SCALE_CONNECT" KVX_SCALE_NODES=$(SCALE_NODES) \
		KVX_SCALE_CONNECT=$(SCALE_CONNECT) \
		scripts/kvx-vm --build $(BUILD) --timeout 1500 tests/vm/scale_membership.sh

# The .deb (packaging/install.cmake): the programs, libkvx, headers, kvx.pc, the unit in
# /lib/systemd/system, the example configs; Depends from dpkg-shlibdeps.
package: build
	@cmake --build $(BUILD) --target package
	@ls -l $(BUILD)/*.deb

# cmake --install; PREFIX (empty: the configured prefix, /usr/local by default) and DESTDIR.
# Into the live system (no DESTDIR, as root), ldconfig then finds the new libkvx.
install: build
	@DESTDIR="$(DESTDIR)" cmake --install $(BUILD) $(if $(PREFIX),--prefix "$(PREFIX)")
	@if [ -z "$(DESTDIR)" ] && [ "$$(id -u)" -eq 0 ]; then ldconfig; fi

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD_ASAN) $(BUILD_TSAN) $(BUILD_FUZZ)
