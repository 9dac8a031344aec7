#!/usr/bin/env bash
# run_r41_h200x2.sh - round 11 of the all-reduce on 2 x H200 in one device call:
# gpu_allreduce on kernel sets 10 (the new default: set 5 with set 9's
# warp-specialized two-shot for exact / INT8 / INT6 from 16 MB), 11 (two
# reduce roles in the exact two-shot) and 12 (the codec two-shot's own decode
# in the gather role); then sets 5, 10, 11, 12 side by side in one process
# (every output compared bitwise with set 5's); then the default
# benchmark (set 10) over every codec and size, JSON and PNG.
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r41_h200x2.sh
NAME=${NAME:-r41}
. bench/device_env.sh

for v in 10 11 12; do
  TPMOE_CUDA_AR_VARIANT=$v timeout 120 "$B/gpu_allreduce" > "$R/gpu_allreduce_v$v.log" 2>&1
  echo "== gpu_allreduce (set $v) rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_allreduce_v$v.log" | head -8
done
pack

timeout 200 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int4,int4_h --variants 5,10,11,12 \
  --sizes "${AR_SIZES:-8M,16M,32M,96M,128M}" --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 / 11 / 12 rc=$? ($(el))"
cut -c1-240 "$R/bench_allreduce_sets.log"
pack

if [ "${AR_FULL:-1}" = 1 ]; then
timeout 200 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 \
  --codecs none,int8,int6,int4,fp8,int4_h,int6_h --sizes 4K,12K,64K,256K,768K,2M,8M,32M,96M,128M \
  --json "$R/allreduce_h200x2.json" --png "$R/allreduce_h200x2.png" > "$R/bench_allreduce.log" 2>&1
echo "== bench allreduce (default set) rc=$? ($(el))"
cut -c1-200 "$R/bench_allreduce.log"
pack
fi
echo "== total $(el)"
