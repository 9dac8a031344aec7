#!/usr/bin/env python3
"""r269's table: routing net (us) of the permutation by every selecting block in its third form
(new), its third form (old, r266's), and by the last block (last: --route-perm-min 0), three
passes each. Run from bench/results/r269/."""
import json
import statistics as st

T = [16, 24, 25, 32, 48, 64, 96, 128, 160, 192, 256]


def load(f):
    return {r['tokens']: r for r in json.load(open(f))['rows']}


runs = {v: [load(f'{p}_{v}.json') for p in 'abc'] for v in ('new', 'old', 'last')}
print("| tokens | mode | new, a / b / c | old | last | new - old | new - last |")
print("| --- | --- | --- | --- | --- | --- | --- |")
for t in T:
    c = {v: [r[t]['route_net_us'] for r in runs[v]] for v in runs}
    m = {v: st.median(c[v]) for v in c}
    print(f"| {t} | {runs['new'][0][t]['route_mode']} | " + " | ".join(' / '.join(f'{x:.1f}' for x in c[v]) for v in ('new', 'old', 'last'))
          + f" | {m['new'] - m['old']:+.2f} | {m['new'] - m['last']:+.2f} |")
rows = [r[t] for v in runs for r in runs[v] for t in T]
print(f"max rel_err {max(r['max_rel_err'] for r in rows):.3g}, selection mismatches {sum(r['sel_mismatch'] for r in rows)}")
