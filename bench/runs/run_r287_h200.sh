#!/usr/bin/env bash
# run_r287_h200.sh - one GPU, into $OUT/r287: round 53's third step, mode 3 on the fewest clusters
# that keep the most chunks per CTA (tuning.route_tc_fit 1, the new default: m3 at 25-128 tokens on
# 12 clusters, not 15) against the resident maximum (--route-tc-fit 0), both with the 128-token
# tiles.
#  1. every GPU test of the layer with the new defaults (gpu_route_wide, gpu_moe, gpu_moe_paths,
#     gpu_act, gpu_moe_api, gpu_route_cl);
#  2. the A/B, fused m3 layer, routing net, three passes in rotating order, one process each:
#       tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#         --tokens 25,32,48,64,65,96,128,160,192,256 [--route-tc-fit 0];
#  3. the trace build's routing steps at 32, 128 and 256 tokens, both;
#  4. the table with the new defaults, two passes:
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release tpmoe and GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r287_h200.sh
NAME=r287
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_route_wide gpu_moe gpu_moe_paths gpu_act gpu_moe_api gpu_route_cl; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
TOK=25,32,48,64,65,96,128,160,192,256
for pass in a b c; do
  case $pass in
    a) order="f1 f0" ;;
    b) order="f0 f1" ;;
    c) order="f1 f0" ;;
  esac
  for v in $order; do
    tag=${pass}_$v
    opt=; [ $v = f0 ] && opt="--route-tc-fit 0"
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK \
      $opt --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-7s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
for v in f1 f0; do
  tag=trace_$v
  opt=; [ $v = f0 ] && opt="--route-tc-fit 0"
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    --tokens 32,128,256 $opt --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block|first / last block|routing mode 3 on" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
done
pack
for n in status status2; do
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "== %-8s rc=%d (%s): " $n $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
  pack
done
echo "== r287 done ($(el))"
