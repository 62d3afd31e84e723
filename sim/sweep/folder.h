// The sweep folder, on a file system every process of the sweep sees (docs/sweeps.md):
//
//   sweep.json          the sweep's name, file and run count        configs/<run>.yaml   what each run simulates
//   sweep.yaml          a copy of the sweep file as planned         manifest.tsv         index, name, config per line
//   runs/<run>/         a finished run: summary.json ..., status.json, stderr.txt (appears in one rename)
//   tmp/                runs being written                          results.db           written by the driver only
//   slurm/              job script, submitted job ids, task logs
//
// Only the driver writes sweep.json, sweep.yaml, configs/, the manifest and results.db; run processes write tmp/
// and move their folder into runs/.
#pragma once

#include <string>
#include <vector>

#include "sim/sweep/plan.h"

namespace podsim {

struct SweepDir {
  std::string root;  // absolute

  std::string path(const std::string& rel) const { return root + "/" + rel; }
  std::string run(const std::string& name) const { return root + "/runs/" + name; }
  std::string config(const std::string& name) const { return root + "/configs/" + name + ".yaml"; }
  std::string manifest() const { return root + "/manifest.tsv"; }
  std::string db() const { return root + "/results.db"; }
};

struct ManifestEntry {
  size_t index = 0;
  std::string name;
  std::string config;  // absolute path of the run's configuration
};

// Refuses an existing `dir.root` that is not a folder (PODSIM-IO-003) or a non-empty folder without sweep.json
// (PODSIM-SWP-004): a sweep never writes into another folder's contents.
void check_sweep_folder(const SweepDir& dir);
void make_sweep_root(const SweepDir& dir);
// Writes sweep.json, sweep.yaml, configs/ and manifest.tsv (each file atomically) and creates runs/ and tmp/;
// returns the manifest's entries.
std::vector<ManifestEntry> write_sweep_folder(const SweepDir& dir, const SweepPlan& plan, const std::string& sweep_text);

// Reads manifest.tsv (PODSIM-SWP-004 when it is missing or malformed).
std::vector<ManifestEntry> read_manifest(const std::string& manifest_path);

// Holds an exclusive lock on the sweep folder for one driver (PODSIM-SWP-003 when another holds it). The lock goes
// with the process, also after kill -9.
class SweepLock {
 public:
  explicit SweepLock(const SweepDir& dir);
  ~SweepLock();
  SweepLock(const SweepLock&) = delete;
  SweepLock& operator=(const SweepLock&) = delete;

 private:
  int m_fd = -1;
};

// Writes through a temporary file renamed over `path`: a reader sees the old or the new text, never a mix.
void write_file_atomic(const std::string& path, const std::string& text);
// The whole file, or "" when it cannot be read.
std::string read_text_file(const std::string& path);

std::string host_name();
std::string self_executable();   // the running podsim binary, absolute
double monotonic_seconds();
std::string utc_timestamp();     // 2024-05-01T12:34:56.789Z

}  // namespace podsim
