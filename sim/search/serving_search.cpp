#include "sim/search/serving_search.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>

#include "base/error.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/search/search_output.h"
#include "sim/sweep/export.h"
#include "sim/sweep/folder.h"
#include "sim/sweep/results_db.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

struct ServingCandidate {
  std::string name;
  std::vector<std::string> overrides;  // path=value, values in YAML
  std::string fate = "simulate";       // or invalid
  std::string why;
  // From the sweep.
  std::string status, error;
  double tokens_per_s = 0, tpot_p99 = 0, ttft_p99 = 0, tpot_mean = 0;
  bool meets = false;
};

// The layout overrides of `layout` over `replicas` data-parallel copies of the pod's chips (docs/serving.md,
// "Layouts"); empty with a reason in `why` when the pod cannot hold it.
std::vector<std::string> layout_overrides(const std::string& layout, int64_t replicas, const Experiment& e,
                                          std::string& why) {
  const std::vector<int64_t>& dims = e.hardware.pod.dims;
  const int64_t chips = e.hardware.pod.chips();
  if (chips % replicas != 0 || chips / replicas < 2) {
    why = std::to_string(replicas) + " replicas do not divide " + std::to_string(chips) + " chips into slices of 2 or more";
    return {};
  }
  const bool two_d = layout.rfind("2d", 0) == 0;
  std::vector<std::string> o;
  if (two_d) {
    if (replicas != 1) {
      why = "2-D weight-stationary candidates use the whole pod (no replicas)";
      return {};
    }
    if (dims.size() < 2) {
      why = "2-D weight-stationary needs a pod of two or more torus dimensions";
      return {};
    }
    int64_t rest = 1;
    for (size_t d = 1; d < dims.size(); ++d) rest *= dims[d];
    const std::string other = dims.size() == 2 ? "y" : "yz";
    o = {"strategy.name=spmd", "strategy.scheme=2d", "strategy.spmd_axes=[x, " + other + "]",
         "mesh.axes=[x, " + other + "]", "mesh.shape=[" + std::to_string(dims[0]) + ", " + std::to_string(rest) + "]"};
  } else if (replicas == 1) {
    o = {"strategy.name=spmd"};
  } else {
    o = {"strategy.name=[data_parallel, spmd]", "mesh.axes=[data, model]",
         "mesh.shape=[" + std::to_string(replicas) + ", " + std::to_string(chips / replicas) + "]"};
  }
  if (layout.size() > 9 && layout.compare(layout.size() - 9, 9, "_kv_batch") == 0) {
    // Chunked batching packs its iterations into one row, which a cache split over the batch cannot hold
    // (PODSIM-INF-004). Continuous batching decodes every slot (its batch padding) but prefills one prompt at a
    // time: as JetStream runs prefill and generate as programs of their own, its prefills take the same layout with
    // the cache split by heads (serving.prefill), each prompt's cache then inserted into its slot.
    const std::string policy = e.params.s("serving.engine.policy");
    const bool padded = e.params.s("serving.engine.batch_padding") == "engine";
    if (policy == "chunked" || (policy == "continuous" && !padded)) {
      why = policy == "chunked"
                ? "a KV cache split over the batch needs one row per sequence; chunked batching packs its iterations"
                : "a KV cache split over the batch needs decodes of every slot (serving.engine.batch_padding: "
                  "engine); with none they are the occupied slots only";
      return {};
    }
    if (policy == "continuous") {
      const std::vector<std::string> decode = o;
      for (const std::string& x : decode) o.push_back("serving.prefill." + x);
      o.push_back("serving.prefill.strategy.kv_sharding=heads");
    }
    o.push_back("strategy.kv_sharding=batch");
  }
  return o;
}

std::string fmt_ms(double s) { return s > 0 ? strprintf("%.2f ms", s * 1e3) : std::string("-"); }

}  // namespace

