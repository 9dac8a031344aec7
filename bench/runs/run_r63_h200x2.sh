#!/usr/bin/env bash
# run_r63_h200x2.sh - the scatter's tie-free extreme for 16-bit inputs
# (codec_fast.h tpm_fast_extreme_lz) and the one-check group load, on
# 2 x H200: gpu_allreduce and gpu_comm_api on the default set 10, gpu_allreduce
# on set 19; sets 5 / 10 side by side for the codecs (outputs compared); the
# whole table on set 10 (JSON and PNG); one rank's INT4 32 MB work alone with
# Nsight Compute's instruction count (r62: 15.65 M before); exact and INT8
# at 32-128 MB with a 128 MB peer buffer (96 MB in one launch).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, gpu_comm_api, ar_loopback.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r63_h200x2.sh
NAME=${NAME:-r63}
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1
for t in gpu_allreduce gpu_comm_api; do
  TPMOE_TOOL=$B/tpmoe timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe timeout 100 "$B/gpu_allreduce" > "$R/gpu_allreduce_v19.log" 2>&1
echo "== gpu_allreduce (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_v19.log"
pack
timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs int8,int6,int4,int4_h,int6_h \
  --variants 5,10 --sizes 2M,8M,32M,96M --iters 30 --json "$R/allreduce_sets.json" \
  > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 5 / 10 rc=$? ($(el)) differs: $(grep -c differs "$R/bench_allreduce_sets.log")"
grep -E "^ +[0-9]" "$R/bench_allreduce_sets.log" | cut -c1-150
pack
timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 \
  --codecs none,int8,int6,int4,fp8,int4_h,int6_h --sizes 4K,12K,64K,256K,768K,2M,8M,32M,96M,128M \
  --json "$R/allreduce_h200x2.json" --png "$R/allreduce_h200x2.png" > "$R/bench_allreduce.log" 2>&1
echo "== bench allreduce rc=$? ($(el))"
grep -E "^ +(12288|786432|2097152|33554432|100663296) " "$R/bench_allreduce.log" | cut -c1-150
pack
# exact at 96 MB in one launch instead of two (a 128 MB peer buffer)
TPMOE_BUFFER_BYTES=134217728 timeout 60 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8 \
  --sizes 32M,96M,128M --json "$R/allreduce_buf128.json" > "$R/bench_allreduce_buf128.log" 2>&1
echo "== bench allreduce, 128 MB buffer rc=$? ($(el))"
grep -E "^ +[0-9]" "$R/bench_allreduce_buf128.log" | cut -c1-120
pack
NCU=$(command -v ncu)
CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=3,33554432,19 timeout 60 "$B/ar_loopback" 2>&1 | tee "$R/solo.log"
CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=1,33554432,19 timeout 60 "$B/ar_loopback" 2>&1 | tee -a "$R/solo.log"
if [ -n "$NCU" ]; then
  CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=3,33554432,19 timeout 120 "$NCU" --clock-control none \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread \
    -k regex:twoshot --launch-skip 3 --launch-count 1 "$B/ar_loopback" > "$R/ncu_solo_int4.log" 2>&1
  echo "== ncu solo INT4 32 MB rc=$? ($(el))"
  grep -E "duration|inst_executed|registers" "$R/ncu_solo_int4.log"
fi
pack
echo "== total $(el)"
