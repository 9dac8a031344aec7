#!/usr/bin/env bash
# run_r113_h200.sh - one H200, into $OUT/r113: the CUDA all-reduce and the TP / EP MoE layer with
# the ranks SHARING the one GPU (TPMOE_CUDA_SHARE_GPU=1, a test mode: every kernel and protocol
# runs and is checked, nothing is timed, no NCCL). gpu_allreduce: worlds 1..8 (exact one-shot and
# two-shot, every codec, odd sizes, in place / unaligned, 100k graph replays, a dead peer's
# timeout, 24-64 MB launches); gpu_moe_api: TP 2 and EP 2 against the CPU backend; tpmoe moe
# --backend cuda --check at TP 2, 4, 8 and EP 2. Binaries (prebuilt/bin.txz): gpu_allreduce,
# gpu_moe_api, tpmoe of HEAD. r111 and r112 (the first tries) timed out where one rank's
# lazily loaded kernel or graph instantiation waited for the device while another rank's
# all-reduce spun on it: kernels now load eagerly and graph replays start together.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r113_h200.sh
NAME=r113
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TOOL=$B/tpmoe
nvidia-smi -L > "$R/gpu.txt" 2>&1
timeout 180 "$B/gpu_moe_api" > "$R/gpu_moe_api.log" 2>&1
echo "== gpu_moe_api rc=$? ($(el))"; grep -E "^\[|GPU|skipped|fail|FAIL" "$R/gpu_moe_api.log" | tail -30
for tp in 2 4 8; do
  timeout 60 "$B/tpmoe" moe --backend cuda --preset m3-mini --tp $tp --tokens 40 --iters 2 --check > "$R/moe_tp$tp.log" 2>&1
  echo "== moe tp $tp rc=$? ($(el))"; grep -E "ranks agree|: ok|bound|error|rror" "$R/moe_tp$tp.log" | head -5
done
timeout 60 "$B/tpmoe" moe --backend cuda --preset m3-mini --tp 2 --ep 2 --tokens 300 --iters 2 --check > "$R/moe_tp2ep2.log" 2>&1
echo "== moe tp 2 ep 2 rc=$? ($(el))"; grep -E "ranks agree|: ok|bound|error|rror" "$R/moe_tp2ep2.log" | head -5
timeout 240 "$B/gpu_allreduce" > "$R/gpu_allreduce.log" 2>&1
echo "== gpu_allreduce rc=$? ($(el))"; grep -E "^\[|GPUs|graph:|differ|disagree|rank [0-9]:" "$R/gpu_allreduce.log" | tail -40
pack
