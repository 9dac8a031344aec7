#!/usr/bin/env bash
# run_r254_h200.sh - one GPU (an H100 or H200), into $OUT/r254: round 47's rule, router experts per
# logits block 16 (not 32) at 1-2 tokens on every rank of TP >= 2 (r253 measured TP 4 and 8 gaining
# too). gpu_moe first (it checks the rule on a TP 2 and a TP 8 rank created alone), then the
# default against 32 forced by --route-experts at 1 and 2 tokens, fused and unfused, two passes in
# alternating order: the whole layer (TP 1, which keeps 32: both forms must agree there) and TP rank
# 0's share of a TP 2, 4 and 8 layer (`--shard`); the other GPU tests between the passes (a short
# lease keeps what finished: each step packs). On an H200 the issue's table follows.
# Binaries: prebuilt/bin.txz, compact Release builds (build-crel) of this tree: b944bd6's sources
# plus the widened rule (tpm_cuda_moe_route_experts_for) and its test.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r254_h200.sh
NAME=r254
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
gtest() {
  for t in "$@"; do
    timeout 150 "$B/$t" > "$R/$t.log" 2>&1
    echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/$t.log" | head -5
    pack
  done
}
gtest gpu_moe
for pass in a b; do
  [ $pass = b ] && gtest gpu_act gpu_moe_paths gpu_moe_api
  case $pass in b) order="def e32" ;; *) order="e32 def" ;; esac
  for sh in 1 2 4 8; do
    for re in $order; do
      a=""; [ $sh -gt 1 ] && a="--shard $sh"
      [ $re = e32 ] && a="$a --route-experts 32"
      tag=${pass}_s${sh}_$re
      timeout 60 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 $a \
        --fuse-shared both --tokens 1,2 --json "$R/ab_$tag.json" > "$R/ab_$tag.log" 2>&1
      printf "== %-10s rc=%d (%s): " $tag $? "$(el)"
      awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s %s | ", $1, $2, $11, $15}' "$R/ab_$tag.log"; echo
    done
  done
  pack
done
# on an H200 only (r248 ran the table on an H100): the issue's table with this build
case "$(cat "$R/smi.txt")" in *H200*)
  n=table
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "== %-8s rc=%d (%s): " $n $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
  pack ;;
esac
echo "== r254 done ($(el))"
