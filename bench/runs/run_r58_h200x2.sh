#!/usr/bin/env bash
# run_r58_h200x2.sh - set 19 with the staged codec path (cuda_twoshot_ll.cu:
# each thread cp.async-copies its next work item's input group into shared
# memory while it computes the current one): gpu_allreduce on set 19, sets
# 10 / 19 side by side for the codecs at 2-96 MB (outputs compared bitwise),
# and the solo rank of bench/ar_loopback.cu at INT4 / INT8 32 MB.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, ar_loopback, of commit 5e5320c (the
# staged path measured no faster and was removed again; docs/allreduce_cuda_rounds.md, round 10).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r58_h200x2.sh
NAME=${NAME:-r58}
. bench/device_env.sh
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe timeout 100 "$B/gpu_allreduce" > "$R/gpu_allreduce_v19.log" 2>&1
echo "== gpu_allreduce (set 19) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/gpu_allreduce_v19.log" | head -8
pack
timeout 200 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs int8,int6,int4,int4_h \
  --variants 10,19 --sizes 2M,8M,32M,96M --iters 30 --json "$R/allreduce_sets.json" \
  > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 10 / 19 rc=$? ($(el)) differs: $(grep -c differs "$R/bench_allreduce_sets.log")"
grep -E "^ +[0-9]" "$R/bench_allreduce_sets.log" | awk '{print $1, $2, $4, $NF}'
for cfg in 3,33554432,19 1,33554432,19; do
  CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=$cfg timeout 60 "$B/ar_loopback" 2>&1 | tee -a "$R/solo.log"
done
pack
echo "== total $(el)"
