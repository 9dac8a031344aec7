#!/usr/bin/env bash
# run_r246_h200.sh - one GPU (an H100 or H200), into $OUT/r246: round 44's defaults (the slot plan
# with the early shared items and the chained down launch up to 8192 tokens, the split plan from
# 8193) through the GPU tests that hold the layer to the CPU reference at the default paths
# (gpu_moe: 1-16384 tokens) and to the plain chain (gpu_moe_paths), then the layer at 4096 and
# 8192 tokens, fused and unfused:
#   tpmoe bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (stripped): tpmoe, gpu_moe, gpu_moe_paths, compact Release builds
# (build-crel) of 75fdd1e.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r246_h200.sh
NAME=r246
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_moe gpu_moe_paths; do
  timeout 100 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
n=layer
timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-6s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s %s %s | ", $1, $2, $4, $5, $12, $15, $18, $21}' "$R/$n.log"; echo
pack
echo "== r246 done ($(el))"
