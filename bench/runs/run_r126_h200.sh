#!/usr/bin/env bash
# run_r126_h200.sh - one H200, into $OUT/r126: r125 had TP 2 rank 0's share (--shard 2) faster
# with the shared slot in the GEMV launches than with the split plan at 5 tokens (304.6 against
# 309.2-312.3 us; the unfused layer 307.6-308.0), where TP 1 switches to the split plan
# (TPM_MOE_SHARED_SPLIT_MIN = 5, r86). Slot against split at 4-7 tokens for the shares of TP 2,
# 4 and 8, two alternating passes each, to place the switch by the per-rank expert size.
# Binaries (prebuilt/bin.txz): tpmoe of the working tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r126_h200.sh
NAME=r126
. bench/device_env.sh
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 4,5,6,7 --gemm-hold 0 --check 1 --fuse-shared 1 "$@" \
    > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {print $1, $4, $15}'
}
for s in 2 4 8; do
  for pass in a b; do
    bm shard${s}_slot_$pass --shard $s --shared-plan slot
    bm shard${s}_split_$pass --shard $s --shared-plan split
  done
done
pack
echo "== total $(el)"
