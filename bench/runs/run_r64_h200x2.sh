#!/usr/bin/env bash
# run_r64_h200x2.sh (ran as run_final13_h200x2.sh, commit 7089819) - a release check on 2 x H200,
# into $OUT/r64: the all-reduce half of run_final_h200x2.sh (gpu_allreduce,
# gpu_comm_api, the CUDA MoE CLI at TP 2, the whole all-reduce table on the
# default set 10), the MoE GPU tests (gpu_moe, gpu_moe_api), gpu_allreduce on
# set 19; then the flag-free kernel at three CTAs per SM (this build) against
# two (tpmoe_r63, the build of r63) for the codecs, back to back in one call,
# and one rank's INT4 32 MB work alone with Nsight Compute's instruction count.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_allreduce, gpu_comm_api, gpu_moe,
# gpu_moe_api, ar_loopback of this commit, tpmoe_r63 of commit 672eed6.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_final13_h200x2.sh
NAME=r64 PART=ar bash bench/runs/run_final_h200x2.sh
NAME=r64
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe timeout 100 "$B/gpu_allreduce" > "$R/gpu_allreduce_v19.log" 2>&1
echo "== gpu_allreduce (set 19) rc=$? ($(el))"; ok "$R/gpu_allreduce_v19.log"
grep -E "^ +(12288|786432|2097152|33554432|100663296) " "$R/bench_allreduce.log" | cut -c1-120
pack
for v in r63 new r63 new; do
  bin=$B/tpmoe; [ $v = r63 ] && bin=$B/tpmoe_r63
  timeout 100 "$bin" bench allreduce --tp 2 --dtype bf16 --codecs int8,int6,int4,int4_h,int6_h \
    --sizes 2M,8M,32M,96M --iters 30 --json "$R/allreduce_ab_$v.json" > "$R/bench_allreduce_ab_$v.log" 2>&1
  echo "== bench allreduce ($v) rc=$? ($(el))"
  grep -E "^ +[0-9]" "$R/bench_allreduce_ab_$v.log" | awk -v v=$v '{print v, $1, $2, $4}' | tr '\n' ';'; echo
done
pack
CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=3,33554432,19 timeout 60 "$B/ar_loopback" 2>&1 | tee "$R/solo.log"
NCU=$(command -v ncu)
if [ -n "$NCU" ]; then
  CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=3,33554432,19 timeout 120 "$NCU" --clock-control none \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    -k regex:twoshot --launch-skip 3 --launch-count 1 "$B/ar_loopback" > "$R/ncu_solo_int4.log" 2>&1
  echo "== ncu solo INT4 32 MB rc=$? ($(el))"
  grep -E "duration|inst_executed|registers|warps_active" "$R/ncu_solo_int4.log"
fi
pack
echo "== total $(el)"
