#!/usr/bin/env python3
"""plot_allreduce.py - plot `tpmoe bench allreduce --json` output.

Usage: python3 bench/plot_allreduce.py RESULTS.json OUT.png
Two panels against message size: latency (us, log-log; one line per codec,
NCCL, and the measured floor of exact) and speed-up over NCCL.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        d = json.load(f)
    rows = d["results"]
    codecs = []
    for r in rows:
        if r["codec"] not in codecs:
            codecs.append(r["codec"])
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 5))
    for c in codecs:
        rs = [r for r in rows if r["codec"] == c and "us" in r]
        xs = [r["bytes"] for r in rs]
        ax1.plot(xs, [r["us"] for r in rs], marker="o", label="tpmoe " + c)
        sp = [(r["bytes"], r["nccl_us"] / r["us"]) for r in rs if "nccl_us" in r]
        ax2.plot([x for x, _ in sp], [y for _, y in sp], marker="o", label="tpmoe " + c)
    exact = [r for r in rows if r["codec"] == codecs[0]]
    xs = [r["bytes"] for r in exact]
    if all("nccl_us" in r for r in exact):
        ax1.plot(xs, [r["nccl_us"] for r in exact], "k--", marker="s", label="NCCL")
    ax1.plot(xs, [r["floor_us"] for r in exact], "k:", label="floor (" + codecs[0] + ")")
    ax2.axhline(1.0, color="k", linestyle="--", label="NCCL")
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes per rank")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    ax1.set_yscale("log")
    ax1.set_ylabel("latency per call (us, median in CUDA graphs)")
    ax2.set_ylabel("speed-up over NCCL")
    fig.suptitle("tpmoe all-reduce, %d x %s, %s, peer write %.0f GB/s"
                 % (d["tp"], d["device"], d["dtype"], d["peer_write_GBps"]))
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
