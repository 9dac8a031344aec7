#!/usr/bin/env bash
# run_r185_h200.sh - one H200, into $OUT/r185: round 29, routing mode 1's wide form (9-16 tokens in
# one row of 512-thread blocks: one ticket, 16 warps select, the one-tile permutation).
#   1. gpu_moe (now also 13 and 16 tokens: the wide form against the 8-token tiles, bit for bit),
#      gpu_moe_paths, gpu_moe_api;
#   2. bits: tpmoe moe --backend cuda --output of this tree and of r171's binary (a11510b), cmp;
#   3. routing net and layer, m3 fused, 1-17 tokens: the wide form (default) against
#      --route-wide 0 in the same binary, interleaved, two passes each; the wide form with 8 router
#      experts per block (16 by default there); deepseek-v3 and gpt-oss 9-16 tokens, one pass each way.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api of this script's commit;
# tpmoe_r171 (a11510b).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r185_h200.sh
NAME=r185
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"; grep -c "8-token tiles" "$R/gpu_moe.log"
mkdir -p "$R/bits"; nb=0; ne=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 8 9 11 13 16 17 24; do
    for b in tpmoe tpmoe_r171; do
      timeout 60 "$B/$b" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 --output "$R/bits/$b.$p.$t.bin" \
        > "$R/bits/$b.$p.$t.log" 2>&1 || echo "run failed: $b $p $t"
    done
    nb=$((nb + 1)); cmp -s "$R/bits/tpmoe.$p.$t.bin" "$R/bits/tpmoe_r171.$p.$t.bin" && ne=$((ne + 1)) || echo "DIFFER: $p $t"
  done
done
echo "== bits: $ne of $nb equal ($(el))"
rm -f "$R"/bits/*.bin
pack
bm() { # name tokens args...
  local n=$1 tk=$2; shift 2
  timeout 150 "$B/tpmoe" bench moe --tokens $tk --gemm-hold 0 --check 1 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-14s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
TR=1,8,9,10,11,12,13,14,15,16,17
for pass in a b; do
  bm wide_$pass $TR --preset m3 --fuse-shared 1
  bm tiles_$pass $TR --preset m3 --fuse-shared 1 --route-wide 0
  pack
done
bm wide_re8 $TR --preset m3 --fuse-shared 1 --route-experts 8
for p in deepseek-v3 gpt-oss; do
  bm ${p}_wide 9,12,13,16 --preset $p --fuse-shared 1
  bm ${p}_tiles 9,12,13,16 --preset $p --fuse-shared 1 --route-wide 0
done
pack
for t in gpu_moe_paths; do
  timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
echo "== total $(el)"
