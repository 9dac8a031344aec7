#!/usr/bin/env bash
# run_r211_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r211: after r210 (the
# decode path stays ahead of the prefill path at 2-8 tokens), the decode path's tensor-core kernel
# set (--decode-kernel 1: one persistent mma.sync launch, measured slower in round 2 and not timed
# since) against the default set at 2-8 tokens, fused, two passes interleaved.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r211_h200.sh
NAME=r211
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
bm() { # name args...
  local n=$1; shift
  timeout 100 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --check 1 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-12s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s/%s ", $1, $3, $4, $15, $18}')"
}
for pass in a b; do
  bm default_$pass --tokens 2,4,6,8
  bm dk1_$pass     --tokens 2,4,6,8 --decode-kernel 1
  pack
done
echo "== r211 done ($(el))"
