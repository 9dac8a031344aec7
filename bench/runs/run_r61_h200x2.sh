#!/usr/bin/env bash
# run_r61_h200x2.sh - this commit's tree on 2 x H200 (a release-check shape),
# into $OUT/r61: the all-reduce half of run_final_h200x2.sh (gpu_allreduce,
# gpu_comm_api, the CUDA MoE CLI at TP 2, the whole all-reduce table on the
# default set 10, which now runs its codec calls on the flag-free kernel where
# r60 measured it faster), the MoE GPU tests (gpu_moe, gpu_moe_api: the
# communicator's buffer layout changed), gpu_allreduce on set 19, and sets
# 5 / 10 / 19 side by side for the codecs (set 5: every codec call on the flag
# kernels, i.e. set 10 before this session; outputs compared between sets).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, gpu_comm_api, gpu_moe,
# gpu_moe_api, built as in run_final_h200x2.sh.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r61_h200x2.sh
NAME=r61 PART=ar bash bench/runs/run_final_h200x2.sh
NAME=r61
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe timeout 100 "$B/gpu_allreduce" > "$R/gpu_allreduce_v19.log" 2>&1
echo "== gpu_allreduce (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_v19.log"
pack
timeout 200 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs int8,int6,int4,fp8,int4_h,int6_h \
  --variants 5,10,19 --sizes 2M,4M,8M,32M,64M,96M --iters 30 --json "$R/allreduce_sets.json" \
  > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 / 19 rc=$? ($(el)) differs: $(grep -c differs "$R/bench_allreduce_sets.log")"
grep -E "^ +[0-9]" "$R/bench_allreduce_sets.log" | cut -c1-150
grep -E "^ +(12288|786432|2097152|33554432|100663296) " "$R/bench_allreduce.log" | cut -c1-150 | head -40
pack
echo "== total $(el)"
