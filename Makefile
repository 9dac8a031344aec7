# Thin wrapper over CMake. `make` builds, `make test` runs every test in a
# CPU-only ASan+UBSan build (GPU tests skip there, counted), `make test-gpu`
# the GPU tests in the CUDA build, `make install`.
BUILD ?= build
SAN_BUILD ?= build-asan
CMAKE_FLAGS ?=
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SHELL := /bin/bash

.PHONY: all build deps test test-gpu install clean
all: build

# Install the build/test dependencies on a fresh Debian/Ubuntu machine.
deps:
	bash .ci/deps

build:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)
	cmake --build $(BUILD) -j $(JOBS)

# The CPU tests run in a CPU-only ASan+UBSan build.
test:
	cmake -S . -B $(SAN_BUILD) -DTPMOE_CUDA=OFF -DTPMOE_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug $(CMAKE_FLAGS)
	cmake --build $(SAN_BUILD) -j $(JOBS)
	cd $(SAN_BUILD) && set -o pipefail && ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --output-on-failure -j $(JOBS) 2>&1 | tee ctest.log; rc=$$?; \
	  n=$$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' ctest.log); \
	  f=$$(sed -n 's/.*, \([0-9]*\) tests failed out of.*/\1/p' ctest.log); \
	  s=$$(grep -c '(Skipped)' ctest.log); \
	  echo "$$(( $${n:-0} - $${f:-0} - s )) passed, $${f:-0} failed, $$s skipped"; exit $$rc

test-gpu: build
	cd $(BUILD) && ctest --output-on-failure -L gpu

install: build
	cmake --install $(BUILD) $(if $(PREFIX),--prefix $(PREFIX),)

clean:
	rm -rf $(BUILD) $(SAN_BUILD)
