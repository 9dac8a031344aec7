#!/usr/bin/env bash
# run_final12_moe_h200x2.sh - the MoE tables of this session's final tree
# (the benchmark part of run_final_h200x2.sh's MoE half, without its GPU
# tests, which final12 already ran), into $OUT/final12_moe: m3 at TP 1 and
# TP 2, fused and unfused, read flush, the plot.
# Binaries (prebuilt/bin.txz) as in run_final12_h200x2.sh.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final12_moe_h200x2.sh
NAME=final12_moe
. bench/device_env.sh
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,16,32,1024,8192 --fuse-shared both \
  --check 2 --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe tp1 rc=$? ($(el))"
pack
timeout 45 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both \
  --check 1 --json "$R/moe_m3_tp2.json" > "$R/bench_moe_tp2.log" 2>&1
echo "== bench moe tp2 rc=$? ($(el))"
python3 bench/plot_moe.py "$R/moe_m3_h200.png" "$R"/moe_m3_tp1.json "$R"/moe_m3_tp2.json > "$R/plot_moe.log" 2>&1
pack
sed -n '/^# harness/,$p' "$R/bench_moe_tp1.log" | cut -c1-200
sed -n '/^tokens/,$p' "$R/bench_moe_tp2.log" | cut -c1-200
echo "== total $(el)"
