#!/usr/bin/env bash
# run_r216_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r216: round 36, the fused
# shared slot on tensor cores in decode kernel set 2 (tuning.shared_mma, bench --shared-mma N,
# plan printed "slotm"). GPU tests first (gpu_moe_paths' shared_mma_forms: the launch forms
# bit-equal, near the scalar slot and the fp64 reference), then the fused layer at 3-8 tokens:
# the defaults (split plan from 5 tokens: the dense cuBLAS MLP beside the routing), the slot plan
# with the scalar shared slot, and the slot plan on tensor cores; the decode path at 9-32 tokens
# on tensor cores against the default prefill path; TP 2's rank share (--shard 2), two passes.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r216_h200.sh
NAME=r216
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_moe_paths gpu_moe gpu_moe_api; do
  timeout 200 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/$t.log" | head -5
done
grep "shared slot on tensor cores" "$R/gpu_moe_paths.log" | head -20
pack
bm() { # name args...
  local n=$1; shift
  timeout 100 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-10s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s:%s/%s/%s/%s/%s ", $1, $2, $4, $12, $15, $18, $20}')"
}
for pass in a b; do
  bm def_$pass --fuse-shared both --tokens 1,2,3,4,5,6,8
  bm sm_$pass --fuse-shared 1 --tokens 3,4,5,6,8 --shared-plan slot --shared-mma 3
  bm slot_$pass --fuse-shared 1 --tokens 3,4,5,6,8 --shared-plan slot --shared-mma 0
  bm d32_$pass --fuse-shared 1 --tokens 9,12,16,24,32 --path decode --shared-plan slot --shared-mma 3
  bm p32_$pass --fuse-shared 1 --tokens 9,12,16,24,32
  bm tp2_$pass --shard 2 --fuse-shared both --tokens 1,2,4,8
  bm tp2sm_$pass --shard 2 --fuse-shared 1 --tokens 3,4,8 --shared-plan slot --shared-mma 3
  pack
done
echo "== r216 done ($(el))"
