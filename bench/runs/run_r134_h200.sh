#!/usr/bin/env bash
# run_r134_h200.sh - one H200, into $OUT/r134: the share-mode arrival gate (results/r134/gate.patch,
# never committed: r135 replaced it)
# against the intermittent TP 2 x EP 2 timeout of r121-r124 (four ranks sharing the GPU).
#  1. gpu_allreduce (new case gate_full_gpu: a kernel needing all but two SMs at once between two
#     sharing ranks' calls) and gpu_preload;
#  2. TP 2 x EP 2 at 256 tokens (m3-mini, --check), six times with the binary of HEAD before the
#     gate ($B/old/tpmoe) and six times with the gate ($B/tpmoe), a 3 s timeout: r124 failed 3 of 4;
#  3. with the gate: TP 2 x EP 2 at 300 and 777, TP 4 and EP 2 at 256, TP 2 x EP 2 fused at 256;
#  4. gpu_moe_api (its CLI case runs in share mode) and gpu_moe.
# Binaries (prebuilt/bin.txz): tpmoe, old/tpmoe, gpu_allreduce, gpu_preload, gpu_moe_api, gpu_moe.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r134_h200.sh
NAME=r134
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp|gpu_preload|gpu_allreduce:" "$1" | head -12; }
timeout 300 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce rc=$? ($(el))"; ok "$R/gpu_allreduce.log"
timeout 120 "$B/gpu_preload" > "$R/gpu_preload.log" 2>&1
echo "== gpu_preload rc=$? ($(el))"; ok "$R/gpu_preload.log"
pack
export TPMOE_CUDA_SHARE_GPU=1
run_case() { # name binary tp ep tokens [env...]
  local n=$1 bin=$2 tp=$3 ep=$4 t=$5; shift 5
  env "$@" timeout 60 stdbuf -oL -eL "$bin" moe --backend cuda --preset m3-mini --tp $tp --ep $ep \
    --tokens $t --iters 2 --check > "$R/moe_$n.log" 2>&1
  echo "== $n rc=$? ($(el))"
  grep -E "ranks agree|: ok|FAIL|rror|timeout|gave up" "$R/moe_$n.log" | cut -c1-200 | head -3
}
for i in 1 2 3 4 5 6; do
  run_case "old_tp2_ep2_t256_$i" "$B/old/tpmoe" 2 2 256 TPMOE_TIMEOUT_MS=3000
  run_case "gate_tp2_ep2_t256_$i" "$B/tpmoe" 2 2 256 TPMOE_TIMEOUT_MS=3000
done
pack
run_case gate_tp2_ep2_t300 "$B/tpmoe" 2 2 300 TPMOE_TIMEOUT_MS=3000
run_case gate_tp2_ep2_t777 "$B/tpmoe" 2 2 777 TPMOE_TIMEOUT_MS=3000
run_case gate_tp4_t256 "$B/tpmoe" 4 1 256 TPMOE_TIMEOUT_MS=3000
run_case gate_ep2_t256 "$B/tpmoe" 1 2 256 TPMOE_TIMEOUT_MS=3000
run_case gate_tp2_ep2_t256_fused "$B/tpmoe" 2 2 256 TPMOE_TIMEOUT_MS=3000 TPMOE_FUSE_SHARED_EXPERTS=1
pack
unset TPMOE_CUDA_SHARE_GPU
TPMOE_TOOL=$B/tpmoe timeout 240 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; ok "$R/gpu_moe_api.log"
pack
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"; ok "$R/gpu_moe.log"
pack
echo "== total $(el)"
