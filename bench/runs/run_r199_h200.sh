#!/usr/bin/env bash
# run_r199_h200.sh - one H200 only (it stops at once on any other card): the H200 figures that
# r197 and r198 could not take (each call got an H100):
#   1. r197's script (round 31's defaults on the issue's machine: gpu_moe, gpu_moe_paths,
#      gpu_moe_api, the m3 routing sweeps, the issue's table twice) into $OUT/r197;
#   2. r198's routing comparison (round 32: mode 3's direct against pipelined loads at 256
#      experts, m2 and deepseek-v3, mode 2 beside them, two passes) into $OUT/r199.
# Binaries: prebuilt/bin.txz (compact builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r199_h200.sh
nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200 || { echo "not an H200: $(nvidia-smi --query-gpu=name --format=csv,noheader)"; exit 3; }
bash bench/runs/run_r197_h200.sh
NAME=r199
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
bm() { # name preset tokens args...
  local n=$1 pr=$2 tk=$3; shift 3
  timeout 120 "$B/tpmoe" bench moe --preset $pr --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $tk "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-16s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $7, $11, $20}')"
}
for pass in a b; do
  for pr in m2 deepseek-v3; do
    bm ${pr}_direct_$pass $pr 25,32,64,96,128,160,192,256 --route-tc 1:256 --route-tc-loads direct
    bm ${pr}_pipe_$pass $pr 25,32,64,96,128,160,192,256 --route-tc 1:256 --route-tc-loads pipe
    bm ${pr}_mode2_$pass $pr 96,128,160,192,256 --route-tc 0:0
  done
  pack
done
echo "== r199 done ($(el))"
