// The podsim command line: one function per subcommand, each returning the process exit code
// (0 ok, 2 bad input, 1 internal failure). main.cpp wires them into CLI11.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace podsim::cli {

struct RunArgs {
  std::vector<std::string> plugins;
  std::string experiment;
  std::string out;
  std::vector<std::string> overrides;
  bool force = false;
  std::string trace_format;  // "" keeps run.trace.format
  bool quiet = false;
  bool single_device = false;  // the experiment's single-device reference (LoadOptions::single_device)
  bool memory_only = false;    // stop after the memory check (RunOptions::memory_only)
};
int cmd_run(const RunArgs& a);

struct ValidateArgs {
  std::vector<std::string> plugins;
  std::string experiment;
  std::vector<std::string> overrides;
  bool no_origins = false;
};
int cmd_validate(const ValidateArgs& a);

struct ListArgs {
  std::vector<std::string> plugins;
  std::string what;      // hardware | workloads | strategies | collectives | params | errors
  std::string workload;  // for params: which workload's parameters (default: all)
};
int cmd_list(const ListArgs& a);

struct ReportArgs {
  std::string run_dir;
  bool no_plots = false;
  bool fit_colors = false;  // heatmap.png's colours fitted to each panel's range (PlotOptions)
};
int cmd_report(const ReportArgs& a);

struct CompareArgs {
  std::vector<std::string> plugins;
  std::string reference, candidate;
  std::optional<double> tolerance;  // unset: each tensor's own bound (workloads/compare_rules.h)
  bool brief = false;
};
// Exit 0: every tensor within its bound; 1: some differ or are missing; 2: a folder is not a numeric run.
int cmd_compare(const CompareArgs& a);
// `podsim sweep` and its subcommands (cmd_sweep.cpp): added to the app before parsing, run after.
struct SweepCommand;
SweepCommand* add_sweep_command(CLI::App& app);
bool sweep_selected(const SweepCommand* c);
int cmd_sweep(SweepCommand* c);

// `podsim search` (cmd_search.cpp), the same way.
struct SearchCommand;
SearchCommand* add_search_command(CLI::App& app);
bool search_selected(const SearchCommand* c);
int cmd_search(SearchCommand* c);

// Regenerates docs/config.md or docs/errors.md text (printed to stdout).
int cmd_docs(const std::string& what);

// Prints an Error (or any exception) to stderr and returns its exit code.
int report_failure(const std::exception& e);

}  // namespace podsim::cli
