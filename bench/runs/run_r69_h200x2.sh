#!/usr/bin/env bash
# run_r69_h200x2.sh - the flag-free two-shot's world-2 codec path (run2:
# stepped ranges and slots, my term straight into the sum, the next column's
# loads issued early; codec_fast.h's two-instruction tie scan and the PRMT
# magic from constant memory) on 2 x H200: gpu_allreduce and gpu_comm_api on
# the default set 10, gpu_allreduce on set 19, then the codec two-shots of
# this build (tpmoe) and of r66's (tpmoe_old) in alternation, two passes.
# Binaries (prebuilt/ab.txz): tpmoe, gpu_allreduce, gpu_comm_api of this build (BINS=tpmoe; two builds do not fit one call, so the comparison is with r66 / final13).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r69_h200x2.sh
NAME=${NAME:-r69}
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1
for t in ${TESTS:-gpu_allreduce gpu_comm_api}; do
  TPMOE_TOOL=$B/tpmoe timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe timeout 100 "$B/gpu_allreduce" > "$R/gpu_allreduce_v19.log" 2>&1
echo "== gpu_allreduce (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_v19.log"
pack
for pass in 1 2; do
  for bin in ${BINS:-tpmoe_old tpmoe}; do
    timeout 100 "$B/$bin" bench allreduce --tp 2 --dtype bf16 --codecs int8,int6,int4,int4_h,int6_h \
      --sizes 2M,8M,32M,96M --json "$R/ab_${bin}_$pass.json" > "$R/ab_${bin}_$pass.log" 2>&1
    echo "== $bin pass $pass rc=$? ($(el))"
    grep -E "^ +[0-9]+ int" "$R/ab_${bin}_$pass.log" | awk -v b=$bin '{print b, $1, $2, $4}'
  done
done | tee "$R/ab.txt"
pack
echo "== total $(el)"
