#!/usr/bin/env bash
# run_r263_h200.sh - r246's steps (every GPU test, the issue's table, the layer at 4096 and 8192
# tokens) on round 49's binaries (prebuilt/bin.txz: compact Release builds with the permutation
# by every selecting block from 25 tokens, tuning.route_perm_min's default), on whatever card
# comes, into $OUT/r263: the status of the library after round 49.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r263_h200.sh
NAME=r263 exec bash bench/runs/run_r246_h200.sh
