#!/usr/bin/env bash
# run_r292_h200.sh - one GPU, into $OUT/r292: round 54's second step, one binary (and gl's): def (the new
# defaults: route_poll 23, the cluster sums spread over every rank in tiles of <= 64 tokens),
# base (--route-poll 7, round 53's), s2 (--route-tc-split 2, the expert-split wide tiles with the
# runs' tiles now added by the whole CTA, float4 per thread; s4 left out for device time), gl (a
# second binary, tpmoe_gl: def's tree with the logit gather of select_token_pl / select_token_sig4
# as one helper, gather_logits: bench/runs/r292_gather_logits.patch; the same bits, different SASS
# scheduling).
#  1. gpu_route_wide, gpu_moe;
#  2. the A/B, fused m3 layer, routing net, three passes in rotating order, one process each:
#       tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 [opts] \
#         --tokens 25,32,48,64,65,96,128,160,192,256;
#  3. the trace build's routing steps at 32 and 128 tokens, def and s2;
#  4. the table with the defaults, one pass:
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release tpmoe and GPU tests, tpmoe_trace, tpmoe_gl).
# Never ran (no machine came, round 55): run_r293_h200.sh holds all of it and more.
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r292_h200.sh
NAME=r292
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_route_wide gpu_moe; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
TOK=25,32,48,64,65,96,128,160,192,256
args() { case $1 in def) echo "" ;; base) echo "--route-poll 7" ;; s2) echo "--route-tc-split 2" ;;
  s4) echo "--route-tc-split 4" ;; gl) echo "" ;; esac; }
bin() { case $1 in gl) echo "$B/tpmoe_gl" ;; *) echo "$B/tpmoe" ;; esac; }
for pass in a b c; do
  case $pass in
    a) order="def base s2 gl" ;;
    b) order="gl s2 base def" ;;
    c) order="base def gl s2" ;;
  esac
  for v in $order; do
    tag=${pass}_$v
    timeout 90 "$(bin $v)" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK \
      $(args $v) --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-8s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
for v in def s2; do
  tag=trace_$v
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    $(args $v) --tokens 32,128 --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block|first / last block|routing mode 3 on" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
  pack
done
for n in status; do
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "== %-8s rc=%d (%s): " $n $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
  pack
done
echo "== r292 done ($(el))"
