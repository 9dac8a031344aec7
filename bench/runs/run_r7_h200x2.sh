#!/usr/bin/env bash
# run_r7_h200x2.sh - round 7 on 2 x H200 in one device call: gpu_moe (the
# bulk-copy down kernel k_down4 bitwise against the others), the MoE decode
# rows with down kernels 0 and 1 side by side (read flush), the routing with
# a warm L2 (--flush none), and Nsight Compute's per-kernel times with k_down4.
# Binaries as in run_final_h200x2.sh (prebuilt/bin.tgz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r7_h200x2.sh
NAME=${NAME:-r7}
. bench/device_env.sh

for t in ${TESTS:-gpu_moe}; do
  TPMOE_TOOL=$B/tpmoe timeout 90 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack

for dk in 1 0; do
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens "${MOE_TOKENS:-1,2,4,8}" --fuse-shared 1 --flush read \
    --down-kernel $dk --check 2 --json "$R/moe_m3_tp1_dk$dk.json" > "$R/bench_moe_tp1_dk$dk.log" 2>&1
  echo "== bench moe down kernel $dk rc=$? ($(el))"
  sed -n '/^# harness/,$p' "$R/bench_moe_tp1_dk$dk.log" | cut -c1-200
  pack
done
timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --fuse-shared 1 --flush none \
  --check 1 --json "$R/moe_m3_tp1_warm.json" > "$R/bench_moe_tp1_warm.log" 2>&1
echo "== bench moe warm rc=$? ($(el))"
sed -n '/^# harness/,$p' "$R/bench_moe_tp1_warm.log" | cut -c1-200
pack

if command -v ncu > /dev/null; then
  for T in 1 8; do
    timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread \
      -k regex:'k_down' --launch-skip 4 --launch-count 4 --csv \
      "$B/tpmoe" bench moe --preset m3 --tokens $T --fuse-shared 1 --down-kernel 1 --reps 2 --check 1 \
      > "$R/ncu_moe_t$T.csv" 2> "$R/ncu_moe_t$T.err"
    echo "== ncu moe tokens $T rc=$? ($(el))"
    grep -E "gpu__time_duration|dram__throughput" "$R/ncu_moe_t$T.csv" | awk -F'","' '{print $5" | "$(NF-2)" | "$NF}' | cut -c1-150 | head -8
    pack
  done
fi
echo "== total $(el)"
