#!/usr/bin/env bash
# run_r241_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r240: tests/gpu_act.cu
# on splitmix.h's generator (tests/util), the data r240 did not see; the bound as in r240
# Binaries: prebuilt/bin.txz (gpu_act, a compact Release build of the tree; stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r241_h200.sh
NAME=r241
. bench/device_env.sh
nvidia-smi --query-gpu=name --format=csv,noheader > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
timeout 100 "$B/gpu_act" > "$R/gpu_act.log" 2>&1
echo "== gpu_act rc=$? ($(el))"
cat "$R/gpu_act.log"
pack
