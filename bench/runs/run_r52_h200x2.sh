#!/usr/bin/env bash
# run_r52_h200x2.sh - kernel set 19 (cuda_twoshot_ll.cu: the two-shot with
# self-marking payload words, no flags, no system-scope release per column)
# against the default set 10: gpu_allreduce and gpu_comm_api on set 19,
# then sets 10 / 19 side by side at 2-128 MB for every codec (outputs
# compared bitwise by the bench), then the whole benchmark table on set 19.
# Binaries as in run_final_h200x2.sh (prebuilt/bin.txz).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r52_h200x2.sh
NAME=${NAME:-r52}
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|skipp" "$1" | head -8; }
nvidia-smi --query-gpu=index,name,clocks.sm,clocks.max.sm,power.draw --format=csv > "$R/smi.txt" 2>&1

for t in gpu_allreduce gpu_comm_api; do
  TPMOE_CUDA_AR_VARIANT=19 TPMOE_TOOL=$B/tpmoe timeout 150 "$B/$t" > "$R/${t}_v19.log" 2>&1
  echo "== $t (set 19) rc=$? ($(el))"; ok "$R/${t}_v19.log"
done
pack
timeout 200 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 --codecs none,int8,int6,int4,fp8,int4_h \
  --variants 10,19 --sizes 2M,8M,32M,96M,128M --iters 30 --json "$R/allreduce_sets.json" \
  > "$R/bench_allreduce_sets.log" 2>&1
echo "== bench allreduce 10 / 19 rc=$? ($(el))"
cut -c1-180 "$R/bench_allreduce_sets.log" | grep -v "^\s*$" | tail -70
pack
TPMOE_CUDA_AR_VARIANT=19 timeout 150 "$B/tpmoe" bench allreduce --tp 2 --dtype bf16 \
  --codecs none,int8,int6,int4,fp8,int4_h,int6_h --sizes 4K,12K,64K,256K,768K,2M,8M,32M,96M,128M \
  --json "$R/allreduce_h200x2.json" --png "$R/allreduce_h200x2.png" > "$R/bench_allreduce.log" 2>&1
echo "== bench allreduce (set 19) rc=$? ($(el))"
grep -E "^ *(12K|768K|2M|32M|96M) " "$R/bench_allreduce.log" | cut -c1-160 | head -40
pack
echo "== total $(el)"
