#!/usr/bin/env bash
# run_r170_h200.sh - one H200, into $OUT/r170: round 27's mode 1 (k_route_fused: two-part logits,
# several 8-token tiles) against mode 3 (k_route_tc, the default from 9 tokens) at 9-63 tokens,
# m3, fused, two passes: the default; --route-tc 1:0 (mode 3 off: mode 1 below 64 tokens) with
# router experts per block 8, 16 and 32.
# Binaries (prebuilt/bin.txz): tpmoe of c320a0b.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r170_h200.sh
NAME=r170
. bench/device_env.sh
bm() { # name args...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --tokens 9,12,16,24,32,48,63 --gemm-hold 0 --preset m3 --fuse-shared 1 --check 1 "$@" \
    > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
for pass in a b; do
  bm tc_$pass
  for re in 8 16 32; do bm m1_e${re}_$pass --route-tc 1:0 --route-experts $re; done
  pack
done
echo "== total $(el)"
