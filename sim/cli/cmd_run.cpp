#include <map>
#include <algorithm>
#include <iostream>
#include <nlohmann/json.hpp>

#include "sim/cli/commands.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/engine/engine.h"
#include "sim/serving/request_stream.h"
#include "sim/serving/run/serving_run.h"

namespace podsim::cli {
namespace {

std::string pct(double f) { return strprintf("%.1f %%", 100.0 * f); }

// A partitioned step may have many notes (one per padded tensor): the first few here, all in summary.json.
void print_notes(const std::vector<std::string>& notes, const std::string& dir) {
  const size_t shown = notes.size() > 10 ? 8 : notes.size();
  for (size_t i = 0; i < shown; ++i) std::cout << "  note: " << notes[i] << "\n";
  if (shown < notes.size())
    std::cout << "  note: ... and " << notes.size() - shown << " more (\"notes\" in " << dir << "/summary.json)\n";
  std::cout << "  results in " << dir << "/\n";
}

void print_summary(const nlohmann::json& j, const std::string& dir, const std::vector<std::string>& notes) {
  double T = j["step_time_s"];
  std::cout << "podsim: " << j["experiment"].get<std::string>() << " — " << j["workload"].get<std::string>()
            << " on " << j["chips"].get<int64_t>() << " x " << j["hardware"].get<std::string>() << " ("
            << j["strategy"].get<std::string>() << ")\n";
  std::cout << "  step time     " << format_time(T) << "  (" << j["cycles"].get<int64_t>() << " cycles at "
            << format_frequency(j["clock_hz"]) << ")\n";
  std::cout << "  MFU           " << pct(j["mfu"]) << "  (model " << format_count(j["model_flops"]) << "FLOP; peak "
            << format_count(j["peak_flops_per_chip"].get<double>()) << "FLOP/s per chip)\n";
  const double model = j["model_flops"], hardware = j["hardware_flops"];
  std::cout << "  HFU           " << pct(j["hfu"]) << "  (hardware " << format_count(hardware) << "FLOP on the MXUs"
            << (model > 0 ? strprintf(", %.2f x the model's", hardware / model) : std::string()) << ")\n";
  if (j.value("recompute_flops", 0.0) > 0 || j.value("recompute_s", 0.0) > 0)
    std::cout << "  recompute     " << format_time(j["recompute_s"]) << " busy on the busiest chip  ("
              << format_count(j["recompute_flops"]) << "FLOP recomputed on the MXUs)\n";
  if (j.contains("samples_per_s"))
    std::cout << "  throughput    " << format_count(j["samples_per_s"]) << " samples/s"
              << (j.contains("tokens_per_s") ? ", " + format_count(j["tokens_per_s"]) + " tokens/s" : std::string())
              << "\n";
  if (j.contains("parameters"))
    std::cout << "  parameters    " << format_count(j["parameters"].get<double>()) << " trainable\n";
  const auto& b = j["busy_fraction"];
  std::cout << "  busy          MXU " << pct(b["mxu"]) << "  VPU " << pct(b["vpu"]) << "  HBM " << pct(b["hbm"])
            << "  ICI " << pct(b["ici"]) << "\n";
  if (j.contains("memory")) {
    const auto& m = j["memory"];
    const auto& a = m["at_peak"];
    std::cout << "  peak memory   " << format_bytes(m["peak_bytes"]) << " of " << format_bytes(m["capacity_bytes"])
              << " HBM" << (m["fits"].get<bool>() ? "" : "  ** DOES NOT FIT **") << "  (weights "
              << format_bytes(a["weights"]) << ", gradients " << format_bytes(a["gradients"]) << ", optimizer "
              << format_bytes(a["optimizer_state"]) << ", activations " << format_bytes(a["activations"])
              << (a.value("kv_cache", 0.0) > 0 ? ", KV cache " + format_bytes(a["kv_cache"]) : "") << ")\n";
    // The line above is the result chip's; roles differ (pipeline stages), and the heaviest is what must fit.
    const nlohmann::json* heaviest = nullptr;
    if (j.contains("roles"))
      for (const auto& r : j["roles"])
        if (!heaviest || r["peak_memory_bytes"].get<double>() > (*heaviest)["peak_memory_bytes"].get<double>())
          heaviest = &r;
    if (heaviest && (*heaviest)["peak_memory_bytes"].get<double>() > m["peak_bytes"].get<double>())
      std::cout << "  heaviest role " << (*heaviest)["role"].get<std::string>() << ": "
                << format_bytes((*heaviest)["peak_memory_bytes"]) << " at its peak (the line above is the result "
                << "chip's; every role in summary.json's roles)\n";
  }
  if (j.contains("fusion") && j["fusion"]["mode"] != "none") {
    const auto& f = j["fusion"];
    const auto& k = f["by_kind"];
    std::cout << "  fusion        " << f["fusions"].get<int64_t>() << " fusions of " << f["fused_ops"].get<int64_t>()
              << " ops (loop " << k["loop"].get<int64_t>() << ", output " << k["output"].get<int64_t>()
              << ", reduction " << k["reduction"].get<int64_t>() << ")\n";
  }
  if (j.contains("memory_benchmark")) {
    const auto& m = j["memory_benchmark"];
    std::cout << "  memory        " << m["pattern"].get<std::string>() << " of " << format_bytes(m["bytes"])
              << " in " << format_bytes(m["request_bytes"]) << " requests: " << format_bandwidth(m["achieved_bandwidth_Bps"])
              << " (" << pct(m["efficiency"]) << " of peak); idle latency " << format_time(m["latency_row_hit_s"])
              << " row hit, " << format_time(m["latency_row_miss_s"]) << " row miss\n";
  }
  if (j.contains("collectives") && j["collectives"].size() <= 6) {
    for (const auto& c : j["collectives"])
      std::cout << "  collective    " << c["kind"].get<std::string>() << " of " << format_bytes(c["bytes_per_chip"])
                << " per chip: " << format_time(c["time_s"]) << ", algorithm bandwidth "
                << format_bandwidth(c["algorithm_bandwidth_Bps"]) << "\n";
  } else if (j.contains("collectives")) {  // many (a partitioned step): one line per kind
    std::map<std::string, std::pair<int64_t, double>> by_kind;
    for (const auto& c : j["collectives"]) {
      auto& k = by_kind[c["kind"].get<std::string>()];
      ++k.first;
      k.second += c["bytes_per_chip"].get<double>();
    }
    for (const auto& [kind, k] : by_kind)
      std::cout << "  collective    " << k.first << " x " << kind << ", " << format_bytes(k.second)
                << " per chip in all\n";
  }
  if (j.contains("communication") && j.contains("roles") && j["roles"].size() > 0)
    std::cout << "  exposed comm  " << format_time(j["communication"]["exposed_s"]) << " ("
              << pct(j["communication"]["exposed_fraction"]) << " of the step, mean over chips)\n";
  if (j.contains("dcn")) {  // several slices: what crossed the data-center network
    const auto& d = j["dcn"];
    std::cout << "  DCN           " << d["slices"].get<int64_t>() << " slices, " << d["hosts"].get<int64_t>()
              << " hosts: " << format_bytes(d["max_bytes_per_chip"]) << " per chip, "
              << format_bytes(d["max_bytes_per_host"]) << " per host; NICs " << pct(d["nic_busy_fraction"])
              << " busy; " << format_time(d["communication_s"]) << " of DCN communication, "
              << format_time(d["exposed_s"]) << " exposed" << (d["overlap"].get<bool>() ? "" : " (no overlap)")
              << "\n";
  }
  if (j.contains("pipeline")) {
    const auto& pl = j["pipeline"];
    std::cout << "  pipeline      " << pl["stages"].get<int64_t>() << " stages x " << pl["micro_batches"].get<int64_t>()
              << " micro-batches (" << pl["schedule"].get<std::string>() << (pl["remat"].get<bool>() ? ", remat" : "")
              << "): bubble " << pct(pl["bubble_fraction"]) << " (balanced and free communication: "
              << pct(pl["ideal_bubble_fraction"]) << ")\n";
  }
  if (j.contains("traffic")) {
    const auto& t = j["traffic"];
    std::cout << "  traffic       offered " << pct(t["offered_load"]) << " of a link, accepted "
              << pct(t["accepted_throughput"]) << ", average latency " << format_time(t["average_latency_s"])
              << "\n";
  }
  if (j.contains("faults")) {  // hardware.faults: who is slowest, and what waiting for it cost
    const auto& f = j["faults"];
    const auto& c = f["slowest_chip"];
    const auto& l = f["slowest_link"];
    std::cout << "  slowest chip  " << c["label"].get<std::string>() << ": " << format_time(c["compute_busy_s"])
              << " TensorCore busy (clock x" << c["clock_factor"].get<double>() << ", HBM x"
              << c["hbm_factor"].get<double>() << ")\n";
    std::cout << "  slowest link  " << l["label"].get<std::string>() << ": " << pct(l["utilization"]) << " busy, "
              << format_bytes(l["bytes"]) << " at " << format_bandwidth(l["bandwidth_Bps"]) << "\n";
    const nlohmann::json* worst = nullptr;
    for (const auto& w : f["collectives"])
      if (!worst || w["wait_s"].get<double>() > (*worst)["wait_s"].get<double>()) worst = &w;
    std::cout << "  waiting       " << format_time(f["collective_wait_s"])
              << " in all for the slowest member of each collective";
    if (worst && (*worst)["wait_s"].get<double>() > 0)
      std::cout << "; most " << format_time((*worst)["wait_s"]) << " at " << (*worst)["name"].get<std::string>()
                << " (chip " << (*worst)["slowest_member"].get<int64_t>() << " last)";
    std::cout << "\n";
  }
  if (j.contains("hlo_categories") && !j["hlo_categories"].empty()) {  // an imported module, as a profile groups it
    std::cout << "  by category   ";
    const auto& cats = j["hlo_categories"];
    for (size_t i = 0; i < std::min<size_t>(5, cats.size()); ++i)
      std::cout << (i ? ", " : "") << cats[i]["category"].get<std::string>() << " " << pct(cats[i]["self_fraction"]);
    std::cout << (cats.size() > 5 ? ", ..." : "") << " of the instructions' self time (hlo_category_stats.csv)\n";
  }
  // Ranked by busy time (the time a unit worked for the op); the time it waited is shown apart.
  std::vector<const nlohmann::json*> ops;
  for (const auto& o : j["ops"]) ops.push_back(&o);
  std::stable_sort(ops.begin(), ops.end(), [](const nlohmann::json* a, const nlohmann::json* b) {
    return (*a)["busy_s"].get<double>() > (*b)["busy_s"].get<double>();
  });
  if (!ops.empty()) std::cout << "  top ops by busy time (share of the step; time waiting apart):\n";
  for (size_t i = 0; i < std::min<size_t>(5, ops.size()); ++i) {
    const auto& o = *ops[i];
    const double busy = o["busy_s"], wait = o["wait_s"];
    std::cout << "    " << strprintf("%12s %6.1f %%  wait %10s  ", format_time(busy).c_str(), T > 0 ? 100 * busy / T : 0.0,
                                    format_time(wait).c_str())
              << o["name"].get<std::string>() << " (" << o["kind"].get<std::string>() << ", "
              << (o.contains("dcn") ? std::string("DCN") : o["unit"].get<std::string>()) << ")\n";
  }
  print_notes(notes, dir);
}

// A --memory-only run: the experiment, the result chip's peak and, for several roles, each role's.
void print_memory_summary(const nlohmann::json& j, const std::string& dir, const std::vector<std::string>& notes) {
  std::cout << "podsim: " << j["experiment"].get<std::string>() << " — " << j["workload"].get<std::string>()
            << " on " << j["chips"].get<int64_t>() << " x " << j["hardware"].get<std::string>() << " ("
            << j["strategy"].get<std::string>() << "), memory only: not simulated, no step time\n";
  if (j.contains("memory")) {
    const auto& m = j["memory"];
    const auto& a = m["at_peak"];
    std::cout << "  peak memory   " << format_bytes(m["peak_bytes"]) << " of " << format_bytes(m["capacity_bytes"])
              << " HBM (result chip; weights " << format_bytes(a["weights"]) << ", gradients "
              << format_bytes(a["gradients"]) << ", optimizer " << format_bytes(a["optimizer_state"])
              << ", activations " << format_bytes(a["activations"]) << ", temporaries "
              << format_bytes(a["temporaries"])
              << (a.value("weight_copies", 0.0) > 0 ? ", weight copies " + format_bytes(a["weight_copies"]) : "")
              << (a.value("kv_cache", 0.0) > 0 ? ", KV cache " + format_bytes(a["kv_cache"]) : "")
              << ")\n";
    std::cout << "  fits          " << (m["fits"].get<bool>() ? "yes, every role" : "** NO **") << "\n";
  }
  const auto& roles = j["roles"];
  if (roles.size() > 1) {
    // The roles with the highest peaks (a pipeline's stages differ; all of them are in summary.json).
    std::vector<const nlohmann::json*> rs;
    for (const auto& r : roles) rs.push_back(&r);
    std::stable_sort(rs.begin(), rs.end(), [](const nlohmann::json* a, const nlohmann::json* b) {
      return (*a)["peak_memory_bytes"].get<double>() > (*b)["peak_memory_bytes"].get<double>();
    });
    std::cout << "  highest peaks of " << roles.size() << " roles:\n";
    for (size_t i = 0; i < std::min<size_t>(5, rs.size()); ++i)
      std::cout << "    " << strprintf("%-12s %12s", (*rs[i])["role"].get<std::string>().c_str(),
                                       format_bytes((*rs[i])["peak_memory_bytes"]).c_str())
                << ((*rs[i])["fits"].get<bool>() ? "" : "  (does not fit)") << "\n";
  }
  print_notes(notes, dir);
}

// A serving run: the stream's latencies and throughputs (summary.json's serving object).
void print_serving_summary(const nlohmann::json& j, const std::string& dir) {
  const auto& s = j["serving"];
  auto ms = [](const nlohmann::json& x) { return format_time(x.get<double>()); };
  std::cout << "podsim: " << j["experiment"].get<std::string>() << " — serving " << j["workload"].get<std::string>()
            << " on " << j["chips"].get<int64_t>() << " x " << j["hardware"].get<std::string>() << " ("
            << j["strategy"].get<std::string>() << "), " << s["policy"].get<std::string>() << " batching\n";
  std::cout << "  requests      " << s["requests"].get<int64_t>() << " (" << s["input_tokens"].get<int64_t>()
            << " input, " << s["output_tokens"].get<int64_t>() << " output tokens) in " << ms(s["duration_s"])
            << "\n";
  std::cout << "  throughput    " << format_count(s["output_tokens_per_s"]) << " output tokens/s, "
            << format_count(s["total_tokens_per_s"]) << " total, " << strprintf("%.3f", s["requests_per_s"].get<double>())
            << " requests/s\n";
  for (const char* k : {"ttft_s", "tpot_s", "itl_s", "e2e_s"}) {
    const auto& x = s[k];
    std::cout << "  " << strprintf("%-14s", std::string(k).substr(0, std::string(k).size() - 2).c_str())
              << "mean " << ms(x["mean"]) << ", median " << ms(x["p50"]) << ", p90 " << ms(x["p90"]) << ", p99 "
              << ms(x["p99"]) << "\n";
  }
  for (const auto& [kind, it] : s["iterations"].items())
    if (it["count"].get<int64_t>() > 0)
      std::cout << "  " << strprintf("%-14s", kind.c_str()) << it["count"].get<int64_t>() << " iterations, "
                << ms(it["time_s"]) << "; MFU " << pct(it["mfu"]) << ", MBU " << pct(it["mbu"]) << "\n";
  std::cout << "  KV cache      peak " << format_count(s["kv_cache"]["peak_tokens"]) << " tokens, mean occupancy "
            << pct(s["kv_cache"]["mean_occupancy"]) << ", " << s["kv_cache"]["preemptions"].get<int64_t>()
            << " preemptions\n";
  std::cout << "  simulated     " << s["shapes_simulated"].get<int64_t>() << " iteration shapes"
            << (s["exact"].get<bool>() ? " (exact)" : "") << "\n";
  std::cout << "  results in " << dir << "/\n";
}

}  // namespace

int cmd_run(const RunArgs& a) {
  std::vector<std::string> sets = a.overrides;
  if (!a.trace_format.empty()) sets.push_back("run.trace.format=" + a.trace_format);
  LoadOptions lo;
  lo.overrides = sets;
  lo.single_device = a.single_device;
  Experiment e = load_experiment(a.experiment, lo);
  if (serving::serving_run(e.params)) {
    if (a.memory_only || a.single_device)
      throw Error(Err::Usage, std::string("a serving run (the experiment's serving section) simulates its iterations "
                                          "whole; run it without ") +
                                  (a.memory_only ? "--memory-only" : "--single-device"));
    RunOutcome r = serving::run_serving(e, {a.out, a.force, false, false});
    if (!a.quiet) print_serving_summary(nlohmann::json::parse(r.summary), r.out_dir);
    return 0;
  }
  RunOutcome r = run_experiment(e, {a.out, a.force, a.memory_only, !a.quiet});
  if (a.quiet) return 0;
  if (a.memory_only)
    print_memory_summary(nlohmann::json::parse(r.summary), r.out_dir, r.notes);
  else
    print_summary(nlohmann::json::parse(r.summary), r.out_dir, r.notes);
  return 0;
}

}  // namespace podsim::cli
