#!/usr/bin/env bash
# run_r144_h200.sh - one H200, into $OUT/r144: the prefill's shared plan at 17-128 tokens now that
# the split and unfused plans run their dense MLP beside the routing (r142). r143 had the unfused
# layer 3-7 us ahead of the fused slot plan at 32 tokens in three passes of three. Fused slot,
# fused split (beside the routing), unfused; whole layer; three passes interleaved:
#   tpmoe bench moe --preset m3 --tokens 17,24,32,48,64,96,128 --gemm-hold 0 --check 2
#     --fuse-shared 1 --shared-plan slot | --fuse-shared 1 --shared-plan split | --fuse-shared 0
# Binaries (prebuilt/bin.txz): tpmoe of r143.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r144_h200.sh
NAME=r144
. bench/device_env.sh
bm() { # name extra...
  local n=$1; shift
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 17,24,32,48,64,96,128 --gemm-hold 0 --check 2 "$@" \
    > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s:%s %s sel!%s | ", $1, $4, $15, $20}' "$R/$n.log"; echo
}
for p in 1 2 3; do
  bm "slot_p$p" --fuse-shared 1 --shared-plan slot
  bm "split_p$p" --fuse-shared 1 --shared-plan split
  bm "unf_p$p" --fuse-shared 0
done
pack
echo "== total $(el)"
