#!/usr/bin/env bash
# run_r60_h200x2.sh - the leaner INT codec arithmetic (src/codec/codec_fast.h:
# two integer maxes for the extreme, shift-add packing, no lower clamp,
# PRMT decode; cvt.rn.bf16x2 stores of decoded groups; set 19's polls
# checked all at once) against the previous build, on 2 x H200:
#   1. correctness: gpu_allreduce and gpu_comm_api on the default set 10
#      (every codec, dtype and world against the CPU communicator, bitwise),
#      gpu_allreduce on set 19;
#   2. speed: sets 10 and 19 side by side for the codecs at 2-96 MB (bench
#      allreduce, outputs compared between the sets), NCCL in the same
#      process; the previous build's numbers are final12 (set 10) and r52
#      (set 19), same machine type (both builds did not fit one carry);
#   3. one rank's INT4 32 MB work alone (bench/ar_loopback.cu LOOPBACK_SOLO)
#      with Nsight Compute's instruction count (r57: 22.05 M before).
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, gpu_comm_api, ar_loopback
# of this commit.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r60_h200x2.sh
NAME=${NAME:-r60}
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

for v in new; do
  bin=$B/tpmoe
  timeout 150 "$bin" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6,int4,fp8 \
    --variants 10,19 --sizes 2M,8M,32M,96M --iters 30 --json "$R/allreduce_sets_$v.json" \
    > "$R/bench_allreduce_sets_$v.log" 2>&1
  echo "== bench allreduce 10 / 19 ($v) rc=$? ($(el)) differs: $(grep -c differs "$R/bench_allreduce_sets_$v.log")"
  pack
done
for v in new; do grep -E "^ +[0-9]" "$R/bench_allreduce_sets_$v.log" | awk -v v=$v '{print v, $0}' | cut -c1-150; done

NCU=$(command -v ncu)
for v in new; do
  bin=$B/ar_loopback
  for cfg in 3,33554432,19 1,33554432,19; do
    CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=$cfg timeout 60 "$bin" 2>&1 | sed "s/^/$v /" | tee -a "$R/solo.log"
  done
  if [ -n "$NCU" ]; then
    CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=3,33554432,19 timeout 120 "$NCU" --clock-control none \
      --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,launch__registers_per_thread \
      -k regex:twoshot --launch-skip 3 --launch-count 1 "$bin" > "$R/ncu_solo_int4_$v.log" 2>&1
    echo "== ncu solo INT4 32 MB ($v) rc=$? ($(el))"
    grep -E "duration|inst_executed|warps_active|registers" "$R/ncu_solo_int4_$v.log"
  fi
done
pack
echo "== total $(el)"
