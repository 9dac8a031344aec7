#!/usr/bin/env bash
# run_r117_h200.sh - one H200, into $OUT/r117: where `tpmoe moe` at EP 2 hangs with the ranks
# sharing the GPU (r114: EP 2 at 3 and 40 tokens time out, rank 0's all-reduce waiting for rank 1;
# final17 on 2 GPUs: gpu_moe_api's CLI case failed with rc 1, its log lost). Each case runs in the
# background; if it is still running after 7 s, cuda-gdb attaches and writes every host thread's
# stack and the kernels resident on the GPU (NAME.gdb), then lets it go on to its timeout.
# Binaries (prebuilt/bin.txz): tpmoe (symbols kept), gpu_moe_api, gpu_allreduce of HEAD.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r117_h200.sh
NAME=r117
. bench/device_env.sh
export TPMOE_CUDA_SHARE_GPU=1 TPMOE_TIMEOUT_MS=15000
. bench/gdb_case.sh   # case_: the run, cuda-gdb after 7 s
case_ tp2_t40 --preset m3-mini --tp 2 --tokens 40
case_ ep2_t3 --preset m3-mini --ep 2 --tokens 3
case_ ep2_t40 --preset m3-mini --ep 2 --tokens 40
case_ ep2_t40_unfused --preset m3-mini --ep 2 --tokens 40 --fuse-shared 0
case_ ep2_t40_gptoss --preset gpt-oss-mini --ep 2 --tokens 40
CUDA_MODULE_LOADING=LAZY case_ ep2_t3_lazy --preset m3-mini --ep 2 --tokens 3
pack
echo "== total $(el)"
