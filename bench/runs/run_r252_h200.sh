#!/usr/bin/env bash
# run_r252_h200.sh - one GPU, into $OUT/r252: TP rank 0's share of a TP 2 layer (`--shard 2`) at
# 1 and 2 tokens, fused and unfused, under each decode setting the tool exposes, one at a time
# against the defaults (which open and close the sweep), two passes. The question: does any
# existing setting bring the fused share at 2 tokens to <= 158 us (r251: 163-166), where the TP 2
# block's 1.1x target (unfused / fused) is still within reach? On an H200 it first runs r249
# (r248's GPU tests and the issue's table, into $OUT/r249) and judges it with targets_moe.py.
# Binaries: prebuilt/bin.txz, compact Release builds of 781defe's sources (r251's).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r252_h200.sh
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$card" in *H200*) (bash bench/runs/run_r249_h200.sh) ;; esac
NAME=r252
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
if [ -f "$OUT/r249/status.json" ]; then
  python3 bench/targets_moe.py "$OUT/r249/status.json" > "$R/targets_r249.log" 2>&1
  echo "== targets r249: $(tail -1 "$R/targets_r249.log")"
  pack
fi
i=0
for pass in a b; do
  for v in "default" "--down-kernel 0" "--down-kernel 1" "--down-kernel 3" "--down-kernel 4" \
           "--gate-up-pairs 1" "--gate-up-pipe 0" "--expert-wait 0" "--shared-plan split" "--pdl 0" \
           "--route-experts 16" "--decode-kernel 0" "default"; do
    i=$((i + 1))
    a=$v; [ "$v" = default ] && a=
    tag=$(printf "%s_%02d" $pass $i)
    timeout 60 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 --shard 2 --fuse-shared both \
      --tokens 1,2 $a --json "$R/sw_$tag.json" > "$R/sw_$tag.log" 2>&1
    rc=$?
    printf "== %s %-20s rc=%d (%s): " "$tag" "$v" $rc "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s %s %s | ", $1, $2, $4, $6, $15}' "$R/sw_$tag.log"; echo
  done
  pack
done
echo "== r252 done ($(el))"
