#!/usr/bin/env bash
# run_r188_h200.sh - one H200, into $OUT/r188: where mode 3 (the tensor-core routing, one launch of
# clusters of 8, 25-128 tokens) spends its time, with the extra marks of the first and last block
# (a -DTPMOE_MOE_TRACE=ON build, prebuilt/trace.txz): block starts, logits, cluster barrier, the
# cluster's sums stored, the cluster arrive, the group ticket, the slice sums. m3, fused, the
# routing alone (--trace-route 100), two passes; then the clusters along H (--route-tc-clusters) and
# the ring loads at 32 and 64 tokens; mode 1 at 24-32 tokens beside it.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r188_h200.sh
NAME=r188
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
tar xJf prebuilt/trace.txz -C prebuilt
tr() { # tag, args...
  local tag=$1; shift
  timeout 120 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --check 1 --gemm-hold 0 --trace-route 100 "$@" \
    > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"; grep "^# T=.*\(routing mode\|mode 3, first\)" "$R/$tag.log" | sed 's/(medians of 100 replays)//; s/fused=1 //'
}
for pass in a b; do
  tr m3_$pass --tokens 25,32,64,128
done
tr m3_256 --tokens 192,256 --route-tc 25:256
pack
for c in 2 4 8; do tr cl${c} --tokens 32,64 --route-tc-clusters $c; done
tr ring --tokens 32,64 --route-tc-loads ring
tr mode1 --tokens 24,32 --route-tc 0:0
pack
echo "== total $(el)"
