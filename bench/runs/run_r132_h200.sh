#!/usr/bin/env bash
# run_r132_h200.sh - one H200, into $OUT/r132: the decode layer's kernel timeline (a
# -DTPMOE_MOE_TRACE=ON build, bench moe --trace) for the TP 8 and TP 2 shares (--shard) against
# TP 1, at 1 and 4 tokens, fused. r127: TP 8's share takes 41.2 us at 1 token against a 15.7 us
# floor (2.6x), TP 2's 81.9 against 63.2 (1.30x), TP 1 1.12x: where does the fixed part go?
# Binaries (prebuilt/bin.txz): tpmoe of the working tree built with -DTPMOE_MOE_TRACE=ON.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r132_h200.sh
NAME=r132
. bench/device_env.sh
for s in 8 2 1; do
  a=""; [ $s -gt 1 ] && a="--shard $s"
  timeout 120 "$B/tpmoe" bench moe --preset m3 --tokens 1,4 --gemm-hold 0 --check 1 --fuse-shared 1 --trace 50 $a \
    > "$R/trace_s$s.log" 2>&1
  echo "== shard $s rc=$? ($(el))"
  grep -E "^# T=|^#   |^1 |^4 " "$R/trace_s$s.log" | cut -c1-160
done
pack
echo "== total $(el)"
