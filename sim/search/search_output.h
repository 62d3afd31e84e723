// `podsim search`'s results: every candidate's fate (candidates.tsv), the ranked table of the simulated ones
// (printed, and ranking.tsv), best.yaml, pareto.png and the --explain comparison. Internal to sim/search.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "sim/search/enumerate.h"
#include "sim/search/evaluate.h"
#include "sim/search/search.h"

namespace podsim {

struct SearchRow {
  Candidate candidate;
  std::string name;
  Evaluation eval;
  std::string fate;  // invalid | duplicate | memory | fits | simulate
  std::string why;   // for invalid, duplicate, memory
  int64_t estimate_rank = 0;  // 1 = most promising (fits and simulate)
  // From results.db, for the simulated ones.
  std::string status;  // done | failed | pending ("" when not in the sweep)
  double step_time_s = 0, mfu = 0, hfu = 0, peak_memory_bytes = 0, exposed_comm_fraction = 0;
  std::optional<double> bubble_fraction;
  std::string error;
};

void write_candidates_tsv(const std::string& path, const std::vector<SearchRow>& rows);
// --dry-run: the survivors in estimate order.
void print_estimates(const std::vector<SearchRow>& rows, const std::vector<size_t>& order, size_t simulate);
// Fills the simulated rows' figures from the sweep folder's results.db.
void read_simulated(const std::string& sweep_dir, std::vector<SearchRow>& rows);
// The ranked table, Spearman's rho of the estimate, ranking.tsv, best.yaml, pareto.png, --explain. Returns the exit
// code: 0 when some candidate was simulated to the end.
int report_search(const std::string& out, const std::string& experiment, const YAML::Node& base,
                  const SearchSpace& space, std::vector<SearchRow>& rows, const SearchOptions& opts);

// Sets `path` (dotted) of a YAML mapping to `yaml_value`.
void set_yaml_path(YAML::Node& root, const std::string& path, const std::string& yaml_value);

// The experiment file without the sections a candidate decides (strategy, mesh) and the search section, with the
// --set overrides that are not under those sections applied.
YAML::Node search_base(const std::string& experiment, const std::vector<std::string>& overrides);
// A YAML document's text, with a final newline.
std::string emit_yaml(const YAML::Node& n);
// Stage 3 of either search: search.yaml in `out` (base.yaml as its base, one run per candidate: its name and its
// path=value overrides; `what` says what they are in its comment) run through the sweep machinery into out/sweep.
// Returns the sweep's exit code; runs that failed are reported on stderr and left for the ranking.
int run_candidates(const std::string& out, const std::string& experiment, const std::string& what,
                   const std::vector<std::pair<std::string, std::vector<std::string>>>& runs,
                   const SearchOptions& opts);

// best.yaml's text: the experiment with the candidate's strategy, mesh and options, and a comment with its figures.
std::string best_yaml(const YAML::Node& base, const Candidate& c, const std::string& comment);

}  // namespace podsim
