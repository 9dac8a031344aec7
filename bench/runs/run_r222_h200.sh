#!/usr/bin/env bash
# run_r222_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r222: round 37, the
# prefill GEMM's persistent 4-CTA clusters (prefill_cluster 4: two pairs per cluster; a row-tile
# pair over two weight blocks also shares its A tile, each CTA loading one 64-row half into
# itself and the cross CTA), the next step r221's profile pointed to (the own GEMM is L2-bound).
#   1. gpu_moe_paths (prefill_gemm_modes: form 4 bit-equal to the other forms, 4 presets, 1-5000
#      tokens), gpu_moe, gpu_moe_api; the benchmarks run only if gpu_moe_paths passed;
#   2. the fused m3 layer at 4096 and 8192 tokens, form 2 (the default there) against form 4,
#      alternating, two passes;
#   3. Nsight Compute (clocks locked to base) on form 4's gate_up and down at 8192 tokens (r221
#      profiled form 2 the same way).
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r222_h200.sh
NAME=r222
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
timeout 300 "$B/gpu_moe_paths" > "$R/gpu_moe_paths.log" 2>&1
rc=$?
echo "== gpu_moe_paths rc=$rc ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/gpu_moe_paths.log" | head -5
grep -E "m3-mini-wide" "$R/gpu_moe_paths.log" | head -8
pack
[ $rc = 0 ] || { echo "gpu_moe_paths failed: no benchmarks"; tail -20 "$R/gpu_moe_paths.log"; exit 1; }
for t in gpu_moe gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/$t.log" | head -5
done
pack
bm() { # name args...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-10s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s:%s/%s/%s/%s/%s ", $1, $2, $5, $12, $15, $18, $20}')"
}
for pass in a b; do
  bm c2_$pass --fuse-shared 1 --tokens 4096,8192 --prefill-cluster 2
  bm c4_$pass --fuse-shared 1 --tokens 4096,8192 --prefill-cluster 4
  pack
done
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1 --tokens 8192 --prefill-cluster 4"
SECS="--section SpeedOfLight --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy"
MET="--metrics sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,lts__t_bytes.sum,lts__t_sector_hit_rate.pct"
timeout 200 ncu --clock-control base $SECS $MET --import-source no --kernel-name regex:k_wg_gemm_p --launch-count 2 \
  -o /tmp/r222_q $M > "$R/ncu_q.log" 2>&1
echo "== ncu rc=$? ($(el))"
ncu --import /tmp/r222_q.ncu-rep --page details > "$R/details_q.txt" 2>&1
grep -E "^  [a-zA-Z_]|Duration|SM Frequency|L2 Cache Throughput|DRAM Throughput|hmma|Grid Size|Cluster Size|lts__t_bytes|lts__t_sector_hit|dram__bytes" "$R/details_q.txt" | head -40
pack
echo "== r222 done ($(el))"
