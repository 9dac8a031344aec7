#!/usr/bin/env bash
# run_r184_h200.sh - one H200, into $OUT/r184: is the fused layer's 3-5 us deficit at 8 tokens in
# `--fuse-shared both` (r171, r181, r183) the order of the two layers in one process? At 5-8 tokens
# both layers run the same work (the split plan: the shared expert as the dense cuBLAS MLP beside
# the routing).
#   1. one process each, alternating, two passes: --fuse-shared both (fused layer first) and
#      --fuse-shared 0,1 (unfused layer first), m3, 1 and 5-8 tokens;
#   2. separate processes, alternating, three each: --fuse-shared 1 and --fuse-shared 0, 5-8 tokens.
# Binary (prebuilt/bin.txz): tpmoe of this script's commit (release, sm_90 + sm_90a, stripped).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r184_h200.sh
NAME=r184
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
bm() { # name tokens args...
  local n=$1 tk=$2; shift 2
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens $tk --check 1 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-10s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s/%s:%s/%s/%s ", $1, $2, $15, $13, $11}')"
}
for p in 1 2; do
  bm both_p$p 1,5,6,7,8 --fuse-shared both
  bm rev_p$p 1,5,6,7,8 --fuse-shared 0,1
  pack
done
for p in 1 2 3; do
  bm f1_p$p 5,6,7,8 --fuse-shared 1
  bm f0_p$p 5,6,7,8 --fuse-shared 0
  pack
done
echo "== total $(el)"
