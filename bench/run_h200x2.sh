#!/usr/bin/env bash
# run_h200x2.sh - one device call: build, GPU tests, benchmark (logs, JSON and
# PNG under $OUT). Usage from the repository root on the 2 x H200 machine:
#   OUT=/some/dir DEPS=/path/to/.deps bash bench/run_h200x2.sh [quick]
set -u
OUT=${OUT:-out}; DEPS=${DEPS:-$PWD/.deps}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
nvidia-smi topo -m > "$OUT/topo.txt" 2>&1
{ cmake -S . -B build -DTPMOE_DEPS_ROOT="$DEPS" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release \
  && cmake --build build -j 32 --target tpmoe_cli gpu_allreduce; } > "$OUT/build.log" 2>&1 \
  || { tail -30 "$OUT/build.log"; exit 1; }
echo "== build ok"
[ "${1:-}" = bench ] || timeout 240 ./build/tests/gpu_allreduce > "$OUT/gpu_test.log" 2>&1; echo "gpu_allreduce rc=$?"
tail -25 "$OUT/gpu_test.log"
timeout 240 ./build/tpmoe bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6,int4,fp8 \
  --sizes 4K:128M --json "$OUT/allreduce_h200x2.json" --png "$OUT/allreduce_h200x2.png" \
  > "$OUT/bench.log" 2>&1; echo "bench rc=$?"
cat "$OUT/bench.log"
