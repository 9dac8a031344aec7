#!/usr/bin/env bash
# run_r47_h200x2.sh - kernel set 15 (the warp-specialized two-shot at half the
# role threads, two CTAs per SM) and the MoE prefill split plan up to 16
# tokens, on 2 x H200 in one device call:
#   ar:  gpu_allreduce on set 15 and on the default set 10, gpu_comm_api, then
#        sets 5 / 10 / 15 side by side for every codec (outputs compared bitwise
#        with set 5's);
#   moe: gpu_moe and gpu_moe_api, then the fused layer (its default plans) and
#        the unfused one at 8-32 tokens.
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r47_h200x2.sh
# (PART=ar or PART=moe runs one half; the moe half needs one GPU but
# gpu_moe_api's TP 2 / EP 2 tests skip without a second.)
NAME=${NAME:-r47}
. bench/device_env.sh
PART=${PART:-all}

if [ "$PART" != moe ]; then
TPMOE_CUDA_AR_VARIANT=15 timeout 150 "$B/gpu_allreduce" > "$R/gpu_allreduce_v15.log" 2>&1
echo "== gpu_allreduce (set 15) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/gpu_allreduce_v15.log" | head -8
for t in gpu_allreduce gpu_comm_api; do
  TPMOE_TOOL=$B/tpmoe timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t (default) rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack
timeout 280 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6,int4,int4_h,fp8 --variants 5,10,15 \
  --sizes 2M,8M,16M,32M,96M,128M --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 / 15 rc=$? ($(el))"
cut -c1-220 "$R/bench_allreduce_sets.log"
pack
fi

if [ "$PART" != ar ]; then
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack
timeout 100 "$B/tpmoe" bench moe --preset m3 --tokens 8,16,24,32 --fuse-shared both \
  --check 1 --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe rc=$? ($(el))"
cut -c1-200 "$R/bench_moe_tp1.log" | tail -10
pack
fi
echo "== total $(el)"
