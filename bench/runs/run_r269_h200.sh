#!/usr/bin/env bash
# run_r269_h200.sh - one GPU, into $OUT/r269: round 49's fourth form of the permutation by every
# selecting block (the selections travel through a mailbox that the blocks poll, so the words a
# poll returns are the data: no acquire and no second load after the wait) against the third
# form (r266's, a73d944, prebuilt/old/) and against the last block's permutation
# (--route-perm-min 0), three passes in rotating order, one process each:
#   tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#     --tokens 16,24,25,32,48,64,96,128,160,192,256 [--route-perm-min 0]
# then every GPU test on the new binaries and the new trace build's routing steps (as r264, one
# pass, default and --route-perm-min 0).
# Binaries: prebuilt/bin.txz (new: Release tpmoe, tests, tpmoe_trace), prebuilt/bin_prev.txz
# (r266's, a73d944) unpacked into prebuilt/old/.
# Run from the repository root:
#   mkdir -p prebuilt/old && tar xJf prebuilt/bin_prev.txz -C prebuilt/old && tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r269_h200.sh
NAME=r269
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
TOK=16,24,25,32,48,64,96,128,160,192,256
for pass in a b c; do
  case $pass in a) order="new old last" ;; b) order="old last new" ;; c) order="last new old" ;; esac
  for v in $order; do
    bin=$B/tpmoe; extra=""
    [ $v = old ] && bin=$B/old/tpmoe
    [ $v = last ] && extra="--route-perm-min 0"
    tag=${pass}_$v
    timeout 90 "$bin" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK $extra \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-7s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
for pm in 25 0; do
  tag=trace_pm$pm
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    --tokens 32,64,128,256 --route-perm-min $pm --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
done
pack
echo "== r269 done ($(el))"
