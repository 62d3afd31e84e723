// `podsim search EXP.yaml`: the best way to partition EXP's model on EXP's pod, found by simulating (docs/search.md).
//
//   SearchOptions o;  o.jobs = 2;  o.budget = 20;
//   int code = run_search("configs/search/llama2-7b-v5e.yaml", o);
//
// Three stages, each printed: (1) enumerate the `search` section's candidates and validate each through the
// experiment loader; (2) plan and lower each valid one (no simulation) and drop those whose peak HBM use exceeds the
// cap, printing each one's peak, then order the rest by a cheap analytic estimate (sim/search/evaluate.h); (3)
// simulate the first --budget of them through the sweep machinery (sim/sweep: -j N, --backend slurm, results.db,
// resuming). Then the ranked table, best.yaml (a runnable experiment), pareto.png (step time against peak memory,
// the Pareto front drawn) and, with --explain, the winner's time beside the runner-up's.
//
// The search folder (--out, default results/<experiment>-search): candidates.tsv (every candidate: its stage-2 fate,
// peak, estimate), base.yaml and search.yaml (the sweep it runs: `podsim sweep search.yaml` reruns it), sweep/ (the
// sweep folder, results.db), ranking.tsv, best.yaml, pareto.png.
// A serving experiment (a serving section) is searched by run_serving_search (sim/search/serving_search.h) instead.
#pragma once

#include <string>
#include <vector>

#include "sim/sweep/driver.h"

namespace podsim {

struct SearchOptions {
  SweepOptions sweep;    // backend, jobs, timeout, Slurm; sweep.out is ignored (the search folder's sweep/)
  std::string out;       // "" = results/<experiment name>-search
  std::vector<std::string> overrides;  // --set path=value, on the experiment (and its search section)
  int64_t budget = -1;   // simulations at most; -1: search.budget; 0: every candidate that fits
  bool explain = false;  // print the winner's time breakdown beside the runner-up's
  bool dry_run = false;  // stop after stage 2 (the ordered candidates; nothing simulated)
  bool plot = true;      // write pareto.png
};

// Returns the exit code (0 when a best candidate was found, or with dry_run). Throws Error for bad input.
int run_search(const std::string& experiment, const SearchOptions& opts);

// Spearman's rank correlation of two equally long samples (ties share their mean rank); 0 for fewer than 2.
double spearman(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace podsim
