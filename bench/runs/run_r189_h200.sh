#!/usr/bin/env bash
# run_r189_h200.sh - one H200, into $OUT/r189: round 30 (the routing's partial sums loaded in one
# L2 round trip instead of one per partial (mode 3) or up to three (mode 1); the bitmap
# permutation's selections loaded once, before its bitmap is cleared).
#   1. bits: tpmoe moe --backend cuda --output of the round 30 tree and of HEAD 5759d48 (both
#      -DTPMOE_MOE_TRACE=ON builds, tracing off: the same flags), three mini presets, 1-200 tokens;
#   2. gpu_moe_paths, gpu_moe, gpu_moe_api (the round 30 tree's Release build);
#   3. routing net, m3, fused, 1-256 tokens: round 30 against HEAD (the two trace builds, tracing
#      off), two passes each, interleaved; deepseek-v3 and gpt-oss at 9-64 tokens, one pass;
#   4. mode 3's tail with the first / last block marks (--trace-route 100), round 30's trace build;
#   5. the issue's MoE command, one pass, Release build (-> moe_m3_tp1.json):
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries (prebuilt/bin.txz; -DTPMOE_CUDA_COMPACT=ON builds, stripped): tpmoe, gpu_moe, gpu_moe_paths,
# gpu_moe_api (Release) and tpmoe_trace (-DTPMOE_MOE_TRACE=ON) of the round 30 tree; tpmoe_head
# (-DTPMOE_MOE_TRACE=ON) of 5759d48.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r189_h200.sh
NAME=r189
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
mkdir -p "$R/bits"; nb=0; ne=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 5 8 9 12 16 17 24 25 32 40 64 128 200; do
    for b in tpmoe_trace tpmoe_head; do
      timeout 60 "$B/$b" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 --output "$R/bits/$b.$p.$t.bin" \
        > "$R/bits/$b.$p.$t.log" 2>&1 || echo "run failed: $b $p $t"
    done
    nb=$((nb + 1)); cmp -s "$R/bits/tpmoe_trace.$p.$t.bin" "$R/bits/tpmoe_head.$p.$t.bin" && ne=$((ne + 1)) || echo "DIFFER: $p $t"
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
TR=1,2,4,8,9,12,16,17,20,24,25,32,64,128,256
for pass in a b; do
  bm route_new_$pass tpmoe_trace $TR --preset m3 --fuse-shared 1 --check 1
  bm route_head_$pass tpmoe_head $TR --preset m3 --fuse-shared 1 --check 1
  pack
done
for p in deepseek-v3 gpt-oss; do
  bm ${p}_new tpmoe_trace 9,16,24,32,64 --preset $p --fuse-shared 1 --check 1
  bm ${p}_head tpmoe_head 9,16,24,32,64 --preset $p --fuse-shared 1 --check 1
done
timeout 120 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --check 1 --gemm-hold 0 --trace-route 100 \
  --tokens 17,24,25,32,64,128 > "$R/trace.log" 2>&1
echo "== trace rc=$? ($(el))"; grep "^# T=.*\(routing mode\|mode 3, first\)" "$R/trace.log" | sed 's/(medians of 100 replays)//; s/fused=1 //'
pack
bm route_rel tpmoe $TR --preset m3 --fuse-shared 1 --check 1
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== table rc=$? ($(el))"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s %s | ", $1, $2, $4, $15, $11, $18, $20}' "$R/bench_moe_tp1.log"; echo
pack
echo "== total $(el)"
