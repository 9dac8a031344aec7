#!/usr/bin/env bash
# run_r259_h200.sh - r246's steps (every GPU test, the issue's table, the layer at 4096 and 8192
# tokens) on round 48's binaries (prebuilt/bin48.txz, r258's), on whatever card comes, into
# $OUT/r259: the status of the library after round 48.
# Run from the repository root:  tar xJf prebuilt/bin48.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r259_h200.sh
NAME=r259 exec bash bench/runs/run_r246_h200.sh
