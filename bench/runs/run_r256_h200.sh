#!/usr/bin/env bash
# run_r256_h200.sh - r246's steps (every GPU test, the issue's table, the layer at 4096 and 8192
# tokens) on the binaries of 654fcea (round 47's library), on whatever card comes, into $OUT/r256:
# the status of the current library (r248 ran round 45's).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r256_h200.sh
NAME=r256 exec bash bench/runs/run_r246_h200.sh
