#!/usr/bin/env bash
# run_r249_h200.sh - r248 (round 45's library: every GPU test, the issue's table, the layer at
# 4096 and 8192 tokens) on an H200 only, into $OUT/r249: on any other card it stops at once
# (rc 3), since r248 already ran these binaries on an H100.
# Binaries: prebuilt/bin.txz: r248's (compact Release builds of baa3ea9) until 88f0eee; then
# r251's (781defe's sources: the same CUDA library sources); since b944bd6 r253's (781defe's
# sources plus the TP 2 rank's router experts per logits block, which no TP 1 step here uses);
# since 654fcea r254's (that rule on every TP >= 2 rank: still no TP 1 step here uses it); since
# dabad61 r258's (efe0624: round 48's routing, the fused layer's shared slot implied at 1-16 tokens;
# r259 ran these steps on them on an H100); since round 49's commit r263's (the permutation by every
# selecting block from 25 tokens; r263 runs these steps on whatever card comes); since 3aaadad
# r266's (a73d944: round 49's final library, plus its tpmoe_trace, which these steps do not use).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r249_h200.sh
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$card" in *H200*) ;; *) echo "== r249: $card is not an H200, stopping"; exit 3 ;; esac
NAME=r249 exec bash bench/runs/run_r246_h200.sh
