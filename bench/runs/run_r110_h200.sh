#!/usr/bin/env bash
# run_r110_h200.sh - one H200, into $OUT/r110: the held-rate helper after its tidy-up (a lambda
# instead of a macro; same calls): bench moe at 1 and 8192 tokens with --gemm-hold 2, the two
# rates printed in the header. Binaries (prebuilt/bin.txz): tpmoe of HEAD.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r110_h200.sh
NAME=r110
. bench/device_env.sh
"$B/tpmoe" bench moe --preset m3 --tokens 1,8192 --fuse-shared 1 --check 1 --gemm-hold 2 > "$R/bench.log" 2>&1
echo "== bench rc=$? ($(el))"; sed -n '/^# device/,$p' "$R/bench.log" | grep -v "^# T=" | cut -c1-210
pack
