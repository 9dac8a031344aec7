#!/usr/bin/env bash
# run_r205_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r205: round 33's second
# build. r204 (ONE H100) had the routing by programmatic launch with the router prefetch
# (--route-pdl 1) 0-0.8 us slower than the plain launch; this times the launch without the
# prefetch (--route-pdl 2) beside both, interleaved, two passes (m3), one (deepseek-v3);
# gpu_moe_paths first (route_pdl_equals_plain runs the default, route_pdl 1).
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r205_h200.sh
NAME=r205
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
timeout 200 "$B/gpu_moe_paths" > "$R/gpu_moe_paths.log" 2>&1
echo "== gpu_moe_paths rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/gpu_moe_paths.log" | head -5
bm() { # name preset tokens args...
  local n=$1 pr=$2 tk=$3; shift 3
  timeout 150 "$B/tpmoe" bench moe --preset $pr --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $tk "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $7, $11, $20}')"
}
TK=1,2,4,8,9,12,16,17,20,24,25,32,64,128,256
for pass in a b; do
  bm m3_p0_$pass m3 $TK --route-pdl 0
  bm m3_p1_$pass m3 $TK --route-pdl 1
  bm m3_p2_$pass m3 $TK --route-pdl 2
  pack
done
bm ds_p0_a deepseek-v3 1,8,16,25,64,256 --route-pdl 0
bm ds_p2_a deepseek-v3 1,8,16,25,64,256 --route-pdl 2
pack
echo "== r205 done ($(el))"
