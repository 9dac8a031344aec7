#!/usr/bin/env bash
# run_r202_h200.sh - one GPU (H200 asked; an H100 may come):
#   0. on an H200 only: r199's script (r197's and r198's H200 figures) into $OUT/r197 and $OUT/r199;
#   1. on any other card, into $OUT/r202: round 32 recompiled m3's pipelined routing kernel
#      (k_route_tc<1, 2>: 242 registers instead of 246; the same bits, gpu_moe). Is it as fast?
#      tpmoe (735cafe) against tpmoe_old (fac46f7, the library of 729804b) in the same call,
#      m3, fused, routing net, two passes each, interleaved: mode 3 forced with the pipelined
#      loads at 25-256 tokens, and the defaults at 1-256.
# Binaries: prebuilt/bin.txz (compact builds of this tree, stripped; tpmoe_old of fac46f7).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r202_h200.sh
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  bash bench/runs/run_r199_h200.sh
  exit
fi
NAME=r202
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
bm() { # name binary tokens args...
  local n=$1 bin=$2 tk=$3; shift 3
  timeout 120 "$B/$bin" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $tk "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $7, $11, $20}')"
}
for pass in a b; do
  bm pipe_new_$pass tpmoe 25,32,64,96,128,160,192,256 --route-tc 1:256 --route-tc-loads pipe
  bm pipe_old_$pass tpmoe_old 25,32,64,96,128,160,192,256 --route-tc 1:256 --route-tc-loads pipe
  bm default_new_$pass tpmoe 1,8,9,16,24,25,32,64,128,256
  bm default_old_$pass tpmoe_old 1,8,9,16,24,25,32,64,128,256
  pack
done
echo "== r202 done ($(el))"
