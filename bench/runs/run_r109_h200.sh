#!/usr/bin/env bash
# run_r109_h200.sh - round 14, one H200, into $OUT/r109: the fused layer's
# decode-path split plan now runs the unfused layer's shared MLP (bf16 into
# sh_out, added after the routed slots; the slot's fp32 rows gone): gpu_moe
# (fused == unfused bit for bit at 8 tokens) and gpu_moe_api, then bench moe
# at 4-8 tokens, fused and unfused, the previous binary (tpmoe_prev, commit
# 8af6687) and the new one in alternation, three passes each; then the
# issue's command on the new binary.
# Binaries (prebuilt/bin.txz): tpmoe_prev, and tpmoe, gpu_moe, gpu_moe_api of
# the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r109_h200.sh
NAME=r109
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$1" | head -8; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt" 2>&1
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
grep "fused (plan" "$R/gpu_moe.log"
for pass in 1 2 3; do
  for v in prev new; do
    bin=$B/tpmoe; [ $v = prev ] && bin=$B/tpmoe_prev
    $bin bench moe --preset m3 --tokens 4,5,6,8 --fuse-shared both --check 1 --gemm-hold 0 \
      --reps 40 >> "$R/bench_$v.log" 2>&1
    echo "== $v pass $pass rc=$? ($(el))"; awk '$1 ~ /^[0-9]+$/ {printf "%s/%s %s %s | ", $1, $2, $4, $15} END {print ""}' "$R/bench_$v.log" | tail -1
  done
done
pack
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both \
  --check 2 --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe tp1 rc=$? ($(el))"
sed -n '/^# device/,$p' "$R/bench_moe_tp1.log" | grep -v "^# T=" | cut -c1-210
python3 bench/plot_moe.py "$R/moe_m3_h200.png" "$R"/moe_m3_tp1.json > "$R/plot_moe.log" 2>&1
pack
echo "== total $(el)"
