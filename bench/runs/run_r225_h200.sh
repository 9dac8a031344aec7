#!/usr/bin/env bash
# run_r225_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r225: round 37's third
# step. The persistent GEMM (forms 2 and 3) gets two rings instead of one: 3 stages of A (16 KB, L2
# hits mostly) and 5 of the weights (32 KB, DRAM mostly), each with its own barriers and its own
# producer thread (thread 0 the weights and the item taker, thread 32 the A rows), so about twice
# the weight bytes are in flight (r224: the consumers waited on full stages ~25% of their time).
#   1. gpu_moe_paths (prefill_gemm_modes: every form bit-equal; the early and chained launches),
#      gpu_moe, gpu_moe_api; the benchmarks run only if gpu_moe_paths passed;
#   2. the fused m3 layer at 128, 1024, 4096 and 8192 tokens, this build (tpmoe) against HEAD's
#      (tpmoe_head, 829147c: one ring of 4 x 48 KB), alternating, two passes; then ncu (clocks locked)
#      on this build's gate_up at 8192 tokens.
# Binaries: prebuilt/bin.txz (tpmoe, gpu_moe*, tpmoe_head: compact Release builds, stripped).
NAME=r225
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
timeout 300 "$B/gpu_moe_paths" > "$R/gpu_moe_paths.log" 2>&1
rc=$?
echo "== gpu_moe_paths rc=$rc ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/gpu_moe_paths.log" | head -5
pack
[ $rc = 0 ] || { echo "gpu_moe_paths failed: no benchmarks"; tail -20 "$R/gpu_moe_paths.log"; exit 1; }
for t in gpu_moe gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/$t.log" | head -5
done
pack
bm() { # binary name args...
  local b=$1 n=$2; shift 2
  timeout 150 "$B/$b" bench moe --preset m3 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-10s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s/%s/%s ", $1, $5, $12, $15, $18, $20}')"
}
for pass in a b; do
  bm tpmoe_head old_$pass --fuse-shared 1 --tokens 128,1024,4096,8192
  bm tpmoe new_$pass --fuse-shared 1 --tokens 128,1024,4096,8192
  pack
done
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1 --tokens 8192"
timeout 200 ncu --clock-control base --section SpeedOfLight --section WarpStateStats \
  --metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,lts__t_bytes.sum \
  --import-source no --kernel-name regex:k_wg_gemm_p --launch-count 2 -o /tmp/r225 $M > "$R/ncu.log" 2>&1
echo "== ncu rc=$? ($(el))"
ncu --import /tmp/r225.ncu-rep --page details > "$R/details.txt" 2>&1
grep -E "^  [a-zA-Z_]|Duration|SM Frequency|L2 Cache Throughput|hmma|lts__t_bytes|Warp Cycles Per Issued" "$R/details.txt" | head -20
pack
echo "== r225 done ($(el))"
