#!/usr/bin/env bash
# run_r6_h200x2.sh - round 6 on 2 x H200 in one device call: the GPU tests
# (k_down3 bitwise against the other decode kernels, the default all-reduce
# kernel set 5), the MoE decode rows with the two down kernels side by side,
# Nsight Compute's per-kernel times of the decode forward with k_down3, and
# a full Nsight Compute report of the routing launch (stall reasons, hot
# source lines). Binaries as in run_final_h200x2.sh (prebuilt/bin.tgz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r6_h200x2.sh
NAME=${NAME:-r6}
. bench/device_env.sh

for t in ${TESTS:-gpu_moe gpu_allreduce gpu_comm_api gpu_moe_api}; do
  TPMOE_TOOL=$B/tpmoe timeout 90 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack

for dk in 0 1; do
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens "${MOE_TOKENS:-1,2,4,8}" --fuse-shared both --flush read \
    --down-kernel $dk --check 2 --json "$R/moe_m3_tp1_dk$dk.json" > "$R/bench_moe_tp1_dk$dk.log" 2>&1
  echo "== bench moe down kernel $dk rc=$? ($(el))"
  sed -n '/^tokens/,$p' "$R/bench_moe_tp1_dk$dk.log" | cut -c1-200
  pack
done

if command -v ncu > /dev/null; then
  for T in 1 8; do
    timeout 100 ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread \
      -k regex:'k_route|k_gate|k_down|k_comb' --launch-skip 10 --launch-count 8 --csv \
      "$B/tpmoe" bench moe --preset m3 --tokens $T --fuse-shared 1 --down-kernel 1 --reps 2 --check 1 \
      > "$R/ncu_moe_t$T.csv" 2> "$R/ncu_moe_t$T.err"
    echo "== ncu moe tokens $T rc=$? ($(el))"
    grep -E "gpu__time_duration|dram__throughput" "$R/ncu_moe_t$T.csv" | awk -F'","' '{print $5" | "$(NF-2)" | "$NF}' | cut -c1-150 | head -8
    pack
  done
  timeout 120 ncu --clock-control none --set full -k regex:k_route_fused --launch-skip 3 --launch-count 1 \
    -o "$R/route_t1" "$B/tpmoe" bench moe --preset m3 --tokens 1 --fuse-shared 1 --reps 2 --check 1 \
    > "$R/ncu_route_run.log" 2>&1
  echo "== ncu route full rc=$? ($(el))"
  ncu -i "$R/route_t1.ncu-rep" --page details > "$R/ncu_route_details.txt" 2>&1
  ncu -i "$R/route_t1.ncu-rep" --page source --csv --print-source cuda > "$R/ncu_route_source.csv" 2>&1
  rm -f "$R/route_t1.ncu-rep"
  grep -E "Duration|Stall|Warp Cycles|Issued|Eligible|Registers|Achieved Occ" "$R/ncu_route_details.txt" | head -40
  pack
fi
echo "== total $(el)"
