#!/usr/bin/env bash
# run_r270_h200.sh - one GPU, into $OUT/r270: round 50's polled partials in routing mode 1 (one
# row of logits blocks: 1-8 tokens, and the wide form at 9-11) against the ticket
# (--route-poll 0, the same binary; its kernels are the previous code's), fused and unfused
# layers, three passes in rotating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1|0 --gemm-hold 0 --check 1 \
#     --tokens 1,2,3,4,5,6,7,8,9,10,11,12,16 [--route-poll 0]
# (12 and 16 tokens run two rows of tiles: the ticket either way, a control), then every GPU
# test, then the trace build's routing steps at 1, 8 and 10 tokens with either form.
# Binaries: prebuilt/bin.txz (compact Release tpmoe, the GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r270_h200.sh
NAME=r270
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TOK=1,2,3,4,5,6,7,8,9,10,11,12,16
for pass in a b c; do
  case $pass in a) order="poll ticket upoll uticket" ;; b) order="ticket upoll uticket poll" ;;
                c) order="uticket poll ticket upoll" ;; esac
  for v in $order; do
    extra="--fuse-shared 1"
    case $v in ticket) extra="--fuse-shared 1 --route-poll 0" ;; upoll) extra="--fuse-shared 0" ;;
               uticket) extra="--fuse-shared 0 --route-poll 0" ;; esac
    tag=${pass}_$v
    timeout 90 "$B/tpmoe" bench moe --preset m3 --gemm-hold 0 --check 1 --tokens $TOK $extra \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-9s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
for rp in 1 0; do
  tag=trace_rp$rp
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    --tokens 1,8,10 --route-poll $rp --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
done
pack
echo "== r270 done ($(el))"
