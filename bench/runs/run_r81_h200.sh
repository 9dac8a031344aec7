#!/usr/bin/env bash
# run_r81_h200.sh - round 12, one H200, into $OUT/r81: where the own wgmma
# prefill GEMM's time goes at 8192 tokens (Nsight Compute's full set on the
# gate_up and down launches of prefill_cluster 2 with bands of 16; nvidia-smi
# sampling SM clock and power through a long bench of the same), then the
# three forms (prefill_cluster 0 / 2 / 3, bands of 16) at 32-2048 tokens, in
# alternation, twice, to place the switch points.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the r80 commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r81_h200.sh
NAME=r81
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.sm,power.limit,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
for v in 0:0 2:16; do
  pc=${v%%:*}; bd=${v##*:}
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 100 > "$R/smi_pc${pc}_b$bd.csv" 2>&1 &
  SP=$!
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --prefill-cluster $pc --prefill-band $bd \
    --check 0 --reps 200 > "$R/long_pc${pc}_b$bd.log" 2>&1
  echo "== long bench prefill_cluster=$pc band=$bd rc=$? ($(el))"
  kill $SP; wait $SP 2>/dev/null
  sed -n '/^[0-9]/p' "$R/long_pc${pc}_b$bd.log" | awk '{print $1, $12, $15, $18}'
  awk -F', ' 'NR>1 {c[NR]=$2; p[NR]=$4} END {n=0; for (i in c) n++; print n " samples"}' "$R/smi_pc${pc}_b$bd.csv"
  sort -t, -k2 "$R/smi_pc${pc}_b$bd.csv" | awk -F', ' 'NR>1 && $2+0 > 0 {print $2, $4, $6}' | sort | uniq -c | sort -rn | head -6
done
pack
timeout 200 ncu --clock-control none --set full --kernel-name regex:k_wg_gemm_p --launch-count 2 \
  "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --check 0 --reps 1 --prefill-cluster 2 \
  --prefill-band 16 > "$R/ncu_full_pc2_b16.txt" 2>&1
echo "== ncu full rc=$? ($(el))"
grep -E "k_wg_gemm_p|Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|Executed Ipc|Warp Cycles Per Issued|Stall|Tensor|One or More Eligible|No Eligible" "$R/ncu_full_pc2_b16.txt" | head -70
pack
for pass in 1 2; do
  for pc in 0 2 3; do
    timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 32,64,128,256,512,2048 --fuse-shared 1 --prefill-cluster $pc \
      --prefill-band 16 --check 1 --json "$R/pc${pc}_p$pass.json" > "$R/pc${pc}_p$pass.log" 2>&1
    echo "== prefill_cluster=$pc band=16 pass $pass rc=$? ($(el))"
    sed -n '/^[0-9]/p' "$R/pc${pc}_p$pass.log" | awk '{print $1, $12, $15, $18}'
  done
  pack
done
echo "== total $(el)"
