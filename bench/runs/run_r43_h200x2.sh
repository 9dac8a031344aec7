#!/usr/bin/env bash
# run_r43_h200x2.sh - the release check of this session's tree on 2 x H200 in one
# device call: every GPU test on the default kernel set (10), the CUDA MoE CLI
# at TP 2 against fp64, gpu_allreduce on set 14 (set 10 with the exact
# warp-specialized reduce role loading the next column early), sets 10 and 14
# side by side (outputs compared bitwise), and the TP 2 MoE layer at 1 and 8
# tokens, fused and unfused.
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r43_h200x2.sh
NAME=${NAME:-r43}
. bench/device_env.sh
nvidia-smi topo -m > "$R/topo.txt" 2>&1

for t in gpu_allreduce gpu_comm_api gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$R/$t.log" | head -8
done
pack
timeout 60 "$B/tpmoe" moe --preset m3-mini --tokens 64 --backend cuda --tp 2 --check \
  > "$R/moe_cuda_cli.log" 2>&1
echo "== tpmoe moe --backend cuda --tp 2 rc=$? ($(el))"; tail -3 "$R/moe_cuda_cli.log"
pack

TPMOE_CUDA_AR_VARIANT=14 timeout 120 "$B/gpu_allreduce" > "$R/gpu_allreduce_v14.log" 2>&1
echo "== gpu_allreduce (set 14) rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR" "$R/gpu_allreduce_v14.log" | head -8
timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8 --variants 10,14 \
  --sizes 16M,32M,64M,96M,128M --iters 30 --json "$R/allreduce_sets.json" > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 10 / 14 rc=$? ($(el))"
cut -c1-200 "$R/bench_allreduce_sets.log"
pack

timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 1,8 --tp 2 --fuse-shared both \
  --check 1 --json "$R/moe_m3_tp2.json" > "$R/bench_moe_tp2.log" 2>&1
echo "== bench moe tp2 rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp2.log" | cut -c1-160
pack
echo "== total $(el)"
