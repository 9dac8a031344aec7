#!/usr/bin/env bash
# run_r192_h200.sh - one H200, into $OUT/r192: the routing modes' boundaries after round 30 (mode 3
# 1.1-1.7 us faster at 25-128 tokens). m3, fused, Release tpmoe of round 30 (2bb3d85), two passes,
# interleaved, routing net (rnet_us) and the layer:
#   default      --tokens 17,20,24,25,28,32,40,48,64,96,128 (mode 1 to 24, mode 3 25-128)
#   mode1        the same with --route-tc 0:0 --route-gemm-min 1000000 (mode 1 everywhere)
#   mode3        the same with --route-tc 17:128 (mode 3 from 17)
#   mode2        --route-tc 0:0 --tokens 64,96,128 (mode 2 from 64)
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r192_h200.sh
NAME=r192
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
bm() { # name tokens args...
  local n=$1 tk=$2; shift 2
  timeout 120 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $tk "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-10s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $7, $11, $15}')"
}
TK=17,20,24,25,28,32,40,48,64,96,128
for pass in a b; do
  bm default_$pass $TK
  bm mode1_$pass $TK --route-tc 0:0 --route-gemm-min 1000000
  bm mode3_$pass $TK --route-tc 17:128
  bm mode2_$pass 64,96,128 --route-tc 0:0
  pack
done
echo "== total $(el)"
