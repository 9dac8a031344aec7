#!/usr/bin/env python3
"""plot_moe.py - plot `tpmoe bench moe` JSON: time per MoE layer vs tokens,
fused and unfused, against the memory and compute floors measured in the
same run; bench/peers/moe_peers.py JSON files among them add the peers' lines.
Usage: plot_moe.py OUT.png run1.json [run2.json ...] (needs matplotlib)."""
import json
import sys


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5))
    title = None
    for path in sys.argv[2:]:
        d = json.load(open(path))
        if d["rows"] and "peer" in d["rows"][0]:  # moe_peers.py: one line per peer
            for peer in sorted({r["peer"] for r in d["rows"]}):
                rows = sorted((r for r in d["rows"] if r["peer"] == peer and "us" in r), key=lambda r: r["tokens"])
                label = {"triton": "Triton fused-MoE (tuned)", "grouped_mm": "torch._grouped_mm",
                         "ideal": "cuBLAS bmm bound of the GEMMs"}.get(peer, peer)
                ax.plot([r["tokens"] for r in rows], [r["us"] for r in rows], "x-." if peer != "ideal" else "+:",
                        label="peer: %s (%s)" % (label, path.split("/")[-1]))
            continue
        title = title or "tpmoe CUDA MoE, %s on %s" % (d["preset"], d["device"])
        tag = "tp%d" % d["tp"]
        for fused in (1, 0):
            rows = sorted((r for r in d["rows"] if r["fused"] == fused), key=lambda r: r["tokens"])
            if not rows:
                continue
            ax.plot([r["tokens"] for r in rows], [r["total_us"] for r in rows], "o-" if fused else "s--",
                    label="%s %s (%s)" % (tag, "fused" if fused else "unfused", path.split("/")[-1]))
        rows = sorted((r for r in d["rows"] if r["fused"] == 1), key=lambda r: r["tokens"]) or \
            sorted(d["rows"], key=lambda r: r["tokens"])
        ax.plot([r["tokens"] for r in rows], [r["floor_us"] for r in rows], ":", color="gray",
                label="%s floor max(bytes/%.0f GB/s, FLOPs/%.0f TFLOP/s)" % (tag, d["hbm_read_gbps"],
                                                                          d["gemm_bf16_tflops"]))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("tokens")
    ax.set_ylabel("MoE layer time (us, median, CUDA graph where capturable)")
    ax.set_title(title or "MoE layer")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
