#!/usr/bin/env bash
# run_r164_h200.sh - one H200, into $OUT/r164: the routing's router experts per logits block by
# size (round 26: 32 up to 2 tokens, 8 at 3-4, 16 at 5-8; tuning.route_experts = 0, the new
# default) against the old fixed 32, in one binary:
#   gpu_moe, gpu_moe_paths;
#   m3, TP 1, fused, 1-8 tokens: the default and --route-experts 32, three alternating passes;
#   the same at TP 8's share (--shard 8), two passes;
#   the issue's command, one pass (moe_m3_tp1.json):
#     tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r164_h200.sh
NAME=r164
. bench/device_env.sh
for t in gpu_moe gpu_moe_paths; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/$t.log" | head -5
done
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 --check 1 \
    --fuse-shared 1 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-12s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
for pass in a b c; do
  bm def_$pass
  bm re32_$pass --route-experts 32
done
for pass in a b; do
  bm s8def_$pass --shard 8
  bm s8re32_$pass --shard 8 --route-experts 32
done
pack
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe m3 tp1 rc=$? ($(el))"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s %s | ", $1, $2, $4, $15, $11, $18, $20}' "$R/bench_moe_tp1.log"; echo
pack
echo "== total $(el)"
