#!/usr/bin/env bash
# run_r59_h200.sh - the SASS-level profile of one rank's INT4 two-shot work
# (set 19, bench/ar_loopback.cu LOOPBACK_SOLO, INT4 32 MB): Nsight Compute
# kernel replay with source counters; writes the per-instruction table
# (warp stall samples by reason) gzipped, and its top 40 rows.
# Binary carried: prebuilt/ar_loopback (build line in bench/ar_loopback.cu, plus -lineinfo).
# Run from the repository root:  OUT=/some/dir bash bench/runs/run_r59_h200.sh
NAME=${NAME:-r59}
. bench/device_env.sh
NCU=$(command -v ncu)
cfg=3,33554432,19; tag=${cfg//,/_}
CUDA_VISIBLE_DEVICES=0 LOOPBACK_SOLO=$cfg timeout 200 "$NCU" --clock-control none --set full --import-source yes \
  -k regex:twoshot --launch-skip 3 --launch-count 1 -o "$R/solo_$tag" -f "$B/ar_loopback" > "$R/ncu_solo_$tag.log" 2>&1
echo "== ncu solo $cfg rc=$? ($(el))"
"$NCU" -i "$R/solo_$tag.ncu-rep" --page source --print-source sass --csv > "$R/solo_${tag}_sass.csv" 2>&1
python3 - "$R/solo_${tag}_sass.csv" <<'PY' | tee "$R/top.txt"
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
h = rows[1]; i = h.index("Warp Stall Sampling (All Samples)")
cols = [c for c in h if c.startswith("stall_") and "Not Issued" not in c]
body = [r for r in rows[2:] if len(r) == len(h)]
tot = {c: sum(int(r[h.index(c)] or 0) for r in body) for c in cols}
print("totals", sorted(tot.items(), key=lambda kv: -kv[1])[:8])
top = sorted(body, key=lambda r: -int(r[i] or 0))[:40]
for r in top:
    why = {c[6:]: r[h.index(c)] for c in cols if r[h.index(c)] not in ("0", "")}
    print(r[0][-5:], r[i], r[1].strip()[:56], why)
PY
gzip -9 "$R/solo_${tag}_sass.csv"; rm -f "$R/solo_$tag.ncu-rep"
echo "== total $(el)"
