#!/usr/bin/env bash
# run_r66_h200x2.sh - the final tree after merging codec_fast.h's two
# quant-block functions into one (lz argument): gpu_allreduce and gpu_comm_api
# on the default set, and a short all-reduce check at 32 / 96 MB.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, gpu_comm_api.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r66_h200x2.sh
NAME=${NAME:-r66}
. bench/device_env.sh
for t in gpu_allreduce gpu_comm_api; do
  TPMOE_TOOL=$B/tpmoe timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|graph:" "$R/$t.log" | head -8
done
pack
timeout 60 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int4 --sizes 32M,96M \
  --json "$R/allreduce_h200x2.json" > "$R/bench_allreduce.log" 2>&1
echo "== bench allreduce rc=$? ($(el))"
grep -E "^ +[0-9]" "$R/bench_allreduce.log" | cut -c1-120
pack
