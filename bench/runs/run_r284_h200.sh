#!/usr/bin/env bash
# run_r284_h200.sh - one GPU (an H200 asked for, an H100 if none comes), into $OUT/r284: the final
# library of round 52 (the cluster meeting up to 32 tokens) through every GPU test of the layer
# (gpu_route_cl, gpu_act, gpu_moe_paths, gpu_moe, gpu_moe_api), then the table in two
# passes, and the layer at 4096 and 8192 tokens fused and unfused:
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#   tpmoe bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (stripped compact Release builds, build-crel).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r284_h200.sh
NAME=${NAME:-r284}
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$R/clocks.csv" 2>&1 &
S=$!
for t in gpu_route_cl gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
table() { # name, tokens
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens "$2" --fuse-shared both --check 2 \
    --json "$R/$1.json" > "$R/$1.log" 2>&1
  printf "== %-8s rc=%d (%s): " "$1" $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$1.log"; echo
  pack
}
table status 1,8,32,128,1024,8192
table status2 1,8,32,128,1024,8192
table layer 4096,8192
kill $S 2>/dev/null
pack
echo "== $NAME done ($(el))"
