#!/usr/bin/env bash
# run_r186_h200.sh - one H200, into $OUT/r186: where mode 1's wide form (9-16 tokens in one row of
# 512-thread blocks) spends its time against the two rows of 8-token tiles (--route-wide 0): the
# routing alone with the tail's marks (a -DTPMOE_MOE_TRACE=ON build, prebuilt/trace.txz), m3,
# fused, 9, 12 and 16 tokens, two passes each way, interleaved; then 8 against 16 router experts per
# block at 17-24 tokens (tracing off).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r186_h200.sh
NAME=r186
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
tar xJf prebuilt/trace.txz -C prebuilt
for pass in a b; do
  for w in 16 0; do
    timeout 200 "$B/tpmoe_trace" bench moe --preset m3 --tokens 9,12,16 --fuse-shared 1 --check 1 --gemm-hold 0 \
      --route-wide $w --trace-route 100 > "$R/trace_w${w}_$pass.log" 2>&1
    echo "== wide $w pass $pass rc=$? ($(el))"; grep "^# T=.*routing mode" "$R/trace_w${w}_$pass.log" | sed 's/(medians of 100 replays)//'
  done
done
pack
# r185 had 8 router experts per block 0.6 us ahead of 16 at 17 tokens: 17-24 tokens, 8 against 16
# (the default there), the same trace build with tracing off, two passes, interleaved
for pass in a b; do
  for re in 8 16; do
    timeout 200 "$B/tpmoe_trace" bench moe --preset m3 --tokens 17,18,20,22,24 --fuse-shared 1 --check 1 --gemm-hold 0 \
      --route-experts $re > "$R/re${re}_$pass.log" 2>&1
    printf "re %-2s pass %s rc=%d %s\n" $re $pass $? "$(sed -n '/^tokens/,$p' "$R/re${re}_$pass.log" | awk 'NR > 1 {printf "%s:%s/%s ", $1, $15, $11}')"
  done
done
pack
echo "== total $(el)"
