#!/usr/bin/env bash
# run_r210_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r210: the decode / prefill
# switch re-measured. r209 had the Triton fused-MoE peer's GEMMs (its glue left out) at 1.02x of the
# HBM floor at 8 tokens on the H200 where tpmoe's decode path takes 1.07x: time tpmoe's prefill path
# (the wgmma GEMM, TMA weight loads) against the default decode path at 2-8 tokens, and the decode
# path against the default prefill at 9-12, fused, two passes interleaved.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r210_h200.sh
NAME=r210
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
bm() { # name args...
  local n=$1; shift
  timeout 100 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --check 1 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-12s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s/%s ", $1, $3, $4, $15, $18}')"
}
for pass in a b; do
  bm default_$pass --tokens 2,4,6,8,9,12
  bm prefill_$pass --tokens 2,4,6,8 --path prefill
  bm decode_$pass  --tokens 9,12 --path decode
  pack
done
echo "== r210 done ($(el))"
