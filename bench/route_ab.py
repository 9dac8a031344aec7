#!/usr/bin/env python3
"""route_ab.py - the routing A/B tables of a device run folder: routing net (route_net_us) per
token count of each variant's passes, and the first variant's median against each other's.

Usage: route_ab.py DIR VARIANT [VARIANT ...]
Reads DIR/<pass>_<variant>.json for every pass letter found (a, b, c, ...), one `tpmoe bench moe
--json` file per pass and variant (bench/runs/run_r262_h200.sh and later name them so).
Prints a markdown table and the worst rel_err / selection mismatches over every row read.
"""
import glob
import json
import os
import statistics as st
import sys


def load(path):
    with open(path) as f:
        return {r['tokens']: r for r in json.load(f)['rows']}


def main(argv):
    if len(argv) < 3:
        print(__doc__)
        return 2
    d, variants = argv[1], argv[2:]
    passes = sorted({os.path.basename(p).split('_', 1)[0] for p in glob.glob(os.path.join(d, f'*_{variants[0]}.json'))})
    passes = [p for p in passes if len(p) == 1]  # pass letters only (not trace_<variant>.json)
    if not passes:
        print(f"route_ab.py: no {d}/*_{variants[0]}.json", file=sys.stderr)
        return 2
    runs = {v: [load(os.path.join(d, f'{p}_{v}.json')) for p in passes] for v in variants}
    tokens = sorted(runs[variants[0]][0])
    first = variants[0]
    head = ["tokens", "mode"] + [f"{v}, {' / '.join(passes)}" for v in variants] + [f"{first} - {v}" for v in variants[1:]]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head))
    for t in tokens:
        c = {v: [r[t]['route_net_us'] for r in runs[v]] for v in variants}
        m = {v: st.median(c[v]) for v in variants}
        cells = [str(t), runs[first][0][t]['route_mode']] + [' / '.join(f'{x:.1f}' for x in c[v]) for v in variants]
        cells += [f"{m[first] - m[v]:+.2f}" for v in variants[1:]]
        print("| " + " | ".join(cells) + " |")
    rows = [r[t] for v in variants for r in runs[v] for t in tokens]
    print(f"max rel_err {max(r['max_rel_err'] for r in rows):.3g}, selection mismatches "
          f"{sum(r['sel_mismatch'] for r in rows)}")
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
