#!/usr/bin/env bash
# run_r220_h200.sh - one H200 (it stops at once on any other card), into $OUT/r220: round 36's final
# library (the shared slot on tensor cores as an option, off; the routing and experts calls' fork /
# join of the side stream through one pair of helpers, joined also after a failed launch) on the
# issue's machine:
#   1. gpu_moe_paths (shared_mma_forms), gpu_moe, gpu_moe_api;
#   2. the fused layer at 3-8 tokens: the defaults against the slot plan on tensor cores
#      (--shared-plan slot --shared-mma 3; on the H100, r216 / r217, 0.2-0.7% behind the split plan);
#      the unfused layer at 1-4 tokens, shared_overlap 1 against 2 (round 35 measured it on an H100
#      only); two passes;
#   3. the issue's MoE command once (-> moe_m3_tp1.json):
#        tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2
# Binaries: prebuilt/bin.txz (compact Release builds of this tree, stripped).
# Run from the repository root:  tar xJf prebuilt/bin.txz -C prebuilt && OUT=/some/dir bash bench/runs/run_r220_h200.sh
NAME=r220
. bench/device_env.sh
tests() {
  for t in gpu_moe_paths gpu_moe gpu_moe_api; do
    timeout 200 "$B/$t" > "$R/$t.log" 2>&1
    echo "== $t rc=$? ($(el))"; grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]" "$R/$t.log" | head -5
  done
  pack
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu --format=csv > "$R/smi.txt" 2>&1
cat "$R/smi.txt"
# TESTS_ANY=1: on another card run the GPU tests, then stop
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  echo "not an H200: $(nvidia-smi --query-gpu=name --format=csv,noheader)"
  [ "${TESTS_ANY:-0}" = 1 ] && tests
  exit 3
fi
tests
bm() { # name args...
  local n=$1; shift
  timeout 150 "$B/tpmoe" bench moe --preset m3 --check 1 --gemm-hold 0 "$@" --json "$R/$n.json" > "$R/$n.log" 2>&1
  printf "%-10s rc=%d %s\n" "$n" $? "$(sed -n '/^tokens/,$p' "$R/$n.log" | awk 'NR > 1 {printf "%s:%s:%s/%s/%s/%s/%s ", $1, $2, $4, $12, $15, $18, $20}')"
}
for pass in a b; do
  bm def_$pass --fuse-shared 1 --tokens 3,4,5,6,8
  bm sm_$pass --fuse-shared 1 --tokens 3,4,5,6,8 --shared-plan slot --shared-mma 3
  bm u1_$pass --fuse-shared 0 --tokens 1,2,4 --shared-overlap 1
  bm u2_$pass --fuse-shared 0 --tokens 1,2,4 --shared-overlap 2
  pack
done
timeout 300 "$B/tpmoe" bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 \
  --json "$R/moe_m3_tp1.json" > "$R/moe_m3_tp1.log" 2>&1
echo "== issue's table rc=$? ($(el))"; sed -n '/^tokens/,$p' "$R/moe_m3_tp1.log" | awk '{print $1, $2, $4, $11, $15, $17, $18, $20, $21}'
pack
echo "== r220 done ($(el))"
