#!/usr/bin/env bash
# run_r253_h200.sh - one GPU (an H100 or H200), into $OUT/r253: the rule r252 suggested, router
# experts per logits block 16 (not 32) at 1-2 tokens on a TP 2 rank. gpu_moe (it checks the rule on
# a TP 2 rank), then 32 against 16, forced by --route-experts, at 1 and 2 tokens, fused and unfused,
# three passes in alternating order: the whole layer (TP 1, which keeps 32) and TP rank 0's share
# of a TP 2, 4 and 8 layer (`--shard`); the other GPU tests before the third pass (a short lease
# keeps what finished: each step packs).
# Binaries: prebuilt/bin.txz, compact Release builds (build-crel) of this tree: 781defe's sources
# plus the rule (tpm_cuda_moe_route_experts_for) and its test.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r253_h200.sh
NAME=r253
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
for pass in a b c; do
  [ $pass = c ] && gtest gpu_act gpu_moe_paths gpu_moe_api
  case $pass in b) order="16 32" ;; *) order="32 16" ;; esac
  for sh in 1 2 4 8; do
    for re in $order; do
      a=""; [ $sh -gt 1 ] && a="--shard $sh"
      tag=${pass}_s${sh}_e$re
      timeout 60 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 $a --route-experts $re \
        --fuse-shared both --tokens 1,2 --json "$R/ab_$tag.json" > "$R/ab_$tag.log" 2>&1
      printf "== %-10s rc=%d (%s): " $tag $? "$(el)"
      awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s %s | ", $1, $2, $11, $15}' "$R/ab_$tag.log"; echo
    done
  done
  pack
done
echo "== r253 done ($(el))"
