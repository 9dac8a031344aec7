#!/usr/bin/env bash
# run_r77_h200x2.sh - round 13's all-reduce change, second form, on 2 x H200,
# into $OUT/r77: the flag-free two-shot's world-2 pipeline run per warp over
# work units (a warp's 32 groups of a column) taken from a counter, no
# barrier (commit of this script), against the release build's static deal
# of whole columns per CTA. As run_r76_h200x2.sh: gpu_allreduce on the new
# object (set 10 and set 19), bf16 INT8 / INT4 / INT4_H at 2-128 MB in turn
# with the release build, two passes, then the new kernel's timeline.
# Binaries (prebuilt/bin.txz): tpmoe (release library), tpmoe_w and
# gpu_allreduce_w (the new cuda_twoshot_ll.cu object linked ahead of
# libtpmoe.a; the tests' source of this commit), ll_trace_w (that object
# built with -DTPM_LL_TRACE).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r77_h200x2.sh
NAME=r77
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
TPMOE_TOOL=$B/tpmoe_w timeout 200 "$B/gpu_allreduce_w" > "$R/gpu_allreduce_w.log" 2>&1
echo "== gpu_allreduce_w rc=$? ($(el))"; ok "$R/gpu_allreduce_w.log"
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe_w timeout 200 "$B/gpu_allreduce_w" > "$R/gpu_allreduce_w19.log" 2>&1
echo "== gpu_allreduce_w (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_w19.log"
pack
for pass in 1 2; do
  for bin in tpmoe tpmoe_w; do
    timeout 100 "$B/$bin" bench allreduce --tp 2 --dtype bf16 --codecs int8,int4,int4_h \
      --sizes 2M,8M,32M,96M,128M --json "$R/ab_${bin}_$pass.json" > "$R/ab_${bin}_$pass.log" 2>&1
    echo "== $bin pass $pass rc=$? ($(el))"
    grep -E "^ +[0-9]+ (int8|int4|int4_h) " "$R/ab_${bin}_$pass.log" | awk -v b=$bin '{print b, $1, $2, $4, $11}'
  done
done | tee "$R/ab.txt"
pack
timeout 60 "$B/ll_trace_w" "$R" 32 96 > "$R/ll_trace_w.log" 2>&1
echo "== ll_trace_w rc=$? ($(el))"; cat "$R/ll_trace_w.log"
python3 bench/diag/ll_trace_summary.py "$R"/trace_int4_*.csv > "$R/summary.txt" 2>&1
grep "^==" "$R/summary.txt"
pack
echo "== total $(el)"
