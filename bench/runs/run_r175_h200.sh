#!/usr/bin/env bash
# run_r175_h200.sh - one H200, into $OUT/r175: the 1-8 token routing's tail in SM cycles
# (%clock64 beside %globaltimer in the last block; a -DTPMOE_MOE_TRACE=ON build,
# prebuilt/trace.txz), with nvidia-smi sampling the SM clock every 50 ms meanwhile.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r175_h200.sh
NAME=r175
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
tar xJf prebuilt/trace.txz -C prebuilt
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv -lms 50 > "$R/smi_clock.csv" 2>&1 &
SMI=$!
for pass in a b; do
  timeout 200 "$B/tpmoe_trace" bench moe --preset m3 --tokens 1,2,4,8,16 --fuse-shared 1 --check 1 --gemm-hold 0 \
    --trace-route 100 > "$R/trace_$pass.log" 2>&1
  echo "== trace $pass rc=$? ($(el))"; grep "^# T=" "$R/trace_$pass.log" | sed 's/(medians of 100 replays)//'
done
kill $SMI
awk -F, 'NR > 1 {print $2}' "$R/smi_clock.csv" | sort | uniq -c | sort -rn | head -12
pack
echo "== total $(el)"
