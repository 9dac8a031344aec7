#!/usr/bin/env bash
# run_final13_h200x2.sh - the release check of this session's final tree on
# 2 x H200, into $OUT/final13: the all-reduce half of run_final_h200x2.sh
# (gpu_allreduce, gpu_comm_api, the CUDA MoE CLI at TP 2, the whole
# all-reduce table on the default set 10), the MoE GPU tests (gpu_moe,
# gpu_moe_api) and gpu_allreduce on set 19. The MoE code is final12's, so its
# timing tables are not re-run. Binaries (prebuilt/bin.txz): tpmoe,
# gpu_allreduce, gpu_comm_api, gpu_moe, gpu_moe_api, as in run_final_h200x2.sh.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final13_h200x2.sh
NAME=final13 PART=ar bash bench/runs/run_final_h200x2.sh
NAME=final13
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe timeout 100 "$B/gpu_allreduce" > "$R/gpu_allreduce_v19.log" 2>&1
echo "== gpu_allreduce (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_v19.log"
grep -E "^ +(12288|786432|2097152|33554432|100663296) " "$R/bench_allreduce.log" | cut -c1-120
pack
echo "== total $(el)"
