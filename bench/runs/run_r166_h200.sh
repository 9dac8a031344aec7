#!/usr/bin/env bash
# run_r166_h200.sh - one H200, into $OUT/r166:
#  1. the 1-8 token routing (mode 1, k_route_fused) stopped after each phase (--route-stop 1:
#     logits, 2: + ticket and slice sums, 3: + selection, 0: whole), router experts per block 8
#     and 16, m3, fused, two passes: where the step from 4 to 5 tokens (TOK 4 -> 8) goes;
#  2. round 26's by-size router experts per logits block (measured on m3) on the other presets'
#     shapes: deepseek-v3 (256 experts, hidden 7168, grouped top-8) and gpt-oss (128 experts,
#     hidden 2880, softmax top-4), 1-8 tokens, the default against --route-experts 32.
# Binaries (prebuilt/bin.txz): the tpmoe of r165.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r166_h200.sh
NAME=r166
. bench/device_env.sh
bm() { # name args...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
for pass in a b; do
  for re in 8 16; do
    for st in 1 2 3 0; do
      bm stop${st}_e${re}_$pass --preset m3 --fuse-shared 1 --check 0 --route-experts $re --route-stop $st
    done
  done
  pack
done
for pass in a b; do
  bm dsv3_def_$pass --preset deepseek-v3 --fuse-shared 1 --check 1
  bm dsv3_re32_$pass --preset deepseek-v3 --fuse-shared 1 --check 1 --route-experts 32
  bm oss_def_$pass --preset gpt-oss --check 1
  bm oss_re32_$pass --preset gpt-oss --check 1 --route-experts 32
  pack
done
echo "== total $(el)"
