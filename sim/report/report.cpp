#include "sim/report/report.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "base/text.h"
#include "sim/report/serving_report.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

nlohmann::json load_summary(const std::string& dir) {
  SourceLocation w;
  w.file = dir;
  std::string path = dir + "/summary.json";
  std::ifstream f(path);
  if (!fs::is_directory(dir) || !f)
    throw Error(Err::NotARunDir, w,
                "'" + dir + "' is not a podsim run folder (no summary.json); give a folder written by podsim run");
  try {
    return nlohmann::json::parse(f);
  } catch (const std::exception& e) {
    throw Error(Err::NotARunDir, w, "'" + path + "' is not valid JSON: " + e.what());
  }
}

std::string pct(double f) { return strprintf("%6.1f %%", 100 * f); }

void rule(std::ostream& out) { out << std::string(78, '-') << "\n"; }

void print_memory_section(const nlohmann::json& j, std::ostream& out) {
  if (!j.contains("memory")) return;
  const auto& m = j["memory"];
  rule(out);
  out << "memory at the peak (op " << m.value("peak_op", std::string("-")) << ")\n";
  for (const char* k :
       {"weights", "gradients", "optimizer_state", "activations", "temporaries", "weight_copies", "kv_cache"})
    if ((std::string(k) != "weight_copies" && std::string(k) != "kv_cache") ||
        m["at_peak"].value(k, 0.0) > 0)  // mixed precision, inference steps only
      out << strprintf("  %-26s %s\n", k, format_bytes(m["at_peak"].value(k, 0.0)).c_str());
  out << strprintf("  %-26s %s of %s%s\n", "total", format_bytes(m.value("peak_bytes", 0.0)).c_str(),
                   format_bytes(m.value("capacity_bytes", 0.0)).c_str(),
                   m.value("fits", true) ? "" : "  (DOES NOT FIT)");
}

// A run stopped after the memory check (podsim run --memory-only): per role its peak, and the result chip's memory.
void print_memory_report(const nlohmann::json& j, std::ostream& out) {
  rule(out);
  out << "not simulated (podsim run --memory-only): memory figures only, no step time\n";
  if (j.contains("roles") && j["roles"].size() > 1) {
    rule(out);
    out << strprintf("%-14s %6s %11s %11s %11s %11s %11s\n", "role", "chips", "peak mem", "weights", "grads",
                     "optimizer", "activations");
    for (const auto& r : j["roles"]) {
      const auto& a = r["memory_at_peak"];
      out << strprintf("%-14s %6lld %11s %11s %11s %11s %11s%s\n", r.value("role", std::string()).c_str(),
                       static_cast<long long>(r.value("chips", 0LL)),
                       format_bytes(r.value("peak_memory_bytes", 0.0)).c_str(),
                       format_bytes(a.value("weights", 0.0)).c_str(), format_bytes(a.value("gradients", 0.0)).c_str(),
                       format_bytes(a.value("optimizer_state", 0.0)).c_str(),
                       format_bytes(a.value("activations", 0.0)).c_str(), r.value("fits", true) ? "" : "  (DOES NOT FIT)");
    }
  }
}

bool simulated(const nlohmann::json& j) { return j.value("simulated", true); }

}  // namespace

