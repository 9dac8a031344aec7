#!/usr/bin/env bash
# run_r76_h200x2.sh - round 13's all-reduce change on 2 x H200, into $OUT/r76:
# the flag-free two-shot's world-2 pipeline taking its columns from a
# counter (and loading its first column before the epoch read) against the
# release build's static deal. gpu_allreduce on the new object (bitwise
# against the CPU reference; the 24 MB launches run ~3 columns per CTA,
# back to back), on set 10 and set 19; then bf16 INT8 / INT4 / INT4_H at
# 2-128 MB, release build and new object in turn, two passes; then the new
# kernel's timeline (bench/diag/ll_trace.c, as r75).
# Binaries (prebuilt/bin.txz): tpmoe and gpu_allreduce (release library, the
# tests' source of this commit), tpmoe_v and gpu_allreduce_v (the same with
# the new cuda_twoshot_ll.cu object linked ahead of libtpmoe.a), ll_trace_v
# (that object built with -DTPM_LL_TRACE).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r76_h200x2.sh
NAME=r76
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
TPMOE_TOOL=$B/tpmoe_v timeout 200 "$B/gpu_allreduce_v" > "$R/gpu_allreduce_v.log" 2>&1
echo "== gpu_allreduce_v rc=$? ($(el))"; ok "$R/gpu_allreduce_v.log"
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe_v timeout 200 "$B/gpu_allreduce_v" > "$R/gpu_allreduce_v19.log" 2>&1
echo "== gpu_allreduce_v (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_v19.log"
pack
for pass in 1 2; do
  for bin in tpmoe tpmoe_v; do
    timeout 100 "$B/$bin" bench allreduce --tp 2 --dtype bf16 --codecs int8,int4,int4_h \
      --sizes 2M,8M,32M,96M,128M --json "$R/ab_${bin}_$pass.json" > "$R/ab_${bin}_$pass.log" 2>&1
    echo "== $bin pass $pass rc=$? ($(el))"
    grep -E "^ +[0-9]+ (int8|int4|int4_h) " "$R/ab_${bin}_$pass.log" | awk -v b=$bin '{print b, $1, $2, $4, $11}'
  done
done | tee "$R/ab.txt"
pack
timeout 60 "$B/ll_trace_v" "$R" 32 96 > "$R/ll_trace_v.log" 2>&1
echo "== ll_trace_v rc=$? ($(el))"; cat "$R/ll_trace_v.log"
python3 bench/diag/ll_trace_summary.py "$R"/trace_int4_*.csv > "$R/summary.txt" 2>&1
grep "^==" "$R/summary.txt"
pack
echo "== total $(el)"