int run_serving_search(const std::string& experiment, const Experiment& exp, const SearchOptions& opts) {
  const ParamSet& p = exp.params;
  const std::vector<std::string> layouts = p.strings("search.layouts");
  const std::vector<int64_t> replicas = p.ints("search.replicas");
  const std::vector<int64_t> slots = p.ints("search.slots");
  std::vector<std::string> weights = p.strings("search.weight_dtypes"), kvs = p.strings("search.kv_dtypes");
  // [] keeps the experiment's own.
  if (weights.empty()) weights = {""};
  if (kvs.empty()) kvs = {""};
  std::vector<int64_t> slot_values = slots;
  if (slot_values.empty()) slot_values = {0};
  const double tpot_target = p.has("search.tpot_target") ? p.f("search.tpot_target") : 0;
  const double ttft_target = p.has("search.ttft_target") ? p.f("search.ttft_target") : 0;

  const std::string stem = fs::path(experiment).stem().string();
  const std::string out =
      fs::absolute(opts.out.empty() ? "results/" + stem + "-search" : opts.out).lexically_normal().string();
  YAML::Node base = search_base(experiment, opts.overrides);
  // A request trace named relative to the experiment stays that file when the runs read base.yaml elsewhere.
  if (base["serving"] && base["serving"]["requests"] && base["serving"]["requests"]["trace"]) {
    const fs::path trace = base["serving"]["requests"]["trace"].as<std::string>();
    if (trace.is_relative())
      base["serving"]["requests"]["trace"] =
          fs::absolute(fs::path(experiment).parent_path() / trace).lexically_normal().string();
  }
  const std::string base_text = emit_yaml(base);

  // Stage 1: every combination, each loaded as the experiment it is (a bad one is dropped with the loader's reason).
  std::vector<ServingCandidate> all;
  for (int64_t r : replicas)
    for (const std::string& layout : layouts)
      for (int64_t s : slot_values)
        for (const std::string& w : weights)
          for (const std::string& kv : kvs) {
            ServingCandidate c;
            c.name = (r > 1 ? "r" + std::to_string(r) + "-" : std::string()) + layout +
                     (s > 0 ? "-slots" + std::to_string(s) : std::string()) + (w.empty() ? "" : "-w" + w) +
                     (kv.empty() ? "" : "-kv" + kv);
            c.overrides = layout_overrides(layout, r, exp, c.why);
            if (c.overrides.empty()) {
              c.fate = "invalid";
            } else {
              if (s > 0) c.overrides.push_back("serving.engine.slots=" + std::to_string(s));
              if (!w.empty()) c.overrides.push_back("workload.weight_dtype=" + w);
              if (!kv.empty()) c.overrides.push_back("workload.kv_dtype=" + kv);
              YAML::Node n = YAML::Clone(base);
              for (const std::string& o : c.overrides) {
                const size_t eq = o.find('=');
                set_yaml_path(n, o.substr(0, eq), o.substr(eq + 1));
              }
              try {
                load_experiment_text(emit_yaml(n), (fs::path(experiment).parent_path() / (c.name + ".yaml")).string());
              } catch (const Error& e) {
                c.fate = "invalid";
                c.why = e.what();
              }
            }
            all.push_back(std::move(c));
          }
  std::vector<size_t> run;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].fate == "simulate") run.push_back(i);
  const int64_t budget = opts.budget >= 0 ? opts.budget : p.i("search.budget");
  if (budget > 0 && run.size() > static_cast<size_t>(budget)) {
    for (size_t k = static_cast<size_t>(budget); k < run.size(); ++k) all[run[k]].fate = "over budget";
    run.resize(static_cast<size_t>(budget));
  }
  if (opts.explain)
    std::printf("note: --explain compares two steps' time breakdowns; a serving search ranks streams (ranking.tsv "
                "and each run's summary.json have their figures)\n");
  std::printf("search %s (serving): %lld chips (%s); %zu candidates, %zu invalid, simulating %zu serving runs\n",
              experiment.c_str(), static_cast<long long>(exp.hardware.pod.chips()), exp.hardware.preset.c_str(),
              all.size(), static_cast<size_t>(std::count_if(all.begin(), all.end(), [](const ServingCandidate& c) {
                return c.fate == "invalid";
              })),
              run.size());
  for (const ServingCandidate& c : all)
    if (c.fate == "invalid") std::printf("  invalid %-34s %s\n", c.name.c_str(), c.why.c_str());
  fs::create_directories(out);
  write_file_atomic(out + "/base.yaml", base_text);
  {
    std::string tsv = "name\tfate\twhy\toverrides\n";
    for (const ServingCandidate& c : all)
      tsv += c.name + "\t" + c.fate + "\t" + c.why + "\t" + join(c.overrides, " ") + "\n";
    write_file_atomic(out + "/candidates.tsv", tsv);
  }
  if (run.empty())
    throw Error(Err::StrategyMismatch, p.where("search.layouts"),
                "no candidate of the serving search is valid; candidates.tsv in " + out + " says why each was dropped");
  if (opts.dry_run) {
    for (size_t i : run) std::printf("  would run %-32s %s\n", all[i].name.c_str(), join(all[i].overrides, " ").c_str());
    return 0;
  }

  // Stage 2: every valid candidate a serving run of the same stream, through the sweep machinery.
  std::vector<std::pair<std::string, std::vector<std::string>>> runs;
  for (size_t i : run) runs.push_back({all[i].name, all[i].overrides});
  if (const int code = run_candidates(out, experiment, "the serving candidates it runs", runs, opts)) return code;
  const ResultsTable t = read_results(out + "/sweep/results.db");
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < t.columns.size(); ++i) col[t.columns[i]] = i;
  std::map<std::string, ServingCandidate*> by_name;
  for (ServingCandidate& c : all) by_name[c.name] = &c;
  auto num = [&](const std::vector<ColumnValue>& row, const char* c) {
    auto it = col.find(c);
    if (it == col.end()) return 0.0;
    const ColumnValue& v = row[it->second];
    if (const double* d = std::get_if<double>(&v)) return *d;
    if (const int64_t* k = std::get_if<int64_t>(&v)) return static_cast<double>(*k);
    return 0.0;
  };
  for (const auto& row : t.rows) {
    auto it = by_name.find(cell_text(row[col.at("name")]));
    if (it == by_name.end()) continue;
    ServingCandidate& c = *it->second;
    c.status = cell_text(row[col.at("status")]);
    if (col.count("error")) c.error = cell_text(row[col.at("error")]);
    c.tokens_per_s = num(row, "output_tokens_per_s");
    c.tpot_p99 = num(row, "tpot_p99_s");
    c.tpot_mean = num(row, "tpot_mean_s");
    c.ttft_p99 = num(row, "ttft_p99_s");
    c.meets = c.status == "done" && (tpot_target <= 0 || c.tpot_p99 <= tpot_target) &&
              (ttft_target <= 0 || c.ttft_p99 <= ttft_target);
  }

  // Stage 3: the ranking: within the targets by output tokens/s, then those that miss them, then failed runs.
  std::vector<ServingCandidate*> ranked;
  for (size_t i : run) ranked.push_back(&all[i]);
  auto tier = [](const ServingCandidate* c) { return c->meets ? 0 : c->status == "done" ? 1 : 2; };
  std::stable_sort(ranked.begin(), ranked.end(), [&](const ServingCandidate* a, const ServingCandidate* b) {
    if (tier(a) != tier(b)) return tier(a) < tier(b);
    return a->tokens_per_s > b->tokens_per_s;
  });
  const double chips = static_cast<double>(exp.hardware.pod.chips());
  std::printf("\n%-4s %-34s %14s %14s %12s %12s  %s\n", "rank", "candidate", "output tok/s", "per chip", "TPOT p99",
              "TTFT p99", "targets");
  std::string tsv = "rank\tname\tstatus\toutput_tokens_per_s\toutput_tokens_per_s_per_chip\ttpot_p99_s\ttpot_mean_s\t"
                    "ttft_p99_s\tmeets_targets\terror\n";
  for (size_t k = 0; k < ranked.size(); ++k) {
    const ServingCandidate& c = *ranked[k];
    std::string verdict = c.meets ? "met" : c.status == "done" ? "missed" : "failed";
    if (c.status != "done" && !c.error.empty()) verdict += ": " + c.error.substr(0, c.error.find('\n'));
    std::printf("%-4zu %-34s %14.1f %14.2f %12s %12s  %s\n", k + 1, c.name.c_str(), c.tokens_per_s,
                c.tokens_per_s / chips, fmt_ms(c.tpot_p99).c_str(), fmt_ms(c.ttft_p99).c_str(), verdict.c_str());
    tsv += strprintf("%zu\t%s\t%s\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\t%s\t%s\n", k + 1, c.name.c_str(), c.status.c_str(),
                     c.tokens_per_s, c.tokens_per_s / chips, c.tpot_p99, c.tpot_mean, c.ttft_p99,
                     c.meets ? "true" : "false", c.error.substr(0, c.error.find('\n')).c_str());
  }
  write_file_atomic(out + "/ranking.tsv", tsv);
  const std::string targets = (tpot_target > 0 ? "p99 TPOT <= " + fmt_ms(tpot_target) : std::string()) +
                              (tpot_target > 0 && ttft_target > 0 ? ", " : "") +
                              (ttft_target > 0 ? "p99 TTFT <= " + fmt_ms(ttft_target) : std::string());
  if (ranked.empty() || !ranked.front()->meets) {
    std::printf("\nno candidate meets the targets (%s); ranking.tsv in %s has every candidate's figures\n",
                targets.empty() ? "none set, but every run failed" : targets.c_str(), out.c_str());
    return 1;
  }
  const ServingCandidate& best = *ranked.front();
  YAML::Node b = YAML::Clone(base);
  for (const std::string& o : best.overrides) {
    const size_t eq = o.find('=');
    set_yaml_path(b, o.substr(0, eq), o.substr(eq + 1));
  }
  write_file_atomic(out + "/best.yaml", "# The best candidate of podsim search " + experiment + ": " + best.name + ", " +
                                            strprintf("%.1f", best.tokens_per_s) + " output tokens/s" +
                                            (targets.empty() ? std::string() : " within " + targets) + ".\n" + emit_yaml(b));
  std::printf("\nbest: %s, %.1f output tokens/s (%.2f per chip)%s; wrote %s/best.yaml\n", best.name.c_str(),
              best.tokens_per_s, best.tokens_per_s / chips, targets.empty() ? "" : (" within " + targets).c_str(),
              out.c_str());
  return 0;
}

}  // namespace podsim
