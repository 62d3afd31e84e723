// `podsim sweep SWEEP.yaml` and `podsim sweep task`: plan, prepare the folder, bring results.db up to date with
// the run folders, run what is not done (locally or on Slurm) and record each result as it lands.
//
// Resuming is the same command again: runs whose folder holds a done status for the same configuration are
// skipped; failed, missing and changed runs run again. Killing the driver at any moment loses nothing finished:
// a run is in runs/ (whole, with its status) or not at all, and results.db is rebuilt from runs/ at start.
#pragma once

#include <string>

#include "sim/sweep/slurm.h"

namespace podsim {

struct SweepOptions {
  std::string backend = "local";  // local | slurm
  std::string out;                // "" = results/<sweep name>
  int jobs = 0;                   // local: processes at once; 0 = the number of cores
  double timeout = 0;             // seconds per run; 0 = none
  SlurmOptions slurm;
};

// Returns the exit code: 0 when every run is done; throws Error(RunsFailed) when some failed.
int run_sweep(const std::string& sweep_file, const SweepOptions& opts);

// One manifest line (index + offset), as a Slurm array task runs it. Returns 0 when the run is done (now or
// before), 1 when it failed (its status says why), 128 + signal when interrupted.
int run_sweep_task(const std::string& manifest, size_t index, size_t offset, double timeout);

}  // namespace podsim
