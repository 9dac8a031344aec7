#!/usr/bin/env bash
# run_r168_h200.sh - one H200, into $OUT/r168: the 5-8 token logits as two 4-token parts per
# block (8700aba, TPM_EXP_ROUTE_TW=1, the binary's default) against one 8-token part (=0, b3d2ff0's
# code), router experts per block 8 and 16.
#   1. bits: tpmoe moe --backend cuda --output of the new binary and r165's, cmp (mini presets);
#   2. gpu_moe_paths, gpu_moe (CUDA against the CPU reference), TW on;
#   3. m3, 1-8 tokens, fused, three passes: TW 1 / 0 x route-experts 8 / 16; TW 1 e8 stopped
#      after the logits (--route-stop 1);
#   4. deepseek-v3 and gpt-oss, 1-8 tokens, --check 2: TW 1 / 0 (default experts).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of 8700aba; tpmoe_r165.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r168_h200.sh
NAME=r168
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
mkdir -p "$R/bits"; nb=0; ne=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 4 5 6 7 8 13; do
    for b in tpmoe tpmoe_r165; do
      timeout 60 "$B/$b" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 --output "$R/bits/$b.$p.$t.bin" \
        > "$R/bits/$b.$p.$t.log" 2>&1 || echo "run failed: $b $p $t"
    done
    nb=$((nb + 1)); cmp -s "$R/bits/tpmoe.$p.$t.bin" "$R/bits/tpmoe_r165.$p.$t.bin" && ne=$((ne + 1)) || echo "DIFFER: $p $t"
  done
done
echo "== bits: $ne of $nb equal ($(el))"
rm -f "$R"/bits/*.bin
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
bm() { # name tw args...
  local n=$1 tw=$2; shift 2
  TPM_EXP_ROUTE_TW=$tw timeout 150 "$B/tpmoe" bench moe --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
for pass in a b c; do
  for re in 8 16; do
    bm tw1_e${re}_$pass 1 --preset m3 --fuse-shared 1 --check 1 --route-experts $re
    bm tw0_e${re}_$pass 0 --preset m3 --fuse-shared 1 --check 1 --route-experts $re
  done
  bm stop1_tw1_e8_$pass 1 --preset m3 --fuse-shared 1 --check 0 --route-experts 8 --route-stop 1
  pack
done
bm dsv3_tw1 1 --preset deepseek-v3 --fuse-shared 1 --check 2
bm dsv3_tw0 0 --preset deepseek-v3 --fuse-shared 1 --check 2
bm oss_tw1 1 --preset gpt-oss --check 2
bm oss_tw0 0 --preset gpt-oss --check 2
pack
echo "== total $(el)"
