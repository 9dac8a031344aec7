#!/usr/bin/env bash
# run_final12_h200x2.sh - the release check of this session's final tree on
# 2 x H200, into $OUT/final12: the all-reduce half of run_final_h200x2.sh
# (gpu_allreduce, gpu_comm_api, the CUDA MoE CLI at TP 2, the whole
# all-reduce table on the default set) and the MoE GPU tests (gpu_moe,
# gpu_moe_api). The MoE code is final11's, so its timing tables are not
# re-run. Binaries (prebuilt/bin.txz) as in run_final_h200x2.sh.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final12_h200x2.sh
NAME=final12 PART=ar bash bench/runs/run_final_h200x2.sh
NAME=final12
. bench/device_env.sh
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack
