#!/usr/bin/env bash
# run_r239_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r239: the activation's
# clamps as comparisons (a NaN gate or up stays NaN, as on the CPU) and the new GPU test of the
# activation arithmetic.
#   1. gpu_act (new), gpu_moe_paths, gpu_moe, gpu_moe_api;
#   2. Nsight Compute, SpeedOfLight, clocks locked to base, layouts m3rr and dense1, form 2:
#      wg_new (r236's: fminf / fmaxf clamps) against wg_cmp (comparison clamps);
#   3. free-running probe, 200 calls, m3rr, order new cmp new cmp;
#   4. the fused layer once: tpmoe bench moe --preset m3 --tokens 1,32,1024,8192 --fuse-shared 1 --check 2
# Binaries: prebuilt/bin.txz (stripped): tpmoe, gpu_act, gpu_moe, gpu_moe_paths, gpu_moe_api
# (compact Release builds of the tree), wg_new (r236's), wg_cmp (wg_probe over this tree's kernel).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r239_h200.sh
NAME=r239
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|worst|special" "$R/$t.log" | head -8
  pack
done
for l in m3rr dense1; do
  for v in new cmp; do
    timeout 100 ncu --clock-control base --section SpeedOfLight --kernel-name regex:k_wg_gemm_p \
      --launch-skip 2 --launch-count 2 "$B/wg_$v" --layout $l --form 2 --reps 1 > "$R/ncu_${l}_$v.log" 2>&1
    printf "== ncu %-6s %-4s rc=%d (%s): %s\n" $l $v $? "$(el)" \
      "$(awk '/Duration/ {printf "%s %s", $NF, $(NF-1)} /L2 Cache Throughput/ {printf " L2 %s%%", $NF} /Compute \(SM\) Throughput/ {printf " SM %s%% | ", $NF}' "$R/ncu_${l}_$v.log")"
  done
done
pack
for v in new cmp new cmp; do
  n=m3rr_$v; [ -e "$R/probe_$n.log" ] && n=${n}b
  timeout 60 "$B/wg_$v" --layout m3rr --form 2 --reps 200 --json "$R/probe_$n.json" > "$R/probe_$n.log" 2>&1
  printf "== %-10s rc=%d %s\n" $n $? "$(grep "^m3rr" "$R/probe_$n.log" | awk '{print $5, $7, $8, $11}')"
done
pack
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,32,1024,8192 --fuse-shared 1 --check 2 \
  --json "$R/moe_fused.json" > "$R/moe_fused.log" 2>&1
printf "== fused rc=%d (%s): " $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s | ", $1, $15, $18, $19, $20}' "$R/moe_fused.log"; echo
pack
echo "== r239 done ($(el))"
