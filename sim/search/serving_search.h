// `podsim search` of a serving experiment (one with a serving section; docs/search.md, "Serving"): the layouts,
// replicas, decode slots and number formats its search section allows, each a serving run of the experiment's request
// stream through the sweep machinery, ranked by output tokens per second among the candidates within the latency
// targets (p99 time per output token, p99 time to first token).
//
//   int code = run_serving_search("configs/search/llama2-7b-v5e-8-serving.yaml", exp, opts);
//
// The search folder: candidates.tsv (every candidate and its overrides), base.yaml and search.yaml (the sweep it
// runs), sweep/ (its folder and results.db), ranking.tsv and best.yaml (a runnable experiment).
#pragma once

#include <string>

#include "base/params/experiment.h"
#include "sim/search/search.h"

namespace podsim {

// Returns 0 when a candidate meets the targets (or with dry_run), 1 when none does. Throws Error for bad input.
int run_serving_search(const std::string& experiment, const Experiment& exp, const SearchOptions& opts);

}  // namespace podsim
