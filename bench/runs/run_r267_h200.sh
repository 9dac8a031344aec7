#!/usr/bin/env bash
# run_r267_h200.sh - one GPU, into $OUT/r267: round 49's third form of the permutation by every
# selecting block (r266) in routing mode 1's several tiles (12-24 tokens, not on by default):
# --route-perm-min 12 against 0, three passes in alternating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens 12,16,17,20,24 \
#     --route-perm-min 12|0
# then the issue's table on the same binary (the status of round 49's library):
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (r266's new set, a73d944).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r267_h200.sh
NAME=r267
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for pass in a b c; do
  order="12 0"; [ $pass = b ] && order="0 12"
  for pm in $order; do
    tag=${pass}_pm$pm
    timeout 60 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens 12,16,17,20,24 \
      --route-perm-min $pm --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-7s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s | ", $1, $7, $11}' "$R/$tag.log"; echo
  done
  pack
done
n=status
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-8s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $2, $11, $15, $19, $20}' "$R/$n.log"; echo
pack
echo "== r267 done ($(el))"
