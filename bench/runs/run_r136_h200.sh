#!/usr/bin/env bash
# run_r136_h200.sh - one H200, into $OUT/r136: is the routing's tail (slice sums, selection,
# permutation in the last block of k_route_fused, mode 1, 1-8 tokens) paid in cold instruction
# fetches? Three tpmoe binaries: head (the tree), rep1 (a loop around the tail, one pass, with
# one more barrier) and rep2 (the same tail run twice by the last block: the second pass runs
# from a warm instruction cache). If rep2 costs rep1 plus the tail's own work (~1 us), the
# first pass is mostly fetch latency; if it costs twice the tail, it is not.
# Each pass: tpmoe bench moe --preset m3 --tokens 1,2,3,4,6,8 --gemm-hold 0 --check 2
#   --fuse-shared 1 --shared-plan slot (routing timed alone: rnet_us); head also with
#   --route-stop 1 / 2 / 3 (the stage stops). Three passes, binaries interleaved.
# Binaries (prebuilt/bin.txz): head, rep1, rep2 (tpmoe), Release, sm_90.
NAME=r136
. bench/device_env.sh
bm() { # name binary [args...]
  local n=$1 bin=$2; shift 2
  timeout 120 "$B/$bin" bench moe --preset m3 --tokens 1,2,3,4,6,8 --gemm-hold 0 --check 2 --fuse-shared 1 \
    --shared-plan slot "$@" > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  awk '/^tokens/{h=1;print;next} h&&NF>10{print $1, $10, $11}' "$R/$n.log" | tr '\n' ';' | cut -c1-300; echo
}
for p in 1 2 3; do
  for b in head rep1 rep2; do bm "${b}_p$p" $b; done
done
pack
for s in 1 2 3; do bm "head_stop$s" head --route-stop $s; done
pack
echo "== total $(el)"
