// `podsim report RUN_DIR`: the run's summary as tables on a terminal, and PNG plots drawn by matplotlib
// (Debian's python3-matplotlib) from summary.json: a utilization timeline, the memory breakdown at the peak, a
// heat map of per-chip MXU busy fraction laid out on the torus, and a pipeline run's schedule (stages x time).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace podsim {

// Prints the tables; throws Error(NotARunDir) when `run_dir` has no readable summary.json.
void print_report(const std::string& run_dir, std::ostream& out);

// Writes timeline.png, memory.png and heatmap.png into `run_dir`, and pipeline.png (the schedule as it ran) for a
// pipeline run; returns their paths (none for a run that was not simulated: podsim run --memory-only). Throws Error
// when python3 or matplotlib is missing (naming the package to install) or the plotting fails.
std::vector<std::string> write_plots(const std::string& run_dir);

}  // namespace podsim
