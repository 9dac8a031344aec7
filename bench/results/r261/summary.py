#!/usr/bin/env python3
"""r261's table: fused minus unfused (total / experts phase, us) per weight seed and pass at 5-8
tokens, then the separate-process runs. Run from bench/results/r261/."""
import glob
import json


def rows(f):
    return {(r['tokens'], r['fused']): r for r in json.load(open(f))['rows']}


T = (5, 6, 7, 8)
print("fused - unfused, us (total / experts phase), both layers in one process:")
print("| seed | pass | " + " | ".join(str(t) for t in T) + " |")
print("| --- | --- |" + " --- |" * len(T))
dt_all = {t: [] for t in T}
de_all = {t: [] for t in T}
for s in (1, 2, 3, 4):
    for p in "ab":
        R = rows(f"{p}_s{s}.json")
        cells = []
        for t in T:
            dt = R[(t, 1)]['total_us'] - R[(t, 0)]['total_us']
            de = R[(t, 1)]['experts_us'] - R[(t, 0)]['experts_us']
            dt_all[t].append(dt)
            de_all[t].append(de)
            cells.append(f"{dt:+.1f} / {de:+.1f}")
        print(f"| {s} | {p} | " + " | ".join(cells) + " |")
n = len(dt_all[T[0]])
print("| mean | | " + " | ".join(f"{sum(dt_all[t]) / n:+.2f} / {sum(de_all[t]) / n:+.2f}" for t in T) + " |")
print("runs with the fused total slower:", ", ".join(f"{t} tokens {sum(v > 0 for v in dt_all[t])} of {n}" for t in T))
print("one layer per process (seed 1), total (experts) us, fused / unfused:")
for o, name in (("10", "fused first"), ("01", "unfused first")):
    f1, f0 = rows(f"alone_{o}_f1.json"), rows(f"alone_{o}_f0.json")
    print(f"  {name}: " + ", ".join(
        f"{t} tokens {f1[(t, 1)]['total_us']:.1f} ({f1[(t, 1)]['experts_us']:.1f}) / "
        f"{f0[(t, 0)]['total_us']:.1f} ({f0[(t, 0)]['experts_us']:.1f})" for t in (5, 8)))
allr = [r for f in sorted(glob.glob("*.json")) for r in json.load(open(f))['rows']]
print(f"max rel_err {max(r['max_rel_err'] for r in allr):.3g}, selection mismatches {sum(r['sel_mismatch'] for r in allr)}")
