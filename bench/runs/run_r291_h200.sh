#!/usr/bin/env bash
# run_r291_h200.sh - one GPU, into $OUT/r291: round 54's first steps, one binary, four variants of
# mode 3's wide tiles: base (--route-poll 7 --route-tc-split 1, the defaults until now), spread (the
# polled cluster sums spread over every rank: --route-poll 23), s2 and s4 (spread, and the experts
# split in 2 / 4 groups: --route-tc-split 2 / 4), the same defaults otherwise.
#  1. every GPU test of the layer (gpu_route_wide: spread or not the same bits, the split forms against
#     the reference; gpu_moe, gpu_moe_paths, gpu_act, gpu_moe_api, gpu_route_cl);
#  2. the A/B, fused m3 layer, routing net, three passes in rotating order, one process each:
#       tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --route-poll P \
#         --route-tc-split G --tokens 25,32,48,64,65,96,128,160,192,256;
#  3. the trace build's routing steps at 32 and 128 tokens, each variant;
#  4. the issue's table with s4's options (status_s4) and with the defaults (status):
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 [opts]
# Binaries: prebuilt/bin.txz (compact Release tpmoe and GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r291_h200.sh
NAME=r291
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_route_wide gpu_moe gpu_moe_paths gpu_act gpu_moe_api gpu_route_cl; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
TOK=25,32,48,64,65,96,128,160,192,256
args() { case $1 in base) echo "--route-poll 7 --route-tc-split 1" ;; spread) echo "--route-poll 23 --route-tc-split 1" ;;
  s2) echo "--route-poll 23 --route-tc-split 2" ;; s4) echo "--route-poll 23 --route-tc-split 4" ;; esac; }
for pass in a b c; do
  case $pass in
    a) order="s4 s2 spread base" ;;
    b) order="base spread s2 s4" ;;
    c) order="s2 base s4 spread" ;;
  esac
  for v in $order; do
    tag=${pass}_$v
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK \
      $(args $v) --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-8s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
for v in base spread s2 s4; do
  tag=trace_$v
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    $(args $v) --tokens 32,128 --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block|first / last block|routing mode 3 on" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
  pack
done
for n in status_s4 status; do
  opt=; [ $n = status_s4 ] && opt="$(args s4)"
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    $opt --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "== %-9s rc=%d (%s): " $n $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
  pack
done
echo "== r291 done ($(el))"
