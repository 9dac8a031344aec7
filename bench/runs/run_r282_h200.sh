#!/usr/bin/env bash
# run_r282_h200.sh - one GPU, into $OUT/r282: round 52's third step, the cluster meeting of mode
# 3's selecting blocks with the selections read from the groups' shared memory (route_cluster_meet
# 2, the new default) against through L2 (1, r281's default) and the global counter (0).
#  1. gpu_route_cl and gpu_moe (mode 3 with every meeting: the default's bits);
#  2. the A/B, fused m3 layer, routing net, three passes in rotating order, one process each:
#       tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#         --tokens 25,32,48,64 --route-cluster-meet 2 | 1 | 0;
#  3. the trace build's routing steps at 32 and 64 tokens with meetings 2 and 1;
#  4. gpu_moe_paths, gpu_act, gpu_moe_api;
#  5. r246's table with the new defaults:
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#       tpmoe bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release tpmoe and GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r282_h200.sh
NAME=r282
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_route_cl gpu_moe; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
TOK=25,32,48,64
for pass in a b c; do
  case $pass in
    a) order="cm2 cm1 cm0" ;;
    b) order="cm0 cm2 cm1" ;;
    c) order="cm1 cm0 cm2" ;;
  esac
  for v in $order; do
    tag=${pass}_$v
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK \
      --route-cluster-meet ${v#cm} --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-7s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
for v in cm2 cm1; do
  tag=trace_$v
  timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
    --tokens 32,64 --route-cluster-meet ${v#cm} --json "$R/$tag.json" > "$R/$tag.log" 2>&1
  echo "== $tag rc=$? ($(el))"
  grep -E "us from its first block|first / last block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
done
pack
for t in gpu_moe_paths gpu_act gpu_moe_api; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
n=status
timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-8s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
pack
n=layer
timeout 60 "$B/tpmoe" bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2 \
  --json "$R/$n.json" > "$R/$n.log" 2>&1
printf "== %-8s rc=%d (%s): " $n $? "$(el)"
awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
pack
echo "== r282 done ($(el))"
