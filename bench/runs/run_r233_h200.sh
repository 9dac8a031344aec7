#!/usr/bin/env bash
# run_r233_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r233: what the prefill GEMM's
# time is made of. Round 38's "no epilogue" probe (r226, r227: 14-20% faster) had, as its SASS shows,
# no wgmma left either: with the accumulators dead, ptxas drops the HGMMAs (one placeholder
# HGMMA.64x8x16 on RZ stays). So it timed the ring's loads and barriers alone. Five builds of
# bench/micro/wg_probe.cu over bench/micro/var/epi.cu, now bench/micro/var/epi.patch (0fb8b78's moe_cuda_gemm_sm90a.cu with an EPI
# switch; see its top comment):
#   EPI 0  the library's kernel;
#   EPI 1  no output stores (every value computed);
#   EPI 3  no epilogue, hence no wgmma: the loads and barriers alone (round 38's noepi);
#   EPI 4  no loads: wgmma and the epilogue on a zeroed ring;
#   EPI 5  no loads and no stores: wgmma and the epilogue's arithmetic alone.
# Layouts dense1 (one expert of 40960 rows) and m3rr (the 8192-token split plan's routed experts),
# form 2 (the layer's at 8192 tokens):
#   1. Nsight Compute, SpeedOfLight only, clocks locked to base: gate_up and down of one call;
#   2. free-running, 200 timed calls per run, the SM clock and board power sampled every 50 ms;
#      the order 0 1 3 4 5 0 per layout.
# Binaries: prebuilt/bin.txz (wg_epi0, 1, 3, 4, 5; stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r233_h200.sh
NAME=r233
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for l in dense1 m3rr; do
  for v in 0 1 3 4 5; do
    timeout 100 ncu --clock-control base --section SpeedOfLight --kernel-name regex:k_wg_gemm_p \
      --launch-skip 2 --launch-count 2 "$B/wg_epi$v" --layout $l --form 2 --reps 1 > "$R/ncu_${l}_$v.log" 2>&1
    printf "== ncu %-6s EPI %d rc=%d (%s): %s\n" $l $v $? "$(el)" \
      "$(awk '/Duration/ {printf "%s %s", $NF, $(NF-1)} /L2 Cache Throughput/ {printf " L2 %s%%", $NF} /Compute \(SM\) Throughput/ {printf " SM %s%% | ", $NF}' "$R/ncu_${l}_$v.log")"
  done
  pack
done
for l in dense1 m3rr; do
  for v in 0 1 3 4 5 0; do
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
echo "== r233 done ($(el))"
