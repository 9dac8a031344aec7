#!/usr/bin/env bash
# run_r51_h200x2.sh - the fence probe (bench/fence_probe.cu): the sender's
# push rate to the peer with one system-scope release per chunk of 2-64 KB
# per CTA, against no fence, barriers only, and 4 / 8-byte stores.
# Binary built here: nvcc -O3 -arch=sm_90 -o prebuilt/fence_probe bench/fence_probe.cu
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r51_h200x2.sh
NAME=${NAME:-r51}
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,power.limit --format=csv > "$R/smi.txt" 2>&1
timeout 200 "$B/fence_probe" "$R/fence_probe.json" > "$R/fence_probe.log" 2>&1
echo "== fence_probe rc=$? ($(el))"
cat "$R/fence_probe.log"
pack
