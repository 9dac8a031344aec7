#!/usr/bin/env bash
# run_r275_h200.sh - one GPU, into $OUT/r275: round 50's polled partials in routing mode 1's several
# rows of 8-token tiles (route_poll bit 2: each row's last block polls its row's partials, the
# ticket over the rows flips the planes) against the default (--route-poll 3: those rows take
# tickets), fused layer, three passes in rotating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#     --tokens 1,8,9,12,16,17,20,24,25,32 [--route-poll 7]
# (1-11 tokens are one row and 25-32 mode 3: the same code either way, a control).
# Binaries: prebuilt/bin.txz (compact Release tpmoe, the GPU tests).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r275_h200.sh
NAME=r275
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TOK=1,8,9,12,16,17,20,24,25,32
for pass in a b c; do
  case $pass in a|c) order="rows def" ;; b) order="def rows" ;; esac
  for v in $order; do
    extra=""
    [ $v = rows ] && extra="--route-poll 7"
    tag=${pass}_$v
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK $extra \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-9s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
echo "== r275 done ($(el))"
