#!/usr/bin/env python3
"""r262's table: routing net (us) of the permutation by the last block (--route-perm-min 0) and by
every selecting block (12), three passes each. Run from bench/results/r262/."""
import json
import statistics as st

T = [9, 12, 16, 17, 20, 24, 25, 32, 48, 64, 96, 128, 160, 192, 256]


def load(f):
    return {r['tokens']: r for r in json.load(open(f))['rows']}


runs = {pm: [load(f'{p}_pm{pm}.json') for p in 'abc'] for pm in (0, 12)}
print("| tokens | mode | last block (0), a / b / c | every selecting block (12), a / b / c | new - old, medians |")
print("| --- | --- | --- | --- | --- |")
for t in T:
    o = [r[t]['route_net_us'] for r in runs[0]]
    n = [r[t]['route_net_us'] for r in runs[12]]
    print(f"| {t} | {runs[0][0][t]['route_mode']} | {' / '.join(f'{v:.1f}' for v in o)} | "
          f"{' / '.join(f'{v:.1f}' for v in n)} | {st.median(n) - st.median(o):+.2f} |")
rows = [r[t] for pm in runs for r in runs[pm] for t in T]
print(f"max rel_err {max(r['max_rel_err'] for r in rows):.3g}, selection mismatches {sum(r['sel_mismatch'] for r in rows)}")
