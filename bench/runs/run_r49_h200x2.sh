#!/usr/bin/env bash
# run_r49_h200x2.sh - kernel set 18 (set 10 with ShortCodec arithmetic: the
# same bits, shorter dependency chains per codec block) on 2 x H200 in one
# device call: gpu_allreduce on set 18 and on the default set 10, then sets
# 5 / 10 / 18 side by side (outputs compared bitwise with set 5's).
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r49_h200x2.sh
NAME=${NAME:-r49}
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }

TPMOE_CUDA_AR_VARIANT=18 timeout 120 "$B/gpu_allreduce" > "$R/gpu_allreduce_v18.log" 2>&1
echo "== gpu_allreduce (set 18) rc=$? ($(el))"; ok "$R/gpu_allreduce_v18.log"
timeout 120 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce (default) rc=$? ($(el))"; ok "$R/gpu_allreduce.log"
pack
timeout 240 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6,int4,int4_h --variants 5,10,18 \
  --sizes 2M,8M,32M,96M,128M --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 / 18 rc=$? ($(el))"
cut -c1-230 "$R/bench_allreduce_sets.log"
pack
echo "== total $(el)"
