#!/usr/bin/env bash
# run_final17_h200x2.sh - a short 2 x H200 check of the final tree, if a 2-GPU
# machine is lent before the session ends (the device time left is ~6 min):
# gpu_allreduce and gpu_comm_api (the all-reduce code of commit e5f4fdb has not
# run on two GPUs yet), gpu_moe_api (its TP 2 / EP 2 parts), the CUDA MoE CLI
# at TP 2, and m3 at TP 2, 1 and 8 tokens, fused and unfused. No all-reduce
# table (final15's stands). Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce,
# gpu_comm_api, gpu_moe_api of the final tree.
# Run from the repository root:  OUT=/some/dir bash bench/run_final17_h200x2.sh
NAME=final17
. bench/device_env.sh
nvidia-smi topo -m > "$R/topo.txt" 2>&1
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
for t in gpu_allreduce gpu_comm_api gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
timeout 60 "$B/tpmoe" moe --preset m3-mini --tokens 64 --backend cuda --tp 2 --check > "$R/moe_cuda_cli.log" 2>&1
echo "== tpmoe moe --backend cuda --tp 2 rc=$? ($(el))"; tail -2 "$R/moe_cuda_cli.log"
timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both \
  --check 1 --json "$R/moe_m3_tp2.json" > "$R/bench_moe_tp2.log" 2>&1
echo "== bench moe tp2 rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp2.log" | cut -c1-200
pack
echo "== total $(el)"
