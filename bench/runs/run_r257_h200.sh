#!/usr/bin/env bash
# run_r257_h200.sh - one GPU, into $OUT/r257: where the fused layer's routing loses 0.2-0.5 us
# to the unfused one at 1-8 tokens (r241-r256: 8.0-8.1 against 7.6-7.9 us at 8 tokens). Fused and
# unfused as separate processes, the order swapped each pass (three passes), at 1, 4 and 8 tokens,
# the routing whole and stopped after its slice sums (--route-stop 2) and after the selection (3):
# a gap already at stop 2 is not the shared slot's work (selection, permutation); one that opens
# after 3 is the permutation's extra T pairs.
# Binaries: prebuilt/bin.txz, r254's (compact Release builds of 654fcea).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r257_h200.sh
NAME=r257
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for pass in a b c; do
  order="1 0"; [ $pass = b ] && order="0 1"
  for f in $order; do
    for stop in 0 2 3; do
      a=; [ $stop != 0 ] && a="--route-stop $stop"
      tag=${pass}_f${f}_s${stop}
      timeout 60 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 --fuse-shared $f --tokens 1,4,8 $a \
        --json "$R/$tag.json" > "$R/$tag.log" 2>&1
      printf "== %-9s rc=%d (%s): " $tag $? "$(el)"
      awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s rnet %s tot %s | ", $1, $2, $11, $15}' "$R/$tag.log"; echo
    done
  done
  pack
done
echo "== r257 done ($(el))"
