#!/usr/bin/env bash
# run_r75_h200x2.sh - round 13's all-reduce diagnostic on 2 x H200, into
# $OUT/r75: the timeline of the flag-free two-shot's world-2 pipeline
# (bench/diag/ll_trace.c over a library whose cuda_twoshot_ll.cu was built with
# -DTPM_LL_TRACE), INT4 and INT8, bf16, 32 and 96 MiB, summarized by
# bench/diag/ll_trace_summary.py.
# Binary (prebuilt/bin.txz): ll_trace, built as bench/diag/ll_trace.c says.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r75_h200x2.sh
NAME=r75
. bench/device_env.sh
timeout 120 "$B/ll_trace" "$R" 32 96 > "$R/ll_trace.log" 2>&1
echo "== ll_trace rc=$? ($(el))"
cat "$R/ll_trace.log"
python3 bench/diag/ll_trace_summary.py "$R"/trace_*.csv > "$R/summary.txt" 2>&1
cat "$R/summary.txt"
pack
echo "== total $(el)"
