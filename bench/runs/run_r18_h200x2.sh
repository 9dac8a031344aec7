#!/usr/bin/env bash
# run_r18_h200x2.sh - round 18: the fused shared slot at large prefill batches
# inside the own wgmma GEMM (slot) or as dense cuBLAS GEMMs beside it (split),
# against the unfused layer, at 1024 / 4096 / 8192 tokens; every gpu_moe test.
# Binaries (tpmoe, gpu_moe) carried in prebuilt/bin.txz.
#   OUT=/some/dir bash bench/runs/run_r18_h200x2.sh
NAME=${NAME:-r18}
. bench/device_env.sh
for plan in split slot; do
  timeout 150 "$B/tpmoe" bench moe --preset m3 --tokens ${PF_TOKENS:-1024,4096,8192} --fuse-shared both --check 2 \
    --shared-plan $plan --reps 10 --json "$R/moe_prefill_$plan.json" > "$R/bench_moe_prefill_$plan.log" 2>&1
  echo "== bench moe prefill plan $plan rc=$? ($(el))"
  grep -E "^# device|^[0-9]|error|FAIL" "$R/bench_moe_prefill_$plan.log" | cut -c1-220
done
timeout 240 "$B/gpu_moe" > "$R/gpu_moe.log" 2>&1
echo "== gpu_moe rc=$? ($(el))"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|prefill plan|T=5000" "$R/gpu_moe.log" | head -40
pack
echo "== total $(el)"
