#!/usr/bin/env bash
# run_r169_h200.sh - one H200, into $OUT/r169: round 27's library (c320a0b: the 5-8 token logits
# in two 4-token parts, the one-tile permutation's counts vectorized, 8 router experts per block
# at 3-8 tokens).
#   1. bits: tpmoe moe --backend cuda --output of c320a0b and r165's binary, cmp;
#   2. gpu_moe_paths, gpu_moe, gpu_moe_api;
#   3. m3, 1-8 tokens, fused, three passes: c320a0b against r168's binary with the same logits
#      (TPM_EXP_ROUTE_TW=1, --route-experts 8: only the permutation differs); each stopped after
#      the selection (--route-stop 3) once;
#   4. routing and layer at 9-256 tokens (one pass); deepseek-v3 and gpt-oss 1-8 tokens;
#   5. the issue's MoE command, three passes (pass 1 -> moe_m3_tp1.json, 2, 3 -> _pass2, _pass3):
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of c320a0b;
# tpmoe_r168 (8700aba), tpmoe_r165 (4a7f10b).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r169_h200.sh
NAME=r169
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
mkdir -p "$R/bits"; nb=0; ne=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 2 3 4 5 6 7 8 13 40; do
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
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
bm() { # name binary tokens args...
  local n=$1 b=$2 tk=$3; shift 3
  TPM_EXP_ROUTE_TW=1 timeout 150 "$B/$b" bench moe --tokens $tk --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
T8=1,2,3,4,5,6,7,8
for pass in a b c; do
  bm new_$pass tpmoe $T8 --preset m3 --fuse-shared 1 --check 1
  bm r168_$pass tpmoe_r168 $T8 --preset m3 --fuse-shared 1 --check 1 --route-experts 8
  pack
done
bm stop3_new tpmoe $T8 --preset m3 --fuse-shared 1 --check 0 --route-stop 3
bm stop3_r168 tpmoe_r168 $T8 --preset m3 --fuse-shared 1 --check 0 --route-experts 8 --route-stop 3
bm big_new tpmoe 9,16,32,64,128,256 --preset m3 --fuse-shared 1 --check 1
bm dsv3_new tpmoe $T8 --preset deepseek-v3 --fuse-shared 1 --check 2
bm oss_new tpmoe $T8 --preset gpt-oss --check 2
pack
for p in 1 2 3; do
  j=moe_m3_tp1.json; [ $p -gt 1 ] && j=moe_m3_tp1_pass$p.json
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$j" > "$R/bench_moe_tp1_p$p.log" 2>&1
  echo "== pass $p rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s %s | ", $1, $2, $4, $15, $11, $18, $20}' "$R/bench_moe_tp1_p$p.log"; echo
  pack
done
echo "== total $(el)"
