#!/usr/bin/env bash
# run_r223_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r223: round 37's second
# step. The persistent GEMM's CTAs copy the tile table and the offsets into shared memory at the
# start of every launch that is not the early one, so the item decode at each item boundary (a
# binary search of eight dependent loads, in the consumers and the producer) reads shared memory
# instead of making L2 round trips while the tensor cores wait.
#   1. gpu_moe_paths (prefill_gemm_modes: every form bit-equal; the early and chained launches),
#      gpu_moe, gpu_moe_api; the benchmarks run only if gpu_moe_paths passed;
#   2. the fused m3 layer at 128, 1024, 4096 and 8192 tokens, this build (tpmoe) against r222's
#      (tpmoe_r222: the same library without the copies), the default forms, alternating, two
#      passes; then form 4 (4-CTA clusters) of this build at 4096 and 8192.
# Binaries: prebuilt/bin.txz (tpmoe, gpu_moe*, tpmoe_r222: compact Release builds, stripped).
NAME=r223
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
  bm tpmoe_r222 old_$pass --fuse-shared 1 --tokens 128,1024,4096,8192
  bm tpmoe new_$pass --fuse-shared 1 --tokens 128,1024,4096,8192
  pack
done
bm tpmoe q4_a --fuse-shared 1 --tokens 4096,8192 --prefill-cluster 4
pack
echo "== r223 done ($(el))"
