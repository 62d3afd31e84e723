#include "sim/sweep/slurm.h"

#include <poll.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "base/text.h"
#include "sim/sweep/command.h"
#include "sim/sweep/interrupt.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

[[noreturn]] void slurm_failed(const std::vector<std::string>& argv, const CommandResult& r) {
  std::string out = r.output;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  throw Error(Err::SlurmFailed, "'" + command_text(argv) + "' " +
                                    (r.code == 127 ? std::string("could not be run (is Slurm's client installed and on PATH?)")
                                                   : "failed with exit code " + std::to_string(r.code)) +
                                    (out.empty() ? "" : ": " + out));
}

}  // namespace

std::string array_spec(const std::vector<size_t>& sorted) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    parts.push_back(j == i ? std::to_string(sorted[i]) : std::to_string(sorted[i]) + "-" + std::to_string(sorted[j]));
    i = j + 1;
  }
  return join(parts, ",");
}

SlurmBackend::SlurmBackend(const SweepDir& dir, const std::string& sweep_name, const SlurmOptions& opts, double timeout)
    : m_dir(dir), m_name(sweep_name), m_opts(opts), m_timeout(timeout) {}

size_t SlurmBackend::max_array_size() {
  std::vector<std::string> argv = {"scontrol", "show", "config"};
  CommandResult r = run_command(argv);
  if (r.code != 0) slurm_failed(argv, r);
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("MaxArraySize", 0) != 0) continue;
    size_t eq = line.find('=');
    if (eq != std::string::npos) return std::max<size_t>(1, std::strtoull(line.c_str() + eq + 1, nullptr, 10));
  }
  return 1001;
}

std::vector<std::string> SlurmBackend::queued(const std::vector<std::string>& jobs) {
  if (jobs.empty()) return {};
  std::vector<std::string> argv = {"squeue", "-h", "-o", "%i %T", "-j", join(jobs, ",")};
  CommandResult r;
  for (int attempt = 0; attempt < 5; ++attempt) {
    r = run_command(argv);
    if (r.code == 0) break;
    // Jobs that left the controller's memory are "invalid": nothing of them is queued.
    if (r.output.find("Invalid job id") != std::string::npos) return {};
    if (r.code == 127) break;
    poll(nullptr, 0, 1000);  // slurmctld busy: try again shortly
  }
  if (r.code != 0) slurm_failed(argv, r);
  std::vector<std::string> lines;
  std::istringstream in(r.output);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(line);
  return lines;
}

int SlurmBackend::sleep_or_interrupt() {
  pollfd p{sweep_interrupt_fd(), POLLIN, 0};
  poll(&p, 1, static_cast<int>(m_opts.poll * 1000));
  return sweep_interrupted();
}

int SlurmBackend::wait_for_earlier_jobs(Progress& progress) {
  std::vector<std::string> jobs;
  std::istringstream in(read_text_file(m_dir.path("slurm/jobs")));
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') jobs.push_back(line.substr(0, line.find(' ')));
  bool told = false;
  for (;;) {
    std::vector<std::string> q = queued(jobs);
    if (q.empty()) return 0;
    if (!told) progress.note(strprintf("waiting for %zu queued or running task(s) of earlier jobs (%s)", q.size(),
                                       join(jobs, ",").c_str()));
    told = true;
    if (int sig = sleep_or_interrupt()) return sig;
  }
}

namespace {

// The plugins the sweep was given (podsim sweep --plugin), for the tasks whatever sbatch --export says.
std::string plugins_line() {
  const char* env = std::getenv("PODSIM_PLUGINS");
  return env && *env ? "export PODSIM_PLUGINS=" + shell_quote(env) + "\n" : std::string();
}

}  // namespace

