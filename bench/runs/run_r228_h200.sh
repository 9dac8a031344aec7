#!/usr/bin/env bash
# run_r228_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r228: round 39, the prefill
# GEMM's epilogue and L2 policies.
#   - the epilogue's bf16 conversion by the hardware (cvt.rn.bf16x2.f32; a NaN-carrying row falls
#     back to the software rounding, so the bits are those of tpm_f32_to_bf16);
#   - tuning.prefill_hints (bench --prefill-hints, wg_probe --hints), a mask: 1 down's output stores
#     streaming (st.global.cs), 2 gate_up's, 4 the weight tiles' TMA loads evict-first, 8 the A
#     tiles' evict-last, 16 (with 4, the 2-CTA clusters) a pair of an expert with an odd last tile
#     loads its weights at the normal priority (the odd item re-reads them), 32 / 64 the weight tiles
#     prefetched into L2 (cp.async.bulk.prefetch.tensor) 4 / 8 stages ahead of their loads (both: 12).
#     Default 0 in this build.
#   1. wg_probe (bench/micro/wg_probe.cu, M3 shapes, forms 2 and 3, 7 layouts): head (HEAD 996c346's
#      kernel file) and the new kernel with hints 0, 15, 1, 4, 8, 3, 13, 20, 29, 32, 64, 96, 45;
#      fingerprints must agree;
#   2. bits: tpmoe moe --backend cuda --output of the new build and of HEAD's (tpmoe_head), three mini
#      presets, 40-9000 tokens (the wgmma prefill, forms 3 and 2);
#   3. gpu_moe_paths, gpu_moe, gpu_moe_api (the new build);
#   4. the layer, m3, fused, 1024 and 8192 tokens: head, new with hints 0, 15, 13, 29, 32, 64, 45, 1, two
#      passes;
#   5. wg_probe again: head, new 0, 15, 13, 29, 32, 64.
# Binaries: prebuilt/bin.txz (compact Release builds, stripped): tpmoe, gpu_moe, gpu_moe_paths,
# gpu_moe_api, wg_probe_new of this tree; tpmoe_head, wg_probe_head (HEAD's kernel file, -DWG_NO_HINTS).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r228_h200.sh
NAME=r228
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$R/clocks.csv" 2>&1 &
SMI=$!
pr() { # variant hints pass
  local bin=wg_probe_$1 tag=$1_h$2_$3
  [ "$1" = head ] && tag=head_$3
  timeout 90 "$B/$bin" --hints $2 --json "$R/probe_$tag.json" > "$R/probe_$tag.log" 2>&1
  echo "== probe $tag rc=$? ($(el))"; grep -v "^device\|^layout\|^cublas" "$R/probe_$tag.log" | awk '{printf "%s/%s:%s:%s ", $1, $2, $7, substr($11, 1, 6)} END {print ""}'
}
pr head 0 a
for h in 0 15 1 4 8 3 13 20 29 32 64 96 45; do pr new $h a; done
pack
mkdir -p "$R/bits"; nb=0; ne=0
for p in m3-mini deepseek-v3-mini gpt-oss-mini; do
  for t in 40 200 1000 3000 4096 5000 9000; do
    for b in tpmoe tpmoe_head; do
      timeout 60 "$B/$b" moe --backend cuda --preset $p --tokens $t --iters 1 --seed 7 --output "$R/bits/$b.$p.$t.bin" \
        > "$R/bits/$b.$p.$t.log" 2>&1 || echo "run failed: $b $p $t"
    done
    nb=$((nb + 1)); cmp -s "$R/bits/tpmoe.$p.$t.bin" "$R/bits/tpmoe_head.$p.$t.bin" && ne=$((ne + 1)) || echo "DIFFER: $p $t"
  done
done
echo "== bits: $ne of $nb equal ($(el))"
rm -f "$R"/bits/*.bin
pack
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$1" | head -8; }
for t in gpu_moe_paths gpu_moe; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_TOOL=$B/tpmoe timeout 120 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
bm() { # name binary args...
  local n=$1 b=$2; shift 2
  timeout 120 "$B/$b" bench moe --preset m3 --fuse-shared 1 --tokens 1024,8192 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-10s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s:%s/%s/%s/%s/%s ", $1, $2, $5, $12, $15, $18, $20}')"
}
for pass in a b; do
  bm head_$pass tpmoe_head
  for h in 0 15 13 29 32 64 45 1; do bm h${h}_$pass tpmoe --prefill-hints $h; done
  pack
done
pr head 0 b
for h in 0 15 13 29 32 64; do pr new $h b; done
kill $SMI 2>/dev/null
pack
echo "== r228 done ($(el))"
