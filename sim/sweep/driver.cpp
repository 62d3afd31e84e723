#include "sim/sweep/driver.h"

#include <poll.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <iostream>
#include <optional>

#include "base/text.h"
#include "sim/sweep/interrupt.h"
#include "sim/sweep/local_pool.h"
#include "sim/sweep/results_db.h"
#include "sim/sweep/run_process.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

// Run i's status when its folder holds a result of this plan's configuration.
std::optional<RunStatus> current_status(const SweepDir& dir, const PlannedRun& r) {
  auto s = read_status(dir.run(r.name));
  if (!s || s->config_digest != r.config_digest || s->name != r.name) return std::nullopt;
  std::error_code ec;
  if (s->done() && !fs::exists(dir.run(r.name) + "/summary.json", ec)) return std::nullopt;
  s->index = r.index;
  return s;
}

}  // namespace

int run_sweep(const std::string& sweep_file, const SweepOptions& opts) {
  SweepFile file = load_sweep_file(sweep_file);
  SweepPlan plan = plan_sweep(file);
  SweepDir dir{fs::absolute(opts.out.empty() ? "results/" + plan.name : opts.out).lexically_normal().string()};
  while (dir.root.size() > 1 && dir.root.back() == '/') dir.root.pop_back();
  check_sweep_folder(dir);
  make_sweep_root(dir);
  SweepLock lock(dir);
  sweep_interrupt_fd();  // from here on a signal stops the sweep in order

  const bool tty = isatty(STDERR_FILENO);
  std::optional<SlurmBackend> slurm;
  if (opts.backend == "slurm") {
    slurm.emplace(dir, plan.name, opts.slurm, opts.timeout);
    Progress waiting(plan.name, plan.runs.size(), 0, tty);
    if (int sig = slurm->wait_for_earlier_jobs(waiting)) return 128 + sig;
  }
  std::vector<ManifestEntry> entries = write_sweep_folder(dir, plan, file.text);

  std::vector<std::optional<RunStatus>> current;
  size_t done = 0;
  std::vector<ManifestEntry> pending;
  for (const auto& r : plan.runs) {
    current.push_back(current_status(dir, r));
    if (current.back() && current.back()->done()) ++done;
    else pending.push_back(entries[r.index]);
  }
  ResultsDb db(dir.db(), plan, dir);
  db.sync(current);

  const int jobs = opts.jobs > 0 ? opts.jobs : available_cores();
  std::fprintf(stderr, "sweep %s: %zu runs, %zu done before, %zu to run (%s) in %s\n", plan.name.c_str(),
               plan.runs.size(), done, pending.size(),
               opts.backend == "slurm" ? "Slurm" : strprintf("local, %d at once", jobs).c_str(), dir.root.c_str());
  Progress progress(plan.name, plan.runs.size(), done, tty);
  auto on_finish = [&](const RunStatus& s) { db.record(s); };
  int sig = 0;
  if (slurm) {
    sig = slurm->run(pending, on_finish, [&](size_t index, const std::string& why) { db.record_lost(index, why); },
                     progress);
  } else {
    sig = run_local(dir, pending, {jobs, opts.timeout}, on_finish, progress);
  }
  progress.end();
  if (sig) {
    std::fprintf(stderr, "sweep %s: interrupted by signal %d; run the same command again to resume\n",
                 plan.name.c_str(), sig);
    return 128 + sig;
  }
  std::fprintf(stderr, "results in %s\n", dir.db().c_str());
  if (progress.failed() > 0)
    throw Error(Err::RunsFailed, strprintf("%zu of %zu runs failed; results.db has their exit codes and stderr, and "
                                           "running the sweep again re-runs them",
                                           progress.failed(), plan.runs.size()));
  return 0;
}

int run_sweep_task(const std::string& manifest, size_t index, size_t offset, double timeout) {
  std::vector<ManifestEntry> entries = read_manifest(manifest);
  const size_t i = index + offset;
  if (i >= entries.size()) {
    SourceLocation w;
    w.file = manifest;
    throw Error(Err::NotASweepDir, w, strprintf("the manifest has %zu runs; there is no run %zu", entries.size(), i));
  }
  const ManifestEntry& run = entries[i];
  SweepDir dir{fs::absolute(manifest).parent_path().string()};
  auto before = read_status(dir.run(run.name));
  if (before && before->done() && before->config_digest == config_digest(read_text_file(run.config))) {
    std::cerr << "podsim sweep task: run " << i << " (" << run.name << ") is already done\n";
    return 0;
  }
  const int stop_fd = sweep_interrupt_fd();
  RunProcess p(dir, run, timeout);
  while (!p.exited()) {
    if (sweep_interrupted()) {
      // Slurm's time limit or scancel: stop the run and leave it missing; the driver reports it.
      p.terminate();
      while (!p.exited()) usleep(10000);
      return 128 + sweep_interrupted();
    }
    pollfd fds[2] = {{stop_fd, POLLIN, 0}, {p.fd(), POLLIN, 0}};
    poll(fds, p.fd() >= 0 ? 2 : 1, 50);
    p.read_some();
    p.enforce_timeout(monotonic_seconds());
  }
  RunStatus s = p.publish();
  std::cerr << "podsim sweep task: run " << i << " (" << run.name << ") " << s.state << "\n";
  return s.done() ? 0 : 1;
}

}  // namespace podsim
