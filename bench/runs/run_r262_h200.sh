#!/usr/bin/env bash
# run_r262_h200.sh - one GPU, into $OUT/r262: round 49 (the routing's permutation written by
# every block that selected an 8-token group, tuning.route_perm_min, default 12) on the GPU:
# every GPU test (gpu_moe now holds both permutation forms to the default's bits in modes 1 and
# 3 at 1-256 tokens, the EP test runs the new form at 33 tokens), then the routing sweep with
# the new form (--route-perm-min 12) against the old one (0) in alternating order, three passes,
# one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#     --tokens 9,12,16,17,20,24,25,32,48,64,96,128,160,192,256 --route-perm-min 12|0
# Binaries: prebuilt/bin.txz (compact Release builds of round 49's sources).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r262_h200.sh
NAME=r262
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
TOK=9,12,16,17,20,24,25,32,48,64,96,128,160,192,256
for pass in a b c; do
  order="12 0"; [ $pass = b ] && order="0 12"
  for pm in $order; do
    tag=${pass}_pm$pm
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK \
      --route-perm-min $pm --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-7s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s | ", $1, $7, $11}' "$R/$tag.log"; echo
  done
  pack
done
echo "== r262 done ($(el))"
