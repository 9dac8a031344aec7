#!/usr/bin/env bash
# run_r70_h200x2.sh - r69's script for three builds of the flag-free kernel in
# one call, 2 x H200: tpmoe (the world-2 codec path as a pipeline A(j) B(j-1)
# C(j-2) over a CTA's columns), tpmoe_pf (r69's: A, B, C in turn with the
# next column's loads issued early), tpmoe_llold (cuda_twoshot_ll.cu of
# commit 8ebbc26). All three link the same library (this tree's), only the
# cuda_twoshot_ll.cu object differs (linked ahead of libtpmoe.a). Tests:
# gpu_allreduce on set 10 and on set 19 (this tree's build).
# Binaries (prebuilt/ab.txz): tpmoe, tpmoe_pf, tpmoe_llold, gpu_allreduce.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r70_h200x2.sh
NAME=r70 TESTS=gpu_allreduce BINS="tpmoe_llold tpmoe_pf tpmoe" bash bench/runs/run_r69_h200x2.sh
