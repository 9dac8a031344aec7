#!/usr/bin/env bash
# run_r234_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r234: r233's EPI 4 and 5 again
# (in r233 they failed with a launch failure: the clustered form's TMA loads were still issued, with
# no expect_tx; bench/micro/var/epi.cu, now bench/micro/var/epi.patch, leaves every load out) beside EPI 0 on the same machine:
#   EPI 0  the library's kernel;
#   EPI 4  no loads: wgmma and the epilogue on a zeroed ring;
#   EPI 5  no loads and no stores: wgmma and the epilogue's arithmetic alone;
#   "9"    not an EPI build: wg_probe over a23d242's kernel (round 38's try, reverted: the epilogue
#          staged in shared memory, full 64-row blocks stored by TMA), to time down's stores under
#          locked clocks (r227 timed it only free-running, for the whole call).
# The same steps as r233 (Nsight Compute at base clocks; free-running, 200 calls, order 0 4 5 0).
# Binaries: prebuilt/bin.txz (wg_epi0, 4, 5, and wg_epi9 = a23d242's kernel; stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r234_h200.sh
NAME=r234
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for l in dense1 m3rr; do
  for v in 0 4 5 9; do
    timeout 100 ncu --clock-control base --section SpeedOfLight --kernel-name regex:k_wg_gemm_p \
      --launch-skip 2 --launch-count 2 "$B/wg_epi$v" --layout $l --form 2 --reps 1 > "$R/ncu_${l}_$v.log" 2>&1
    printf "== ncu %-6s EPI %d rc=%d (%s): %s\n" $l $v $? "$(el)" \
      "$(awk '/Duration/ {printf "%s %s", $NF, $(NF-1)} /L2 Cache Throughput/ {printf " L2 %s%%", $NF} /Compute \(SM\) Throughput/ {printf " SM %s%% | ", $NF}' "$R/ncu_${l}_$v.log")"
  done
  pack
done
for l in dense1 m3rr; do
  for v in 0 4 5 9 0; do
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
echo "== r234 done ($(el))"
