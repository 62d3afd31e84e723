#include "sim/search/search.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <numeric>
#include <set>

#include "base/error.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/search/enumerate.h"
#include "sim/search/evaluate.h"
#include "sim/search/search_output.h"
#include "sim/search/serving_search.h"
#include "sim/serving/request_stream.h"
#include "sim/sweep/export.h"
#include "sim/sweep/folder.h"

namespace podsim {
namespace fs = std::filesystem;

double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  if (n < 2) return 0;
  auto ranks = [n](const std::vector<double>& v) {
    std::vector<size_t> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](size_t i, size_t j) { return v[i] < v[j]; });
    std::vector<double> r(n);
    for (size_t i = 0; i < n;) {
      size_t j = i;
      while (j + 1 < n && v[idx[j + 1]] == v[idx[i]]) ++j;
      const double mean = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
      for (size_t k = i; k <= j; ++k) r[idx[k]] = mean;
      i = j + 1;
    }
    return r;
  };
  const std::vector<double> ra = ranks(a), rb = ranks(b);
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < n; ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : 0;
}

int run_search(const std::string& experiment, const SearchOptions& opts) {
  // Stage 1: the space, every candidate validated by the loader.
  LoadOptions lo;
  lo.overrides = opts.overrides;
  const Experiment exp = load_experiment(experiment, lo);
  if (serving::serving_run(exp.params)) return run_serving_search(experiment, exp, opts);
  const SearchSpace space = search_space(exp);
  const std::string stem = fs::path(experiment).stem().string();
  const std::string out = fs::absolute(opts.out.empty() ? "results/" + stem + "-search" : opts.out)
                              .lexically_normal()
                              .string();
  YAML::Node base = search_base(experiment, opts.overrides);  // --set: the search's own keys were read above
  const std::string base_text = emit_yaml(base);
  std::vector<Candidate> all = enumerate_candidates(space, exp);
  std::printf("search %s: %lld chips (%s), strategies %s; %zu candidates\n", experiment.c_str(),
              static_cast<long long>(exp.hardware.pod.chips()), exp.hardware.preset.c_str(),
              join(space.strategies, ", ").c_str(), all.size());

  // Stage 2: plan and lower each (no simulation): invalid, duplicate, over the memory cap, or a survivor.
  std::vector<SearchRow> rows;
  std::map<std::string, std::string> seen;  // layout and options -> the first candidate with them
  size_t invalid = 0, duplicate = 0, over = 0;
  for (const Candidate& c : all) {
    SearchRow r;
    r.candidate = c;
    r.name = c.name();
    r.eval = evaluate_candidate(base_text, experiment, c.overrides());
    if (!r.eval.ok) {
      r.fate = "invalid";
      r.why = r.eval.problem;
      ++invalid;
    } else {
      Candidate key = c;
      key.placement.clear();
      const std::string k = r.eval.layout + "|" + key.name();
      auto [it, fresh] = seen.emplace(k, r.name);
      if (!fresh) {
        r.fate = "duplicate";
        r.why = "the same layout as " + it->second;
        ++duplicate;
      } else if (r.eval.peak_bytes > space.memory_cap) {
        r.fate = "memory";
        r.why = "peaks at " + format_bytes(r.eval.peak_bytes) + " (" + r.eval.peak_role + ") > " +
                format_bytes(space.memory_cap);
        ++over;
        std::printf("  dropped %-40s %s\n", r.name.c_str(), r.why.c_str());
      } else {
        r.fate = "fits";
      }
    }
    rows.push_back(std::move(r));
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].fate == "fits") order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return rows[a].eval.estimate_s < rows[b].eval.estimate_s; });
  const int64_t budget = opts.budget >= 0 ? opts.budget : space.budget;
  const size_t simulate = budget > 0 ? std::min<size_t>(order.size(), static_cast<size_t>(budget)) : order.size();
  for (size_t k = 0; k < order.size(); ++k) {
    rows[order[k]].estimate_rank = static_cast<int64_t>(k + 1);
    if (k < simulate) rows[order[k]].fate = "simulate";
  }
  std::printf("stage 2 (no simulation): %zu invalid, %zu duplicate layouts, %zu over the memory cap of %s, %zu fit; "
              "simulating %zu, most promising first by the estimate\n",
              invalid, duplicate, over, format_bytes(space.memory_cap).c_str(), order.size(), simulate);
  // The invalid ones by reason (candidates.tsv has each): a reason, how many, the first of them.
  std::vector<std::pair<std::string, std::vector<std::string>>> reasons;
  for (const SearchRow& r : rows) {
    if (r.fate != "invalid") continue;
    auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& x) { return x.first == r.why; });
    if (it == reasons.end()) reasons.push_back({r.why, {r.name}});
    else it->second.push_back(r.name);
  }
  for (const auto& [why, names] : reasons)
    std::printf("  invalid: %zu like %s: %s\n", names.size(), names.front().c_str(), why.c_str());

  fs::create_directories(out);
  write_file_atomic(out + "/base.yaml", base_text);
  write_candidates_tsv(out + "/candidates.tsv", rows);
  if (order.empty())
    throw Error(Err::OutOfMemory, exp.params.where("workload.model"),
                "no candidate of the search fits: " + std::to_string(invalid) + " invalid, " + std::to_string(over) +
                    " over the memory cap (" + format_bytes(space.memory_cap) +
                    "); candidates.tsv in " + out + " says why each was dropped");
  if (opts.dry_run) {
    print_estimates(rows, order, simulate);
    return 0;
  }

  // Stage 3: simulate through the sweep machinery.
  std::vector<std::pair<std::string, std::vector<std::string>>> runs;
  for (size_t k = 0; k < simulate; ++k) runs.push_back({rows[order[k]].name, rows[order[k]].candidate.overrides()});
  if (const int code = run_candidates(out, experiment, "the candidates it simulates, most promising first", runs, opts))
    return code;

  read_simulated(out + "/sweep", rows);
  return report_search(out, experiment, base, space, rows, opts);
}

}  // namespace podsim
