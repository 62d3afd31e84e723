#!/usr/bin/python3
"""Draws the plots of a podsim run folder from its summary.json (called by `podsim report`).

usage: plot_report.py RUN_DIR      writes RUN_DIR/timeline.png, memory.png, heatmap.png (and pipeline.png for a
                                   pipeline run) and prints their paths
"""
import json
import math
import os
import sys

# matplotlib is Debian's python3-matplotlib (tools/packages.txt; `tools/bootstrap build` installs it), which only
# the system interpreter sees. Started by another python3 (pyenv, a virtualenv: `python3 plot_report.py ...`), the
# script runs again under /usr/bin/python3; without matplotlib there either, it says what is missing.
SYSTEM_PYTHON = "/usr/bin/python3"
try:
    import matplotlib
except ImportError:
    first = os.environ.get("PODSIM_PYTHON_FIRST")
    if first is None and sys.executable != SYSTEM_PYTHON and os.access(SYSTEM_PYTHON, os.X_OK):
        os.environ["PODSIM_PYTHON_FIRST"] = sys.executable
        os.execv(SYSTEM_PYTHON, [SYSTEM_PYTHON] + sys.argv)
    tried = sys.executable + (" (nor for %s)" % first if first else "")
    sys.exit("plot_report.py: No module named 'matplotlib' for %s. `tools/bootstrap build` installs it "
             "(Debian's python3-matplotlib, for %s)." % (tried, SYSTEM_PYTHON))

matplotlib.use("Agg")
import matplotlib.patches  # noqa: E402
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


def _unit(nbytes):
    for name, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return name, scale
    return "B", 1


def memory(s, out):
    """A stacked horizontal bar of what is live at the peak, scaled to the peak (not the capacity, which would
    flatten a small model to nothing); the capacity is drawn only when the peak comes within reach of it."""
    m = s.get("memory")
    fig, ax = plt.subplots(figsize=(8, 2.8))
    if m:
        parts = m["at_peak"]
        names = ["weights", "gradients", "optimizer_state", "activations", "temporaries"]
        peak = max(sum(parts[n] for n in names), 1.0)
        cap = m["capacity_bytes"]
        uname, scale = _unit(max(peak, cap) if peak > 0.5 * cap else peak)
        left = 0.0
        for n in names:
            v = parts[n] / scale
            ax.barh(["HBM"], [v], left=left, label="%s %.2f %s" % (n.replace("_", " "), v, uname))
            left += v
        if peak > 0.5 * cap:
            ax.axvline(cap / scale, color="red", linestyle="--", label="capacity %.2f %s" % (cap / scale, uname))
        ax.set_xlabel(uname)
        cu, cs = _unit(cap)
        ax.set_title("memory at the peak (op %s): %.2f %s of %.2f %s HBM (%.1f %%)"
                     % (m["peak_op"] or "-", peak / scale, uname, cap / cs, cu, 100 * peak / cap), fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def heatmap(s, out):
    """Busy fraction per chip on the torus, one panel per unit kind. A 3-D pod is drawn as its z-planes stacked
    vertically (row y + Y*z), with white lines between planes."""
    dims = s["pod_dims"] or [1, 1]
    pc = s["per_chip"]
    x = dims[0]
    y = dims[1] if len(dims) > 1 else 1
    z = dims[2] if len(dims) > 2 else 1
    panels = [("MXU", "mxu_busy_fraction"), ("VPU", "vpu_busy_fraction"), ("HBM", "hbm_busy_fraction"),
              ("ICI links", "ici_busy_fraction")]
    panels = [(t, k) for t, k in panels if k in pc]
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels) + 1, 3.6 if z == 1 else 6), squeeze=False)
    im = None
    for ax, (title, key) in zip(axes[0], panels):
        vals = pc[key]
        grid = [[100 * vals[xi + x * (yi + y * k)] for xi in range(x)] for k in range(z) for yi in range(y)]
        im = ax.imshow(grid, origin="lower", vmin=0, vmax=100, cmap="viridis", aspect="auto" if z > 1 else "equal")
        mean = 100 * sum(vals) / max(len(vals), 1)
        ax.set_title("%s busy %% (mean %.1f)" % (title, mean), fontsize=10)
        ax.set_xlabel("x")
        if ax is axes[0][0]:
            ax.set_ylabel("y" if z == 1 else "y + %d z" % y)
        else:
            ax.set_yticklabels([])
        for k in range(1, z):
            ax.axhline(k * y - 0.5, color="white", linewidth=0.8)
    fig.suptitle("%s: busy fraction per chip on the %s pod" % (s["experiment"], " x ".join(map(str, dims))),
                 fontsize=11)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="busy %")
    fig.savefig(out, dpi=110)
    plt.close(fig)


