#!/usr/bin/env bash
# run_r54_h200x2.sh - kernel sets 20 (= 10) and 21 (= 19) with a backoff
# between data polls (Spin::tick_data: __nanosleep 32 ns doubling to 256 ns):
# gpu_allreduce on 20 and 21, then sets 10 / 20 / 19 / 21 side by side from
# 12 KB to 96 MB (outputs compared bitwise by the bench).
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz), of commit 584db27 (sets 20
# and 21 were removed again after this run: docs/allreduce_cuda_rounds.md, round 9).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r54_h200x2.sh
NAME=${NAME:-r54}
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
for v in 20 21; do
  TPMOE_CUDA_AR_VARIANT=$v TPMOE_TOOL=$B/tpmoe timeout 100 "$B/gpu_allreduce" > "$R/gpu_allreduce_v$v.log" 2>&1
  echo "== gpu_allreduce (set $v) rc=$? ($(el))"; ok "$R/gpu_allreduce_v$v.log"
done
pack
timeout 300 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int4 \
  --variants 10,20,19,21 --sizes 12K,256K,768K,2M,8M,32M,96M --iters 30 --json "$R/allreduce_sets.json" \
  > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 10 / 20 / 19 / 21 rc=$? ($(el))"
grep -c differs "$R/bench_allreduce_sets.log"
cut -c1-200 "$R/bench_allreduce_sets.log" | grep -v "^\s*$" | tail -26
pack
echo "== total $(el)"
