// The PNG plots of `podsim report`, drawn by matplotlib (Debian's python3-matplotlib) from a run's summary.json:
// timeline.png (the result chip over the step: compute, HBM, communication), memory.png (what is live at the
// peak), heatmap.png (busy share per chip on the torus; pods of more than one chip) and pipeline.png (the schedule
// as it ran; pipeline runs). The script is tools/plot_report.py, compiled into the binary.
//
//   PlotOutcome o = write_plots("results/quickstart", {.fit_colors = true});
//   for (const auto& f : o.files) ...      // the PNGs written
//   for (const auto& n : o.notes) ...      // "no heatmap.png: one chip, ..."
#pragma once

#include <string>
#include <vector>

namespace podsim {

struct PlotOptions {
  bool fit_colors = false;  // heatmap.png: each panel's colours span its own range, not 0-100 %
};

struct PlotOutcome {
  std::vector<std::string> files;  // paths of the PNGs written
  std::vector<std::string> notes;  // plots left out, and why
};

// Nothing for a run that was not simulated (podsim run --memory-only). Throws Error when python3 or matplotlib is
// missing (naming the package to install) or the plotting fails.
PlotOutcome write_plots(const std::string& run_dir, const PlotOptions& options = {});

}  // namespace podsim
