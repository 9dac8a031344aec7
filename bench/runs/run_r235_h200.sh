#!/usr/bin/env bash
# run_r235_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r235: what gate_up's
# activation costs, and a specialized epilogue. r234 found gate_up's wgmma + epilogue alone (no
# loads, no stores: EPI 5) 20-23% over its tensor time at locked clocks, down's 9-14%. Builds of
# bench/micro/wg_probe.cu over bench/micro/var/epi.cu, now bench/micro/var/epi.patch (its top comment):
#   EPI 0  the library's kernel;              EPI 5  no loads, no stores;
#   EPI 6  5 with the activation replaced by g + u;
#   EPI 7  5 with gate_up's epilogue specialized (swiglu-oai, no bias: no per-value branch);
#   EPI 8  the library's kernel with 7's epilogue (the same bits as 0: the fingerprints must match).
# Layouts dense1 and m3rr, form 2:
#   1. Nsight Compute, SpeedOfLight, clocks locked to base: gate_up and down of one call;
#   2. free-running, 200 calls, order 0 8 0 8, the SM clock and power sampled every 50 ms.
# Binaries: prebuilt/bin.txz (wg_epi0, 5, 6, 7, 8; stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r235_h200.sh
NAME=r235
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for l in m3rr dense1; do
  for v in 0 8 5 6 7; do
    timeout 100 ncu --clock-control base --section SpeedOfLight --kernel-name regex:k_wg_gemm_p \
      --launch-skip 2 --launch-count 2 "$B/wg_epi$v" --layout $l --form 2 --reps 1 > "$R/ncu_${l}_$v.log" 2>&1
    printf "== ncu %-6s EPI %d rc=%d (%s): %s\n" $l $v $? "$(el)" \
      "$(awk '/Duration/ {printf "%s %s", $NF, $(NF-1)} /L2 Cache Throughput/ {printf " L2 %s%%", $NF} /Compute \(SM\) Throughput/ {printf " SM %s%% | ", $NF}' "$R/ncu_${l}_$v.log")"
  done
  pack
done
for l in m3rr dense1; do
  for v in 0 8 0 8; do
    n=${l}_$v; [ -e "$R/probe_$n.log" ] && n=${n}b
    nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 50 > "$R/clocks_$n.csv" 2>&1 &
    S=$!
    timeout 60 "$B/wg_epi$v" --layout $l --form 2 --reps 200 --json "$R/probe_$n.json" > "$R/probe_$n.log" 2>&1
    rc=$?
    kill $S 2>/dev/null; wait $S 2>/dev/null
    printf "== %-10s rc=%d %s  clock/power: %s\n" $n $rc "$(grep "^$l" "$R/probe_$n.log" | awk '{print $5, $7, $8, $11}')" \
      "$(awk -F', ' '{gsub(/ MHz/, "", $2); gsub(/ W/, "", $3); if ($3 > 150) {c += $2; p += $3; k++}} END {if (k) printf "%.0f MHz %.0f W (%d samples)", c / k, p / k, k}' "$R/clocks_$n.csv")"
  done
  pack
done
echo "== r235 done ($(el))"
