#!/usr/bin/python3
"""Draws the plots of a podsim run folder from its summary.json (called by `podsim report`).

usage: plot_report.py [--fit-colors] RUN_DIR
    writes RUN_DIR/timeline.png, memory.png, heatmap.png (pods of more than one chip), links.png (runs with
    hardware.faults) and pipeline.png (pipeline runs), and prints their paths, and a line "note: ..." for a plot
    it leaves out. --fit-colors: the heat map's colours span each panel's own range instead of 0-100 %.
    A serving run (summary.json with a serving object) gets serving.png instead, from its iterations.csv and
    requests.csv.
"""
import csv
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
import matplotlib.ticker  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402


# Fixed colours, one meaning each across the panels (tests read the MXU line back by its colour, #1f77b4).
COLOURS = {"mxu": "#1f77b4", "vpu": "#ff7f0e", "hbm": "#2ca02c", "ici": "#9467bd", "communication": "#c7c7c7",
           "exposed": "#d62728"}


def time_unit(seconds):
    """The unit that suits a span of simulated time: (name, seconds per unit)."""
    for name, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return name, scale
    return "ns", 1e-9


def timeline(s, out):
    """The result chip over the step, in three panels sharing the time axis: compute (MXU and VPU busy), HBM
    (bandwidth: bytes moved against the peak; the channels' busy share, which the console calls "HBM busy", as a
    dashed line at its step mean) and communication (links sending, and the time a communication op ran, red where
    no compute ran: exposed). Exposed communication is also shaded red under the compute panel, so a gap in compute
    that communication fills does not read as idle."""
    t = s["timeline"]
    w = t["bin_s"]
    n = len(t["mxu_busy"])
    uname, scale = time_unit(w * n)
    edges = [i * w / scale for i in range(n + 1)]
    mids = [(i + 0.5) * w / scale for i in range(n)]
    pct = lambda v: [100 * x for x in v]  # noqa: E731
    exposed = t.get("exposed_communication", [0.0] * n)
    comm = t.get("communication", [0.0] * n)
    fig, (ax_c, ax_h, ax_i) = plt.subplots(3, 1, figsize=(9, 7.2), sharex=True,
                                           gridspec_kw={"height_ratios": [1.3, 1, 1]})
    tb = s.get("time_breakdown", {})
    chip = t.get("chip", 0)

    ax_c.stairs(pct(exposed), edges, fill=True, color=COLOURS["exposed"], alpha=0.25, linewidth=0,
                label="exposed communication (no compute op)")
    ax_c.plot(mids, pct(t["mxu_busy"]), color=COLOURS["mxu"], label="MXU busy")
    ax_c.plot(mids, pct(t["vpu_busy"]), color=COLOURS["vpu"], label="VPU busy")
    ax_c.set_ylabel("compute (%)")
    ax_c.set_title("%s: chip %d over one step of %s" % (s["experiment"], chip, _time_text(s["step_time_s"])),
                   fontsize=10)

    peak = s["hbm"]["peak_bandwidth_Bps"]
    bw = [100 * v / peak for v in t["hbm_Bps"]]
    ax_h.plot(mids, bw, color=COLOURS["hbm"],
              label="bandwidth: bytes moved / %.0f GB/s peak (step mean %.1f %%)" % (peak / 1e9, sum(bw) / max(n, 1)))
    busy = 100 * s["per_chip"]["hbm_busy_fraction"][chip] if "per_chip" in s else None
    if busy is not None:
        ax_h.axhline(busy, color=COLOURS["hbm"], linestyle="--", linewidth=1,
                     label="busy: time a channel serves a request (step mean %.1f %%)" % busy)
    ax_h.set_ylabel("HBM (%)")

    ax_i.stairs(pct(comm), edges, fill=True, color=COLOURS["communication"], linewidth=0,
                label="communication op running (%s in all)" % _time_text(tb.get("communication_s", 0.0)))
    ax_i.stairs(pct(exposed), edges, fill=True, color=COLOURS["exposed"], alpha=0.6, linewidth=0,
                label="of it exposed: no compute op (%s)" % _time_text(tb.get("exposed_communication_s", 0.0)))
    if "ici_busy" in t:
        ax_i.plot(mids, pct(t["ici_busy"]), color=COLOURS["ici"], label="ICI links sending (mean over links)")
    if not any(comm) and not any(t.get("ici_busy", [])):
        ax_i.text(0.5, 0.5, "no communication on this chip", transform=ax_i.transAxes, ha="center", va="center",
                  fontsize=9, color="#555555")
    ax_i.set_ylabel("ICI (%)")
    ax_i.set_xlabel("simulated time (%s)" % uname)
    ax_i.set_xlim(0, edges[-1])
    for ax in (ax_c, ax_h, ax_i):
        ax.set_ylim(0, 105)
        ax.set_yticks([0, 25, 50, 75, 100])
        ax.grid(alpha=0.3)
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7, frameon=False)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def _time_text(seconds):
    uname, scale = time_unit(seconds) if seconds > 0 else ("s", 1.0)
    return "%.3g %s" % (seconds / scale, uname)


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
        names = [n for n in ["weights", "gradients", "optimizer_state", "activations", "temporaries", "weight_copies",
                             "kv_cache"] if n in parts]
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
        ax.set_xlabel("memory (%s)" % uname)
        cu, cs = _unit(cap)
        ax.set_title("memory at the peak (op %s): %.2f %s of %.2f %s HBM (%.1f %%)"
                     % (m["peak_op"] or "-", peak / scale, uname, cap / cs, cu, 100 * peak / cap), fontsize=10)
        ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def heatmap(s, out, fit_colors=False):
    """Busy share per chip on the torus, one panel per unit kind. A 3-D pod is drawn as its z-planes stacked
    vertically (row y + Y*z), with white lines between planes. The colour scale is 0-100 %, shared by the panels,
    or with fit_colors each panel's own range (its lowest to its highest chip), so that small differences show."""
    dims = s["pod_dims"] or [1, 1]
    pc = s["per_chip"]
    x = dims[0]
    y = dims[1] if len(dims) > 1 else 1
    z = dims[2] if len(dims) > 2 else 1
    panels = [("MXU", "mxu_busy_fraction"), ("VPU", "vpu_busy_fraction"), ("HBM", "hbm_busy_fraction"),
              ("ICI links", "ici_busy_fraction")]
    panels = [(t, k) for t, k in panels if k in pc]
    height = (3.6 if z == 1 else 6) + (0.8 if fit_colors else 0)  # fitted: a colour bar under each panel
    fig, axes = plt.subplots(1, len(panels), figsize=(3.4 * len(panels) + 1, height), squeeze=False)
    if fit_colors:
        fig.subplots_adjust(top=0.8, bottom=0.05)
    im = None
    for ax, (title, key) in zip(axes[0], panels):
        vals = pc[key]
        grid = [[100 * vals[xi + x * (yi + y * k)] for xi in range(x)] for k in range(z) for yi in range(y)]
        lo, hi = 0.0, 100.0
        if fit_colors:
            lo, hi = 100 * min(vals), 100 * max(vals)
            if hi - lo < 1e-9:  # every chip alike: a band around the value, the cells mid-scale
                lo, hi = lo - 0.5, hi + 0.5
        im = ax.imshow(grid, origin="lower", vmin=lo, vmax=hi, cmap="viridis", aspect="auto" if z > 1 else "equal")
        mean = 100 * sum(vals) / max(len(vals), 1)
        alike = max(vals) - min(vals) < 1e-9
        ax.set_title("%s busy (%s %.1f %%)" % (title, "every chip" if alike else "mean", mean), fontsize=10)
        ax.set_xlabel("chip x")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        if ax is axes[0][0]:
            ax.set_ylabel("chip y" if z == 1 else "chip y + %d z" % y)
        else:
            ax.set_yticklabels([])
        for k in range(1, z):
            ax.axhline(k * y - 0.5, color="white", linewidth=0.8)
        if fit_colors:
            fig.colorbar(im, ax=ax, shrink=0.8, orientation="horizontal", pad=0.18, label="busy (%)")
    scale = "colours fitted to each panel's range" if fit_colors else "colours 0-100 %"
    fig.suptitle("%s: busy share per chip on the %s pod (%s)" % (s["experiment"], " x ".join(map(str, dims)), scale),
                 fontsize=11)
    if not fit_colors:
        fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="busy (%)")
    fig.savefig(out, dpi=110)
    plt.close(fig)


