// A sweep's plan: the axes of a sweep file expanded into runs, each validated by the experiment loader and
// resolved into the configuration file its process will run.
//
//   SweepPlan p = plan_sweep(load_sweep_file("configs/sweeps/scaling.yaml"));
//   for (const PlannedRun& r : p.runs) std::cout << r.index << " " << r.name << "\n";
//
// Order: the first axis written varies slowest. A run that does not load stops the plan with an Error located in
// the sweep file (the swept value, the inline base, or the template), its message naming the run.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "sim/config/sweep_file.h"

namespace podsim {

// A results.db cell: NULL, integer, real or text.
using ColumnValue = std::variant<std::monostate, int64_t, double, std::string>;

struct PlannedRun {
  size_t index = 0;
  std::string name;
  std::vector<std::pair<std::string, std::string>> swept;  // key path, resolved value text ("64MiB", "[4, 4]")
  std::vector<ColumnValue> params;  // one per SweepPlan::param_columns: the run's resolved value (SI units)
  std::string config;               // the resolved experiment, as podsim run reads it
  std::string config_digest;        // config_digest(config)
};

struct SweepPlan {
  std::string name;                        // the sweep's name (results/<name> by default)
  std::string file;                        // the sweep file
  std::vector<std::string> param_columns;  // every key path an axis sets, in axis order
  std::vector<SweepFigure> figures;        // default figures plus the file's own
  std::vector<PlannedRun> runs;
};

// Runs beyond this many are refused (the expansion is probably a mistake).
inline constexpr size_t kMaxSweepRuns = 1000000;

SweepPlan plan_sweep(const SweepFile& file);

// A short stable digest of a run's configuration text (64-bit FNV-1a, hex): a run folder whose status records
// another digest belongs to an older version of the sweep.
std::string config_digest(const std::string& text);

}  // namespace podsim
