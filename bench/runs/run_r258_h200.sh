#!/usr/bin/env bash
# run_r258_h200.sh - one GPU, into $OUT/r258: round 48 (the fused layer's routing with the shared
# slot's pairs implied in the direct permutation, and the token's K selections in one store) on
# the GPU: every GPU test on the new binaries, then the new tpmoe against round 47's in
# alternating order (three passes) at 1-16 tokens, fused and unfused in one process:
#   tpmoe bench moe --preset m3 --check 2 --gemm-hold 0 --fuse-shared both --tokens 1,2,4,8,9,12,16
# On an H200 it then runs r246's steps (the GPU tests, the issue's table, the 4096 / 8192-token
# layer) on the new binaries under the name r258h.
# Binaries: prebuilt/ (from prebuilt/bin48.txz): compact Release builds of round 48's sources;
# prebuilt/old/ (from prebuilt/bin.txz): r254's, of 654fcea.
# Run from the repository root:
#   mkdir -p prebuilt/old && tar xJf prebuilt/bin.txz -C prebuilt/old && tar xJf prebuilt/bin48.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r258_h200.sh
NAME=r258
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_act gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|passed|failed" "$R/$t.log" | head -5
  pack
done
for pass in a b c; do
  order="new old"; [ $pass = b ] && order="old new"
  for v in $order; do
    bin=$B/tpmoe; [ $v = old ] && bin=$B/old/tpmoe
    tag=${pass}_$v
    timeout 90 "$bin" bench moe --preset m3 --check 2 --gemm-hold 0 --fuse-shared both --tokens 1,2,4,8,9,12,16 \
      --json "$R/$tag.json" > "$R/$tag.log" 2>&1
    printf "== %-5s rc=%d (%s): " $tag $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s %s %s %s | ", $1, $2, $11, $15, $19, $20}' "$R/$tag.log"; echo
  done
  pack
done
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$card" in *H200*) NAME=r258h bash bench/runs/run_r246_h200.sh ;; esac
echo "== r258 done ($(el))"
