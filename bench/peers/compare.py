#!/usr/bin/env python3
"""compare.py - tpmoe's layer beside the peers of one device call: a markdown table and JSON.

Reads `tpmoe bench moe --json` files (the fused rows; several files: the median of their passes)
and bench/peers/moe_peers.py JSON files; each layer's memory floor is its batch's touched expert
bytes over the HBM read bandwidth tpmoe measured in the same call, the FLOP floor the batch's
FLOPs over tpmoe's burst cuBLAS rate; x = time / max(the two).
Usage: python3 bench/peers/compare.py --tpmoe a.json [b.json] --peers p1.json [p2.json] [--json out.json]
"""
import argparse
import json
import statistics
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tpmoe", nargs="+", required=True)
    ap.add_argument("--peers", nargs="+", required=True)
    ap.add_argument("--json", default="")
    o = ap.parse_args()
    runs = [json.load(open(f)) for f in o.tpmoe]
    bw = statistics.median(r["hbm_read_gbps"] for r in runs) * 1e3  # bytes/us
    rate = statistics.median(r["gemm_bf16_tflops"] for r in runs) * 1e6  # FLOP/us
    tp = {}
    for r in runs:
        for row in r["rows"]:
            if row.get("fused") == 1:
                tp.setdefault(row["tokens"], []).append(row)
    peers, shapes = {}, None
    for f in o.peers:
        d = json.load(open(f))
        shapes = shapes or d["shapes"]
        for row in d["rows"]:
            peers.setdefault(row["tokens"], {})[row["peer"]] = row
    H, I, slots = shapes["hidden"], shapes["inter"], shapes["topk"] + shapes["shared"]
    out = {"device": runs[0]["device"], "hbm_read_gbps": bw / 1e3, "gemm_bf16_tflops": rate / 1e6, "rows": []}
    print(f"# {runs[0]['device']}: HBM read {bw / 1e3:.0f} GB/s, cuBLAS bf16 {rate / 1e6:.0f} TFLOP/s (tpmoe's "
          "measurements in the same call); x = time / max(touched bytes / HBM read, FLOPs / cuBLAS rate)")
    print("| tokens | experts touched (tpmoe / peers) | tpmoe fused us (x) | Triton fused-MoE, tuned us (x) | "
          "torch._grouped_mm us (x) | tpmoe vs Triton | vs grouped_mm | cuBLAS bound of the GEMMs us (held) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for T in sorted(tp):
        t_us = statistics.median(r["total_us"] for r in tp[T])
        t_touch = tp[T][0]["experts_touched"]
        flops = 2.0 * T * slots * 3 * H * I
        row = {"tokens": T, "tpmoe_us": t_us, "tpmoe_touched": t_touch,
               "tpmoe_x": t_us / max(t_touch * 3 * H * I * 2 / bw, flops / rate)}
        cells = {}
        for name in ("triton", "grouped_mm", "ideal"):
            p = peers.get(T, {}).get(name)
            if not p or "us" not in p:
                continue
            row[name + "_us"] = p["us"]
            if name != "ideal":
                row[name + "_touched"] = p["touched"]
                row[name + "_x"] = p["us"] / max(p["touched_bytes"] / bw, flops / rate)
                row["speedup_vs_" + name] = p["us"] / t_us
                cells[name] = f"{p['us']:.1f} ({row[name + '_x']:.2f}x)"
            else:
                row["ideal_held_us"] = p.get("held_us")
                cells[name] = f"{p['us']:.1f} ({p['held_us']:.1f})" if p.get("held_us") else f"{p['us']:.1f}"
        touch = "/".join(str(row[k]) for k in ("tpmoe_touched", "triton_touched", "grouped_mm_touched") if k in row)
        print(f"| {T} | {touch} | {t_us:.1f} ({row['tpmoe_x']:.2f}x) | {cells.get('triton', '-')} | "
              f"{cells.get('grouped_mm', '-')} | "
              f"{row.get('speedup_vs_triton', float('nan')):.2f}x | {row.get('speedup_vs_grouped_mm', float('nan')):.2f}x | "
              f"{cells.get('ideal', '-')} |")
        out["rows"].append(row)
    if o.json:
        with open(o.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
