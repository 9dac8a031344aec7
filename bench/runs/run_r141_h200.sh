#!/usr/bin/env bash
# run_r141_h200.sh - one H200, into $OUT/r141: where the wgmma prefill's shared plan should turn
# from the slot (the shared expert as one more expert of the grouped launches) to the split plan
# (the shared expert as the dense cuBLAS MLP into its own rows). r140 had the slot ahead at 4096
# tokens and behind the unfused layer at 8192 in three passes of three. Fused slot, fused split,
# unfused; whole layer; three passes interleaved:
#   tpmoe bench moe --preset m3 --tokens 6144,8192,12288,16384 --gemm-hold 0 --check 2
#     --fuse-shared 1 --shared-plan slot | --fuse-shared 1 --shared-plan split | --fuse-shared 0
# Binaries (prebuilt/bin.txz): tpmoe (d9cd458).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r141_h200.sh
NAME=r141
. bench/device_env.sh
bm() { # name extra...
  local n=$1; shift
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 6144,8192,12288,16384 --gemm-hold 0 --check 2 "$@" \
    > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s:%s %s (exp %s) sel!%s | ", $1, $4, $15, $12, $20}' "$R/$n.log"; echo
}
for p in 1 2 3; do
  bm "slot_p$p" --fuse-shared 1 --shared-plan slot
  bm "split_p$p" --fuse-shared 1 --shared-plan split
  bm "unf_p$p" --fuse-shared 0
  pack
done
echo "== total $(el)"
