#!/usr/bin/env bash
# run_r212_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r212: the Triton peer's
# sweep widened where r209 left doubt (the issue's own tuned Triton figure at 1024 tokens, 3374 us on
# its H200, is 1.24x faster than r209's best of 10 configs): 9 / 10 / 12 configs at 8-32 / 128 /
# 1024 tokens (memory-bound shapes: BLOCK_K 128-256, small BLOCK_M), tpmoe's layer before and after.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r212_h200.sh
NAME=r212
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TK=8,32,128,1024
bm() { # name args...
  local n=$1; shift
  timeout 100 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --check 1 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-12s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $4, $15, $18}')"
}
bm tpmoe_a --tokens $TK; pack
timeout 300 python3 bench/peers/moe_peers.py --tokens $TK --peers triton --sweep-budget-s 90 --json "$R/peers_triton.json" > "$R/peers_triton.log" 2>&1
echo "rc=$?"; grep " triton " "$R/peers_triton.log"; pack
bm tpmoe_b --tokens $TK; pack
echo "== r212 done ($(el))"
