#!/usr/bin/env bash
# run_final18_moe_h200.sh - this session's MoE release check on one H200 (the
# 2-GPU machine was not lent this session), into $OUT/final18_moe: the MoE GPU
# tests (gpu_moe, gpu_moe_api; their TP 2 parts skip with one GPU), then the
# issue's benchmark, m3 at TP 1, fused and unfused, read flush:
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both
# a routing / in-between sweep (2, 4, 16, 64, 256, 2048, 4096 tokens, fused),
# a second pass of the sizes (fused), and the plot. Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_api of the
# final tree (Release, sm_90 + sm_90a).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final18_moe_h200.sh
NAME=final18_moe
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp|differ" "$1" | head -8; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt" 2>&1
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both \
  --check 2 --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe tp1 rc=$? ($(el))"
sed -n '/^# harness/,$p' "$R/bench_moe_tp1.log" | cut -c1-200
pack
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 2,4,16,64,256,2048,4096 --fuse-shared 1 \
  --check 1 --json "$R/moe_m3_tp1_sweep.json" > "$R/bench_moe_tp1_sweep.log" 2>&1
echo "== bench moe tp1 sweep rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp1_sweep.log" | cut -c1-200
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared 1 \
  --check 1 --json "$R/moe_m3_tp1_pass2.json" > "$R/bench_moe_tp1_pass2.log" 2>&1
echo "== bench moe tp1 pass 2 (fused) rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp1_pass2.log" | cut -c1-200
python3 bench/plot_moe.py "$R/moe_m3_h200.png" "$R"/moe_m3_tp1.json > "$R/plot_moe.log" 2>&1
echo "== plot rc=$? ($(el))"
pack
echo "== total $(el)"
