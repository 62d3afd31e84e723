// One run as a child process: `podsim run CONFIG --out STAGE -q`, its stderr captured, its time limited.
//
//   RunProcess p(dir, entry, timeout_s);            // started
//   while (!p.exited()) { poll on p.fd(); p.read_some(); p.enforce_timeout(monotonic_seconds()); }
//   RunStatus s = p.publish();                       // runs/<name>/ with status.json
//
// The child has its own process group (a Ctrl-C at the terminal reaches only the sweep, which decides) and gets
// SIGTERM when the process that started it dies, even by SIGKILL: podsim run then removes its partial folder.
// A timeout sends SIGTERM, then SIGKILL after a grace period.
#pragma once

#include <sys/types.h>

#include <string>

#include "sim/sweep/status.h"

namespace podsim {

class RunProcess {
 public:
  RunProcess(const SweepDir& dir, const ManifestEntry& run, double timeout_s);
  ~RunProcess();  // a child still running is killed
  RunProcess(const RunProcess&) = delete;
  RunProcess& operator=(const RunProcess&) = delete;

  const ManifestEntry& run() const { return m_run; }
  int fd() const { return m_fd; }  // the child's stderr; -1 once it is closed
  void read_some();                // reads what is available without blocking
  bool exited();                   // reaps without blocking
  void enforce_timeout(double now);
  void terminate();                // SIGTERM now (the sweep was interrupted)
  double started() const { return m_start; }

  // After exited(): moves the run's folder into runs/ and returns its status.
  RunStatus publish();

 private:
  SweepDir m_dir;
  ManifestEntry m_run;
  std::string m_stage;
  std::string m_digest;
  std::string m_started_at;
  double m_timeout = 0, m_start = 0, m_term_at = -1;
  pid_t m_pid = -1;
  int m_fd = -1;
  int m_wait_status = 0;
  bool m_exited = false, m_timed_out = false;
  std::string m_stderr;
  size_t m_dropped = 0;  // stderr bytes dropped from the front (kept: the last 1 MiB)
};

}  // namespace podsim
