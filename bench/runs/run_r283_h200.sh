#!/usr/bin/env bash
# run_r283_h200.sh - one GPU, into $OUT/r283: round 52's final library (the cluster meeting up to
# 32 tokens), in little device time: gpu_route_cl, gpu_moe (every routing mode's bits, the
# meeting up to 32 and up to 64 tokens and the counter), then the table fused and unfused:
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release tpmoe and GPU tests).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r283_h200.sh
NAME=r283
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_route_cl gpu_moe; do
  timeout 100 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
n=status
timeout 100 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-8s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
pack
echo "== r283 done ($(el))"
