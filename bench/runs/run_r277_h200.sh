#!/usr/bin/env bash
# run_r277_h200.sh - one GPU, into $OUT/r277: the final library of round 50 (route_poll default 7):
# gpu_moe and gpu_moe_paths, then the routing at the defaults, one pass:
#   tpmoe bench moe --preset m3 --fuse-shared both --gemm-hold 0 --check 1 --tokens 1,8,12,16,24,32,128,256
# Binaries: prebuilt/bin.txz (compact Release tpmoe, the GPU tests).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r277_h200.sh
NAME=r277
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_moe gpu_moe_paths; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
tag=route
timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared both --gemm-hold 0 --check 1 --tokens 1,8,12,16,24,32,128,256 \
  --json "$R/$tag.json" > "$R/$tag.log" 2>&1
printf "== %-9s rc=%d (%s): " $tag $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
pack
echo "== r277 done ($(el))"
