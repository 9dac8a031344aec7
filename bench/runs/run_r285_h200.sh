#!/usr/bin/env bash
# run_r285_h200.sh - one GPU, into $OUT/r285: round 53, routing mode 3 in 128-token tiles (the x
# slice in shared memory; tuning.route_tc_wide) against the 64-token tiles.
#  1. gpu_route_wide (the wide tiles give the 64-token tiles' bits over the same H slices), gpu_moe,
#     gpu_route_cl;
#  2. the A/B, fused m3 layer, routing net, three passes in rotating order, one process each:
#       tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#         --tokens 25,32,64,65,96,128,160,192,256 --route-tc-wide 1 | 0;
#  3. the trace build's routing steps at 32, 128 and 256 tokens, both forms;
#  4. the table with the wide tiles from 65 tokens:
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 --route-tc-wide 65
# Binaries: prebuilt/bin.txz (compact Release tpmoe and GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r285_h200.sh
NAME=r285
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_route_wide gpu_moe gpu_route_cl; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
TOK=25,32,64,65,96,128,160,192,256
for pass in a b c; do
  case $pass in
    a) order="w1 w0" ;;
    b) order="w0 w1" ;;
    c) order="w1 w0" ;;
  esac
  for v in $order; do
    tag=${pass}_$v
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK \
      --route-tc-wide ${v#w} --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-7s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
for v in w1 w0; do
  tag=trace_$v
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    --tokens 32,128,256 --route-tc-wide ${v#w} --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block|first / last block|CTAs" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
done
pack
n=status
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --route-tc-wide 65 --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-8s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
pack
echo "== r285 done ($(el))"
