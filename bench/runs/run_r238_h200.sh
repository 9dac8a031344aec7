#!/usr/bin/env bash
# run_r238_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r238: the status of the
# library after round 41 (the tests ran in r236; this run: the tables).
#   1. the issue's MoE command, two passes (-> moe_m3_tp1.json, moe_m3_tp1_b.json):
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
#   2. routing + permutation at 1-256 tokens, the defaults, fused, two passes (JSON);
#   3. on an H200 only: r218's comparisons, which wait for one (round 36's shared slot on tensor
#      cores against the defaults at 3-8 tokens; round 35's shared_overlap 2 for the unfused layer
#      at 1-4 tokens), two passes.
# The SM clock and board power are sampled every 100 ms throughout (clocks.csv).
#   1b. the prefill combine's loop forms, two passes (comb_*.json; see the step; the builds are of
#       28dc662, whose switches 9a4313b reverted).
# Binaries: prebuilt/bin.txz (stripped): tpmoe, a compact Release build of round 41, and
# tpmoe_c0_8 / c1_8 / c2_8 / c2_6, the same with src/moe/moe_cuda_combine.cu's TPM_COMBINE_VAR /
# TPM_COMBINE_MINB set to 0/8 (the library), 1/8, 2/8, 2/6.
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r238_h200.sh
NAME=r238
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw --format=csv,noheader -lms 100 > "$R/clocks.csv" 2>&1 &
S=$!
for pass in a b; do
  j=moe_m3_tp1.json; [ $pass = b ] && j=moe_m3_tp1_b.json
  timeout 200 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
    --json "$R/$j" > "$R/bench_moe_tp1_$pass.log" 2>&1
  echo "== table $pass rc=$? ($(el))"
  awk '/^tokens/{h=1;next} h&&NF>10{printf "%s/%s %s: %s %s %s %s | ", $1, $2, $4, $15, $11, $18, $20}' "$R/bench_moe_tp1_$pass.log"; echo
  pack
done
# the prefill combine's loop forms (round 41 experiment; the same sums in the same order):
# c0_8 the library's (one slot's row load at a time, 8 blocks of 256 per SM), c1_8 the next
# slot's index and weight loaded ahead, c2_8 / c2_6 two slots' row loads in flight (8 / 6 blocks)
for pass in a b; do
  for v in c0_8 c1_8 c2_8 c2_6; do
    n=comb_${v}_$pass
    timeout 100 "$B/tpmoe_$v" bench moe --preset m3 --tokens 32,1024,4096,8192 --fuse-shared 1 --check 1 \
      --json "$R/$n.json" > "$R/$n.log" 2>&1
    printf "== %-12s rc=%d (%s): " $n $? "$(el)"
    awk '/^tokens/{h=1;next} h&&NF>10{printf "%s comb %s total %s err %s sel %s | ", $1, $13, $15, $19, $20}' "$R/$n.log"; echo
  done
  pack
done
bm() { # name args...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-10s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s/%s/%s/%s ", $1, $4, $11, $12, $15, $18, $20}')"
}
for pass in a b; do
  bm route_$pass --fuse-shared 1 --tokens 1,8,9,12,16,17,20,24,25,32,64,96,128,160,192,256
  pack
done
if nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  for pass in a b; do
    bm def_$pass --fuse-shared 1 --tokens 3,4,5,6,8
    bm sm_$pass --fuse-shared 1 --tokens 3,4,5,6,8 --shared-plan slot --shared-mma 3
    bm u1_$pass --fuse-shared 0 --tokens 1,2,4 --shared-overlap 1
    bm u2_$pass --fuse-shared 0 --tokens 1,2,4 --shared-overlap 2
    pack
  done
fi
kill $S 2>/dev/null; wait $S 2>/dev/null
pack
echo "== r238 done ($(el))"
