#!/usr/bin/env bash
# moe_run.sh - the one device call that tests and times the CUDA MoE layer on
# an nvidia-h200-x2 machine (run from the worktree root; logs and JSON under
# $OUT/r, packed into $OUT/moe_results.tgz after every step).
# Round 3 (2026-11-30): shared-expert plan (slot vs split) at 1-8 tokens, prefill GEMM
# issue mode (loop / grouped / streams) at 32-8192 tokens, TP 2 fused vs unfused.
# gpu_moe runs on GPU 1 while the TP-1 benchmarks time GPU 0 (its TP-2 case then skips;
# the TP-2 benchmark rows, validated against the fp64 reference, run after it on both).
# Binaries built here (-DCMAKE_CUDA_ARCHITECTURES=90, Release) are carried in
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
CUDA_VISIBLE_DEVICES=1 timeout 100 $G > "$OUT/gpu_moe.log" 2>&1 &
GPID=$!
run() { # name timeout args...
  local name=$1 to=$2; shift 2
  timeout "$to" $B bench moe "$@" --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - t0 )) s): $*"
  sed -n '/^tokens/,$p' "$OUT/$name.log" | cut -c1-150; grep -E "FAIL|error|rank" "$OUT/$name.log" | head -5
  pack
}
export CUDA_VISIBLE_DEVICES=0
# the layer's defaults (per-call shared plan, grouped prefill GEMMs), fused and unfused
run moe_m3_tp1_decode 30 --preset m3 --tokens 1,2,4,8 --fuse-shared both --check 1
run moe_m3_tp1_prefill 45 --preset m3 --tokens 32,1024,8192 --fuse-shared both --check 1
# the shared plan forced: slot (inside the GEMV launches) vs split (dense cuBLAS), same weights
run moe_m3_tp1_plan_slot 25 --preset m3 --tokens 1,2,4,8 --fuse-shared 1 --shared-plan slot --check 1
run moe_m3_tp1_plan_split 25 --preset m3 --tokens 1,2,4,8 --fuse-shared 1 --shared-plan split --check 1
# prefill GEMM issue: per-expert loop (the previous round) vs the loop over 4 streams
run moe_m3_tp1_gemm_loop 35 --preset m3 --tokens 32,1024,8192 --fuse-shared 1 --prefill-gemm loop --check 1
run moe_m3_tp1_gemm_streams 35 --preset m3 --tokens 32,1024,8192 --fuse-shared 1 --prefill-gemm streams --check 1
wait $GPID; echo "gpu_moe rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "PASSED|FAILED|Error|rel err .*>|skipped|\[  ERROR|Failure|assert" "$OUT/gpu_moe.log" | head -20
pack
unset CUDA_VISIBLE_DEVICES
# TP 2 (NCCL all-reduce in the graph): defaults fused/unfused, then the slot plan forced
run moe_m3_tp2 40 --preset m3 --tokens 1,8 --tp 2 --fuse-shared both --check 1
run moe_m3_tp2_plan_slot 30 --preset m3 --tokens 1,8 --tp 2 --fuse-shared 1 --shared-plan slot --check 1
echo "total $(( $(date +%s) - t0 )) s"
