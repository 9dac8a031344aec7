#!/usr/bin/env bash
# run_r240_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r240: tests/gpu_act.cu
# with its bound corrected after r239 (2^-17 relative for the scaled ex2 argument, plus the
# flushed sigmoid's 2^-126 |gate x up factor| absolute; r239's 2^-18 / 1e-34 failed in the
# flush window with large ups).
# Binaries: prebuilt/bin.txz (gpu_act, a compact Release build of the tree; stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r240_h200.sh
NAME=r240
. bench/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
timeout 100 "$B/gpu_act" > "$R/gpu_act.log" 2>&1
echo "== gpu_act rc=$? ($(el))"
cat "$R/gpu_act.log"
pack
