#include "sim/report/serving_report.h"

#include <nlohmann/json.hpp>
#include <string>

#include "base/text.h"

namespace podsim {

namespace {

void rule(std::ostream& out) { out << std::string(78, '-') << "\n"; }
std::string pct(double f) { return strprintf("%6.1f %%", 100 * f); }
double num(const nlohmann::json& j, const char* k) { return j.contains(k) ? j[k].get<double>() : 0.0; }

}  // namespace

void print_serving_report(const nlohmann::json& j, std::ostream& out) {
  const nlohmann::json& s = j["serving"];
  out << "Serving run " << j.value("experiment", std::string("?")) << ": " << j.value("workload", std::string("?"))
      << " on " << j.value("chips", 0) << " x " << j.value("hardware", std::string("?")) << ", strategy "
      << j.value("strategy", std::string("?")) << ", " << s.value("policy", std::string("?")) << " batching\n";
  rule(out);
  out << strprintf("%-28s %lld (%lld input, %lld output tokens)\n", "requests",
                   static_cast<long long>(s.value("requests", 0LL)), static_cast<long long>(s.value("input_tokens", 0LL)),
                   static_cast<long long>(s.value("output_tokens", 0LL)));
  out << strprintf("%-28s %s (first request sent to the last token)\n", "duration",
                   format_time(num(s, "duration_s")).c_str());
  const nlohmann::json pc = s.value("per_chip", nlohmann::json::object());
  out << strprintf("%-28s %12s %12s\n", "throughput", "slice", "per chip");
  for (const char* k : {"output_tokens_per_s", "total_tokens_per_s", "requests_per_s"})
    out << strprintf("  %-26s %12s %12s\n", k, format_count(num(s, k)).c_str(), format_count(num(pc, k)).c_str());
  rule(out);
  out << strprintf("%-28s %12s %12s %12s %12s\n", "latency", "mean", "median", "p90", "p99");
  const char* what[][2] = {{"ttft_s", "time to first token"},
                           {"tpot_s", "time per output token"},
                           {"itl_s", "inter-token latency"},
                           {"e2e_s", "end to end"}};
  for (const auto& w : what) {
    if (!s.contains(w[0])) continue;
    const nlohmann::json& x = s[w[0]];
    out << strprintf("  %-26s %12s %12s %12s %12s\n", w[1], format_time(num(x, "mean")).c_str(),
                     format_time(num(x, "p50")).c_str(), format_time(num(x, "p90")).c_str(),
                     format_time(num(x, "p99")).c_str());
  }
  rule(out);
  out << strprintf("%-28s %8s %12s %12s %9s %9s\n", "iterations", "count", "time", "tokens", "MFU", "MBU");
  for (const char* k : {"prefill", "decode", "mixed"}) {
    if (!s["iterations"].contains(k) || s["iterations"][k].value("count", 0LL) == 0) continue;
    const nlohmann::json& it = s["iterations"][k];
    out << strprintf("  %-26s %8lld %12s %12s %9s %9s\n", k, static_cast<long long>(it.value("count", 0LL)),
                     format_time(num(it, "time_s")).c_str(), format_count(num(it, "tokens")).c_str(),
                     pct(num(it, "mfu")).c_str(), pct(num(it, "mbu")).c_str());
  }
  if (s.contains("batch"))
    out << strprintf("  %-26s %lld sequences in one iteration at most, of %lld slots\n", "batch",
                     static_cast<long long>(s["batch"].value("max_sequences", 0LL)),
                     static_cast<long long>(s["batch"].value("slots", 0LL)));
  if (s.contains("kv_cache")) {
    const nlohmann::json& kv = s["kv_cache"];
    rule(out);
    out << strprintf("KV cache (%s): %s tokens of %s at the peak, mean occupancy %.1f %%, %lld preemptions\n",
                     kv.value("kind", std::string("?")).c_str(), format_count(num(kv, "peak_tokens")).c_str(),
                     format_count(num(kv, "capacity_tokens")).c_str(), 100 * num(kv, "mean_occupancy"),
                     static_cast<long long>(kv.value("preemptions", 0LL)));
  }
  if (s.contains("disaggregated")) {
    const nlohmann::json& d = s["disaggregated"];
    const nlohmann::json& t = d["kv_transfer_s"];
    rule(out);
    out << strprintf("disaggregated: %lld prefill chips, %lld decode chips, prefills of %lld, link %s at %s\n",
                     static_cast<long long>(d.value("prefill_chips", 0LL)),
                     static_cast<long long>(d.value("decode_chips", 0LL)),
                     static_cast<long long>(d.value("prefill_batch", 0LL)), d.value("link", std::string("?")).c_str(),
                     format_bandwidth(num(d, "link_bandwidth_bytes_per_s")).c_str());
    out << strprintf("  %-26s %lld, %s in all; each mean %s, median %s, p99 %s\n", "KV cache transfers",
                     static_cast<long long>(d.value("kv_transfers", 0LL)),
                     format_bytes(num(d, "kv_transfer_bytes")).c_str(), format_time(num(t, "mean")).c_str(),
                     format_time(num(t, "p50")).c_str(), format_time(num(t, "p99")).c_str());
  }
  rule(out);
  out << strprintf("%-28s %lld%s (requests.csv: one row a request; iterations.csv: one row an iteration)\n",
                   "iteration shapes simulated", static_cast<long long>(s.value("shapes_simulated", 0LL)),
                   s.value("exact", false) ? " (exact)" : "");
}

}  // namespace podsim
