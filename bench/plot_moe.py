#!/usr/bin/env python3
"""plot_moe.py - plot `tpmoe bench moe` JSON: time per MoE layer vs tokens,
fused and unfused, against the memory and compute floors measured in the
same run. Usage: plot_moe.py OUT.png run1.json [run2.json ...] (needs matplotlib)."""
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
    for path in sys.argv[2:]:
        d = json.load(open(path))
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
    ax.set_title("tpmoe CUDA MoE, %s on %s" % (d["preset"], d["device"]))
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(sys.argv[1], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
