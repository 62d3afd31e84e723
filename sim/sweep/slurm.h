// The Slurm backend: a sweep's pending runs as job arrays. Each array task runs
//   podsim sweep task <folder>/manifest.tsv --index $SLURM_ARRAY_TASK_ID --offset K
// which runs one manifest line and moves its folder into runs/. The driver only submits and watches: it polls
// squeue and the run folders, and records each result in results.db as it appears. Arrays larger than the
// cluster's MaxArraySize (scontrol show config) are split, each with its index offset. Only Slurm's command-line
// tools are used, and the sweep folder must be on a file system the compute nodes share.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "sim/sweep/progress.h"

namespace podsim {

struct SlurmOptions {
  std::string partition, account, time_limit;  // -p, -A, -t; "" = the cluster's default
  std::vector<std::string> sbatch_args;        // passed to sbatch as they are
  double poll = 10;                            // seconds between squeue calls
  size_t array_limit = 0;                      // largest array to submit; 0 = the cluster's MaxArraySize
};

class SlurmBackend {
 public:
  SlurmBackend(const SweepDir& dir, const std::string& sweep_name, const SlurmOptions& opts, double timeout);

  // Waits until no task of a job an earlier driver of this folder submitted (slurm/jobs) is queued or running, so
  // that no run is submitted twice. Returns 0 or the signal that interrupted the wait.
  int wait_for_earlier_jobs(Progress& progress);

  // Submits `runs` and waits for them. `on_finish` gets each run that lands in runs/ (the folders present before
  // are told apart by their finish time); `on_lost` each run whose task ended without one. Returns 0 or the signal
  // that interrupted the wait (the jobs keep running; the next driver collects them).
  int run(const std::vector<ManifestEntry>& runs, const std::function<void(const RunStatus&)>& on_finish,
          const std::function<void(size_t index, const std::string& why)>& on_lost, Progress& progress);

  // The cluster's MaxArraySize (Slurm's default is 1001: indices 0 to 1000).
  size_t max_array_size();

 private:
  std::vector<std::string> queued(const std::vector<std::string>& jobs);  // squeue lines "<id> <state>"
  std::string write_job_script();
  int sleep_or_interrupt();

  SweepDir m_dir;
  std::string m_name;
  SlurmOptions m_opts;
  double m_timeout;
};

// "0-3,5,7-9" for the sorted indices given.
std::string array_spec(const std::vector<size_t>& sorted);

}  // namespace podsim
