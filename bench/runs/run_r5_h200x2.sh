#!/usr/bin/env bash
# run_r5_h200x2.sh - round 5 on 2 x H200 in one device call: the GPU tests of
# the changed code (communicator init / fallback / variant plumbing, routing),
# the one-shot kernel sets 4 / 5 / 6 side by side with the link probes
# (write, read, write + read), the MoE decode rows with both L2 flushes, and
# Nsight Compute's per-kernel durations of one decode forward (1 and 8 tokens).
# Binaries as in run_final_h200x2.sh (built here, carried in prebuilt/bin.tgz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r5_h200x2.sh
NAME=${NAME:-r5}
. bench/device_env.sh

for t in ${TESTS:-gpu_allreduce gpu_comm_api gpu_moe gpu_moe_api}; do
  TPMOE_TOOL=$B/tpmoe timeout 90 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack

timeout 90 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none --variants 4,5,6 \
  --sizes "${AR_SIZES:-256K,512K,768K,1M,2M,4M,8M}" --iters 50 \
  --json "$R/allreduce_vars.json" > "$R/bench_allreduce_vars.log" 2>&1
echo "== bench allreduce variants rc=$? ($(el))"
cut -c1-200 "$R/bench_allreduce_vars.log"
pack

for f in write read; do
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens "${MOE_TOKENS:-1,8,32}" --fuse-shared both --flush $f \
    --check 2 --json "$R/moe_m3_tp1_$f.json" > "$R/bench_moe_tp1_$f.log" 2>&1
  echo "== bench moe flush $f rc=$? ($(el))"
  sed -n '/^# harness/,$p' "$R/bench_moe_tp1_$f.log" | cut -c1-200
  pack
done

if command -v ncu > /dev/null && [ "${NCU:-1}" = 1 ]; then
  for T in 1 8; do
    timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__registers_per_thread \
      -k regex:'k_route|k_gate|k_down|k_comb|combine' --launch-skip 10 --launch-count 12 --csv \
      "$B/tpmoe" bench moe --preset m3 --tokens $T --fuse-shared 1 --reps 2 --check 1 \
      > "$R/ncu_moe_t$T.csv" 2> "$R/ncu_moe_t$T.err"
    echo "== ncu moe tokens $T rc=$? ($(el))"
    grep -E "gpu__time_duration|dram__throughput" "$R/ncu_moe_t$T.csv" | awk -F'","' '{print $5" | "$(NF-2)" | "$NF}' | cut -c1-160 | head -24
    pack
  done
fi
echo "== total $(el)"
