#!/usr/bin/env bash
# run_r10_h200x2.sh - round 10 on one device call: gpu_allreduce on kernel
# set 8, and sets 5 and 8 side by side (8: the world-2 exact two-shot over
# registered in/out buffers, no staging; every output compared bitwise with
# set 5's). Binaries (tpmoe, gpu_allreduce) carried in prebuilt/bin.txz.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r10_h200x2.sh
NAME=${NAME:-r10}
. bench/device_env.sh
TPMOE_CUDA_AR_VARIANT=8 timeout 90 "$B/gpu_allreduce" > "$R/gpu_allreduce_v8.log" 2>&1
echo "== gpu_allreduce (set 8) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_allreduce_v8.log" | head -8
timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none --variants 5,8 \
  --sizes "${AR_SIZES:-12K,1000006,2M,8M,16M,32M,64M,96M,128M}" --iters 30 \
  --json "$R/allreduce_registered.json" > "$R/bench_allreduce_registered.log" 2>&1
echo "== bench allreduce 5 vs 8 rc=$? ($(el))"
cut -c1-200 "$R/bench_allreduce_registered.log"
timeout 60 "$B/tpmoe" bench allreduce --tp 2 --dtype fp32 --codecs none --variants 5,8 \
  --sizes 4K,1M,32M --iters 20 > "$R/bench_allreduce_registered_fp32.log" 2>&1
echo "== bench allreduce fp32 5 vs 8 rc=$? ($(el))"
cut -c1-200 "$R/bench_allreduce_registered_fp32.log" | tail -4
pack
echo "== total $(el)"
