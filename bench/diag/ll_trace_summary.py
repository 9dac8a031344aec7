#!/usr/bin/env python3
"""ll_trace_summary.py - summarize bench/diag/ll_trace.c's CSV timelines.

For each trace file: the CTAs' entry spread, the pipeline's steps (median
over CTAs of each step's start and of its A, B and C durations, in us from
the earliest entry on that GPU) and the end spread. Usage:
  ll_trace_summary.py trace_*.csv
"""
import csv
import statistics as st
import sys


def med(v):
    return st.median(v) if v else float("nan")


for path in sys.argv[1:]:
    rows = list(csv.DictReader(open(path)))
    ctas = {}
    for r in rows:
        ctas.setdefault(int(r["cta"]), []).append(r)
    entry = [int(v[0]["entry"]) / 1e3 for v in ctas.values()]
    begun = [int(v[0]["begun"]) / 1e3 for v in ctas.values()]
    end = [int(v[0]["end"]) / 1e3 for v in ctas.values()]
    cols = [int(v[0]["cols"]) for v in ctas.values()]
    print(f"== {path}: {len(ctas)} CTAs, columns (r75) / warp 0 units (r77) {min(cols)}..{max(cols)}; entry {min(entry):.2f}..{max(entry):.2f} "
          f"(median {med(entry):.2f}), begun median {med(begun):.2f}, end {min(end):.2f}..{max(end):.2f} "
          f"(median {med(end):.2f}) us")
    nmax = max(cols) + 2
    print("  step  n   start    A      B      C    (median us; B = loads + poll + compute + push)")
    for j in range(nmax):
        s, a, b, c = [], [], [], []
        for v in ctas.values():
            if j < len(v):
                r = v[j]
                t = [int(r[k]) / 1e3 for k in ("start", "after_a", "after_b", "after_c")]
                s.append(t[0]); a.append(t[1] - t[0]); b.append(t[2] - t[1]); c.append(t[3] - t[2])
        print(f"  {j:4d} {len(s):3d} {med(s):7.2f} {med(a):6.2f} {med(b):6.2f} {med(c):6.2f}")
