#!/usr/bin/env bash
# run_r245_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r245:
#   1. (H200 only) the GPU tests and the status, as r244 below;
#   2. the gather micro-benchmark (bench/micro/gather.cu: the prefill gather in three forms
#      against a copy of the same bytes, 1024-8192 tokens, K 4 and 5);
#   3. the library with g1's gather (a block per token, rows by shuffle; tpmoe_g, gpu_moe_g,
#      gpu_moe_paths_g): its GPU tests, then the layer against HEAD's, alternating, 3 pairs:
#      tpmoe[_g] bench moe --preset m3 --tokens 1024,4096,8192 --fuse-shared 1 --check 2
#   4. r244's script (never ran). r244: the chains of the
# persistent prefill at 4096 and 8192 tokens re-measured with round 42's down kernel (r243's plan
# sweep had --prefill-down-early 16384 1.1-1.3% ahead of the defaults at 8192 tokens, in a
# spread of 2-4%). Four variants in turn, four passes (A B C D, A B C D, ...):
#   A  the defaults (above 4095 tokens: no chain)
#   B  --prefill-down-early 16384   (down chained to gate_up)
#   C  --shared-plan slot --prefill-early 16384   (the fused slot plan, its shared gate_up items
#      beside the routing; --prefill-early needs the slot plan, and the default above 4095
#      tokens is the split plan)
#   D  C and --prefill-down-early 16384
#   tpmoe bench moe --preset m3 --tokens 4096,8192 --fuse-shared 1 --check 2 [opts]
# On an H200 (none of round 42's library has run on one) the GPU tests and the status come first:
#   gpu_act, gpu_moe_paths, gpu_moe, gpu_moe_api; tpmoe bench moe --preset m3 --tokens
#   1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (stripped; r243's archive): tpmoe and the GPU tests, compact Release
# builds of 1ce1583 (the library is unchanged since); gather: nvcc -O3 -std=c++17 -arch=sm_90a
# bench/micro/gather.cu -o gather; tpmoe_g, gpu_moe_g, gpu_moe_paths_g: the same build of
# 5ed2a8b with k_gather in g1's form (bench/micro/var/gather_tok.patch).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r245_h200.sh
NAME=r245
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$R/clocks.csv" 2>&1 &
S=$!
if grep -q H200 "$R/smi.txt"; then
  for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
    timeout 200 "$B/$t" > "$R/$t.log" 2>&1
    echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  done
  n=status
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "== %-12s rc=%d (%s): " $n $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s | ", $1, $11, $15, $18, $19, $20}' "$R/$n.log"; echo
  pack
fi
timeout 120 "$B/gather" "$R/gather.json" > "$R/gather.log" 2>&1
echo "== gather rc=$? ($(el))"; cat "$R/gather.log"
for t in gpu_moe_paths_g gpu_moe_g; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
done
for n in ga_1 gg_1 gg_2 ga_2 ga_3 gg_3; do
  case $n in ga*) bin=tpmoe ;; *) bin=tpmoe_g ;; esac
  timeout 100 "$B/$bin" bench moe --preset m3 --tokens 1024,4096,8192 --fuse-shared 1 --check 2 \
    --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "== %-5s rc=%d (%s): " $n $? "$(el)"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s %s | ", $1, $4, $5, $12, $13, $15, $18}' "$R/$n.log"; echo
done
pack
for pass in a b c d; do
  for v in A B C D; do
    case $v in
      A) opts="" ;;
      B) opts="--prefill-down-early 16384" ;;
      C) opts="--shared-plan slot --prefill-early 16384" ;;
      D) opts="--shared-plan slot --prefill-early 16384 --prefill-down-early 16384" ;;
    esac
    n=${v}_$pass
    timeout 100 "$B/tpmoe" bench moe --preset m3 --tokens 4096,8192 --fuse-shared 1 --check 2 $opts \
      --json "$R/$n.json" > "$R/$n.log" 2>&1
    printf "== %-4s rc=%d (%s): " $n $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s %s %s %s %s %s %s | ", $1, $4, $5, $12, $13, $15, $18}' "$R/$n.log"; echo
  done
  pack
done
kill $S 2>/dev/null; wait $S 2>/dev/null
pack
echo "== r245 done ($(el))"
