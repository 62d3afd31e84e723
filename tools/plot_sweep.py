#!/usr/bin/python3
"""Draws one figure of a sweep against one parameter, one line per value of a third (called by `podsim sweep plot`,
which picks the points from results.db and checks them).

usage: plot_sweep.py POINTS.json     POINTS.json: {"out", "title", "x_label", "y_label", "by_label", "categorical",
                                     "logx", "logy", "series": [{"label", "x": [...], "y": [...]}]}
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


def main(path):
    with open(path) as f:
        p = json.load(f)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    categories = []
    if p["categorical"]:
        for s in p["series"]:
            for x in s["x"]:
                if x not in categories:
                    categories.append(x)
    for s in p["series"]:
        xs = [categories.index(x) for x in s["x"]] if p["categorical"] else s["x"]
        label = "%s = %s" % (p["by_label"], s["label"]) if p["by_label"] else None
        ax.plot(xs, s["y"], marker="o", markersize=4, label=label)
    if p["categorical"]:
        ax.set_xticks(range(len(categories)))
        ax.set_xticklabels(categories, rotation=30 if len(categories) > 6 else 0, ha="right" if len(categories) > 6 else "center",
                           fontsize=8)
    if p["logx"] and not p["categorical"]:
        ax.set_xscale("log", base=2)
    if p["logy"]:
        ax.set_yscale("log")
    ax.set_xlabel(p["x_label"])
    ax.set_ylabel(p["y_label"])
    ax.set_title(p["title"], fontsize=10)
    if p["by_label"]:
        ax.legend(fontsize=8, loc="best")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(p["out"], dpi=110)
    plt.close(fig)
    print(p["out"])


if __name__ == "__main__":
    main(sys.argv[1])
