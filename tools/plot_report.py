#!/usr/bin/env python3
"""Draws the plots of a podsim run folder from its summary.json (called by `podsim report`).

usage: plot_report.py RUN_DIR      writes RUN_DIR/timeline.png, memory.png, heatmap.png and prints their paths
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def timeline(s, out):
    t = s["timeline"]
    w = t["bin_s"]
    xs = [(i + 0.5) * w * 1e6 for i in range(len(t["mxu_busy"]))]
    fig, ax = plt.subplots(figsize=(9, 3.6))
    ax.plot(xs, [100 * v for v in t["mxu_busy"]], label="MXU busy %")
    ax.plot(xs, [100 * v for v in t["vpu_busy"]], label="VPU busy %")
    peak = s["hbm"]["peak_bandwidth_Bps"]
    ax.plot(xs, [100 * v / peak for v in t["hbm_Bps"]], label="HBM % of peak bandwidth")
    ax.set_xlabel("simulated time (us)")
    ax.set_ylabel("% of capacity")
    ax.set_ylim(0, 105)
    ax.set_title("%s: utilization over one step (chip %d)" % (s["experiment"], 0))
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def memory(s, out):
    m = s.get("memory")
    fig, ax = plt.subplots(figsize=(6, 3.6))
    if m:
        parts = m["at_peak"]
        names = ["weights", "gradients", "optimizer_state", "activations", "temporaries"]
        vals = [parts[n] / 2**30 for n in names]
        bottom = 0
        for n, v in zip(names, vals):
            ax.bar(["peak"], [v], bottom=bottom, label="%s %.2f GiB" % (n.replace("_", " "), v))
            bottom += v
        ax.axhline(m["capacity_bytes"] / 2**30, color="red", linestyle="--", label="HBM capacity")
        ax.set_ylabel("GiB")
        ax.set_title("memory at the peak (op %s)" % (m["peak_op"] or "-"))
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def heatmap(s, out):
    dims = s["pod_dims"] or [1, 1]
    vals = s["per_chip"]["mxu_busy_fraction"]
    x = dims[0]
    y = dims[1] if len(dims) > 1 else 1
    z = dims[2] if len(dims) > 2 else 1
    fig, axes = plt.subplots(1, z, figsize=(min(4 * z, 16), 3.8), squeeze=False)
    for k in range(z):
        grid = [[100 * vals[xi + x * (yi + y * k)] for xi in range(x)] for yi in range(y)]
        ax = axes[0][k]
        im = ax.imshow(grid, origin="lower", vmin=0, vmax=100, cmap="viridis")
        ax.set_xlabel("x")
        ax.set_ylabel("y")
        ax.set_title("z = %d" % k if z > 1 else "MXU busy % per chip")
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="MXU busy %")
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    run = sys.argv[1]
    with open(os.path.join(run, "summary.json")) as f:
        s = json.load(f)
    outs = []
    for name, fn in (("timeline.png", timeline), ("memory.png", memory), ("heatmap.png", heatmap)):
        path = os.path.join(run, name)
        fn(s, path)
        outs.append(path)
    print("\n".join(outs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
