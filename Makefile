# A thin wrapper over CMake. Targets:
#   make        release build: build/bin, build/lib (libsluice.a, .so, sluice.pc)
#   make run    build, then start sluiced on the in-memory store
#   make test   install dependencies, build under the sanitizers, run every test
#   make bench  release build, then run the benchmarks
#   make clean
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=

.PHONY: all build deps run test test-asan test-tsan bench clean

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
	  exec build/bin/sluiced; \
	else \
	  echo "make run: sluiced is not built yet (the server is a later issue); libsluice is in build/lib"; \
	fi

# Every test, under AddressSanitizer + UndefinedBehaviorSanitizer; the
# concurrent ones (label mt) again under ThreadSanitizer.
test: deps build test-asan test-tsan

test-asan:
	@cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON -DSLUICE_BENCH=OFF >/dev/null
	@cmake --build build/asan -j $(JOBS)
	@cd build/asan && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS)

test-tsan:
	@cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLUICE_TSAN=ON -DSLUICE_BENCH=OFF >/dev/null
	@cmake --build build/tsan -j $(JOBS)
	@cd build/tsan && if ctest -N -L mt | grep -q 'Total Tests: 0'; then \
	  echo "test-tsan: no concurrent tests yet"; \
	else TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -L mt; fi

bench: build
	@for b in build/bin/bench_*; do echo "== $$b"; $$b; done

clean:
	rm -rf build
