#!/usr/bin/env bash
# run_r214_h200.sh - one GPU (H200 asked; an H100 may come), into $OUT/r214: round 35,
# shared_overlap 2. r213's timeline (split plan, 5-8 tokens) had k_gate_up2's first block at ~55 us,
# after the dense shared MLP that runs beside the routing and is joined before the experts; with
# shared_overlap 2 the experts call forks that MLP beside the routed decode kernels instead.
# gpu_moe_paths (pdl_equals_plain: variants 15, 16 give set 0's bits) and gpu_moe first; then the
# layer at 5-8 tokens, fused and unfused, shared_overlap 1 (default) against 2, two passes.
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r214_h200.sh
NAME=r214
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
for t in gpu_moe_paths gpu_moe; do
  timeout 150 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/$t.log" | head -5
done
pack
bm() { # name args...
  local n=$1; shift
  timeout 100 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-10s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s/%s/%s/%s ", $1, $4, $12, $15, $18}')"
}
for pass in a b; do
  bm f1_o1_$pass --fuse-shared 1 --tokens 5,6,8 --shared-overlap 1
  bm f1_o2_$pass --fuse-shared 1 --tokens 5,6,8 --shared-overlap 2
  bm f0_o1_$pass --fuse-shared 0 --tokens 1,8 --shared-overlap 1
  bm f0_o2_$pass --fuse-shared 0 --tokens 1,8 --shared-overlap 2
  pack
done
echo "== r214 done ($(el))"
