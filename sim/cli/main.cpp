// podsim: entry point. SystemC's library brings its own main() that calls sc_main(); we define main() ourselves
// so the SystemC banner can be switched off before the kernel starts, then hand over to sc_elab_and_sim.
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <string>
#include <unistd.h>
#include <iostream>
#include <systemc>

#include "sim/cli/commands.h"
#include "base/error.h"
#include "base/plugins.h"
#include "sim/engine/output_dir.h"

using namespace podsim;

int sc_main(int argc, char** argv) {
  CLI::App app{"podsim: a cycle-approximate simulator of TPU pods", "podsim"};
  app.set_version_flag("--version", std::string("podsim ") + PODSIM_VERSION);
  app.require_subcommand(1);

  cli::RunArgs run;
  auto* r = app.add_subcommand("run", "Simulate an experiment and write its results folder");
  r->add_option("experiment", run.experiment, "Experiment YAML file")->required();
  r->add_option("--out", run.out, "Output folder (default: results/<run.name>)");
  r->add_option("--set", run.overrides, "Override a parameter: --set path=value (repeatable)")
      ->allow_extra_args(false);
  r->add_flag("--force", run.force, "Replace an existing output folder");
  r->add_option("--trace-format", run.trace_format, "Trace format, overriding run.trace.format")
      ->check(CLI::IsMember({"pftrace", "json", "off"}));
  r->add_flag("-q,--quiet", run.quiet, "Print nothing but errors");
  r->add_flag("--single-device", run.single_device,
              "Run the experiment's single-device reference: its strategy replaced by single_device and its mesh "
              "dropped (the same workload and global batch on chip 0); compare with `podsim compare`");
  r->add_flag("--memory-only", run.memory_only,
              "Plan and lower the step and check that every chip's peak fits in HBM, without simulating it: the "
              "results folder has the memory figures only (no step time); a step that does not fit fails with "
              "PODSIM-MEM-001 as a full run does");
  r->add_option("--plugin", run.plugins, "Load workloads/strategies/collectives from a shared library (repeatable)")
      ->allow_extra_args(false);

  cli::ValidateArgs val;
  auto* v = app.add_subcommand("validate", "Check an experiment and print it fully resolved");
  v->add_option("experiment", val.experiment, "Experiment YAML file")->required();
  v->add_option("--set", val.overrides, "Override a parameter: --set path=value (repeatable)")
      ->allow_extra_args(false);
  v->add_flag("--no-origins", val.no_origins, "Leave out the comments saying where each value came from");
  v->add_option("--plugin", val.plugins, "Load workloads/strategies/collectives from a shared library (repeatable)")
      ->allow_extra_args(false);

  cli::ListArgs list;
  auto* l = app.add_subcommand("list", "List hardware presets, workloads, strategies, collectives, params or errors");
  l->add_option("what", list.what, "What to list (without it: what can be listed)")
      ->check(CLI::IsMember({"hardware", "workloads", "strategies", "collectives", "params", "errors"}));
  l->add_option("--workload", list.workload, "For params: only this workload's parameters");
  l->add_option("--plugin", list.plugins, "Load workloads/strategies/collectives from a shared library (repeatable)")
      ->allow_extra_args(false);

  cli::ReportArgs rep;
  auto* p = app.add_subcommand("report", "Print a run's summary as tables and write PNG plots into it");
  p->add_option("run_dir", rep.run_dir, "A folder written by podsim run")->required();
  p->add_flag("--no-plots", rep.no_plots, "Only print the tables");
  p->add_flag("--fit-colors", rep.fit_colors,
              "heatmap.png: fit each panel's colour scale to its lowest and highest chip instead of 0-100 %, so that "
              "small differences between chips show");

  cli::CompareArgs cmp;
  auto* c = app.add_subcommand(
      "compare",
      "Compare the tensors of two numeric runs: podsim compare REFERENCE CANDIDATE (the reference first, e.g. the "
      "--single-device run). Each tensor is judged by the precision it was computed in, and a parameter an optimizer "
      "updated against the size of its step (docs/strategies.md)");
  c->add_option("reference", cmp.reference, "The reference run folder, e.g. the single-device run")->required();
  c->add_option("candidate", cmp.candidate, "The run judged against it, e.g. the partitioned run")->required();
  c->add_option("--tolerance", cmp.tolerance,
                "Judge every tensor by its relative norm error against this bound instead (0: bit for bit equal)")
      ->check(CLI::NonNegativeNumber);
  c->add_flag("--brief", cmp.brief, "Print only the tensors above their bounds and the verdict");
  c->add_option("--plugin", cmp.plugins, "Load workloads from a shared library, to rebuild a plugin workload's step "
                                         "(repeatable)")
      ->allow_extra_args(false);
  cli::SweepCommand* sweep = cli::add_sweep_command(app);
  cli::SearchCommand* search = cli::add_search_command(app);

  std::string docs_what;
  auto* d = app.add_subcommand("docs", "Print the parameter reference (config) or the error catalogue (errors) in "
                                       "Markdown, as in docs/config.md and docs/errors.md");
  d->add_option("what", docs_what, "config | errors")->required()->check(CLI::IsMember({"config", "errors"}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "error " << error_info(Err::Usage).id << ": " << e.what() << "\n"
              << "run 'podsim --help' (or 'podsim COMMAND --help') for usage\n";
    return error_info(Err::Usage).exit_code;
  }

  try {
    load_plugins_from_environment();
    for (const auto& path : run.plugins) load_plugin(path);
    for (const auto& path : val.plugins) load_plugin(path);
    for (const auto& path : list.plugins) load_plugin(path);
    for (const auto& path : cmp.plugins) load_plugin(path);
    if (*r) return cli::cmd_run(run);
    if (*v) return cli::cmd_validate(val);
    if (*l) return cli::cmd_list(list);
    if (*p) return cli::cmd_report(rep);
    if (*d) return cli::cmd_docs(docs_what);
    if (*c) return cli::cmd_compare(cmp);
    if (cli::sweep_selected(sweep)) return cli::cmd_sweep(sweep);
    if (cli::search_selected(search)) return cli::cmd_search(search);
  } catch (const std::exception& e) {
    return cli::report_failure(e);
  }
  return 1;
}

namespace {

// A pod simulated chip by chip keeps its hot state in many small allocations per chip, and the simulation visits
// every chip every microsecond of simulated time: with 4 KiB pages the processor's address translation misses on
// most of them. glibc backs its heap with transparent huge pages when GLIBC_TUNABLES asks for it
// (glibc.malloc.hugetlb=1), a setting it reads at start-up only, so podsim sets it and runs itself again, once.
// The every-chip 32 x 32 all-reduce takes 15-20 % less CPU (docs/performance.md). The same setting keeps up to
// 64 MiB free at the top of the heap (glibc.malloc.trim_threshold) and serves blocks up to 32 MiB from the heap
// (glibc.malloc.mmap_threshold), so that freed memory is reused instead of given back to the kernel, which clears
// fresh pages when it is asked again: a fifth of the page faults and 3 % less CPU in that run.
// PODSIM_NO_HUGE_PAGES=1, or a GLIBC_TUNABLES that already names hugetlb, leaves the environment as it is.
// Under valgrind (its preload library is in LD_PRELOAD) the process is left as it is: running again would leave
// the tool, which does not follow a program into exec by default.
void use_huge_pages(char** argv) {
  if (std::getenv("PODSIM_NO_HUGE_PAGES")) return;
  const char* preload = std::getenv("LD_PRELOAD");
  if (preload && std::string(preload).find("vgpreload") != std::string::npos) return;
  const char* set = std::getenv("GLIBC_TUNABLES");
  std::string tunables = set ? set : "";
  if (tunables.find("glibc.malloc.hugetlb") != std::string::npos) return;
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return;
  self[n] = '\0';
  tunables += std::string(tunables.empty() ? "" : ":") + "glibc.malloc.hugetlb=1";
  if (tunables.find("glibc.malloc.trim_threshold") == std::string::npos)
    tunables += ":glibc.malloc.trim_threshold=67108864";
  if (tunables.find("glibc.malloc.mmap_threshold") == std::string::npos)
    tunables += ":glibc.malloc.mmap_threshold=33554432";
  if (setenv("GLIBC_TUNABLES", tunables.c_str(), 1) != 0) return;
  execv(self, argv);  // returns only when it fails: then run as we are
  unsetenv("GLIBC_TUNABLES");
  if (set) setenv("GLIBC_TUNABLES", set, 1);
}

}  // namespace

int main(int argc, char** argv) {
  use_huge_pages(argv);
  setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 1);
  podsim::install_interrupt_cleanup();  // before any other thread starts
  return sc_core::sc_elab_and_sim(argc, argv);
}
