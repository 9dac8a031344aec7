#!/usr/bin/env bash
# run_r124_h200.sh - one H200, into $OUT/r124: the kernel preload (src/core/cuda_preload.cu) and
# tpm_comm_get_async_error.
#  1. gpu_preload under CUDA_MODULE_LOADING=LAZY (its ctest form), then three runs of
#     `gpu_preload --no-preload`: the same first-launch-beside-a-spinning-all-reduce case with
#     the preload switched off (does the lazy load wait for the spin?);
#  2. gpu_allreduce (its timeout test now asks tpm_comm_get_async_error too);
#  3. the CLI with ranks sharing the GPU under LAZY loading (the CLI forces EAGER in share mode
#     unless CUDA_MODULE_LOADING is set): EP 2 at 3 / 40 / 300 tokens, TP 2 at 40, TP 2 x EP 2
#     at 300 (r117 had EP 2 at 3 tokens time out under LAZY before the warm-up);
#  4. TP 2 x EP 2 at 256 tokens four times (the intermittent case of r121-r123) with a 5 s
#     timeout: a failure must now end in an error from the CLI, not NaN with no error;
#  5. gpu_moe_api and gpu_moe.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_preload, gpu_allreduce, gpu_moe_api, gpu_moe.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r124_h200.sh
NAME=r124
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp|gpu_preload" "$1" | head -12; }
timeout 120 "$B/gpu_preload" > "$R/gpu_preload.log" 2>&1
echo "== gpu_preload rc=$? ($(el))"; ok "$R/gpu_preload.log"
for i in 1 2 3; do
  timeout 60 "$B/gpu_preload" --no-preload > "$R/gpu_preload_off_$i.log" 2>&1
  echo "== gpu_preload --no-preload #$i rc=$? ($(el))"; tail -4 "$R/gpu_preload_off_$i.log" | cut -c1-200
done
pack
timeout 300 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce rc=$? ($(el))"; ok "$R/gpu_allreduce.log"
pack
export TPMOE_CUDA_SHARE_GPU=1
run_case() { # name tp ep tokens [env...]
  local n=$1 tp=$2 ep=$3 t=$4; shift 4
  env "$@" timeout 60 stdbuf -oL -eL "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $tp --ep $ep \
    --tokens $t --iters 2 --check > "$R/moe_$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  grep -E "ranks agree|: ok|FAIL|rror|timeout|gave up" "$R/moe_$n.log" | cut -c1-180 | head -3
}
for c in "1 2 3" "1 2 40" "1 2 300" "2 1 40" "2 2 300"; do
  set -- $c
  run_case "lazy_tp$1_ep$2_t$3" $1 $2 $3 CUDA_MODULE_LOADING=LAZY TPMOE_TIMEOUT_MS=15000
done
pack
for i in 1 2 3 4; do
  run_case "tp2_ep2_t256_$i" 2 2 256 TPMOE_TIMEOUT_MS=5000
done
pack
unset TPMOE_CUDA_SHARE_GPU
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"
pack
echo "== total $(el)"
