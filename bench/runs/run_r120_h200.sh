#!/usr/bin/env bash
# run_r120_h200.sh - one H200, into $OUT/r120: r119's TP 2 x EP 2 at 300 tokens (world 4 on one
# GPU) timed out with rank 0 waiting for rank 2 after the warm-up fix. A first cuBLAS use at a
# token count the warm-up did not run (300; it runs 256 and 384), or a kernel of rank 2 that cannot
# be placed beside three ranks' spinning all-reduces? Cases as in r117 (cuda-gdb attached after
# 7 s: host stacks and resident kernels): TP 2 x EP 2 at 300 and 256, EP 2 at 300, TP 2 at 300.
# Binaries (prebuilt/bin.txz): tpmoe of the working tree (symbols kept).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r120_h200.sh
NAME=r120
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TIMEOUT_MS=15000
. bench/gdb_case.sh   # case_: the run, cuda-gdb after 7 s
case_ tp2ep2_t300 --preset m3-mini --tp 2 --ep 2 --tokens 300
case_ tp2ep2_t256 --preset m3-mini --tp 2 --ep 2 --tokens 256
case_ ep2_t300 --preset m3-mini --ep 2 --tokens 300
case_ tp2_t300 --preset m3-mini --tp 2 --tokens 300
pack
echo "== total $(el)"
