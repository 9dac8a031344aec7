#!/usr/bin/env bash
# run_r55_h200.sh - the one-GPU loopback of the world-2 two-shot
# (bench/ar_loopback.cu: sets 5 and 19 for exact / INT8 / INT4 at 8-96 MB,
# both ranks' kernels concurrent on GPU 0, outputs checked between ranks and
# sets). Binary carried: prebuilt/ar_loopback (build line in the source).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r55_h200.sh
NAME=${NAME:-r55}
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv
timeout 120 "$B/ar_loopback" "$R/ar_loopback.json" 2>&1 | tee "$R/ar_loopback.log"
