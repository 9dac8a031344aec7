#!/usr/bin/env bash
# run_r246_h200.sh - one GPU (an H100 or H200), into $OUT/r246: round 44's defaults (the slot plan
# with the early shared items and the chained down launch up to 8192 tokens, the split plan from
# 8193) through every GPU test (gpu_act; gpu_moe_paths: the layer against the plain chain;
# gpu_moe: against the CPU reference at the default paths, 1-16384 tokens; gpu_moe_api), then
# the table, and the layer at 4096 and 8192 tokens fused and unfused:
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#   tpmoe bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (stripped): tpmoe, gpu_act, gpu_moe, gpu_moe_paths, gpu_moe_api,
# compact Release builds (build-crel) of 75fdd1e.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r246_h200.sh
NAME=${NAME:-r246}   # r248 runs these steps under its own name
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$R/clocks.csv" 2>&1 &
S=$!
for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
n=status
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-8s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
pack
n=layer
timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-8s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
kill $S 2>/dev/null
pack
echo "== $NAME done ($(el))"
