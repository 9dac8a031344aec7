#!/usr/bin/env bash
# moe_run.sh - the one device call that tests and times the CUDA MoE layer on
# an nvidia-h200-x2 machine (run from the worktree root; logs and JSON under
# $OUT/r, packed into $OUT/moe_results.tgz after every step).
# Binaries built here (-DCMAKE_CUDA_ARCHITECTURES=90) may be carried in
# build-prebuilt/ (tpmoe, gpu_moe; ignored by git); if they do not run there, it builds.
set -u
OUT=${OUT:-/tmp/moe_out}
TOP=$OUT; OUT=$OUT/r # the device returns at most 8 files: only the tarball stays at the top
mkdir -p "$OUT"
DEPS=$(cd ../.. && pwd)/.deps
export LD_LIBRARY_PATH=$DEPS/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0
t0=$(date +%s)
pack() { tar -C "$OUT" -czf "$TOP/moe_results.tgz" $(cd "$OUT" && ls *.json *.log *.txt 2>/dev/null); }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$OUT/smi.txt" 2>&1
B=./build-prebuilt/tpmoe; G=./build-prebuilt/gpu_moe
if ! $B bench moe --help > "$OUT/prebuilt.log" 2>&1; then
  echo "prebuilt binaries do not run here: building"
  cmake -S . -B build -DTPMOE_DEPS_ROOT="$DEPS" -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_BUILD_TYPE=Release > "$OUT/cmake.log" 2>&1
  if ! cmake --build build -j32 --target tpmoe_cli gpu_moe > "$OUT/build.log" 2>&1; then
    grep -E "error" -A3 "$OUT/build.log" | head -40; pack; exit 1
  fi
  B=./build/tpmoe; G=./build/tests/gpu_moe
  echo "build $(( $(date +%s) - t0 )) s"
fi
timeout 90 $G > "$OUT/gpu_moe.log" 2>&1; echo "gpu_moe rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "PASSED|FAILED|Error|rel err .*>|skipped|\[  ERROR|Failure|assert" "$OUT/gpu_moe.log" | head -20
pack
run() { # name timeout args...
  local name=$1 to=$2; shift 2
  timeout "$to" $B bench moe "$@" --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - t0 )) s): $*"
  sed -n '/^tokens/,$p' "$OUT/$name.log" | cut -c1-150; grep -E "FAIL|error|rank" "$OUT/$name.log" | head -5
  pack
}
# the layer's defaults (persistent tensor-core decode, fused / GEMM routing), fused and unfused
run moe_m3_tp1 100 --preset m3 --tokens 1,8,32,1024,8192 --fuse-shared both --check 2
# the previous kernels (two scalar decode launches, two-launch routing), same timing: the before
run moe_m3_tp1_before 40 --preset m3 --tokens 1,8,32 --fuse-shared both --path decode --decode-kernel 0 --route-legacy 1 --check 1
# switch point: prefill forced at small batches, decode at 16
run moe_m3_tp1_path_prefill 40 --preset m3 --tokens 1,8,16,32 --path prefill --fuse-shared both --check 1
run moe_m3_tp1_path_decode 30 --preset m3 --tokens 16 --path decode --fuse-shared both --check 1
# routing at 128 / 256 tokens: one fused launch vs the router GEMM
run moe_m3_tp1_route_fused 30 --preset m3 --tokens 64,128,256 --route-gemm-min 100000 --fuse-shared 1 --check 1
run moe_m3_tp1_route_gemm 30 --preset m3 --tokens 64,128,256 --route-gemm-min 1 --fuse-shared 1 --check 1
# TP 2 (NCCL all-reduce in the graph)
run moe_m3_tp2 60 --preset m3 --tokens 1,8,32 --tp 2 --fuse-shared both --check 1
echo "total $(( $(date +%s) - t0 )) s"
