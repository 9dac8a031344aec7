#!/usr/bin/env bash
# run_r229_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r229: round 39's second call.
# What costs random routing its 24% over uniform at 8192 tokens (r228: m3rr 8.17-8.27 ms against
# routed 6.59-6.63 in form 2, ONE H100)? wg_probe (bench/micro/wg_probe.cu of ad6248c: the library's
# kernel file, unchanged since 996c346) with two more layouts of routed's 32768 rows, half the experts
# with a third row tile:
#   thin  257 / 255 rows: a 1-row odd tile (63 padded rows in its 64-row chunk);
#   even  320 / 192 rows: a full 64-row odd tile, no padded rows at all;
# so that thin - even is the padding and even - routed the odd items. Three passes.
# Binaries: prebuilt/bin.txz (wg_probe, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r229_h200.sh
NAME=r229
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv -lms 250 > "$R/clocks.csv" 2>&1 &
SMI=$!
for p in a b c; do
  timeout 90 "$B/wg_probe" --json "$R/probe_$p.json" > "$R/probe_$p.log" 2>&1
  echo "== probe $p rc=$? ($(el))"; grep -v "^device\|^layout\|^cublas" "$R/probe_$p.log" | awk '{printf "%s/%s:%s:%s ", $1, $2, $7, substr($11, 1, 6)} END {print ""}'
  pack
done
kill $SMI 2>/dev/null
pack
echo "== r229 done ($(el))"
