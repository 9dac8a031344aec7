#!/usr/bin/env bash
# run_r105_h200.sh - round 14, one H200, into $OUT/r105: k_select's new form
# (8 / 16 / 32 tokens per block, the permutation's prefixes by one warp per
# expert with coalesced loads) against the previous binary: gpu_moe and
# gpu_moe_api of the new tree, then bench moe of both binaries in alternation
# at 129-8192 tokens (routing mode 2 from 129; two passes each), then every
# kernel's time at 256 and 8192 tokens with the new binary (ncu, one metric).
# Binaries (prebuilt/bin.txz): tpmoe_old (commit c86b6c8), tpmoe, gpu_moe,
# gpu_moe_api of the working tree (k_select change).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r105_h200.sh
NAME=r105
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt"
$B/gpu_moe > "$R/gpu_moe.log" 2>&1; echo "== gpu_moe rc=$? ($(el))"; grep -E "PASSED|FAILED|\[  (PASSED|FAILED)" "$R/gpu_moe.log" | tail -4
$B/gpu_moe_api > "$R/gpu_moe_api.log" 2>&1; echo "== gpu_moe_api rc=$? ($(el))"; grep -E "PASSED|FAILED" "$R/gpu_moe_api.log" | tail -3
for pass in 1 2; do
  for v in old new; do
    bin=$B/tpmoe; [ $v = old ] && bin=$B/tpmoe_old
    $bin bench moe --preset m3 --tokens 129,256,512,1024,2048,4096,8192 --fuse-shared 1 --check 2 --gemm-hold 0 \
      --reps 40 > "$R/bench_${v}_$pass.log" 2>&1
    echo "== $v pass $pass rc=$? ($(el))"; awk '$1 ~ /^[0-9]+$/ {print $1, $7, $10, $11, $12, $15, $18, $20}' "$R/bench_${v}_$pass.log"
  done
done
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1"
for t in 256 8192; do
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --kernel-name regex:"k_select|k_perm|nvjet_sm90_tss|splitK" \
    --csv $M --tokens $t > "$R/ncu_t$t.csv" 2> "$R/ncu_t$t.err"
  echo "== ncu $t rc=$? ($(el))"
  python3 - "$R/ncu_t$t.csv" <<'PY'
import csv, sys, statistics, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
sc = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}
d = collections.OrderedDict()
for r in rows[1:]: d.setdefault(r[ki][:60], []).append(float(r[vi].replace(",", "")) * sc[r[ui]])
for k, v in d.items(): print(f"  {k:60s} n={len(v):3d} median {statistics.median(v):9.1f} us")
PY
done
pack
echo "== total $(el)"
