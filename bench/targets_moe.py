#!/usr/bin/env python3
"""targets_moe.py - hold `tpmoe bench moe --json` files to the targets of the CUDA MoE issue.

Usage: targets_moe.py RUN.json [RUN.json ...]

Each file is one run (one process: the floors, the HBM read rate and the bf16 GEMM rate were
measured in it). Per file it prints one line per check and exits 1 if any check is missed
(2 on a file it cannot read). The checks, as the issue states them (M3 shapes, one GPU unless
said; the floor is the run's own: max(bytes of the experts the batch touched / HBM read rate,
FLOPs / bf16 GEMM rate)):
  - layer time of the fused layer <= 1.15x floor at 1, 8 and 32 tokens, <= 1.3x at 1024,
    <= 1.4x at 8192 (other token counts are printed, not judged);
  - routing + permutation (route_net_us) <= 8 us up to 256 tokens, fused and unfused rows;
  - the fused layer never slower than the unfused one (both rows present);
  - TP 2 runs (tp == 2): the fused block >= 1.1x faster than unfused at 1-8 tokens;
  - every row validated: max_rel_err <= 1e-2 and no selection mismatch.
`bench moe --shard N` runs (TP rank 0's share of a TP N layer alone on one GPU, no all-reduce) are
not the issue's layer: their layer ratios are printed, not judged, and at TP 2 the share's unfused /
fused ratio is printed with what the 1.1x target needs of the fused share against its floor of
bytes (below the floor: no fused layer can reach it against that unfused one). Their routing, fused
<= unfused and validation checks are judged.
At TP 2 (block or share) each line at 1-8 tokens also says whether 1.1x is reachable at all: the
fused time it needs (unfused / 1.1) against the fused row's floor.
The held rate (x_floor_held, the GEMM rate at the board's power cap) is shown beside the burst
ratio where the run measured it; the judged ratio is the burst one (total_us / floor_us), the
stricter. Ratios are computed here from the times and floors, not read from the file.
"""
import json
import sys

LAYER_TARGET = {1: 1.15, 8: 1.15, 32: 1.15, 1024: 1.3, 8192: 1.4}
ROUTE_MAX_US, ROUTE_MAX_TOKENS = 8.0, 256
TP2_SPEEDUP, TP2_MAX_TOKENS = 1.1, 8


def check(path):
    """Returns (met, missed) for one file, after printing its lines."""
    with open(path) as f:
        d = json.load(f)
    if d.get("bench") != "moe" or "rows" not in d:
        raise ValueError("not a `tpmoe bench moe --json` file")
    rows = d["rows"]
    tp = d.get("tp", 1)
    shard = d.get("shard_of_tp", 1) or 1
    print("== %s: %s, preset %s, tp %s, ep %s, HBM read %.0f GB/s, bf16 GEMM %.0f TFLOP/s"
          % (path, d.get("device", "?"), d.get("preset", "?"), tp, d.get("ep", 1),
             d.get("hbm_read_gbps", 0.0), d.get("gemm_bf16_tflops", 0.0)))
    if shard > 1:
        print("   note: TP rank 0's share of a TP %d layer alone (--shard %d, no all-reduce): layer ratios "
              "and the TP 2 block target are shown, not judged" % (shard, shard))
    if d.get("preset") != "m3":
        print("   note: the targets are for the m3 preset; this run is %s" % d.get("preset"))
    res = {"met": 0, "missed": 0}

    def judge(ok, what):
        res["met" if ok else "missed"] += 1
        print("   %-6s %s" % ("met" if ok else "MISSED", what))

    by = {}
    for r in rows:
        by[(r["tokens"], r["fused"])] = r
    tokens = sorted({r["tokens"] for r in rows})
    for t in tokens:
        r = by.get((t, 1)) or by.get((t, 0))
        if tp == 1 and d.get("ep", 1) == 1:
            x = r["total_us"] / r["floor_us"]
            held = None
            if "flop_floor_held_us" in r:
                held = r["total_us"] / max(r["mem_floor_us"], r["flop_floor_held_us"])
            text = "layer %5d tokens (%s): %9.1f us, floor %8.1f us, %.3fx%s" % (
                t, "fused" if r["fused"] else "unfused", r["total_us"], r["floor_us"], x,
                " (held rate %.3fx)" % held if held else "")
            if t in LAYER_TARGET and shard == 1:
                judge(x <= LAYER_TARGET[t], text + " <= %.2fx" % LAYER_TARGET[t])
            elif t in LAYER_TARGET:
                print("   %-6s %s (a share: not judged)" % ("-", text))
            else:
                print("   %-6s %s (no target)" % ("-", text))
        if t <= ROUTE_MAX_TOKENS:
            for fu in (1, 0):
                q = by.get((t, fu))
                if q is not None and "route_net_us" in q:
                    judge(q["route_net_us"] <= ROUTE_MAX_US, "routing %5d tokens (%s): %.1f us <= %.0f us"
                          % (t, "fused" if fu else "unfused", q["route_net_us"], ROUTE_MAX_US))
        f, u = by.get((t, 1)), by.get((t, 0))
        if f is not None and u is not None:
            judge(f["total_us"] <= u["total_us"], "fused %.1f us <= unfused %.1f us at %d tokens (%.3fx)"
                  % (f["total_us"], u["total_us"], t, u["total_us"] / f["total_us"]))
            if (tp == 2 or shard == 2) and t <= TP2_MAX_TOKENS:
                need = u["total_us"] / TP2_SPEEDUP
                text = "TP 2 %s at %d tokens: unfused / fused %.3fx >= %.1fx (needs fused <= %.1f us; its floor " \
                       "%.1f us: %s)" % ("block" if tp == 2 else "share", t, u["total_us"] / f["total_us"], TP2_SPEEDUP,
                                         need, f["floor_us"], "reachable" if need >= f["floor_us"]
                                         else "below the floor, not reachable")
                if tp == 2:
                    judge(u["total_us"] >= TP2_SPEEDUP * f["total_us"], text)
                else:
                    print("   %-6s %s" % ("-", text))
    bad = [r for r in rows if not (r.get("max_rel_err", 1.0) <= 1e-2) or r.get("sel_mismatch", 1) != 0]
    judge(not bad, "validated: %d rows against the CPU reference, %d beyond 1e-2 or with a selection "
          "mismatch" % (len(rows), len(bad)))
    return res["met"], res["missed"]


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    met = missed = 0
    for path in argv[1:]:
        try:
            a, b = check(path)
        except (OSError, ValueError, KeyError) as e:
            print("targets_moe.py: %s: %s" % (path, e), file=sys.stderr)
            return 2
        met += a
        missed += b
    print("%d met, %d missed" % (met, missed))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
