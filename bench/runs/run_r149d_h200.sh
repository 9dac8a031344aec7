#!/usr/bin/env bash
# run_r149d_h200.sh - one H200, into $OUT/r149d: where r149's early chain went wrong. The
# binaries (tpmoe, gpu_moe_paths, gpu_moe_api) were built from a working tree that the commit
# adding r150 supersedes: the early chain with its routing outputs and tile table read through
# ld.global.cg instead of __ldg, plus a temporary switch TPMOE_EARLY_DIAG (not committed):
# 1 = the early items without programmatic dependent launch, 2 = the chain without early items
# (which also leaves the shared rows of xp ungathered, so it must fail), 0 = the whole chain.
#   gpu_moe_paths with TPMOE_EARLY_DIAG = 0, 1, 2 (its early test printed, per variant, how many
#   outputs differ from the plain chain), then gpu_moe_api.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r149d_h200.sh
NAME=r149d
. bench/device_env.sh
for dg in 0 1 2; do
  TPMOE_EARLY_DIAG=$dg timeout 200 "$B/gpu_moe_paths" > "$R/paths_d$dg.log" 2>&1
  echo "== diag $dg rc=$? ($(el))"; grep -E "DIAG|early shared|FAILED|PASSED|ERROR" "$R/paths_d$dg.log" | head -14
done
TPMOE_TOOL=$B/tpmoe timeout 200 "$B/gpu_moe_api" > "$R/api.log" 2>&1
echo "== api rc=$? ($(el))"; grep -E "fused TP|FAILED|PASSED" "$R/api.log" | head -8
pack
