#!/usr/bin/env bash
# run_r273_h200.sh - one GPU, into $OUT/r273: round 50's mode 3 polled group sums with the sentinel
# written back while the group waits for the others inside the permutation (new) against r272's
# binary, which wrote it back before the group's arrival (prev), and against mode 3's tickets
# (--route-poll 1 on new), fused layer, three passes in rotating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#     --tokens 1,8,25,32,48,64,96,128,160,192,256 [--route-poll 1]
# then the trace build's routing steps at 32, 128 and 256 tokens (new).
# Binaries: prebuilt/bin.txz (new: compact Release tpmoe, the GPU tests, tpmoe_trace),
# prebuilt/bin_prev.txz (r272's tpmoe) unpacked into prebuilt/old/.
# Run from the repository root:
#   mkdir -p prebuilt/old && tar xJf prebuilt/bin_prev.txz -C prebuilt/old && tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r273_h200.sh
NAME=r273
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TOK=1,8,25,32,48,64,96,128,160,192,256
for pass in a b c; do
  case $pass in a) order="new prev ticket" ;; b) order="prev ticket new" ;; c) order="ticket new prev" ;; esac
  for v in $order; do
    bin=$B/tpmoe; extra=""
    [ $v = prev ] && bin=$B/old/tpmoe
    [ $v = ticket ] && extra="--route-poll 1"
    tag=${pass}_$v
    timeout 90 "$bin" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK $extra \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-9s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
tag=trace_new
timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
  --tokens 32,128,256 --json "$R/$tag.json" > "$R/$tag.log" 2>&1
echo "== $tag rc=$? ($(el))"
grep -E "us from its first block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
pack
echo "== r273 done ($(el))"
