#!/usr/bin/env bash
# run_h200x2.sh - one device call: GPU tests and the benchmark, everything
# (logs, JSON, PNG) in one tarball $OUT/allreduce_run.tgz. From the
# repository root on the 2 x H200 machine:
#   OUT=/some/dir DEPS=/path/to/.deps bash bench/run_h200x2.sh [bench]
# Uses binaries carried in prebuilt/ (built on the development machine with
# -DCMAKE_CUDA_ARCHITECTURES=90) when they start there, else builds.
set -u
OUT=${OUT:-out}; DEPS=${DEPS:-$PWD/.deps}; R=$OUT/run
mkdir -p "$R"
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
SIZES=${SIZES:-4K,8K,12K,16K,32K,64K,128K,256K,512K,768K,1M,2M,4M,8M,16M,32M,64M,96M,128M}
CODECS=${CODECS:-none,int8,int6,int4,fp8,int4_h}
nvidia-smi topo -m > "$R/topo.txt" 2>&1
BIN=prebuilt
if ! "$BIN/tpmoe" bench allreduce --help > /dev/null 2>&1; then
  BIN=build
  { cmake -S . -B build -DTPMOE_DEPS_ROOT="$DEPS" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
      -DJANSSON_LIBRARY="$DEPS/usr/lib/x86_64-linux-gnu/libjansson.so" \
    && cmake --build build -j 32 --target tpmoe_cli gpu_allreduce && cp build/tests/gpu_allreduce build/; } \
    > "$R/build.log" 2>&1 || { tail -30 "$R/build.log"; tar czf "$OUT/allreduce_run.tgz" -C "$OUT" run; exit 1; }
fi
echo "== binaries: $BIN"
if [ "${1:-}" != bench ]; then
  timeout 120 "$BIN/gpu_allreduce" > "$R/gpu_test.log" 2>&1; echo "gpu_allreduce rc=$?"
  grep -E "^\[  (PASSED|FAILED)|FAILED|graph:|skipped" "$R/gpu_test.log" | head -20
fi
timeout 240 "$BIN/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs "$CODECS" --sizes "$SIZES" \
  --json "$R/allreduce_h200x2.json" --png "$R/allreduce_h200x2.png" > "$R/bench.log" 2>&1
echo "bench rc=$?"
tar czf "$OUT/allreduce_run.tgz" -C "$OUT" run
cat "$R/bench.log"
