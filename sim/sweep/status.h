// A run's status record (runs/<name>/status.json) and how a finished run's folder gets into runs/.
//
// A run is staged in tmp/<name>@<host>@<pid>/ (podsim run writes its results there), its status.json and
// stderr.txt are added, and the whole folder is renamed to runs/<name>. So runs/<name> exists only for a run that
// finished, done or failed, with its status inside; a process killed at any moment leaves at most a stage folder in
// tmp/, which the next attempt of that run removes.
#pragma once

#include <optional>
#include <string>

#include "sim/sweep/folder.h"

namespace podsim {

struct RunStatus {
  std::string name;
  size_t index = 0;
  std::string state;              // "done" or "failed"
  std::optional<int> exit_code;   // when the process exited
  std::optional<int> signal;      // when a signal ended it
  bool timed_out = false;         // stopped by --timeout
  double wall_s = 0;
  std::string started, finished;  // UTC timestamps
  std::string host;
  std::string config_digest;      // of the configuration it ran (plan.h: config_digest)
  std::string slurm_job, slurm_task;
  std::string stderr_tail;        // the last lines of its stderr

  bool done() const { return state == "done"; }
};

std::string status_json(const RunStatus& s);
// The status of runs/<name>, or nothing when the folder or its status.json is missing or unreadable.
std::optional<RunStatus> read_status(const std::string& run_dir);

// Where a process of this host stages run `name`.
std::string stage_dir(const SweepDir& dir, const std::string& name);
// Removes leftovers of earlier attempts at run `name` in tmp/ (stages and podsim's partial folders).
void clear_stale_stages(const SweepDir& dir, const std::string& name);

// Completes `stage` (created when the run wrote nothing) with status.json and stderr.txt and renames it to
// runs/<name>, replacing an older folder of that run.
void publish_run(const SweepDir& dir, const std::string& stage, const RunStatus& status, const std::string& stderr_text);

// The last `lines` lines of `text`, at most `max_chars` characters.
std::string tail_of(const std::string& text, size_t lines = 20, size_t max_chars = 2000);

}  // namespace podsim
