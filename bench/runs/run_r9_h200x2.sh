#!/usr/bin/env bash
# run_r9_h200x2.sh - round 9 on one device call: gpu_moe (routing changes:
# selections against the CPU reference, every decode kernel bitwise), the
# routing launch with its phases cut off (--route-stop), and the routing at
# 1-256 tokens. Binaries (tpmoe, gpu_moe) carried in prebuilt/bin.txz.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r9_h200x2.sh
NAME=${NAME:-r9}
. bench/device_env.sh
TPMOE_TOOL=$B/tpmoe timeout 90 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -8
for stop in 0 1 2 3; do
  timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --fuse-shared 1 --flush read --route-stop $stop \
    --check 1 > "$R/bench_moe_route_stop$stop.log" 2>&1
  echo "== route stop $stop rc=$? ($(el))"
  sed -n '/^tokens/,$p' "$R/bench_moe_route_stop$stop.log" | cut -c1-110
done
timeout 90 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,64,128,256 --fuse-shared 1 --flush read \
  --check 2 --json "$R/moe_route_sizes.json" > "$R/bench_moe_route_sizes.log" 2>&1
echo "== routing sizes rc=$? ($(el))"
sed -n '/^# harness/,$p' "$R/bench_moe_route_sizes.log" | cut -c1-200
pack
echo "== total $(el)"
