#!/usr/bin/env bash
# run_r167_h200.sh - one H200, into $OUT/r167: the logits' loads without per-token predicates
# (b3d2ff0) against r165's tpmoe, and the bench's reference with the expert biases (0dd8648).
#   1. bits: tpmoe moe --backend cuda --output of both binaries, cmp (mini presets, 1-40 tokens);
#   2. gpu_moe_paths, gpu_moe (CUDA against the CPU reference);
#   3. m3, 1-8 tokens, fused: old / new routing (default by-size experts), new with
#      --route-experts 8 / 16 / 32, new stopped after the logits (--route-stop 1); three passes;
#   4. deepseek-v3 and gpt-oss, 1-8 tokens, --check 2: old / new (gpt-oss: the bias fix).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of b3d2ff0; tpmoe_r165.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r167_h200.sh
NAME=r167
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
# 1. bits
mkdir -p "$R/bits"; nb=0; ne=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 2 3 4 5 6 8 13 40; do
    for b in tpmoe tpmoe_r165; do
      timeout 60 "$B/$b" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 --output "$R/bits/$b.$p.$t.bin" \
        > "$R/bits/$b.$p.$t.log" 2>&1 || echo "run failed: $b $p $t"
    done
    nb=$((nb + 1)); cmp -s "$R/bits/tpmoe.$p.$t.bin" "$R/bits/tpmoe_r165.$p.$t.bin" && ne=$((ne + 1)) || echo "DIFFER: $p $t"
  done
done
echo "== bits: $ne of $nb equal ($(el))"
rm -f "$R"/bits/*.bin
# 2. GPU tests
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe_paths gpu_moe; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
# 3. m3 routing
bm() { # name binary args...
  local n=$1 b=$2; shift 2
  timeout 150 "$B/$b" bench moe --tokens 1,2,3,4,5,6,7,8 --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
for pass in a b c; do
  bm old_$pass tpmoe_r165 --preset m3 --fuse-shared 1 --check 1
  bm new_$pass tpmoe --preset m3 --fuse-shared 1 --check 1
  for re in 8 16 32; do bm new_e${re}_$pass tpmoe --preset m3 --fuse-shared 1 --check 1 --route-experts $re; done
  bm stop1_$pass tpmoe --preset m3 --fuse-shared 1 --check 0 --route-stop 1
  pack
done
# 4. the other presets
for pass in a b; do
  bm dsv3_old_$pass tpmoe_r165 --preset deepseek-v3 --fuse-shared 1 --check 2
  bm dsv3_new_$pass tpmoe --preset deepseek-v3 --fuse-shared 1 --check 2
  bm oss_old_$pass tpmoe_r165 --preset gpt-oss --check 2
  bm oss_new_$pass tpmoe --preset gpt-oss --check 2
  pack
done
echo "== total $(el)"
