#!/usr/bin/env bash
# run_r176_h200.sh - one H200, into $OUT/r176: mode 1's one-tile tail with its selection
# (--route-stop 5) or its permutation (--route-stop 6) run twice, the second from warm
# instruction and constant caches, in SM cycles (a -DTPMOE_MOE_TRACE=ON build, prebuilt/trace.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r176_h200.sh
NAME=r176
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
tar xJf prebuilt/trace.txz -C prebuilt
for st in 0 5 6; do
  timeout 200 "$B/tpmoe_trace" bench moe --preset m3 --tokens 1,4,8 --fuse-shared 1 --check 1 --gemm-hold 0 \
    --route-stop $st --trace-route 100 > "$R/trace_s$st.log" 2>&1
  echo "== stop $st rc=$? ($(el))"; grep "^# T=" "$R/trace_s$st.log" | sed 's/(medians of 100 replays)//'
done
pack
echo "== total $(el)"
