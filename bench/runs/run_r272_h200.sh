#!/usr/bin/env bash
# run_r272_h200.sh - one GPU, into $OUT/r272: round 50's polled cluster partials in routing mode 3
# (each 8-token group's block of the last cluster polls the SC partials instead of a ticket) against
# mode 3's tickets (--route-poll 1: mode 1's one row still polled), fused layer, three passes in
# rotating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#     --tokens 8,16,24,25,32,48,64,96,128,160,192,256 [--route-poll 1]
# (8-24 tokens are mode 1: the same code either way, a control), then every GPU test, then the
# trace build's routing steps at 32, 64, 128 and 256 tokens with either form.
# Binaries: prebuilt/bin.txz (compact Release tpmoe, the GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r272_h200.sh
NAME=r272
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TOK=8,16,24,25,32,48,64,96,128,160,192,256
for pass in a b c; do
  case $pass in a|c) order="poll ticket" ;; b) order="ticket poll" ;; esac
  for v in $order; do
    extra=""
    [ $v = ticket ] && extra="--route-poll 1"
    tag=${pass}_$v
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK $extra \
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
for rp in 3 1; do
  tag=trace_rp$rp
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    --tokens 32,64,128,256 --route-poll $rp --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
done
pack
echo "== r272 done ($(el))"
