#!/usr/bin/env bash
# run_r71_h200x2.sh - the flag-free two-shot in pipeline order for every world
# and codec (exact included), on 2 x H200: gpu_allreduce and gpu_comm_api on
# the default set 10, gpu_allreduce on set 19 (every two-shot on this
# kernel), then sets 10 and 19 side by side for exact and INT8 at 2-128 MB,
# two passes (set 10 runs exact and INT8 below 4 MB / from 64 MB on its
# flag kernels): does the pipelined flag-free kernel now beat them there?
# Binaries (prebuilt/ab.txz): tpmoe, gpu_allreduce, gpu_comm_api of this build.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r71_h200x2.sh
NAME=${NAME:-r71}
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1
for t in gpu_allreduce gpu_comm_api; do
  TPMOE_TOOL=$B/tpmoe timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe timeout 100 "$B/gpu_allreduce" > "$R/gpu_allreduce_v19.log" 2>&1
echo "== gpu_allreduce (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_v19.log"
pack
for pass in 1 2; do
  timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8 --variants 10,19 \
    --sizes 2M,8M,32M,64M,96M,128M --json "$R/sets_$pass.json" > "$R/sets_$pass.log" 2>&1
  echo "== sets 10 / 19 pass $pass rc=$? ($(el)) differs: $(grep -c differs "$R/sets_$pass.log")"
  grep -E "^ +[0-9]" "$R/sets_$pass.log" | cut -c1-150
done
pack
echo "== total $(el)"
