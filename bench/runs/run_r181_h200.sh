#!/usr/bin/env bash
# run_r181_h200.sh - one H200, into $OUT/r181: round 28's library (the permutation of up to 128
# (token, slot) pairs counted in one block without a bitmap, barrier or shared atomics; mode 1's
# several tiles and mode 3's smallest sizes gather their selections for it).
#   1. bench/micro/route_tail (prebuilt/route_tail): the new build_permutation_direct against
#      round 27's on random selections (bit-equal), cycles;
#   2. bits: tpmoe moe --backend cuda --output of this tree and of r171's binary (a11510b), cmp;
#   3. gpu_moe_paths, gpu_moe, gpu_moe_api;
#   4. routing net, m3, fused, 1-256 tokens: this tree against r171's binary, two passes each,
#      interleaved; deepseek-v3 and gpt-oss 1-25 tokens (one pass each binary);
#   5. the issue's MoE command, three passes (pass 1 -> moe_m3_tp1.json, 2, 3 -> _pass2, _pass3):
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_paths, gpu_moe_api, route_tail of the commit
# before this script's; tpmoe_r171 (a11510b).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r181_h200.sh
NAME=r181
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
timeout 60 "$B/route_tail" > "$R/route_tail.log" 2>&1
echo "== route_tail rc=$? ($(el))"; grep "cycles\|differs\|equal" "$R/route_tail.log"
mkdir -p "$R/bits"; nb=0; ne=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 2 3 4 5 6 7 8 9 13 16 24 25 40; do
    for b in tpmoe tpmoe_r171; do
      timeout 60 "$B/$b" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 --output "$R/bits/$b.$p.$t.bin" \
        > "$R/bits/$b.$p.$t.log" 2>&1 || echo "run failed: $b $p $t"
    done
    nb=$((nb + 1)); cmp -s "$R/bits/tpmoe.$p.$t.bin" "$R/bits/tpmoe_r171.$p.$t.bin" && ne=$((ne + 1)) || echo "DIFFER: $p $t"
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
  timeout 150 "$B/$b" bench moe --tokens $tk --gemm-hold 0 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-16s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $15, $11, $20}')"
}
TR=1,2,4,8,9,12,16,20,24,25,32,48,64,128,256
for pass in a b; do
  bm route_new_$pass tpmoe $TR --preset m3 --fuse-shared 1 --check 1
  bm route_r171_$pass tpmoe_r171 $TR --preset m3 --fuse-shared 1 --check 1
  pack
done
for b in tpmoe tpmoe_r171; do
  bm dsv3_$b $b 1,4,8,9,12,16,24,25 --preset deepseek-v3 --fuse-shared 1 --check 1
  bm oss_$b $b 1,4,8,9,12,16,24,25 --preset gpt-oss --check 1
done
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
