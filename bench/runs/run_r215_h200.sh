#!/usr/bin/env bash
# run_r215_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r215: round 35 again, wider.
# r214 (ONE H100): shared_overlap 2 tied at 5-6 tokens fused, 0.7-0.9% slower at 8; unfused 3%
# faster at 1 token, 1.1% slower at 8. Here: unfused 1, 2, 4, 5, 8 and fused 5, 6, 8, overlap 1
# against 2, two passes.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r215_h200.sh
NAME=r215
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
bm() { # name args...
  local n=$1; shift
  timeout 100 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-10s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s ", $1, $4, $15, $18}')"
}
for pass in a b; do
  bm f0_o1_$pass --fuse-shared 0 --tokens 1,2,4,5,8 --shared-overlap 1
  bm f0_o2_$pass --fuse-shared 0 --tokens 1,2,4,5,8 --shared-overlap 2
  bm f1_o1_$pass --fuse-shared 1 --tokens 5,6,8 --shared-overlap 1
  bm f1_o2_$pass --fuse-shared 1 --tokens 5,6,8 --shared-overlap 2
  pack
done
echo "== r215 done ($(el))"
