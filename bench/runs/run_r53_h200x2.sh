#!/usr/bin/env bash
# run_r53_h200x2.sh - run_r52_h200x2.sh again (the same steps, results in
# $OUT/r53) over the binaries of commit fee3f51: kernel set 19 with the quad
# kernel for INT8 / INT4 / INT4_H (since removed; docs/allreduce_cuda_rounds.md,
# round 9).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r53_h200x2.sh
NAME=${NAME:-r53} exec bash bench/runs/run_r52_h200x2.sh
