#include "sim/sweep/local_pool.h"

#include <poll.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "sim/sweep/interrupt.h"
#include "sim/sweep/run_process.h"

namespace podsim {

int available_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

int run_local(const SweepDir& dir, const std::vector<ManifestEntry>& runs, const LocalOptions& opts,
              const std::function<void(const RunStatus&)>& on_finish, Progress& progress) {
  const int stop_fd = sweep_interrupt_fd();
  std::vector<std::unique_ptr<RunProcess>> running;
  size_t next = 0;
  const size_t jobs = static_cast<size_t>(std::max(1, opts.jobs));
  while (next < runs.size() || !running.empty()) {
    if (sweep_interrupted()) {
      // Runs that already ended are kept; the others are stopped (they remove their partial folders) and left
      // missing.
      for (auto& p : running)
        if (p->exited()) {
          RunStatus s = p->publish();
          on_finish(s);
          progress.finished(s);
        } else {
          p->terminate();
        }
      for (auto& p : running)
        while (!p->exited()) usleep(10000);
      progress.set_running(0);
      return sweep_interrupted();
    }
    while (running.size() < jobs && next < runs.size())
      running.push_back(std::make_unique<RunProcess>(dir, runs[next++], opts.timeout));
    progress.set_running(running.size());

    std::vector<pollfd> fds;
    fds.push_back({stop_fd, POLLIN, 0});
    for (auto& p : running)
      if (p->fd() >= 0) fds.push_back({p->fd(), POLLIN, 0});
    // Children that closed stderr are reaped by polling their status; 50 ms keeps that cheap and prompt.
    poll(fds.data(), fds.size(), 50);
    const double now = monotonic_seconds();
    for (auto it = running.begin(); it != running.end();) {
      RunProcess& p = **it;
      p.read_some();
      p.enforce_timeout(now);
      if (!p.exited()) {
        ++it;
        continue;
      }
      RunStatus s = p.publish();
      it = running.erase(it);
      progress.set_running(running.size());
      on_finish(s);
      progress.finished(s);
    }
    progress.tick();
  }
  return 0;
}

}  // namespace podsim
