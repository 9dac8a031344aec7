#!/usr/bin/env bash
# run_r125_h200.sh - one H200, into $OUT/r125: TP rank 0's share of m3 at TP 2, alone on the GPU
# (`bench moe --shard 2`: inter 1536 per expert, the TP 2 layer's kernels and plans, no
# all-reduce), fused against unfused at 1-8 tokens. final17 (2 x H200, not kept) had the TP 2
# block fused 451.2 / unfused 441.8 us at 8 tokens: which plan does the fused layer lose with,
# and does another win? Passes: auto (both, twice), the slot plan, the split plan, the split
# plan after the routing (no overlap), and TP 1 for reference.
# Binaries (prebuilt/bin.txz): tpmoe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r125_h200.sh
NAME=r125
. bench/device_env.sh
T=1,2,3,4,5,6,7,8
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens $T --gemm-hold 0 --check 2 --json "$R/$n.json" "$@" \
    > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  sed -n '/^tokens/,$p' "$R/$n.log" | cut -c1-150
}
bm shard2_auto_a --shard 2 --fuse-shared both
bm shard2_slot --shard 2 --fuse-shared 1 --shared-plan slot
bm shard2_split --shard 2 --fuse-shared 1 --shared-plan split
bm shard2_split_noov --shard 2 --fuse-shared both --shared-plan split --shared-overlap 0
bm shard2_auto_b --shard 2 --fuse-shared both
pack
bm tp1_auto --fuse-shared both
pack
echo "== total $(el)"
