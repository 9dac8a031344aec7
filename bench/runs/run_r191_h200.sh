#!/usr/bin/env bash
# run_r191_h200.sh - one H200, into $OUT/r191: fused against unfused in both orders.
# r190 had the fused layer 0.7% behind the unfused one at 8192 tokens in both passes (the split
# plan: the same GEMMs), with the fused rows always run first. Here each call runs both layers,
# alternately unfused first (--fuse-shared 0,1) and fused first (1,0), three calls each, at
# 16 / 1024 / 8192 tokens (split / slot / split plans), then the slot plan forced at 8192.
#   tpmoe bench moe --preset m3 --tokens 16,1024,8192 --fuse-shared 0,1|1,0 --check 1 --gemm-hold 0
# Binaries: prebuilt/bin.txz as in r189 / r190 (Release tpmoe of 2bb3d85).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r191_h200.sh
NAME=r191
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
bm() { # name args...
  local n=$1; shift
  timeout 120 "$B/tpmoe" bench moe --preset m3 --gemm-hold 0 --check 1 "$@" > "$R/$n.log" 2>&1
  local rc=$?
  printf "%-8s rc=%d %s\n" "$n" $rc "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s/%s %s: %s %s | ", $1, $2, $4, $15, $12}')"
}
for i in 1 2 3; do
  bm uf_$i --tokens 16,1024,8192 --fuse-shared 0,1
  bm fu_$i --tokens 16,1024,8192 --fuse-shared 1,0
  pack
done
bm slot --tokens 8192 --fuse-shared 1,0 --shared-plan slot
pack
echo "== total $(el)"
