// `podsim report RUN_DIR`: the run's summary as tables on a terminal (and PNG plots, sim/report/plots.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace podsim {

// Prints the tables; throws Error(NotARunDir) when `run_dir` has no readable summary.json.
void print_report(const std::string& run_dir, std::ostream& out);

// The plots: sim/report/plots.h.

}  // namespace podsim
