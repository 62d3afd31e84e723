// The local backend: runs a sweep's pending runs on this machine, up to `jobs` processes at once.
#pragma once

#include <functional>
#include <vector>

#include "sim/sweep/progress.h"

namespace podsim {

struct LocalOptions {
  int jobs = 1;
  double timeout = 0;  // seconds per run; 0 = none
};

// Calls `on_finish` for each run as it lands in runs/. Returns 0, or the signal that interrupted the sweep: then the
// runs in flight were stopped and are left missing (not failed), for the next sweep to re-run.
int run_local(const SweepDir& dir, const std::vector<ManifestEntry>& runs, const LocalOptions& opts,
              const std::function<void(const RunStatus&)>& on_finish, Progress& progress);

// The processors this process may use (its CPU affinity), at least 1.
int available_cores();

}  // namespace podsim
