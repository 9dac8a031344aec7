#!/usr/bin/env bash
# run_r163_h200.sh - one H200, into $OUT/r163: the 1-8 token routing (k_route_fused) with 8 / 16
# / 32 router experts per logits block (`--route-experts`; 32 the default). Until this commit only
# the 32-expert form had its 1 / 2 / 4-token instantiations; the 8- and 16-expert forms kept
# 8 tokens of accumulators and x loads at every T (round 17's comparison ran them so). Now all
# three have them. gpu_moe first (its routing variants cover 8 / 16 / 32), then the m3 layer at
# 1-8 tokens, TP 1, fused, three alternating passes.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe of the commit that adds this script.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r163_h200.sh
NAME=r163
. bench/device_env.sh
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_moe.log" | head -5
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 --check 1 \
    --fuse-shared 1 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-10s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
for pass in a b c; do
  for re in 32 16 8; do bm re${re}_$pass --route-experts $re; done
  pack
done
echo "== total $(el)"
