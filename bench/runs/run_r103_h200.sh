#!/usr/bin/env bash
# run_r103_h200.sh - round 14, one H200, into $OUT/r103: (1) the issue's MoE
# command with the new held cuBLAS rate (--gemm-hold 3: cuBLAS 8192^3 back to
# back for 3 s, the rate at the 700 W cap) while nvidia-smi logs SM clock and
# power every 100 ms; (2) every kernel's time in the 256-, 1024- and
# 8192-token fused layers (Nsight Compute, one metric, --clock-control none,
# one replay): where the non-GEMM microseconds of the prefill path go.
# Binaries (prebuilt/bin.txz): tpmoe of HEAD.
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r103_h200.sh
NAME=r103
. bench/device_env.sh
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit,driver_version --format=csv > "$R/smi.txt"
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu --format=csv,noheader -lms 100 > "$R/smi_log.csv" &
SMI=$!
$B/tpmoe bench moe --preset m3 --tokens 1,8,32,128,1024,8192 --fuse-shared both --check 2 --gemm-hold 3 \
  --json "$R/moe_m3_tp1.json" > "$R/bench_moe_tp1.log" 2>&1
echo "== bench rc=$? ($(el))"; cat "$R/bench_moe_tp1.log"
kill $SMI
M="$B/tpmoe bench moe --preset m3 --fuse-shared 1 --check 0 --gemm-hold 0 --reps 1"
for t in 256 1024 8192; do
  timeout 150 ncu --clock-control none --metrics gpu__time_duration.sum --csv $M --tokens $t > "$R/ncu_t$t.csv" 2> "$R/ncu_t$t.err"
  echo "== ncu $t rc=$? ($(el))"
  python3 - "$R/ncu_t$t.csv" <<'PY'
import csv, sys, statistics, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
d = collections.OrderedDict()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")) * {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[r[ui]]
    d.setdefault(r[ki][:60], []).append(v)
for k, v in d.items(): print(f"  {k:60s} n={len(v):3d} median {statistics.median(v):9.1f} us  min {min(v):9.1f}")
PY
done
pack
echo "== total $(el)"
