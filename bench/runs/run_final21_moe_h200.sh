#!/usr/bin/env bash
# run_final21_moe_h200.sh - the MoE benchmark on the final tree (k_gather by token, after
# final20_moe), one H200, into $OUT/final21_moe: m3 at TP 1, fused and unfused, read flush, the
# held cuBLAS rate (default --gemm-hold 3) with an nvidia-smi clock / power log, then a second
# pass (fused) and the plot. The GPU tests of these binaries ran in r108 (gpu_moe 11/11,
# gpu_moe_api 4/4).
#   tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both
# Binaries (prebuilt/bin.txz): tpmoe of the final tree (Release, sm_90 + sm_90a).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final21_moe_h200.sh
NAME=final21_moe
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt" 2>&1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 200 > "$R/smi_log.csv" &
SMI=$!
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both \
  --check 2 --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench moe tp1 rc=$? ($(el))"
kill $SMI
sed -n '/^# device/,$p' "$R/bench_moe_tp1.log" | grep -v "^# T=" | cut -c1-210
timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared 1 --gemm-hold 0 \
  --check 1 --json "$R/moe_m3_tp1_pass2.json" > "$R/bench_moe_tp1_pass2.log" 2>&1
echo "== bench moe tp1 pass 2 (fused) rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/bench_moe_tp1_pass2.log" | cut -c1-210
python3 bench/plot_moe.py "$R/moe_m3_h200.png" "$R"/moe_m3_tp1.json > "$R/plot_moe.log" 2>&1
echo "== plot rc=$? ($(el))"
pack
echo "== total $(el)"
