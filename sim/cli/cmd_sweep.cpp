// `podsim sweep`: run a sweep (locally or on Slurm), and its subcommands plan, task, export and plot
// (docs/sweeps.md).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "sim/cli/commands.h"
#include "base/plugins.h"
#include "base/text.h"
#include "base/params/units.h"
#include "sim/sweep/driver.h"
#include "sim/sweep/export.h"
#include "sim/sweep/plot.h"

namespace podsim::cli {

struct SweepCommand {
  CLI::App* sweep = nullptr;
  CLI::App *plan = nullptr, *task = nullptr, *exporter = nullptr, *plot = nullptr;
  std::string file, timeout;
  std::vector<std::string> plugins;
  SweepOptions opts;
  // task
  std::string manifest;
  size_t index = 0, offset = 0;
  // export, plot
  std::string folder, out;
  bool csv = false;
  PlotRequest plot_req;
};

namespace {

// "90s", "10min", "2h", or a bare number of seconds.
double parse_timeout(const std::string& text) {
  if (text.empty()) return 0;
  char* end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  if (end && *end == 0 && end != text.c_str()) {
    if (!(v > 0)) throw Error(Err::Usage, "--timeout must be positive, e.g. --timeout 10min");
    return v;
  }
  QuantityParse q = parse_quantity(Quantity::Time, text);
  if (!q.value || !(*q.value > 0))
    throw Error(Err::Usage, "--timeout '" + text + "': " + (q.problem.empty() ? "must be positive" : q.problem) +
                                " (e.g. 90s, 10min, 2h, or a number of seconds)");
  return *q.value;
}

}  // namespace

SweepCommand* add_sweep_command(CLI::App& app) {
  static SweepCommand c;
  c.sweep = app.add_subcommand("sweep", "Run a sweep of experiments (locally or on Slurm); plan, export, plot");
  c.sweep->require_subcommand(0, 1);
  c.sweep->add_option("sweep_file", c.file, "Sweep YAML file (docs/sweeps.md)");
  c.sweep->add_option("--backend", c.opts.backend, "Where runs run: local (default) or slurm")
      ->check(CLI::IsMember({"local", "slurm"}));
  c.sweep->add_option("--out", c.opts.out, "Sweep folder (default: results/<sweep name>)");
  c.sweep->add_option("-j,--jobs", c.opts.jobs, "local: runs at once (default: the number of cores)")
      ->check(CLI::Range(1, 4096));
  c.sweep->add_option("--timeout", c.timeout, "Stop a run after this long (90s, 10min, 2h) and record it as failed");
  c.sweep->add_option("--plugin", c.plugins,
                      "Load workloads/strategies/collectives from a shared library, here and in every run "
                      "(repeatable; passed on as PODSIM_PLUGINS)")
      ->allow_extra_args(false);
  c.sweep->add_option("--partition", c.opts.slurm.partition, "slurm: partition (sbatch --partition)");
  c.sweep->add_option("--account", c.opts.slurm.account, "slurm: account (sbatch --account)");
  c.sweep->add_option("--time-limit", c.opts.slurm.time_limit, "slurm: time limit of each task (sbatch --time)");
  c.sweep->add_option("--sbatch-arg", c.opts.slurm.sbatch_args, "slurm: one more sbatch argument (repeatable)")
      ->allow_extra_args(false);
  c.sweep->add_option("--poll", c.opts.slurm.poll, "slurm: seconds between queue checks (default 10)")
      ->check(CLI::Range(0.05, 3600.0));
  c.sweep->add_option("--array-limit", c.opts.slurm.array_limit,
                      "slurm: largest job array to submit (default: the cluster's MaxArraySize)")
      ->check(CLI::Range(1, 100000000));

  c.plan = c.sweep->add_subcommand("plan", "Print the runs a sweep expands to, each validated, without running them");
  c.plan->add_option("sweep_file", c.file, "Sweep YAML file")->required();

  c.task = c.sweep->add_subcommand("task", "Run one line of a sweep's manifest (what a Slurm array task runs)");
  c.task->add_option("manifest", c.manifest, "The sweep folder's manifest.tsv")->required();
  c.task->add_option("--index", c.index, "Manifest index (the array task id)")->required();
  c.task->add_option("--offset", c.offset, "Added to --index (arrays split at MaxArraySize)");
  c.task->add_option("--timeout", c.timeout, "Stop the run after this long");

  c.exporter = c.sweep->add_subcommand("export", "Write a sweep's results.db as CSV");
  c.exporter->add_option("folder", c.folder, "Sweep folder (or its results.db)")->required();
  c.exporter->add_flag("--csv", c.csv, "CSV (the one format; the default)");
  c.exporter->add_option("-o,--output", c.out, "Write to this file instead of stdout");

  c.plot = c.sweep->add_subcommand("plot", "Draw a figure against a parameter, one line per value of others (PNG)");
  c.plot->add_option("folder", c.folder, "Sweep folder (or its results.db)")->required();
  c.plot->add_option("--x", c.plot_req.x, "Column on the x axis (a swept key path, or chips, ...)")->required();
  c.plot->add_option("--y", c.plot_req.y, "Figure on the y axis (step_time_s, mfu, ...)")->required();
  c.plot->add_option("--by", c.plot_req.by,
                     "One line (or bar colour) per value of this column; several (--by a,b or repeated): one per "
                     "combination")
      ->delimiter(',')
      ->allow_extra_args(false);
  c.plot->add_option("--where", c.plot_req.where,
                     "Keep runs with column=value; column= keeps runs without the column; repeated for one column: "
                     "any of the values")
      ->allow_extra_args(false);
  c.plot->add_option("-o,--output", c.plot_req.out, "PNG file (default: in the sweep folder)");
  c.plot->add_flag("--logx", c.plot_req.logx, "Logarithmic x axis (base 2)");
  c.plot->add_flag("--logy", c.plot_req.logy, "Logarithmic y axis");
  return &c;
}

bool sweep_selected(const SweepCommand* c) { return c && c->sweep && c->sweep->parsed(); }

int cmd_sweep(SweepCommand* c) {
  load_plugins_for_children(c->plugins);
  if (c->plan->parsed()) {
    SweepPlan plan = plan_sweep(load_sweep_file(c->file));
    std::cout << "# sweep " << plan.name << ": " << plan.runs.size() << " run" << (plan.runs.size() == 1 ? "" : "s")
              << ", every one valid; index, name, swept values\n";
    for (const auto& r : plan.runs) {
      std::cout << r.index << "\t" << r.name;
      for (const auto& [k, v] : r.swept) std::cout << "\t" << k << "=" << v;
      std::cout << "\n";
    }
    return 0;
  }
  if (c->task->parsed()) return run_sweep_task(c->manifest, c->index, c->offset, parse_timeout(c->timeout));
  if (c->exporter->parsed()) {
    ResultsTable t = read_results(results_db_path(c->folder));
    if (c->out.empty()) {
      write_csv(t, std::cout);
      return 0;
    }
    std::ofstream f(c->out, std::ios::binary);
    write_csv(t, f);
    if (!f.flush()) throw Error(Err::OutputUnwritable, "cannot write '" + c->out + "'");
    std::cerr << "wrote " << c->out << "\n";
    return 0;
  }
  if (c->plot->parsed()) {
    c->plot_req.db = results_db_path(c->folder);
    const std::string png = plot_sweep(c->plot_req);
    std::cout << "wrote " << png << "\n";
    return 0;
  }
  if (c->file.empty()) throw Error(Err::Usage, "podsim sweep needs a sweep file, or one of plan, task, export, plot");
  c->opts.timeout = parse_timeout(c->timeout);
  return run_sweep(c->file, c->opts);
}

}  // namespace podsim::cli
