#!/usr/bin/env bash
# run_r107_h200.sh - round 14, one H200, into $OUT/r107: r106 again after the tail's loads were made unconditional (clamped addresses: r106 showed them issued one by one); k_select with the
# tail's loads batched over (expert, chunk) pairs and the in-block scatter's
# loads batched: gpu_moe (now with mode 2 at 8 / 16 / 32 tokens per
# selection block, the same bits) and gpu_moe_api, then bench moe at
# 129-8192 tokens, fused, two passes: the previous binary (tpmoe_old, commit
# c86b6c8) and the new one with --select-tokens 0 (by size), 16 and 32;
# then k_select's kernel time at 256 and 8192 tokens (ncu).
# Binaries (prebuilt/bin.txz): tpmoe_old, and tpmoe, gpu_moe, gpu_moe_api of
# the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r107_h200.sh
NAME=r107
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt"
$B/gpu_moe > "$R/gpu_moe.log" 2>&1; echo "== gpu_moe rc=$? ($(el))"; grep -E "\[  (PASSED|FAILED)|FAILED" "$R/gpu_moe.log" | tail -4
for pass in 1 2; do
  for v in old auto 16 32; do
    if [ $v = old ]; then cmd="$B/tpmoe_old bench moe"; else cmd="$B/tpmoe bench moe --select-tokens ${v/auto/0}"; fi
    $cmd --preset m3 --tokens 129,256,512,1024,2048,4096,8192 --fuse-shared 1 --check 2 --gemm-hold 0 \
      --reps 40 > "$R/bench_${v}_$pass.log" 2>&1
    echo "== $v pass $pass rc=$? ($(el))"; awk '$1 ~ /^[0-9]+$/ {printf "%s %s %s | ", $1, $11, $15} END {print ""}' "$R/bench_${v}_$pass.log"
  done
done
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1"
for t in 256 8192; do
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --kernel-name regex:"k_select|k_perm" \
    --csv $M --tokens $t > "$R/ncu_t$t.csv" 2> "$R/ncu_t$t.err"
  echo "== ncu $t rc=$? ($(el))"; grep -E '"k_select|k_perm|::k_' "$R/ncu_t$t.csv" | awk -F'","' '{print $(NF-1), $NF}' | sort | uniq -c
done
pack
echo "== total $(el)"