def links(s, out):
    """Link utilization (busy / step time) per chip and outgoing direction, one panel per direction, for runs with
    hardware.faults: a degraded link and the detour around a down one (marked x) show as busier rows or columns.
    A 3-D pod is drawn as its z-planes stacked vertically, as in heatmap.png."""
    f = s["faults"]
    lu = f["link_utilization"]
    dims = lu["dims"]
    x = dims[0]
    y = dims[1] if len(dims) > 1 else 1
    z = dims[2] if len(dims) > 2 else 1
    dirs = lu["directions"]
    per = lu["per_chip"]
    down = {(l["chip"], l["direction"]) for l in f["links"] if l["down"]}
    fig, axes = plt.subplots(1, len(dirs), figsize=(3.2 * len(dirs) + 1, 3.6 if z == 1 else 6), squeeze=False)
    im = None
    for d, (ax, name) in enumerate(zip(axes[0], dirs)):
        grid = [[100 * per[xi + x * (yi + y * k)][d] for xi in range(x)] for k in range(z) for yi in range(y)]
        im = ax.imshow(grid, origin="lower", vmin=0, vmax=100, cmap="magma", aspect="auto" if z > 1 else "equal")
        for c, dn in down:
            if dn == name:
                ax.text(c % x, (c // x) % y + y * (c // (x * y)), "x", ha="center", va="center", color="cyan",
                        fontsize=10, fontweight="bold")
        ax.set_title("links %s" % name, fontsize=10)
        ax.set_xlabel("chip x")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        if d == 0:
            ax.set_ylabel("chip y" if z == 1 else "chip y + %d z" % y)
        else:
            ax.set_yticklabels([])
        for k in range(1, z):
            ax.axhline(k * y - 0.5, color="white", linewidth=0.8)
    sl = f["slowest_link"]
    fig.suptitle("%s: link utilization per chip and direction (x: down); busiest %s at %.1f %%"
                 % (s["experiment"], sl["label"], 100 * sl["utilization"]), fontsize=11)
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.8, label="busy (% of the step)")
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



