#!/usr/bin/env bash
# run_r243_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r243: the status of round
# 42's library (1ce1583; the first H200 run of it if an H200 comes) and r242's comparison, which
# did not run: down's partial 64-row blocks stored by the threads from the staging buffer (1ce1583)
# or straight from the accumulators (bench/micro/var/partial_direct.patch), and the 8192-token
# plans re-measured with the new down kernel.
#   1. gpu_act, gpu_moe_paths, gpu_moe, gpu_moe_api of 1ce1583, then of the patched tree (_pd);
#   2. the status: tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#   3. the layer at 1024 and 8192 tokens, fused, order new pd new pd:
#        tpmoe_X bench moe --preset m3 --tokens 1024,8192 --fuse-shared 1 --check 2
#   4. Nsight Compute, SpeedOfLight, clocks locked to base, layout m3rr, form 2: wg_new, wg_pd
#      (their fingerprints must agree with r241's b68dc7a5a2ced327);
#   5. free-running probe, 200 calls, m3rr, order new pd new pd;
#   6. 8192 tokens, fused, tpmoe (1ce1583), two passes of: the defaults (split plan, form 2),
#      --shared-plan slot, --prefill-cluster 3, --shared-plan slot --prefill-cluster 3,
#      --prefill-down-early 16384.
# Binaries: prebuilt/bin.txz (stripped): tpmoe, gpu_act, gpu_moe, gpu_moe_paths, gpu_moe_api
# (1ce1583), tpmoe_pd and gpu_*_pd (1ce1583 + partial_direct.patch), all compact Release builds;
# wg_new, wg_pd (bench/micro/wg_probe.cu with -DWG_SRC = the kernel file of 1ce1583 / with the
# patch).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r243_h200.sh
NAME=r243
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$R/clocks.csv" 2>&1 &
S=$!
for sfx in "" _pd; do
  for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
    timeout 200 "$B/$t$sfx" > "$R/$t$sfx.log" 2>&1
    echo "== $t$sfx rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t$sfx.log" | head -5
  done
  pack
done
n=status
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-12s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
pack
for pass in a b; do
  for bin in tpmoe tpmoe_pd; do
    n=${bin}_$pass
    timeout 100 "$B/$bin" bench moe --preset m3 --tokens 1024,8192 --fuse-shared 1 --check 2 \
      --json "$R/$n.json" > "$R/$n.log" 2>&1
    printf "== %-12s rc=%d (%s): " $n $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $12, $13, $15, $18, $20}' "$R/$n.log"; echo
  done
  pack
done
for v in new pd; do
  timeout 100 ncu --clock-control base --section SpeedOfLight --kernel-name regex:k_wg_gemm_p \
    --launch-skip 2 --launch-count 2 "$B/wg_$v" --layout m3rr --form 2 --reps 1 > "$R/ncu_m3rr_$v.log" 2>&1
  printf "== ncu m3rr %-4s rc=%d (%s): %s\n" $v $? "$(el)" \
    "$(awk '/Duration/ {printf "%s %s", $NF, $(NF-1)} /L2 Cache Throughput/ {printf " L2 %s%%", $NF} /Compute \(SM\) Throughput/ {printf " SM %s%% | ", $NF}' "$R/ncu_m3rr_$v.log")"
done
for v in new pd new pd; do
  n=m3rr_$v; [ -e "$R/probe_$n.log" ] && n=${n}b
  timeout 60 "$B/wg_$v" --layout m3rr --form 2 --reps 200 --json "$R/probe_$n.json" > "$R/probe_$n.log" 2>&1
  printf "== %-10s rc=%d %s\n" $n $? "$(grep "^m3rr" "$R/probe_$n.log" | awk '{print $5, $7, $8, $11}')"
done
pack
for pass in a b; do
  i=0
  for opts in "" "--shared-plan slot" "--prefill-cluster 3" "--shared-plan slot --prefill-cluster 3" "--prefill-down-early 16384"; do
    n=plan${i}_$pass; i=$((i+1))
    timeout 100 "$B/tpmoe" bench moe --preset m3 --tokens 8192 --fuse-shared 1 --check 2 $opts \
      --json "$R/$n.json" > "$R/$n.log" 2>&1
    printf "== %-8s %-40s rc=%d (%s): " $n "[$opts]" $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s %s | ", $1, $4, $5, $12, $13, $15, $18}' "$R/$n.log"; echo
  done
  pack
done
kill $S 2>/dev/null; wait $S 2>/dev/null
pack
echo "== r243 done ($(el))"
