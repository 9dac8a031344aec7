#!/usr/bin/env bash
# run_r174_h200.sh - one H200, into $OUT/r174: where the 1-128 token routing's time goes, step by
# step inside the launch, and the fused / unfused order at 5-8 tokens.
#   1. the routing alone with %globaltimer marks (a -DTPMOE_MOE_TRACE=ON build of 22546ec + this
#      commit's marks, prebuilt/trace.txz): `bench moe --trace-route 60`, m3, fused, modes 1 and 3;
#   2. the same sizes' routing net with --route-stop 1 / 2 / 3 / 0 (the same binary; the marks
#      cost a branch on d.trace where tracing is off);
#   3. fused and unfused at 5-8 tokens in separate processes, alternating, three each (the same).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r174_h200.sh
NAME=r174
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
tar xJf prebuilt/trace.txz -C prebuilt
TK=1,2,4,8,9,12,16,24,25,32,64,128
for pass in a b; do
  timeout 200 "$B/tpmoe_trace" bench moe --preset m3 --tokens $TK --fuse-shared 1 --check 1 --gemm-hold 0 \
    --trace-route 60 > "$R/trace_$pass.log" 2>&1
  echo "== trace $pass rc=$? ($(el))"; grep "^# T=" "$R/trace_$pass.log" | sed 's/(medians of 60 replays)//'
  pack
done
timeout 200 "$B/tpmoe_trace" bench moe --preset m3 --tokens 9,12,16,24 --route-experts 8 --fuse-shared 1 --check 1 \
  --gemm-hold 0 --trace-route 60 > "$R/trace_e8.log" 2>&1
echo "== trace e8 rc=$? ($(el))"; grep "^# T=" "$R/trace_e8.log" | sed 's/(medians of 60 replays)//'
for st in 1 2 3 0; do
  timeout 200 "$B/tpmoe_trace" bench moe --preset m3 --tokens $TK --fuse-shared 1 --check 1 --gemm-hold 0 \
    --route-stop $st > "$R/stop$st.log" 2>&1
  echo "== stop $st rc=$? ($(el)) $(sed -n '/^tokens/,$p' "$R/stop$st.log" | awk 'NR > 1 {printf "%s:%s ", $1, $11}')"
done
pack
for p in 1 2 3; do
  for f in 0 1; do
    timeout 200 "$B/tpmoe_trace" bench moe --preset m3 --tokens 5,6,7,8 --fuse-shared $f --check 1 --gemm-hold 0 \
      > "$R/order_f${f}_p$p.log" 2>&1
    echo "== fuse $f pass $p rc=$? ($(el)) $(sed -n '/^tokens/,$p' "$R/order_f${f}_p$p.log" | awk 'NR > 1 {printf "%s:%s/%s ", $1, $15, $13}')"
  done
done
pack
echo "== total $(el)"
