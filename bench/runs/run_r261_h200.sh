#!/usr/bin/env bash
# run_r261_h200.sh - one GPU, into $OUT/r261: is the fused layer's 1.2-3.6 us loss in the
# experts phase at 8 tokens (r258, r260; a gain of 0.5-1.6 us at 5) structural, or does it follow
# which experts the batch touches? Both layers run the split plan at 5-8 tokens, so their routed
# GEMV kernels read the same experts' weights, from different allocations. Four weight seeds
# (other routers: other experts touched) at 5-8 tokens, two passes, both layers in one process:
#   tpmoe bench moe --preset m3 --check 1 --gemm-hold 0 --fuse-shared both --tokens 5,6,7,8 --seed S
# then, at seed 1, each layer alone in its own process, in both orders. A sign that changes with
# the seed points at the experts touched (their weights' places in HBM), one that holds at
# every seed at 8 tokens at the kernels.
# Binaries: prebuilt/bin.txz, r258's new set (compact Release builds of efe0624, round 48).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r261_h200.sh
NAME=r261
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
row() { awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s e%s t%s | ", $1, $2, $4, $12, $15}' "$1"; echo; }
for pass in a b; do
  for seed in 1 2 3 4; do
    tag=${pass}_s$seed
    timeout 60 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 --fuse-shared both --tokens 5,6,7,8 \
      --seed $seed --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-6s rc=%d (%s): " $tag $? "$(el)"; row "$R/$tag.log"
  done
  pack
done
for order in "1 0" "0 1"; do
  for f in $order; do
    tag=alone_$(echo $order | tr -d ' ')_f$f
    timeout 60 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 --fuse-shared $f --tokens 5,8 \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-12s rc=%d (%s): " $tag $? "$(el)"; row "$R/$tag.log"
  done
done
pack
echo "== r261 done ($(el))"
