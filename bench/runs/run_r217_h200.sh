#!/usr/bin/env bash
# run_r217_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r217: round 36, the shared
# slot on tensor cores (shared_mma) in three builds of k_gate_up2 / k_down2's tensor-core
# instantiations: 4 chunks per register stage and 2 blocks per SM at 4 tokens (u4b2, r216's), 2
# chunks (u2b2), 2 chunks and 3 blocks per SM at 4 tokens (u2b3, the plain GEMVs' occupancy there).
# The fused layer at 3-8 tokens, slot plan on tensor cores, against the defaults (scalar slot at
# 3-4 tokens, split plan from 5) of the same binary, two passes.
# Binaries: prebuilt/bin.txz (tpmoe_u4b2, tpmoe_u2b2, tpmoe_u2b3: compact Release builds, stripped).
NAME=r217
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
bm() { # bin name args...
  local b=$1 n=$2; shift 2
  timeout 100 "$B/$b" bench moe --preset m3 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-14s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s/%s ", $1, $4, $12, $15, $18}')"
}
for pass in a b; do
  bm tpmoe_u2b3 def_$pass --fuse-shared 1 --tokens 3,4,5,6,8
  for v in u4b2 u2b2 u2b3; do
    bm tpmoe_$v ${v}_$pass --fuse-shared 1 --tokens 3,4,5,6,8 --shared-plan slot --shared-mma 3
  done
  pack
done
echo "== r217 done ($(el))"
