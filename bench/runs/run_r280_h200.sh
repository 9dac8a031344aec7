#!/usr/bin/env bash
# run_r280_h200.sh - one GPU, into $OUT/r280: round 52's routing mode 4 (one cluster of 16 or 8
# CTAs does the whole routing of up to 64 tokens; moe_cuda_route_cl.cu).
#  1. gpu_route_cl (mode 4 against the reference on three mini presets and M3's router shape at
#     hidden 4096, both cluster sizes, run-to-run bits, a sequence and a replayed graph);
#  2. the A/B, fused m3 layer, routing net, two passes in rotating order, one process each:
#       tpmoe bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 \
#         --tokens 1,4,8,9,12,16,24,25,32,48,64 --route-cl 0:0 | 1:64 --route-cl-size 16 | 1:64 --route-cl-size 8
#     (off = modes 1 / 3 as in r279; c16, c8 = mode 4 at every size);
#  3. the trace build's routing steps with mode 4 at 9, 16, 32 and 64 tokens (clusters of 16);
#  4. gpu_moe, gpu_moe_paths, gpu_act, gpu_moe_api (the new default: mode 4 at 9-64 tokens);
#  5. r246's table with the new default:
#       tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#       tpmoe bench moe --preset m3 --tokens 4096,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release tpmoe and GPU tests, tpmoe_trace).
# Run from the repository root:
#   tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r280_h200.sh
NAME=r280
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
timeout 200 "$B/gpu_route_cl" > "$R/gpu_route_cl.log" 2>&1
echo "== gpu_route_cl rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed|not available|32 tokens:" "$R/gpu_route_cl.log" | head -8
pack
TOK=1,4,8,9,12,16,24,25,32,48,64
for pass in a b; do
  case $pass in
    a) order="off c16 c8" ;;
    b) order="c8 c16 off" ;;
  esac
  for v in $order; do
    case $v in
      off) rc="0:0" ;;
      c16) rc="1:64 --route-cl-size 16" ;;
      c8) rc="1:64 --route-cl-size 8" ;;
    esac
    tag=${pass}_$v
    timeout 90 "$B/tpmoe" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --tokens $TOK --route-cl $rc \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-7s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s | ", $1, $11}' "$R/$tag.log"; echo
  done
  pack
done
grep -h "routing mode 4" "$R/a_c16.log" "$R/a_c8.log" | head -4
tag=trace_c16
timeout 90 "$B/tpmoe_trace" bench moe --preset m3 --fuse-shared 1 --gemm-hold 0 --check 1 --trace-route 100 \
  --tokens 9,16,32,64 --route-cl 1:64 --json "$R/$tag.json" > "$R/$tag.log" 2>&1
echo "== $tag rc=$? ($(el))"
grep -E "us from its first block" "$R/$tag.log" | sed 's/ (medians of 100 replays)//'
pack
for t in gpu_moe gpu_moe_paths gpu_act gpu_moe_api; do
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
echo "== r280 done ($(el))"
