#!/usr/bin/env bash
# run_r166_h200.sh - one H200, into $OUT/r166: round 26's by-size router experts per logits block
# (measured on m3) on the other presets' shapes: deepseek-v3 (256 experts, hidden 7168, grouped
# top-8) and gpt-oss (gpt-oss-120b: 128 experts, hidden 2880, softmax top-4), 1-8 tokens, fused where
# there is a shared expert, the default against --route-experts 32, two alternating passes.
# Binaries (prebuilt/bin.txz): the tpmoe of r165.
# Run from the repository root:  OUT=/some/dir bash bench/run_r166_h200.sh
NAME=r166
. bench/device_env.sh
bm() { # name args...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 --check 1 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
for pass in a b; do
  bm dsv3_def_$pass --preset deepseek-v3 --fuse-shared 1
  bm dsv3_re32_$pass --preset deepseek-v3 --fuse-shared 1 --route-experts 32
  bm oss_def_$pass --preset gpt-oss
  bm oss_re32_$pass --preset gpt-oss --route-experts 32
  pack
done
echo "== total $(el)"
