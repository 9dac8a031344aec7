#!/usr/bin/env bash
# run_r90_h200.sh - one H200, into $OUT/r90: the final tree (the prefill form
# resolved by tpm_cuda_moe_prefill_form, printed and written by bench moe):
# gpu_moe, gpu_moe_api, then m3 at TP 1, fused, 1 / 1024 / 8192 tokens.
# Binaries (prebuilt/bin.txz): tpmoe, gpu_moe, gpu_moe_api of the final tree.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r90_h200.sh
NAME=r90
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$1" | head -8; }
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
timeout 90 "$B/tpmoe" bench moe --preset m3 --tokens 1,1024,8192 --fuse-shared 1 --check 1 \
  --json "$R/moe.json" > "$R/moe.log" 2>&1
echo "== bench rc=$? ($(el))"
sed -n '/^tokens/,$p' "$R/moe.log" | cut -c1-200
grep -o '"prefill_form": [-0-9]*' "$R/moe.json" | tr '\n' ' '; echo
pack
echo "== total $(el)"