# The serving figure's series (tests read the batch line back by its colour, #1f77b4).
SERVING_COLOURS = {"sequences": "#1f77b4", "running": "#ff7f0e", "kv": "#2ca02c", "capacity": "#7f7f7f",
                   "ttft": "#d62728", "e2e": "#9467bd"}


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def serving(s, out, run):
    """A serving run over its duration, in three panels sharing the time axis: the sequences each iteration ran and
    those holding a slot at its end (iterations.csv; on the decode slice when disaggregated), the tokens in the KV
    caches against their capacity, and each request's time to first token and end-to-end latency at the time it
    was sent (requests.csv)."""
    its = [r for r in _rows(os.path.join(run, "iterations.csv")) if r.get("slice", "decode") != "prefill"]
    reqs = _rows(os.path.join(run, "requests.csv"))
    sv = s["serving"]
    uname, scale = time_unit(max(sv["duration_s"], 1e-9))
    fig, (ax_b, ax_k, ax_r) = plt.subplots(3, 1, figsize=(9, 7.2), sharex=True)
    starts = [float(r["start_s"]) / scale for r in its]
    ends = [(float(r["start_s"]) + float(r["duration_s"])) / scale for r in its]
    ax_b.step(ends, [int(r["running"]) for r in its], where="post", color=SERVING_COLOURS["running"], linestyle="--",
              label="sequences holding a slot (of %d)" % sv["batch"]["slots"])
    ax_b.step(starts, [int(r["sequences"]) for r in its], where="post", color=SERVING_COLOURS["sequences"],
              label="sequences in the iteration", zorder=3)
    ax_b.set_ylabel("sequences")
    ax_b.set_title("%s: %d requests, %s policy, %.0f output tokens/s" %
                   (s["experiment"], sv["requests"], sv["policy"], sv["output_tokens_per_s"]), fontsize=10)
    ax_b.legend(fontsize=8, loc="upper right")
    kv = sv["kv_cache"]
    ax_k.step(ends, [int(r["kv_tokens"]) for r in its], where="post", color=SERVING_COLOURS["kv"],
              label="tokens in the KV caches (mean occupancy %.1f %%)" % (100 * kv["mean_occupancy"]))
    ax_k.axhline(kv["capacity_tokens"], color=SERVING_COLOURS["capacity"], linestyle="--", linewidth=1,
                 label="capacity (%s)" % kv["kind"])
    ax_k.set_ylabel("KV cache (tokens)")
    ax_k.legend(fontsize=8, loc="upper right")
    sent = [float(r["sent_s"]) / scale for r in reqs]
    ax_r.scatter(sent, [float(r["ttft_s"]) for r in reqs], s=6, color=SERVING_COLOURS["ttft"],
                 label="time to first token (median %s)" % _time_text(sv["ttft_s"]["p50"]))
    ax_r.scatter(sent, [float(r["e2e_s"]) for r in reqs], s=6, color=SERVING_COLOURS["e2e"],
                 label="end to end (median %s)" % _time_text(sv["e2e_s"]["p50"]))
    ax_r.set_ylabel("latency (s)")
    if reqs and min(float(r["ttft_s"]) for r in reqs) > 0:
        ax_r.set_yscale("log")
    ax_r.set_xlabel("time (%s), requests at the time they were sent" % uname)
    ax_r.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main():
    args = sys.argv[1:]
    fit_colors = "--fit-colors" in args
    args = [a for a in args if a != "--fit-colors"]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    run = args[0]
    with open(os.path.join(run, "summary.json")) as f:
        s = json.load(f)
    if "serving" in s:  # a serving run: the stream over its duration, not one step
        path = os.path.join(run, "serving.png")
        serving(s, path, run)
        print(path)
        return 0
    plots = [("timeline.png", timeline), ("memory.png", memory)]
    notes = []
    if s.get("chips", 1) > 1:
        plots.append(("heatmap.png", lambda s, out: heatmap(s, out, fit_colors)))
    else:
        notes.append("note: no heatmap.png: one chip, no chips to compare")
    if s.get("faults", {}).get("link_utilization"):  # runs with hardware.faults only
        plots.append(("links.png", links))
    if s.get("pipeline", {}).get("stage_units"):  # runs with a pipeline strategy only
        plots.append(("pipeline.png", pipeline))
    for name, fn in plots:
        path = os.path.join(run, name)
        fn(s, path)
        print(path)
    for n in notes:
        print(n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
