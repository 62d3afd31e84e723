#!/usr/bin/python3
"""Draws one figure of a sweep against one parameter, one line (or bar colour) per combination of others (called by
`podsim sweep plot`, which picks the points from results.db, checks them and scales them to the axis units).

usage: plot_sweep.py POINTS.json     POINTS.json: {"out", "title", "x_label", "y_label", "legend_title",
                                     "categorical", "categories", "logx", "logy",
                                     "series": [{"label", "x": [...], "y": [...], "markers_only"?}]}
A numeric x draws lines; a categorical x (text) draws grouped bars, one group per category in "categories" order.
Writes the PNG named by "out" and prints its path.
"""
import json
import os
import sys

# matplotlib is Debian's python3-matplotlib (tools/packages.txt; `tools/bootstrap build` installs it), which only
# the system interpreter sees. Started by another python3 (pyenv, a virtualenv: `python3 plot_sweep.py ...`), the
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
    sys.exit("plot_sweep.py: No module named 'matplotlib' for %s. `tools/bootstrap build` installs it "
             "(Debian's python3-matplotlib, for %s)." % (tried, SYSTEM_PYTHON))

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def main(path):
    with open(path) as f:
        p = json.load(f)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    series = p["series"]
    legend_title = p.get("legend_title", p.get("by_label", ""))  # by_label: the name an older podsim gave it
    labelled = bool(legend_title)
    if p["categorical"]:
        # One group of bars per category, side by side for the series that have a value there, centred on it.
        categories = p.get("categories") or list(dict.fromkeys(x for s in series for x in s["x"]))
        present = {c: [i for i, s in enumerate(series) if c in s["x"]] for c in categories}
        width = 0.8 / max([len(v) for v in present.values()] + [1])
        colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        for i, s in enumerate(series):
            xs = []
            for x in s["x"]:
                here = present[x]
                xs.append(categories.index(x) + (here.index(i) - (len(here) - 1) / 2) * width)
            ax.bar(xs, s["y"], width=width, label=s["label"] or None, color=colours[i % len(colours)])
        ax.set_xticks(range(len(categories)))
        tilt = len(categories) > 6 or max((len(c) for c in categories), default=0) * len(categories) > 60
        ax.set_xticklabels(categories, rotation=30 if tilt else 0, ha="right" if tilt else "center", fontsize=8)
    else:
        for s in series:
            # "markers_only": points not joined by a line (podsim search's candidates on its Pareto plot).
            style = "none" if s.get("markers_only") else "-"
            ax.plot(s["x"], s["y"], marker="o", markersize=4, linestyle=style, label=s["label"] or None)
        if p["logx"]:
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: "%g" % v))  # 1, 2, 4: not 2^0
        elif all(float(x).is_integer() for s in series for x in s["x"]):  # batch sizes, chips: no 1.25 ticks
            ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    if p["logy"]:
        ax.set_yscale("log")
    ax.set_xlabel(p["x_label"])
    ax.set_ylabel(p["y_label"])
    ax.set_title(p["title"], fontsize=10)
    if labelled:  # beside the axes, where it hides no point or bar
        ax.legend(title=legend_title, title_fontsize=8, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                  frameon=False)
    ax.grid(alpha=0.3, axis="y" if p["categorical"] else "both")
    ax.set_axisbelow(True)
    fig.tight_layout()
    fig.savefig(p["out"], dpi=110)
    plt.close(fig)
    print(p["out"])


if __name__ == "__main__":
    main(sys.argv[1])
