// `podsim search EXP.yaml`: the best partitioning of EXP's model on EXP's pod, found by the simulator
// (sim/search/search.h, docs/search.md).
#include <CLI/CLI.hpp>

#include "sim/cli/commands.h"
#include "base/plugins.h"
#include "base/params/units.h"
#include "sim/search/search.h"

namespace podsim::cli {

struct SearchCommand {
  CLI::App* app = nullptr;
  std::string file, timeout;
  std::vector<std::string> plugins;
  SearchOptions opts;
};

SearchCommand* add_search_command(CLI::App& app) {
  static SearchCommand c;
  c.app = app.add_subcommand("search", "Find the best way to partition the experiment's model on its pod: enumerate "
                                       "the `search` section's candidates, drop those that do not fit, simulate the "
                                       "most promising (docs/search.md)");
  c.app->add_option("experiment", c.file, "Experiment YAML file with a `search` section (or none: the defaults)")
      ->required();
  c.app->add_option("--out", c.opts.out, "Search folder (default: results/<experiment>-search)");
  c.app->add_option("--set", c.opts.overrides,
                    "Override a parameter of the experiment or its search section: --set path=value (repeatable)")
      ->allow_extra_args(false);
  c.app->add_option("--budget", c.opts.budget,
                    "Simulate at most this many candidates, most promising first (default: search.budget; 0: all "
                    "that fit)")
      ->check(CLI::Range(0, 1000000));
  c.app->add_flag("--explain", c.opts.explain, "Print the winner's time breakdown beside the runner-up's");
  c.app->add_flag("--dry-run", c.opts.dry_run,
                  "Stop before simulating: print the candidates that fit, in the estimate's order");
  c.app->add_flag("--no-plot", [](int64_t) { c.opts.plot = false; }, "Do not draw pareto.png");
  c.app->add_option("--backend", c.opts.sweep.backend, "Where the simulations run: local (default) or slurm")
      ->check(CLI::IsMember({"local", "slurm"}));
  c.app->add_option("-j,--jobs", c.opts.sweep.jobs, "local: simulations at once (default: the number of cores)")
      ->check(CLI::Range(1, 4096));
  c.app->add_option("--timeout", c.timeout, "Stop a simulation after this long (90s, 10min) and record it as failed");
  c.app->add_option("--partition", c.opts.sweep.slurm.partition, "slurm: partition (sbatch --partition)");
  c.app->add_option("--account", c.opts.sweep.slurm.account, "slurm: account (sbatch --account)");
  c.app->add_option("--time-limit", c.opts.sweep.slurm.time_limit, "slurm: time limit of each task (sbatch --time)");
  c.app->add_option("--sbatch-arg", c.opts.sweep.slurm.sbatch_args, "slurm: one more sbatch argument (repeatable)")
      ->allow_extra_args(false);
  c.app->add_option("--poll", c.opts.sweep.slurm.poll, "slurm: seconds between queue checks (default 10)")
      ->check(CLI::Range(0.05, 3600.0));
  c.app->add_option("--plugin", c.plugins,
                    "Load workloads/strategies/collectives from a shared library, here and in every run (repeatable)")
      ->allow_extra_args(false);
  return &c;
}

bool search_selected(const SearchCommand* c) { return c && c->app && c->app->parsed(); }

int cmd_search(SearchCommand* c) {
  load_plugins_for_children(c->plugins);
  if (!c->timeout.empty()) {
    QuantityParse q = parse_quantity(Quantity::Time, c->timeout);
    if (!q.value || !(*q.value > 0))
      throw Error(Err::Usage, "--timeout '" + c->timeout + "': " + (q.problem.empty() ? "must be positive" : q.problem) +
                                  " (e.g. 90s, 10min)");
    c->opts.sweep.timeout = *q.value;
  }
  return run_search(c->file, c->opts);
}

}  // namespace podsim::cli
