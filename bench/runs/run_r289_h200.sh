#!/usr/bin/env bash
# run_r289_h200.sh - one GPU, into $OUT/r289: round 53's fifth step, the wide tile's mma in groups
# of eight n-tiles above 64 tokens (eight independent accumulator chains per warp instead of four;
# new: tpmoe of this commit) against r287's binary (prev: tpmoe_prev, d68ce12's tpmoe), the same
# defaults otherwise.
#  1. gpu_route_wide, gpu_moe (the wide tiles' bits against the 64-token tiles', the reference);
#  2. the A/B, fused m3 layer, routing net, three passes in rotating order, one process each:
#       tpmoe[_prev] bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#         --tokens 25,32,48,64,65,96,128,160,192,256;
#  3. the trace build's routing steps at 32, 128 and 256 tokens;
#  4. the table:
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release tpmoe, tpmoe_prev and GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r289_h200.sh
NAME=r289
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_route_wide gpu_moe; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
TOK=25,32,48,64,65,96,128,160,192,256
for pass in a b c; do
  case $pass in
    a) order="new prev" ;;
    b) order="prev new" ;;
    c) order="new prev" ;;
  esac
  for v in $order; do
    tag=${pass}_$v
    bin=$B/tpmoe; [ $v = prev ] && bin=$B/tpmoe_prev
    timeout 90 "$bin" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-7s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
tag=trace_new
timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
  --tokens 32,128,256 --json "$R/$tag.json" > "$R/$tag.log" 2>&1
echo "== $tag rc=$? ($(el))"
grep -E "us from its first block|first / last block|routing mode 3 on" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
pack
n=status
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-8s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
pack
echo "== r289 done ($(el))"
