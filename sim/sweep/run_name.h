// Run names from a sweep's run_name template: "{workload.op}-{hardware.pod.dims}" gives "all_reduce-4x4".
//
// Placeholders: {key.path} (the run's resolved value of any parameter, swept or not), {index} (the run's index,
// zero-padded to the width of the last one), {sweep} (the sweep's name) and {key.path:+TEXT} (TEXT when the run
// sets that parameter to true, nothing when false or when the run has no such parameter; so
// "{strategy.name}{strategy.weight_update_sharding:+-wus}" tells two data_parallel runs apart in a sweep whose
// other strategies lack the option). Values are written as in a config ("64MiB", "tpu-v4"); a list becomes its
// items joined by 'x' ([4, 4] -> 4x4). Characters other than letters, digits and _ - . + = become '_' so that a
// name is always a folder name. Without a template the name is the run's swept values joined by '-', or the
// sweep's name for a sweep of one run.
#pragma once

#include <string>
#include <vector>

#include "base/error.h"
#include "base/params/experiment.h"

namespace podsim {

struct RunNameContext {
  const std::string& tmpl;            // "" = the default
  const SourceLocation& where;        // of the template, for errors
  const Experiment& exp;              // the run's loaded experiment
  size_t index = 0, total = 1;
  const std::string& sweep;
  const std::vector<std::string>& swept_paths;  // the key paths this run's axes set, in order
  const std::string& run_label;       // "run 3 of 12 (...)" for messages
};

std::string render_run_name(const RunNameContext& c);

}  // namespace podsim
