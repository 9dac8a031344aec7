#!/usr/bin/env bash
# run_r140_h200.sh - one H200, into $OUT/r140:
#  1. the logits' warp sums as a transposed xor tree (logits_tile, routing modes 0 and 1):
#     V - 1 + (5 - log2 V) shuffles instead of 5 V for V = EPW x TOK values per lane (160 -> 31
#     at 8 tokens). The same lane pairs in the same order, so the same bits: checked here by
#     comparing `tpmoe moe --backend cuda --output` files of the binary before and after
#     (mini presets, mode 1 sizes and controls), then gpu_moe / gpu_moe_api against the CPU.
#     A/B, routing net of the harness (rnet_us), three passes of each binary, interleaved:
#       tpmoe bench moe --preset m3 --tokens 1,2,3,4,5,6,7,8,16,128 --gemm-hold 0 --check 2
#         --fuse-shared 1 --shared-plan slot
#     and one pass of the new binary with --route-experts 16 (8 experts per warp -> 2).
#  2. the prefill's shared plan at 4096 and 8192 tokens, the new binary, three passes each,
#     interleaved: fused slot (the default), fused split (--shared-plan split: the shared expert
#     as the dense cuBLAS MLP), unfused (--fuse-shared 0):
#       tpmoe bench moe --preset m3 --tokens 4096,8192 --gemm-hold 0 --check 2 ...
# Binaries (prebuilt/bin.txz): head (tpmoe of 400598b), tpmoe, gpu_moe, gpu_moe_api (after).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r140_h200.sh
NAME=r140
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
# 1a. the same bits
nd=0; nsame=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 1 2 3 4 5 8 13 40; do
    for b in head tpmoe; do
      timeout 60 "$B/$b" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 \
        --output "$R/bits_${b}_${p}_$t.st" > "$R/bits_${b}_${p}_$t.log" 2>&1 || echo "rc!=0 $b $p $t"
    done
    if cmp -s "$R/bits_head_${p}_$t.st" "$R/bits_tpmoe_${p}_$t.st"; then nsame=$((nsame+1)); else nd=$((nd+1)); echo "DIFF $p $t"; fi
  done
done
echo "== bits: $nsame same, $nd differ ($(el))"
rm -f "$R"/bits_*.st
bm() { # name binary tokens extra...
  local n=$1 b=$2 tk=$3; shift 3
  timeout 200 "$B/$b" bench moe --preset m3 --tokens $tk --gemm-hold 0 --check 2 "$@" > "$R/$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
}
rt() { awk '/^tokens/{h=1;next} h&&NF>10{printf "%s:%s/%s ", $1, $11, $20}' "$R/$1.log"; echo; }
pf() { awk '/^tokens/{h=1;next} h&&NF>10{printf "%s:%s tot %s exp %s comb %s sel!%s | ", $1, $4, $15, $12, $13, $20}' "$R/$1.log"; echo; }
# 1b. routing A/B
for p in 1 2 3; do
  bm "head_p$p" head 1,2,3,4,5,6,7,8,16,128 --fuse-shared 1 --shared-plan slot; rt "head_p$p"
  bm "new_p$p" tpmoe 1,2,3,4,5,6,7,8,16,128 --fuse-shared 1 --shared-plan slot; rt "new_p$p"
done
bm new_re16 tpmoe 1,2,3,4,5,6,7,8 --fuse-shared 1 --shared-plan slot --route-experts 16; rt new_re16
pack
# 2. prefill shared plan
for p in 1 2 3; do
  bm "slot_p$p" tpmoe 4096,8192 --fuse-shared 1 --shared-plan slot; pf "slot_p$p"
  bm "split_p$p" tpmoe 4096,8192 --fuse-shared 1 --shared-plan split; pf "split_p$p"
  bm "unf_p$p" tpmoe 4096,8192 --fuse-shared 0; pf "unf_p$p"
done
pack
timeout 300 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
echo "== total $(el)"
