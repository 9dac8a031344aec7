#!/usr/bin/env bash
# run_r55_h200x2.sh - the session's last device call: (1) the one-GPU
# loopback of the world-2 two-shot (bench/ar_loopback.cu: sets 5 and 19 for
# exact / INT8 / INT4 at 8-96 MB, both ranks on GPU 0), into $OUT/r55;
# (2) the release check of the final tree, into $OUT/final12: the all-reduce
# half of run_final_h200x2.sh (gpu_allreduce, gpu_comm_api, the CUDA MoE CLI
# at TP 2, the whole all-reduce table on the default set) and the MoE GPU
# tests (gpu_moe, gpu_moe_api). The MoE code is final11's, so its timing
# tables are not re-run.
# Binaries (prebuilt/bin.txz): tpmoe gpu_allreduce gpu_comm_api gpu_moe
# gpu_moe_api as in run_final_h200x2.sh, plus prebuilt/ar_loopback:
#   nvcc -O3 -arch=sm_90 -I src -I include -o prebuilt/ar_loopback bench/ar_loopback.cu \
#        build-prebuilt/libtpmoe.a -lcuda
# Run from the repository root:  OUT=/some/dir bash bench/run_r55_h200x2.sh
NAME=r55
. bench/device_env.sh
CUDA_VISIBLE_DEVICES=0 timeout 120 "$B/ar_loopback" "$R/ar_loopback.json" > "$R/ar_loopback.log" 2>&1
echo "== ar_loopback rc=$? ($(el))"
cat "$R/ar_loopback.log"
pack
NAME=final12 PART=ar bash bench/run_final_h200x2.sh
NAME=final12
. bench/device_env.sh
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack
