# A thin wrapper over CMake. Targets:
#   make        release build: build/bin, build/lib (libsluice.a, .so, sluice.pc)
#   make run    build, then start sluiced on the in-memory store
#   make test   install dependencies, build under the sanitizers, run every test
#   make bench  release build, then run the benchmarks (build/bench/bench_*)
#   make soak   release build, then a bounded soak under faults (SOAK_SECONDS, default 60)
#   make clean
MAKEFLAGS += --no-print-directory
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build build-asan build-tsan build-fuzz deps run test test-asan test-tsan fuzz \
  check-layers bench clean

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	@cmake --build build -j $(JOBS)

run: build
	@if [ -x build/bin/sluiced ]; then \
	  echo "sluiced: RESP on 127.0.0.1:7379, HTTP on 127.0.0.1:7380"; \
	  echo "try: redis-cli -p 7379 CL.THROTTLE user:1 15 30 60"; \
	  echo "     curl -i 'http://127.0.0.1:7380/v1/check?key=user:1&limit=100&period=60'"; \
	  echo "     build/bin/sluice simulate --limit 100 --period 60 --traffic boundary"; \
	  exec build/bin/sluiced; \
	else \
	  echo "make run: build/bin/sluiced is missing after the build; see the output of make above"; \
	  exit 1; \
	fi

# Every test, under AddressSanitizer + UndefinedBehaviorSanitizer; the
# concurrent ones (label mt) again under ThreadSanitizer.
# The layer check comes first: it reads sources only, and refuses an include
# that points up the layers (scripts/check-layers.sh).
test: check-layers deps build test-build test-asan test-tsan test-integration test-module \
  test-backend test-cli test-clients test-install fuzz

check-layers:
	@scripts/check-layers.sh

# Each sanitizer build tree is configured and built by one target, on which
# every test target that uses it depends: under `make -j N test` no two
# recipes configure or build the same tree at once. Each waits for deps.
build-asan: deps
	@cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON -DSLUICE_BENCH=OFF >/dev/null
	@cmake --build build/asan -j $(JOBS)

build-tsan: deps
	@cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TSAN=ON -DSLUICE_BENCH=OFF >/dev/null
	@cmake --build build/tsan -j $(JOBS)

test-asan: build-asan
	@cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

test-tsan: build-tsan
	@cd build/tsan && if ctest -N -L mt | grep -q 'Total Tests: 0'; then \
	  echo "test-tsan: no concurrent tests yet"; \
	else TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -L mt; fi

# libFuzzer targets: each tests/fuzz/fuzz_NAME.c, built by CMake with clang
# into build/fuzz (-DSLUICE_FUZZ=ON: the same libraries as the products, with
# libFuzzer's instrumentation and ASan+UBSan), runs for FUZZ_SECONDS
# from its seeds in tests/fuzz/corpus/NAME, JOBS targets at once
# (scripts/fuzz-one.sh); what it learns goes to build/fuzz/corpus/NAME. Any
# crash, leak or failed check fails the run and leaves the input in build/fuzz/
# (replay: build/fuzz/fuzz_NAME FILE).
FUZZ_SECONDS ?= 30
FUZZ_MAX_LEN ?= 4096
FUZZ_CC ?= clang

build-fuzz: deps
	@CC=$(FUZZ_CC) cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=Debug -DSLUICE_FUZZ=ON \
	  -DSLUICE_TESTS=OFF -DSLUICE_BENCH=OFF >/dev/null
	@cmake --build build/fuzz -j $(JOBS) --target fuzz_all

fuzz: build-fuzz
	@ls tests/fuzz/fuzz_*.c | FUZZ_SECONDS=$(FUZZ_SECONDS) FUZZ_MAX_LEN=$(FUZZ_MAX_LEN) \
	  xargs -P $(JOBS) -n 1 scripts/fuzz-one.sh

# Integration tests: real clients (redis-py, redis-cli, hiredis, raw sockets)
# against a running sluiced over 127.0.0.1. SLUICED picks the binary: by default
# the ASan+UBSan build, so that the sanitizers watch the server during the run
# (SLUICED=build/bin/sluiced for the release build).
SLUICED ?= build/asan/bin/sluiced
# (A tree is built when a test runs a binary from it: the ASan+UBSan one by
# default, the release one for SLUICED=build/bin/sluiced.)
tree_of = $(if $(filter build/asan/%,$(1)),build-asan) $(if $(filter build/bin/%,$(1)),build)
.PHONY: test-integration
test-integration: $(call tree_of,$(SLUICED))
	@SLUICED=$(SLUICED) /usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/integration

# The Redis module's tests: Debian's redis-server 7, started by the tests on free
# 127.0.0.1 ports with --loadmodule build/lib/sluice-redis.so (the release build:
# a sanitizer build cannot be loaded into an uninstrumented redis-server);
# primary and replica, RDB and AOF restarts, a three-node cluster, the Lua scripts.
.PHONY: test-module
test-module: build
	@/usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/module

# The backends' tests (tests/backend/): tests/backend/redis_driver, the redis
# backend on a uv loop under ASan+UBSan, against Debian's redis-server 7 on free
# 127.0.0.1 ports, with build/lib/sluice-redis.so (the release build) loaded and
# without (the Lua script); Redis killed, restarted, paused, or not Redis at all.
# tests/backend/cluster_driver, the Redis Cluster transport, against clusters of
# redis-server 7 (three primaries, a replica each where a failover is tested):
# every slot, ASK and MOVED during a migration, a primary killed and its replica
# promoted, seeds that are down or silent, AUTH.
.PHONY: test-backend
test-backend: build build-asan
	@/usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/backend

# The CLI's tests (tests/cli/): pytest runs the ASan+UBSan build of `sluice` on
# simulated traffic and checks the algorithms' guarantees on its output, and runs
# take and bench against a real sluiced on 127.0.0.1 (stopped by its PID), and
# against redis-server with build/lib/sluice-redis.so when that is built.
SLUICE_CLI ?= build/asan/bin/sluice
.PHONY: test-cli
test-cli: $(call tree_of,$(SLUICE_CLI) $(SLUICED))
	@SLUICE=$(SLUICE_CLI) SLUICED=$(SLUICED) /usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/cli

# The client libraries (clients/): the Python package's tests and the Node.js
# package's (node's own test runner, after npm ci installs ioredis from its
# package-lock.json), each with the shared header vectors (tests/vectors/) and
# against a real sluiced (SLUICED) on free 127.0.0.1 ports; and the C RESP client
# (tests/client: its driver, built in the ASan tree, beside redis-py).
.PHONY: test-clients
test-clients: $(call tree_of,$(SLUICED))
	@SLUICED=$(SLUICED) /usr/bin/python3 -B -m pytest -q -p no:cacheprovider clients/python/tests
	@SLUICED=$(SLUICED) /usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/client
	@cd clients/node && npm ci --no-audit --no-fund --loglevel=error && \
	  SLUICED=$(SLUICED) node --test test/*.test.js

# The install (tests/install/): `cmake --install` of the release build into a
# temporary prefix; a C program built against it with only pkg-config's flags
# (shared and static), the module loaded from there by a real redis-server, the
# systemd unit checked by systemd-analyze verify.
.PHONY: test-install
test-install: build
	@/usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/install

# The build's own tests (tests/build/): build/lib and build/bin hold only the
# products, and scripts/check-layers.sh refuses what it must on small trees.
.PHONY: test-build
test-build: build
	@/usr/bin/python3 -B -m pytest -q -p no:cacheprovider tests/build

# The soak (tests/soak/soak.py, not part of `make test`): mixed RESP and HTTP load with faults
# on a schedule for SOAK_SECONDS against the release build, then every key checked against
# its algorithm's bound over the run.
SOAK_SECONDS ?= 60
.PHONY: soak
soak: build
	@/usr/bin/python3 -B tests/soak/soak.py --seconds $(SOAK_SECONDS)

bench: build
	@for b in build/bench/bench_*; do echo "== $$b"; $$b; done

clean:
	rm -rf build