PASS_COLOURS = {"forward": "#1f77b4", "backward": "#ff7f0e", "recompute": "#aec7e8"}
PASS_TEXT = {"forward": "white", "backward": "black", "recompute": "black"}


def pipeline(s, out):
    """The pipeline schedule as it ran: stages (rows, stage 0 on top) over the forward and backward passes, each
    unit of a stage (a micro-batch's forward, backward or recomputation) a block from its first op's start to its
    last op's end, with the micro-batch's number in it when it fits. What is left empty is the bubble."""
    p = s["pipeline"]
    stages = p["stage_units"]
    k = len(stages)
    end = p.get("forward_backward_s") or max(u["end_s"] for st in stages for u in st)
    fig, ax = plt.subplots(figsize=(10, min(12.0, 1.2 + 0.5 * k)))
    ms = 1e3
    for row, units in enumerate(stages):
        for name, colour in PASS_COLOURS.items():
            spans = [(a * ms, (b - a) * ms) for u in units if u["pass"] == name
                     for a, b in u.get("spans_s", [[u["start_s"], u["end_s"]]])]
            if spans:
                ax.broken_barh(spans, (row - 0.4, 0.8), facecolors=colour, edgecolor="white", linewidth=0.5)
    ax.set_xlim(0, end * ms)
    ax.set_ylim(k - 0.5, -0.5)  # stage 0 on top
    every = max(1, math.ceil(k / 32))  # at most 32 stage labels
    ax.set_yticks(range(0, k, every))
    ax.set_yticklabels(["stage %d" % i for i in range(0, k, every)], fontsize=10 if k <= 16 else 7)
    ax.set_xlabel("simulated time (ms)")
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    passes = [n for n in PASS_COLOURS if any(u["pass"] == n for st in stages for u in st)]
    handles = [matplotlib.patches.Patch(color=PASS_COLOURS[n], label=n) for n in passes]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    what = "%s: pipeline schedule, %d stages x %d micro-batches (%s%s)" % (
        s["experiment"], k, p["micro_batches"], p["schedule"], ", remat" if p["remat"] else "")
    bubble = "bubble %.1f %% (GPipe's (K-1)/(M+K-1) %.1f %%)" % (100 * p["bubble_fraction"],
                                                                100 * p["ideal_bubble_fraction"])
    ax.set_title(what + (": " if len(what) + len(bubble) <= 110 else "\n") + bubble, fontsize=10)
    fig.tight_layout()
    # Micro-batch numbers, in the longest span of each unit, where the text fits (measured after the layout).
    box = ax.get_window_extent()
    px_per_ms = box.width / (end * ms) if end > 0 else 0
    size = 7
    char_px = 0.6 * size * fig.dpi / 72
    if 0.8 * box.height / max(k, 1) >= 1.3 * size * fig.dpi / 72:
        for row, units in enumerate(stages):
            for u in units:
                a, b = max(u.get("spans_s", [[u["start_s"], u["end_s"]]]), key=lambda x: x[1] - x[0])
                label = str(u["micro_batch"])
                if (b - a) * ms * px_per_ms >= len(label) * char_px + 4:
                    ax.text((a + b) / 2 * ms, row, label, ha="center", va="center", fontsize=size,
                            color=PASS_TEXT[u["pass"]])
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
    plots = [("timeline.png", timeline), ("memory.png", memory), ("heatmap.png", heatmap)]
    if s.get("pipeline", {}).get("stage_units"):  # runs with a pipeline strategy only
        plots.append(("pipeline.png", pipeline))
    for name, fn in plots:
        path = os.path.join(run, name)
        fn(s, path)
        outs.append(path)
    print("\n".join(outs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
