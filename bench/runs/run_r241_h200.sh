#!/usr/bin/env bash
# run_r241_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r241: round 42's down
# epilogue (staged in shared memory, full 64-row blocks stored by TMA; gate_up keeps its direct
# stores) against the library before it (9a0b605), and gpu_act drawing from tests/util/splitmix.h.
#   1. gpu_act, gpu_moe_paths, gpu_moe, gpu_moe_api of the new library;
#   2. Nsight Compute, SpeedOfLight, clocks locked to base, layouts m3rr and dense1, form 2:
#      wg_base (9a0b605's kernel file), wg_new (the new one); their fingerprints must agree;
#   3. free-running probe, 200 calls, m3rr, order base new base new;
#   4. the issue's MoE command, fused layer, old and new alternating (a b a b):
#        tpmoe[_old] bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared 1 --check 2
#   5. the status: tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (stripped): tpmoe, gpu_act, gpu_moe, gpu_moe_paths, gpu_moe_api
# (compact Release builds of the new tree), tpmoe_old (9a0b605), wg_base, wg_new (bench/micro/
# wg_probe.cu with WG_SRC = 9a0b605's src/moe/moe_cuda_gemm_sm90a.cu / the new one).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r241_h200.sh
NAME=r241
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
done
pack
for l in m3rr dense1; do
  for v in base new; do
    timeout 100 ncu --clock-control base --section SpeedOfLight --kernel-name regex:k_wg_gemm_p \
      --launch-skip 2 --launch-count 2 "$B/wg_$v" --layout $l --form 2 --reps 1 > "$R/ncu_${l}_$v.log" 2>&1
    printf "== ncu %-6s %-4s rc=%d (%s): %s\n" $l $v $? "$(el)" \
      "$(awk '/Duration/ {printf "%s %s", $NF, $(NF-1)} /L2 Cache Throughput/ {printf " L2 %s%%", $NF} /Compute \(SM\) Throughput/ {printf " SM %s%% | ", $NF}' "$R/ncu_${l}_$v.log")"
  done
  pack
done
for v in base new base new; do
  n=m3rr_$v; [ -e "$R/probe_$n.log" ] && n=${n}b
  timeout 60 "$B/wg_$v" --layout m3rr --form 2 --reps 200 --json "$R/probe_$n.json" > "$R/probe_$n.log" 2>&1
  printf "== %-10s rc=%d %s\n" $n $? "$(grep "^m3rr" "$R/probe_$n.log" | awk '{print $5, $7, $8, $11}')"
done
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$R/clocks.csv" 2>&1 &
S=$!
for pass in a b; do
  for bin in tpmoe_old tpmoe; do
    n=${bin}_$pass
    timeout 200 "$B/$bin" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared 1 --check 2 \
      --json "$R/$n.json" > "$R/$n.log" 2>&1
    printf "== %-12s rc=%d (%s): " $n $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s | ", $1, $15, $18, $19, $20}' "$R/$n.log"; echo
    pack
  done
done
n=status
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-12s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
kill $S 2>/dev/null; wait $S 2>/dev/null
pack
echo "== r241 done ($(el))"
