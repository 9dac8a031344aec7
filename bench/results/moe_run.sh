#!/usr/bin/env bash
# moe_run.sh - the one device call that tests and times the CUDA MoE layer on
# an nvidia-h200-x2 machine (run from the worktree root; logs and JSON under
# $OUT/r, packed into $OUT/moe_results.tgz after every step).
# Round 4 (2026-11-30): decode kernel set 2 (shared slot's gate_up overlapping the
# routing, down's first loads overlapping gate_up, combine launched early: programmatic
# dependent launch) against set 0 in the same run; the L2 flush by write (default) vs by
# read; routing at 64/256 tokens; TP 2 fused vs unfused with both kernel sets.
# gpu_moe runs on GPU 1 while the TP-1 benchmarks time GPU 0 (its TP-2 case then skips).
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
LIMIT=${LIMIT:-95} # seconds of script: later steps are skipped past it
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
  if [ $(( $(date +%s) - t0 )) -gt "$LIMIT" ]; then echo "== $name skipped (time)"; return; fi
  timeout "$to" $B bench moe "$@" --json "$OUT/$name.json" > "$OUT/$name.log" 2>&1
  echo "== $name rc=$? ($(( $(date +%s) - t0 )) s): $*"
  grep "^# harness" "$OUT/$name.log"
  sed -n '/^tokens/,$p' "$OUT/$name.log" | cut -c1-150; grep -E "FAIL|error|rank" "$OUT/$name.log" | head -5
  pack
}
export CUDA_VISIBLE_DEVICES=0
M="--preset m3 --check 1"
# set 0 (round 3's kernels) and set 2 with PDL, fused and unfused, layer plans otherwise
run moe_m3_tp1_dk0 25 $M --tokens 1,2,4,8,32 --fuse-shared both --decode-kernel 0
run moe_m3_tp1_dk2 25 $M --tokens 1,2,4,8,32 --fuse-shared both --decode-kernel 2 --pdl 1
# set 2 without PDL (same kernels, plain launches); set 2 + PDL with the slot plan forced at 4, 8
run moe_m3_tp1_dk2_nopdl 20 $M --tokens 1,2,4,8 --fuse-shared 1 --decode-kernel 2 --pdl 0
run moe_m3_tp1_dk2_slot 20 $M --tokens 2,4,8 --fuse-shared 1 --decode-kernel 2 --pdl 1 --shared-plan slot
# the flush: read (clean L2) instead of write (dirty L2), both kernel sets
run moe_m3_tp1_read_dk0 20 $M --tokens 1,8 --fuse-shared 1 --decode-kernel 0 --flush read
run moe_m3_tp1_read_dk2 20 $M --tokens 1,8 --fuse-shared 1 --decode-kernel 2 --pdl 1 --flush read
# routing at 64 and 256 tokens: one fused launch vs the router GEMM (prefill path)
run moe_m3_tp1_route_fused 20 $M --tokens 64,256 --fuse-shared 1 --route-gemm-min 100000 --reps 10
wait $GPID; echo "gpu_moe rc=$? ($(( $(date +%s) - t0 )) s)"
grep -E "PASSED|FAILED|Error|rel err .*>|skipped|\[  ERROR|Failure|assert" "$OUT/gpu_moe.log" | head -20
pack
unset CUDA_VISIBLE_DEVICES
# TP 2 (NCCL all-reduce in the graph): fused vs unfused, set 0 and set 2 + PDL
run moe_m3_tp2_dk0 30 $M --tokens 1,8 --tp 2 --fuse-shared both --decode-kernel 0
run moe_m3_tp2_dk2 30 $M --tokens 1,8 --tp 2 --fuse-shared both --decode-kernel 2 --pdl 1
echo "total $(( $(date +%s) - t0 )) s"