std::string SlurmBackend::write_job_script() {
  fs::create_directories(m_dir.path("slurm/logs"));  // sbatch does not create the folders of -o and -e
  std::string script = m_dir.path("slurm/job.sh");
  std::string text =
      "#!/bin/bash\n"
      "# podsim sweep '" + m_name + "': array task i runs manifest line i + $1 (the array's offset).\n"
      "#SBATCH --job-name=podsim-" + m_name + "\n"
      "#SBATCH --output=" + m_dir.path("slurm/logs/%A_%a.out") + "\n"
      "#SBATCH --error=" + m_dir.path("slurm/logs/%A_%a.err") + "\n" + plugins_line() +
      "exec " + shell_quote(self_executable()) + " sweep task " + shell_quote(m_dir.manifest()) +
      " --index \"$SLURM_ARRAY_TASK_ID\" --offset \"${1:-0}\"" +
      (m_timeout > 0 ? strprintf(" --timeout %.17g", m_timeout) : std::string()) + "\n";
  write_file_atomic(script, text);
  fs::permissions(script, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
  return script;
}

int SlurmBackend::run(const std::vector<ManifestEntry>& runs, const std::function<void(const RunStatus&)>& on_finish,
                      const std::function<void(size_t, const std::string&)>& on_lost, Progress& progress) {
  if (runs.empty()) return 0;
  size_t limit = max_array_size();
  if (m_opts.array_limit > 0) limit = std::min(limit, m_opts.array_limit);
  const std::string script = write_job_script();

  // Folders already there belong to earlier attempts; a run is back when its status changes.
  std::map<size_t, std::string> before;
  std::map<size_t, const ManifestEntry*> pending;
  std::map<size_t, std::string> log_of;
  for (const auto& r : runs) {
    auto s = read_status(m_dir.run(r.name));
    before[r.index] = s ? s->finished + s->host + s->slurm_job : "";
    pending[r.index] = &r;
  }

  // One array per block of `limit` manifest indices, with the block's start as offset.
  std::map<size_t, std::vector<size_t>> blocks;
  for (const auto& r : runs) blocks[r.index / limit].push_back(r.index - r.index / limit * limit);
  std::vector<std::string> jobs;
  for (auto& [block, idx] : blocks) {
    std::sort(idx.begin(), idx.end());
    const size_t offset = block * limit;
    std::vector<std::string> argv = {"sbatch", "--parsable", "--array=" + array_spec(idx)};
    if (!m_opts.partition.empty()) argv.push_back("--partition=" + m_opts.partition);
    if (!m_opts.account.empty()) argv.push_back("--account=" + m_opts.account);
    if (!m_opts.time_limit.empty()) argv.push_back("--time=" + m_opts.time_limit);
    argv.insert(argv.end(), m_opts.sbatch_args.begin(), m_opts.sbatch_args.end());
    argv.push_back(script);
    argv.push_back(std::to_string(offset));
    CommandResult r = run_command(argv);
    std::string id = r.output.substr(0, r.output.find_first_of(";\n"));
    if (r.code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos) slurm_failed(argv, r);
    jobs.push_back(id);
    std::ofstream(m_dir.path("slurm/jobs"), std::ios::app) << id << " offset=" << offset << " array=" << array_spec(idx) << "\n";
    for (size_t i : idx) log_of[i + offset] = "slurm/logs/" + id + "_" + std::to_string(i) + ".err";
    progress.note(strprintf("submitted job %s: %zu task(s), array %s, offset %zu", id.c_str(), idx.size(),
                            array_spec(idx).c_str(), offset));
  }

  auto collect = [&] {
    for (auto it = pending.begin(); it != pending.end();) {
      auto s = read_status(m_dir.run(it->second->name));
      if (s && s->finished + s->host + s->slurm_job != before[it->first]) {
        on_finish(*s);
        progress.finished(*s);
        it = pending.erase(it);
      } else {
        ++it;
      }
    }
  };
  for (;;) {
    std::vector<std::string> q = queued(jobs);
    size_t running = 0;
    for (const auto& line : q) running += line.find(" RUNNING") != std::string::npos;
    progress.set_running(running);
    collect();
    if (q.empty()) break;
    progress.tick();
    if (int sig = sleep_or_interrupt()) {
      progress.note("interrupted; the Slurm job(s) " + join(jobs, ",") +
                    " keep running: run the sweep again to collect their results, or scancel them");
      return sig;
    }
  }
  collect();
  for (const auto& [index, entry] : pending) {
    std::string why = "the Slurm task ended without a status record (time limit, node failure or scancel?); see " +
                      log_of[index];
    std::string err = tail_of(read_text_file(m_dir.path(log_of[index])), 5, 800);
    if (!err.empty()) why += ":\n" + err;
    on_lost(index, why);
    RunStatus s;
    s.name = entry->name;
    s.index = index;
    s.state = "failed";
    s.stderr_tail = why;
    progress.finished(s);
  }
  return 0;
}

}  // namespace podsim
