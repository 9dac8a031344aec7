#!/usr/bin/env bash
# run_r204_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r204: round 33, the routing
# (modes 1 and 3) launched by programmatic dependent launch behind the stream's previous kernel
# (tuning.route_pdl, default 1 in this build; --route-pdl 0 is the plain launch of r197):
#   1. gpu_moe_paths (with the new route_pdl_equals_plain: y2 = layer(layer(x)), the second
#      routing beside the combine that wrote its input, eager and graph, == plain), gpu_moe,
#      gpu_moe_api;
#   2. routing net, m3, fused, --route-pdl 0 / 1 interleaved, two passes, JSON, 1-256 tokens;
#      deepseek-v3 (mode 3 with two m-tiles per warp) one pass each;
#   3. the issue's MoE command once with the new defaults:
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r204_h200.sh
NAME=r204
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
grep "programmatic launch" "$R/gpu_moe_paths.log" | head -12
pack
bm() { # name preset tokens args...
  local n=$1 pr=$2 tk=$3; shift 3
  timeout 150 "$B/tpmoe" bench moe --preset $pr --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $tk "$@" \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $7, $11, $20}')"
}
TK=1,2,4,8,9,12,16,17,20,24,25,32,64,128,256
for pass in a b; do
  bm m3_plain_$pass m3 $TK --route-pdl 0
  bm m3_pdl_$pass m3 $TK --route-pdl 1
  pack
done
bm ds_plain_a deepseek-v3 1,8,16,25,64,256 --route-pdl 0
bm ds_pdl_a deepseek-v3 1,8,16,25,64,256 --route-pdl 1
pack
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== table rc=$? ($(el))"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s %s | ", $1, $2, $4, $15, $11, $18, $20}' "$R/bench_moe_tp1.log"; echo
pack
echo "== r204 done ($(el))"
