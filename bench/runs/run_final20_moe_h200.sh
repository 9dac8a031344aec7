#!/usr/bin/env bash
# run_final20_moe_h200.sh - the final tree's MoE release check on one H200
# (the 2-GPU machine was not lent this session), into $OUT/final20_moe: the MoE
# GPU tests (gpu_moe, gpu_moe_api; their TP 2 parts skip with one GPU); the
# independent NumPy layer (tests/indep/moe_ref.py) against `tpmoe moe
# --backend cuda` (mini presets, TP 1, decode- and prefill-sized batches);
# the benchmark, m3 at TP 1, fused and unfused, read flush, with the
# held cuBLAS rate (default --gemm-hold 3) while nvidia-smi logs SM clock and
# power:
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both
# a routing / in-between sweep (2, 4, 16, 64, 256, 2048, 4096 tokens, fused),
# a second pass of the sizes (fused), k_select before / after
# (tpmoe_old = commit c86b6c8) at 129-8192 tokens, and the plot.
# Binaries (prebuilt/bin.txz): tpmoe_old, and tpmoe, gpu_moe, gpu_moe_api of
# the final tree (Release, sm_90 + sm_90a).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final20_moe_h200.sh
NAME=final20_moe
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp|differ" "$1" | head -8; }
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt" 2>&1
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
for tok in 5 37 300; do
  timeout 200 python3 tests/indep/moe_ref.py --tool "$B/tpmoe" --backend cuda --tp 1 --full --tokens $tok \
    --workdir /tmp/indep_$tok > "$R/indep_cuda_t$tok.log" 2>&1
  echo "== indep cuda T=$tok rc=$? ($(el))"; tail -3 "$R/indep_cuda_t$tok.log"
done
pack
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > "$R/smi_log.csv" &
SMI=$!
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both \
  --check 2 --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe tp1 rc=$? ($(el))"
kill $SMI
sed -n '/^# device/,$p' "$R/bench_moe_tp1.log" | grep -v "^# T=" | cut -c1-210
pack
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 2,4,16,64,256,2048,4096 --fuse-shared 1 --gemm-hold 0 \
  --check 1 --json "$R/moe_m3_tp1_sweep.json" > "$R/bench_moe_tp1_sweep.log" 2>&1
echo "== bench moe tp1 sweep rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp1_sweep.log" | cut -c1-210
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared 1 --gemm-hold 0 \
  --check 1 --json "$R/moe_m3_tp1_pass2.json" > "$R/bench_moe_tp1_pass2.log" 2>&1
echo "== bench moe tp1 pass 2 (fused) rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp1_pass2.log" | cut -c1-210
for v in old new old new; do
  bin=$B/tpmoe; [ $v = old ] && bin=$B/tpmoe_old
  $bin bench moe --preset m3 --tokens 129,256,512,1024,2048,4096,8192 --fuse-shared 1 --check 1 --gemm-hold 0 \
    --reps 40 >> "$R/ksel_$v.log" 2>&1
  echo "== k_select $v rc=$? ($(el))"; awk '$1 ~ /^[0-9]+$/ {printf "%s %s %s | ", $1, $11, $15} END {print ""}' "$R/ksel_$v.log" | tail -1
done
python3 bench/plot_moe.py "$R/moe_m3_h200.png" "$R"/moe_m3_tp1.json > "$R/plot_moe.log" 2>&1
echo "== plot rc=$? ($(el))"
pack
echo "== total $(el)"
