#!/usr/bin/env bash
# run_r237_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r237: a lag between the
# persistent kernel's two consumer warpgroups (bench/micro/var/lag.patch over round 41's kernel):
# warpgroup 1 starts each tile once warpgroup 0 has issued its first LAG stages, so one
# warpgroup's wgmmas cover the other's epilogue. LAG 0 is the library's kernel; every LAG gives
# the same bits (the probe's fingerprints must match).
#   1. Nsight Compute, SpeedOfLight, clocks locked to base, layouts m3rr and dense1, form 2,
#      LAG 0 1 2 3 (gate_up and down of one call);
#   2. free-running, 200 calls, m3rr and dense1, order 0 1 2 3 0 2.
# Binaries: prebuilt/bin.txz (wg_lag0..3, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r237_h200.sh
NAME=r237
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for l in m3rr dense1; do
  for v in 0 1 2 3; do
    timeout 100 ncu --clock-control base --section SpeedOfLight --kernel-name regex:k_wg_gemm_p \
      --launch-skip 2 --launch-count 2 "$B/wg_lag$v" --layout $l --form 2 --reps 1 > "$R/ncu_${l}_$v.log" 2>&1
    printf "== ncu %-6s LAG %d rc=%d (%s): %s\n" $l $v $? "$(el)" \
      "$(awk '/Duration/ {printf "%s %s", $NF, $(NF-1)} /L2 Cache Throughput/ {printf " L2 %s%%", $NF} /Compute \(SM\) Throughput/ {printf " SM %s%% | ", $NF}' "$R/ncu_${l}_$v.log")"
  done
  pack
done
for l in m3rr dense1; do
  for v in 0 1 2 3 0 2; do
    n=${l}_$v; [ -e "$R/probe_$n.log" ] && n=${n}b
    timeout 60 "$B/wg_lag$v" --layout $l --form 2 --reps 200 --json "$R/probe_$n.json" > "$R/probe_$n.log" 2>&1
    printf "== %-10s rc=%d %s\n" $n $? "$(grep "^$l" "$R/probe_$n.log" | awk '{print $5, $7, $8, $11}')"
  done
  pack
done
echo "== r237 done ($(el))"
