#!/usr/bin/env bash
# moe_run.sh - the one device call that builds, tests and times the CUDA MoE
# layer on an nvidia-h200-x2 machine (run from the repository root; writes
# logs and JSON under $OUT). Usage: bash bench/results/moe_run.sh [quick]
set -u
OUT=${OUT:-/tmp/moe_out}
mkdir -p "$OUT"
DEPS=$(cd ../.. && pwd)/.deps
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
t0=$(date +%s)
cmake -S . -B build -DTPMOE_DEPS_ROOT="$DEPS" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1
if ! cmake --build build -j32 --target tpmoe_cli gpu_moe > "$OUT/build.log" 2>&1; then
  grep -E "error" -A3 "$OUT/build.log" | head -40; exit 1
fi
echo "build $(( $(date +%s) - t0 )) s"
B=./build/tpmoe
timeout 150 ./build/tests/gpu_moe > "$OUT/gpu_moe.log" 2>&1; echo "gpu_moe rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "PASSED|FAILED|Error|rel err .*>|skipped" "$OUT/gpu_moe.log" | head -20
run() { # name timeout args...
  local name=$1 to=$2; shift 2
  timeout "$to" $B bench moe "$@" --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - t0 )) s): $*"
  sed -n '/^tokens/,$p' "$OUT/$name.log"; grep -E "FAIL|error|rank" "$OUT/$name.log" | head -5
}
# (the device returns a limited number of files: everything is also packed into one tarball)
run moe_m3_tp1 200 --preset m3 --tokens 1,8,16,32,128,1024,8192 --fuse-shared both
run moe_m3_tp1_path_prefill 60 --preset m3 --tokens 1,4,8,16,32 --path prefill --fuse-shared 1 --check 1
run moe_m3_tp1_path_decode 60 --preset m3 --tokens 4,16,32 --path decode --fuse-shared 1 --check 1
run moe_m3_tp2 150 --preset m3 --tokens 1,8,32,1024 --tp 2 --fuse-shared both
tar -C "$OUT" -czf "$OUT/moe_results.tgz" $(cd "$OUT" && ls *.json *.log smi.txt 2>/dev/null)
