#!/usr/bin/env bash
# run_r46_h200x2.sh - kernel set 15 (the warp-specialized two-shot at half the
# role threads, two CTAs per SM) on 2 x H200 in one device call: gpu_allreduce
# on set 15 and on the default set 10, then sets 5 / 10 / 15 side by side for
# every codec (outputs compared bitwise with set 5's); then the fused MoE
# layer's shared-expert plans at 4-128 tokens on one GPU: auto (slot on the
# prefill path) with the unfused layer beside it, and the split plan forced.
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r46_h200x2.sh
NAME=${NAME:-r46}
. bench/device_env.sh
PART=${PART:-all} # ar: the all-reduce part only (2 GPUs); moe: the MoE part only (one GPU)

if [ "$PART" != moe ]; then

TPMOE_CUDA_AR_VARIANT=15 timeout 150 "$B/gpu_allreduce" > "$R/gpu_allreduce_v15.log" 2>&1
echo "== gpu_allreduce (set 15) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/gpu_allreduce_v15.log" | head -8
timeout 150 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce (default) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/gpu_allreduce.log" | head -8
pack
timeout 280 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6,int4,int4_h,fp8 --variants 5,10,15 \
  --sizes 2M,8M,16M,32M,96M,128M --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 / 15 rc=$? ($(el))"
cut -c1-220 "$R/bench_allreduce_sets.log"
pack
fi

if [ "$PART" != ar ]; then
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 4,8,16,24,32,48,64,128 --fuse-shared both \
  --check 1 --json "$R/moe_auto.json" > "$R/bench_moe_auto.log" 2>&1
echo "== bench moe auto rc=$? ($(el))"
cut -c1-200 "$R/bench_moe_auto.log" | tail -22
pack
timeout 100 "$B/tpmoe" bench moe --preset m3 --tokens 16,24,32,48,64,128 --fuse-shared 1 --shared-plan split \
  --check 1 --json "$R/moe_split.json" > "$R/bench_moe_split.log" 2>&1
echo "== bench moe split rc=$? ($(el))"
cut -c1-200 "$R/bench_moe_split.log" | tail -10
pack
fi
echo "== total $(el)"
