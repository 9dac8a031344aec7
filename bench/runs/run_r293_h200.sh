#!/usr/bin/env bash
# run_r293_h200.sh - one GPU, into $OUT/r293: run_r292 (which never got a machine) with round 55's
# spread poll: round 54's second step and round 55's first, one binary (and gl's): def (the new
# defaults: route_poll 23, the cluster sums spread over every rank in tiles of <= 64 tokens),
# base (--route-poll 7, round 53's), s2 (--route-tc-split 2, the expert-split wide tiles with the
# runs' tiles now added by the whole CTA, float4 per thread; s4 left out for device time), gl (a
# second binary, tpmoe_gl: def's tree with the logit gather of select_token_pl / select_token_sig4
# as one helper, gather_logits: bench/runs/r292_gather_logits.patch; the same bits, different SASS
# scheduling), sp (--route-poll 55: def and bit 5, the cluster meeting's poll spread over the last
# cluster's 8 ranks, at <= 32 tokens, the meeting's default range), m64 (--route-cluster-meet 64:
# the meeting up to 64 tokens) and sp64 (both).
#  In this order: gpu_route_wide; the A/B's passes a and b; gpu_moe; the table; pass c; the traces.
#  1. gpu_route_wide, gpu_moe;
#  2. the A/B, fused m3 layer, routing net, three passes in rotating order, one process each:
#       tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 [opts] \
#         --tokens 25,32,40,48,64,65,96,128,160,192,256;
#  3. the trace build's routing steps at 32 and 128 tokens, def, sp and s2;
#  4. the table with the defaults, one pass:
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release tpmoe and GPU tests, tpmoe_trace, tpmoe_gl).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r293_h200.sh
NAME=r293
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
tst() {
  timeout 200 "$B/$1" > "$R/$1.log" 2>&1
  echo "== $1 rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$1.log" | head -5
  pack
}
TOK=25,32,40,48,64,65,96,128,160,192,256
args() { case $1 in def) echo "" ;; base) echo "--route-poll 7" ;; s2) echo "--route-tc-split 2" ;;
  s4) echo "--route-tc-split 4" ;; gl) echo "" ;; sp) echo "--route-poll 55" ;;
  m64) echo "--route-cluster-meet 64" ;; sp64) echo "--route-poll 55 --route-cluster-meet 64" ;; esac; }
bin() { case $1 in gl) echo "$B/tpmoe_gl" ;; *) echo "$B/tpmoe" ;; esac; }
ab_pass() {
  local pass=$1 order
  case $pass in
    a) order="def base s2 gl sp m64 sp64" ;;
    b) order="sp64 m64 sp gl s2 base def" ;;
    c) order="base sp64 def gl sp s2 m64" ;;
  esac
  for v in $order; do
    tag=${pass}_$v
    timeout 90 "$(bin $v)" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK \
      $(args $v) --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-8s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
    pack
  done
}
traces() {
  for v in def sp s2; do
    tag=trace_$v
    timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
      $(args $v) --tokens 32,128 --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    echo "== $tag rc=$? ($(el))"
    grep -E "us from its first block|first / last block|routing mode 3 on" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
    pack
  done
}
status() {
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/status.json" > "$R/status.log" 2>&1
  printf "== %-8s rc=%d (%s): " status $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/status.log"; echo
  pack
}
# most needed first (a call cut short by device time returns what each step packed)
tst gpu_route_wide
ab_pass a
ab_pass b
tst gpu_moe
status
ab_pass c
traces
echo "== r293 done ($(el))"
