#!/usr/bin/env bash
# run_r271_h200.sh - one GPU, into $OUT/r271: r270 again after the polled buffer's layout went back
# to the ticket's [slice][token][expert] (16 token rows per slice), so that a warp's loads of a
# slice are side by side: the polled partials against the ticket (--route-poll 0), fused layer,
# three passes in rotating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#     --tokens 1,2,3,4,5,6,7,8,9,10,11,12,16 [--route-poll 0]
# then gpu_moe.
# Binaries: prebuilt/bin2.txz (compact Release tpmoe and gpu_moe).
# Run from the repository root:
#   tar xJf prebuilt/bin2.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r271_h200.sh
NAME=r271
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TOK=1,2,3,4,5,6,7,8,9,10,11,12,16
for pass in a b c; do
  case $pass in a|c) order="poll ticket" ;; b) order="ticket poll" ;; esac
  for v in $order; do
    extra=""
    [ $v = ticket ] && extra="--route-poll 0"
    tag=${pass}_$v
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK $extra \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-9s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
timeout 200 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/gpu_moe.log" | head -5
pack
echo "== r271 done ($(el))"
