#!/usr/bin/env bash
# run_r108_h200.sh - round 14, one H200, into $OUT/r108: k_gather by token (x
# read once, written to its K permuted rows) against by row (x read K times):
# gpu_moe and gpu_moe_api of the new tree, then bench moe of both binaries in
# alternation at 128-8192 tokens (fused, two passes), then k_gather's time at
# 1024 and 8192 tokens (ncu, one metric).
# Binaries (prebuilt/bin.txz): tpmoe_prev (commit 2052269, final20_moe's),
# tpmoe, gpu_moe, gpu_moe_api of the working tree (the gather change).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r108_h200.sh
NAME=r108
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$1" | head -8; }
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
for v in prev new prev new; do
  bin=$B/tpmoe; [ $v = prev ] && bin=$B/tpmoe_prev
  $bin bench moe --preset m3 --tokens 128,1024,2048,4096,8192 --fuse-shared 1 --check 1 --gemm-hold 0 \
    --reps 30 >> "$R/bench_$v.log" 2>&1
  echo "== $v rc=$? ($(el))"; awk '$1 ~ /^[0-9]+$/ {printf "%s %s %s | ", $1, $12, $15} END {print ""}' "$R/bench_$v.log" | tail -1
done
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1"
for t in 1024 8192; do
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --kernel-name regex:k_gather \
    --csv $M --tokens $t > "$R/ncu_t$t.csv" 2> "$R/ncu_t$t.err"
  echo "== ncu $t rc=$? ($(el))"; grep k_gather "$R/ncu_t$t.csv" | awk -F'","' '{print $(NF-1), $NF}' | tr -d '"' | sort | uniq -c
done
pack
echo "== total $(el)"
