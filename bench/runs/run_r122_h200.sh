#!/usr/bin/env bash
# run_r122_h200.sh - one H200, into $OUT/r122: r121's one failure after the EP fix, TP 2 x EP 2 at
# 256 tokens (world 4 sharing the GPU): rank 1's routing phase took 7.5 s by its events, the other
# ranks' all-reduces waited that long, and the output held NaN (no error). Which kernels are resident
# then? The case again with cuda-gdb attached after 7 s (as r117), then TP 4 and EP 2 at 256 tokens.
# Binaries (prebuilt/bin.txz): tpmoe of the working tree (symbols kept).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r122_h200.sh
NAME=r122
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TIMEOUT_MS=15000
GDB_BT=40
. bench/gdb_case.sh   # case_: the run, cuda-gdb after 7 s
case_ tp2ep2_t256 --preset m3-mini --tp 2 --ep 2 --tokens 256
case_ tp4_t256 --preset m3-mini --tp 4 --tokens 256
case_ ep2_t256 --preset m3-mini --ep 2 --tokens 256
pack
echo "== total $(el)"
