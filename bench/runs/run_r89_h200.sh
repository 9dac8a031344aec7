#!/usr/bin/env bash
# run_r89_h200.sh - one H200, into $OUT/r89: r88 again with the chunked combine
# on the decode path only (fp32 rows; the prefill's bf16 rows one slot at a time
# as before, r88 found chunks of 4 slower there): new against the binary of
# commit a47e32a (old).
# First gpu_moe and gpu_moe_api (new), then m3 at TP 1, fused, 1 / 2 / 4 / 8 /
# 1024 / 8192 tokens, old and new in alternation, two passes.
# Binaries (prebuilt/bin.txz): tpmoe (new), tpmoe_old, gpu_moe, gpu_moe_api.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r89_h200.sh
NAME=r89
. bench/device_env.sh
ok() { grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|ERROR|differ" "$1" | head -8; }
for t in gpu_moe gpu_moe_api; do
  TPMOE_TOOL=$B/tpmoe timeout 300 "$B/$t" > "$R/$t.log" 2>&1
  echo "== $t rc=$? ($(el))"; ok "$R/$t.log"
done
pack
for pass in 1 2; do
  for v in tpmoe_old tpmoe; do
    timeout 90 "$B/$v" bench moe --preset m3 --tokens 1,2,4,8,1024,8192 --fuse-shared 1 \
      --check 1 --json "$R/${v}_p$pass.json" > "$R/${v}_p$pass.log" 2>&1
    echo "== $v pass $pass rc=$? ($(el))"
    sed -n '/^[0-9]/p' "$R/${v}_p$pass.log" | awk '{print $1, $4, $12, $13, $15, $18, $19}'
  done
  pack
done
echo "== total $(el)"
