#!/usr/bin/env bash
# run_r78_h200x2.sh - round 13, the exact two-shot's columns taken from a
# counter, on 2 x H200, into $OUT/r78: the warp-specialized kernel
# (cuda_twoshot_ws.cu, set 10's exact kernel from 16 MB) whose scatter role
# takes each next column from the per-launch counter ctl[2] and publishes it
# to the reduce and gather roles in shared memory, instead of the static deal
# b, b + G, ... (with r77's flag-free kernel). gpu_allreduce on it (set 10,
# set 19), then exact bf16 at 8-128 MB against the release build, three
# passes in turn, and INT4 / INT8 at 32 and 96 MB once each.
# Binaries (prebuilt/bin.txz): tpmoe (release library), tpmoe_x and
# gpu_allreduce_x (cuda_twoshot_ws.cu and cuda_twoshot_ll.cu of this commit
# linked ahead of libtpmoe.a; the tests' source of this commit).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r78_h200x2.sh
NAME=r78
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
TPMOE_TOOL=$B/tpmoe_x timeout 200 "$B/gpu_allreduce_x" > "$R/gpu_allreduce_x.log" 2>&1
echo "== gpu_allreduce_x rc=$? ($(el))"; ok "$R/gpu_allreduce_x.log"
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe_x timeout 200 "$B/gpu_allreduce_x" > "$R/gpu_allreduce_x19.log" 2>&1
echo "== gpu_allreduce_x (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_x19.log"
pack
for pass in 1 2 3; do
  for bin in tpmoe tpmoe_x; do
    timeout 100 "$B/$bin" bench allreduce --tp 2 --dtype bf16 --codecs none \
      --sizes 8M,16M,32M,64M,96M,128M --json "$R/ab_${bin}_$pass.json" > "$R/ab_${bin}_$pass.log" 2>&1
    echo "== $bin pass $pass rc=$? ($(el))"
    grep -E "^ +[0-9]+ none" "$R/ab_${bin}_$pass.log" | awk -v b=$bin '{print b, $1, $3, $4}'
  done
done | tee "$R/ab.txt"
for bin in tpmoe tpmoe_x; do
  timeout 100 "$B/$bin" bench allreduce --tp 2 --dtype bf16 --codecs int8,int4 \
    --sizes 32M,96M,128M --json "$R/cq_${bin}.json" > "$R/cq_${bin}.log" 2>&1
  echo "== $bin codecs rc=$? ($(el))"
  grep -E "^ +[0-9]+ (int8|int4) " "$R/cq_${bin}.log" | awk -v b=$bin '{print b, $1, $2, $4}'
done | tee -a "$R/ab.txt"
pack
echo "== total $(el)"