void print_report(const std::string& dir, std::ostream& out) {
  nlohmann::json j = load_summary(dir);
  if (j.contains("serving")) {  // a serving run: the stream's figures, not one step's
    print_serving_report(j, out);
    return;
  }
  if (!simulated(j)) {
    out << "Run " << j.value("experiment", std::string("?")) << ": " << j.value("workload", std::string("?"))
        << " on " << j.value("chips", 0) << " x " << j.value("hardware", std::string("?")) << ", strategy "
        << j.value("strategy", std::string("?")) << "\n";
    print_memory_report(j, out);
    print_memory_section(j, out);
    return;
  }
  double T = j.value("step_time_s", 0.0);
  out << "Run " << j.value("experiment", std::string("?")) << ": " << j.value("workload", std::string("?")) << " on "
      << j.value("chips", 0) << " x " << j.value("hardware", std::string("?")) << ", strategy "
      << j.value("strategy", std::string("?")) << "\n";
  rule(out);
  out << strprintf("%-28s %s\n", "step time", format_time(T).c_str());
  out << strprintf("%-28s %lld\n", "cycles", static_cast<long long>(j.value("cycles", 0LL)));
  out << strprintf("%-28s %s  (model FLOPs: the step's matmuls, each once)\n", "MFU", pct(j.value("mfu", 0.0)).c_str());
  if (j.contains("hfu"))
    out << strprintf("%-28s %s  (hardware FLOPs: what the MXUs executed)\n", "HFU", pct(j.value("hfu", 0.0)).c_str());
  const double model = j.value("model_flops", 0.0), hardware = j.value("hardware_flops", 0.0);
  out << strprintf("%-28s %sFLOP (model %sFLOP", "FLOPs", format_count(j.value("flops", 0.0)).c_str(),
                   format_count(model).c_str());
  if (j.contains("hardware_flops"))
    out << ", hardware " << format_count(hardware) << "FLOP"
        << (model > 0 ? strprintf(": %.2f x the model's", hardware / model) : std::string());
  out << ")\n";
  if (j.value("recompute_flops", 0.0) > 0 || j.value("recompute_s", 0.0) > 0)
    out << strprintf("%-28s %s  (recomputed ops busy on the busiest chip; %sFLOP on the MXUs)\n", "recompute",
                     format_time(j.value("recompute_s", 0.0)).c_str(),
                     format_count(j.value("recompute_flops", 0.0)).c_str());
  if (j.contains("samples_per_s"))
    out << strprintf("%-28s %s samples/s%s\n", "throughput", format_count(j.value("samples_per_s", 0.0)).c_str(),
                     j.contains("tokens_per_s")
                         ? (", " + format_count(j.value("tokens_per_s", 0.0)) + " tokens/s").c_str()
                         : "");
  rule(out);
  out << "utilization (busy fraction, averaged over active chips)\n";
  for (const char* u : {"mxu", "vpu", "hbm", "ici"})
    out << strprintf("  %-26s %s\n", u, pct(j["busy_fraction"].value(u, 0.0)).c_str());
  out << strprintf("  %-26s %s of %s peak\n", "HBM achieved bandwidth",
                   format_bandwidth(j["hbm"].value("achieved_bandwidth_Bps", 0.0)).c_str(),
                   format_bandwidth(j["hbm"].value("peak_bandwidth_Bps", 0.0)).c_str());
  if (j.contains("fusion")) {
    const auto& f = j["fusion"];
    rule(out);
    out << strprintf("fusion (%s): %lld fusions of %lld ops; %lld kernels in all\n",
                     f.value("mode", std::string()).c_str(), static_cast<long long>(f.value("fusions", 0LL)),
                     static_cast<long long>(f.value("fused_ops", 0LL)), static_cast<long long>(f.value("exec_ops", 0LL)));
    for (const char* k : {"loop", "output", "reduction"})
      out << strprintf("  %-26s %lld\n", k, static_cast<long long>(f["by_kind"].value(k, 0LL)));
  }
  if (j.contains("memory_benchmark")) {
    const auto& m = j["memory_benchmark"];
    rule(out);
    out << strprintf("memory benchmark (%s, %s requests): %s, %s of peak; idle latency %s row hit, %s row miss\n",
                     m.value("pattern", std::string()).c_str(), format_bytes(m.value("request_bytes", 0.0)).c_str(),
                     format_bandwidth(m.value("achieved_bandwidth_Bps", 0.0)).c_str(),
                     pct(m.value("efficiency", 0.0)).c_str(), format_time(m.value("latency_row_hit_s", 0.0)).c_str(),
                     format_time(m.value("latency_row_miss_s", 0.0)).c_str());
  }
  if (j.contains("time_breakdown")) {
    const auto& t = j["time_breakdown"];
    rule(out);
    out << "time on the result chip\n";
    out << strprintf("  %-26s %s\n", "compute", format_time(t.value("compute_s", 0.0)).c_str());
    out << strprintf("  %-26s %s\n", "communication", format_time(t.value("communication_s", 0.0)).c_str());
    out << strprintf("  %-26s %s\n", "exposed communication",
                     format_time(t.value("exposed_communication_s", 0.0)).c_str());
    out << strprintf("  %-26s %s (%s)\n", "idle (bubble)", format_time(t.value("idle_s", 0.0)).c_str(),
                     pct(t.value("idle_fraction", 0.0)).c_str());
  }
  if (j.contains("dcn")) {  // several slices: the data-center network (docs/outputs.md, dcn)
    const auto& d = j["dcn"];
    rule(out);
    out << strprintf("data-center network: %lld slices, %lld hosts of %lld chips, %s per host and direction\n",
                     static_cast<long long>(d.value("slices", 0LL)), static_cast<long long>(d.value("hosts", 0LL)),
                     static_cast<long long>(d.value("chips_per_host", 0LL)),
                     format_bandwidth(d.value("bandwidth_per_host_Bps", 0.0)).c_str());
    out << strprintf("  %-26s %s per chip, %s per host (the most)\n", "sent over the DCN",
                     format_bytes(d.value("max_bytes_per_chip", 0.0)).c_str(),
                     format_bytes(d.value("max_bytes_per_host", 0.0)).c_str());
    out << strprintf("  %-26s %s\n", "NICs busy", pct(d.value("nic_busy_fraction", 0.0)).c_str());
    out << strprintf("  %-26s %s, %s exposed%s\n", "DCN communication",
                     format_time(d.value("communication_s", 0.0)).c_str(), format_time(d.value("exposed_s", 0.0)).c_str(),
                     d.value("overlap", true) ? "" : " (run.dcn_overlap off)");
  }
  if (j.contains("roles") && !j["roles"].empty() && j.value("active_chips", 1) > 1) {
    // Per role (the SPMD step, or each pipeline stage), on its first chip.
    rule(out);
    out << strprintf("%-14s %6s %11s %11s %11s %11s %7s %11s\n", "role", "chips", "compute", "comm", "exposed", "idle",
                     "MXU", "peak mem");
    for (const auto& r : j["roles"])
      out << strprintf("%-14s %6lld %11s %11s %11s %11s %7s %11s%s\n", r.value("role", std::string()).c_str(),
                       static_cast<long long>(r.value("chips", 0LL)), format_time(r.value("compute_s", 0.0)).c_str(),
                       format_time(r.value("communication_s", 0.0)).c_str(),
                       format_time(r.value("exposed_communication_s", 0.0)).c_str(),
                       format_time(r.value("idle_s", 0.0)).c_str(), pct(r.value("mxu_busy_fraction", 0.0)).c_str(),
                       format_bytes(r.value("peak_memory_bytes", 0.0)).c_str(),
                       r.value("fits", true) ? "" : "  (DOES NOT FIT)");
    if (j.contains("communication"))
      out << strprintf("exposed communication: %s of the step (mean over chips); pod MFU %s\n",
                       pct(j["communication"].value("exposed_fraction", 0.0)).c_str(), pct(j.value("mfu", 0.0)).c_str());
    if (j.contains("pipeline"))
      out << strprintf("pipeline: %lld stages x %lld micro-batches (%s%s): bubble %s, GPipe's (K-1)/(M+K-1) %s\n",
                       static_cast<long long>(j["pipeline"].value("stages", 0LL)),
                       static_cast<long long>(j["pipeline"].value("micro_batches", 0LL)),
                       j["pipeline"].value("schedule", std::string()).c_str(),
                       j["pipeline"].value("remat", false) ? ", remat" : "",
                       pct(j["pipeline"].value("bubble_fraction", 0.0)).c_str(),
                       pct(j["pipeline"].value("ideal_bubble_fraction", 0.0)).c_str());
  }
  print_memory_section(j, out);
  if (j.contains("collectives")) {
    // One row per communication op of the result chip, in issue order: what it moves, over which mesh axes
    // ("all": every axis), and the chips of its group as laid out on the torus (a transfer's peer).
    rule(out);
    auto fit = [](std::string s, size_t w) { return s.size() > w ? s.substr(0, w - 3) + "..." : s; };
    out << strprintf("%-16s %-24s %-9s %10s %10s %10s  %s\n", "collectives", "tensor", "mesh axis", "per chip", "time",
                     "bandwidth", "group");
    size_t shown = 0;
    for (const auto& c : j["collectives"]) {
      if (++shown > 20) {
        out << strprintf("  ... and %zu more (summary.json collectives)\n", j["collectives"].size() - 20);
        break;
      }
      std::vector<std::string> axes = c.value("axes", std::vector<std::string>{});
      out << strprintf("  %-14s %-24s %-9s %10s %10s %10s  %s\n", fit(c.value("kind", std::string()), 14).c_str(),
                       fit(c.value("tensor", std::string("-")), 24).c_str(),
                       fit(axes.empty() ? "all" : join(axes, ","), 9).c_str(),
                       format_bytes(c.value("bytes_per_chip", 0.0)).c_str(),
                       format_time(c.value("time_s", 0.0)).c_str(),
                       format_bandwidth(c.value("algorithm_bandwidth_Bps", 0.0)).c_str(),
                       c.value("group", std::string("-")).c_str());
    }
    if (j.contains("combined_collectives") && j["combined_collectives"].value("collectives", 0) > 0) {
      const auto& k = j["combined_collectives"];
      out << strprintf("  gradient bucketing: %lld collectives carry %lld gradient reductions (run.combine_threshold "
                       "%s)\n",
                       static_cast<long long>(k.value("collectives", 0)), static_cast<long long>(k.value("tensors", 0)),
                       format_bytes(k.value("threshold_bytes", 0.0)).c_str());
    }
  }
  if (j.contains("faults")) {  // hardware.faults: the slowest chip and link, the longest waits for a slowest member
    const auto& f = j["faults"];
    const auto& c = f["slowest_chip"];
    const auto& l = f["slowest_link"];
    rule(out);
    out << strprintf("faults: %lld slow chips, %lld links down (links.png: utilization per link)\n",
                     static_cast<long long>(f.value("slow_chips", 0)), static_cast<long long>(f.value("down_links", 0)));
    out << strprintf("  slowest chip  %s: %s TensorCore busy (clock x%g, HBM x%g)\n",
                     c.value("label", std::string()).c_str(), format_time(c.value("compute_busy_s", 0.0)).c_str(),
                     c.value("clock_factor", 1.0), c.value("hbm_factor", 1.0));
    out << strprintf("  slowest link  %s: %s busy, %s at %s\n", l.value("label", std::string()).c_str(),
                     pct(l.value("utilization", 0.0)).c_str(), format_bytes(l.value("bytes", 0.0)).c_str(),
                     format_bandwidth(l.value("bandwidth_Bps", 0.0)).c_str());
    std::vector<nlohmann::json> w(f["collectives"].begin(), f["collectives"].end());
    std::stable_sort(w.begin(), w.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
      return a.value("wait_s", 0.0) > b.value("wait_s", 0.0);
    });
    out << strprintf("  waiting for the slowest member: %s in all\n", format_time(f.value("collective_wait_s", 0.0)).c_str());
    for (size_t i = 0; i < std::min<size_t>(5, w.size()) && w[i].value("wait_s", 0.0) > 0; ++i)
      out << strprintf("    %12s  %s (chip %lld last)\n", format_time(w[i].value("wait_s", 0.0)).c_str(),
                       w[i].value("name", std::string()).c_str(),
                       static_cast<long long>(w[i].value("slowest_member", int64_t{-1})));
  }
  if (j.contains("traffic")) {
    const auto& t = j["traffic"];
    rule(out);
    out << strprintf("traffic (%s): offered %s, accepted %s, average latency %s\n",
                     t.value("pattern", std::string()).c_str(), pct(t.value("offered_load", 0.0)).c_str(),
                     pct(t.value("accepted_throughput", 0.0)).c_str(),
                     format_time(t.value("average_latency_s", 0.0)).c_str());
  }
  if (j.contains("hlo_categories") && !j["hlo_categories"].empty()) {  // an imported module, as a profile groups it
    rule(out);
    out << strprintf("HLO op categories %29s %8s %12s %12s  %s\n", "self time", "share", "instructions", "occurrences",
                     "bound by");
    for (const auto& c : j["hlo_categories"])
      out << strprintf("  %-36s %10s %7.1f%% %12lld %12lld  %s\n", c.value("category", std::string()).c_str(),
                       format_time(c.value("self_s", 0.0)).c_str(), 100 * c.value("self_fraction", 0.0),
                       static_cast<long long>(c.value("instructions", int64_t{0})),
                       static_cast<long long>(c.value("occurrences", int64_t{0})),
                       c.value("bound_by", std::string()).c_str());
  }
  // Ranked by busy time (a unit worked for the op); waiting (for a peer, for links or HBM busy with others' work)
  // apart. A summary without busy times (an older podsim) counts the whole span as busy.
  auto wall = [](const nlohmann::json& o) { return (o.value("end_ns", 0.0) - o.value("start_ns", 0.0)) * 1e-9; };
  auto busy = [&](const nlohmann::json& o) { return o.value("busy_s", wall(o)); };
  std::vector<nlohmann::json> ops(j["ops"].begin(), j["ops"].end());
  std::stable_sort(ops.begin(), ops.end(),
                   [&](const nlohmann::json& a, const nlohmann::json& b) { return busy(a) > busy(b); });
  if (!ops.empty()) {
    rule(out);
    out << strprintf("top ops by busy time %26s %8s %10s %10s %11s\n", "busy", "share", "wait", "cycles", "HBM bytes");
    for (size_t i = 0; i < std::min<size_t>(10, ops.size()); ++i) {
      const auto& o = ops[i];
      const double d = busy(o), w = o.value("wait_s", 0.0);
      const std::string unit = o.contains("dcn") ? std::string("DCN") : o.value("unit", std::string());
      std::string name = o.value("name", std::string()) + " (" + unit + ")";
      if (name.size() > 36) name = name.substr(0, 33) + "...";
      out << strprintf("  %-36s %10s %7.1f%% %10s %10lld %11s\n", name.c_str(), format_time(d).c_str(),
                       T > 0 ? 100 * d / T : 0.0, format_time(w).c_str(), static_cast<long long>(o.value("cycles", 0LL)),
                       format_bytes(o.value("bytes", 0.0)).c_str());
    }
  }
}

}  // namespace podsim
