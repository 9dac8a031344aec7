#!/usr/bin/env bash
# run_r135_h200.sh - one H200, into $OUT/r135: ranks sharing the GPU run every collective on a grid
# of TPM_CUDA_SHARE_GRID (2) CTAs (src/comm/cuda_comm.cu), instead of r134's arrival gate (a
# second kernel per call, which timed out once in gpu_allreduce).
#  1. gpu_allreduce (with share_full_gpu: a kernel needing all but four SMs at once between two
#     sharing ranks' calls) and gpu_preload;
#  2. TP 2 x EP 2 at 256 tokens (m3-mini, --check) eight times, a 3 s timeout (r134: 5 of 6 runs
#     of the binary before timed out);
#  3. TP 2 x EP 2 at 300 and 777, TP 4 and EP 2 at 256, TP 2 x EP 2 fused at 256, TP 8 at 40;
#  4. gpu_moe_api (its CLI case runs in share mode).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, gpu_preload, gpu_moe_api.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r135_h200.sh
NAME=r135
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp|gpu_preload|gpu_allreduce:|graph:|gave up" "$1" | head -12; }
timeout 400 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce rc=$? ($(el))"; ok "$R/gpu_allreduce.log"
timeout 120 "$B/gpu_preload" > "$R/gpu_preload.log" 2>&1
echo "== gpu_preload rc=$? ($(el))"; ok "$R/gpu_preload.log"
pack
export TPMOE_CUDA_SHARE_GPU=1
run_case() { # name tp ep tokens [env...]
  local n=$1 tp=$2 ep=$3 t=$4; shift 4
  env "$@" timeout 60 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $tp --ep $ep \
    --tokens $t --iters 2 --check > "$R/moe_$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  grep -E "ranks agree|: ok|FAIL|rror|timeout|gave up" "$R/moe_$n.log" | cut -c1-160 | head -2
}
for i in 1 2 3 4 5 6 7 8; do run_case "tp2_ep2_t256_$i" 2 2 256 TPMOE_TIMEOUT_MS=3000; done
pack
run_case tp2_ep2_t300 2 2 300 TPMOE_TIMEOUT_MS=3000
run_case tp2_ep2_t777 2 2 777 TPMOE_TIMEOUT_MS=3000
run_case tp4_t256 4 1 256 TPMOE_TIMEOUT_MS=3000
run_case ep2_t256 1 2 256 TPMOE_TIMEOUT_MS=3000
run_case tp2_ep2_t256_fused 2 2 256 TPMOE_TIMEOUT_MS=3000 TPMOE_FUSE_SHARED_EXPERTS=1
run_case tp8_t40 8 1 40 TPMOE_TIMEOUT_MS=3000
pack
unset TPMOE_CUDA_SHARE_GPU
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
echo "== total $(el)"
