#!/usr/bin/env bash
# run_r48_h200x2.sh - kernel sets 15 (the warp-specialized two-shot at half
# the role threads, two CTAs per SM), 16 (15 with decoupled releases) and 17
# (9 with decoupled releases), and the MoE prefill split plan up to 16 tokens,
# on 2 x H200 in one device call:
#   ar:  gpu_allreduce on sets 16, 17 and on the default set 10,
#        gpu_comm_api, then sets 5 / 10 / 16 / 17 side by side (outputs
#        compared bitwise with set 5's; set 15 alone ran in r47);
#   moe: gpu_moe and gpu_moe_api, then the fused layer (its default plans) and
#        the unfused one at 8-32 tokens on one GPU, and at 1 and 8 tokens at TP 2.
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r48_h200x2.sh
# (PART=ar or PART=moe runs one half.)
NAME=${NAME:-r48}
. bench/device_env.sh
PART=${PART:-all}
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }

if [ "$PART" != moe ]; then
for v in 16 17; do
  TPMOE_CUDA_AR_VARIANT=$v timeout 120 "$B/gpu_allreduce" > "$R/gpu_allreduce_v$v.log" 2>&1
  echo "== gpu_allreduce (set $v) rc=$? ($(el))"; ok "$R/gpu_allreduce_v$v.log"
done
for t in gpu_allreduce gpu_comm_api; do
  TPMOE_TOOL=$B/tpmoe timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t (default) rc=$? ($(el))"; ok "$R/$t.log"
done
pack
timeout 300 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6,int4 --variants 5,10,16,17 \
  --sizes 8M,32M,96M,128M --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 / 16 / 17 rc=$? ($(el))"
cut -c1-250 "$R/bench_allreduce_sets.log"
pack
fi

if [ "$PART" != ar ]; then
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
timeout 100 "$B/tpmoe" bench moe --preset m3 --tokens 8,16,24,32 --fuse-shared both \
  --check 1 --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe rc=$? ($(el))"
cut -c1-200 "$R/bench_moe_tp1.log" | tail -9
pack
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both \
    --check 1 --json "$R/moe_m3_tp2.json" > "$R/bench_moe_tp2.log" 2>&1
  echo "== bench moe tp2 rc=$? ($(el))"
  cut -c1-200 "$R/bench_moe_tp2.log" | tail -5
  pack
fi
fi
echo "== total $(el)"
