#include "sim/engine/hlo_stats.h"

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>

#include "base/text.h"
#include "hw/pod/pod.h"
#include "hw/timing/vpu_timing.h"
#include "sim/engine/busy_time.h"
#include "sim/engine/engine.h"

namespace podsim {
namespace {

std::shared_ptr<const HloOpStats> compute(const Prepared& p, const Simulation& s) {
  const Chip& chip = *s.pod->chips()[p.plan.result_chip];
  if (chip.role() < 0) return nullptr;
  const Program& prog = p.plan.programs[chip.role()];
  if (prog.sources.empty()) return nullptr;
  const ExecProgram& ep = p.ctx->programs[chip.role()];
  const std::vector<double>& busy = result_op_busy(s, chip, ep.ops.size());
  const ChipConfig& cfg = p.exp.hardware.chip;
  const double hbm_bw = cfg.hbm.bandwidth, mxu_peak = cfg.peak_flops(),
               vpu_rate = cfg.vpu.elements_per_cycle() * cfg.clock * static_cast<double>(cfg.tensorcores);
  std::vector<HloOpStats::Row> rows(prog.sources.size());
  for (size_t i = 0; i < ep.ops.size(); ++i) {
    const ExecOp& e = ep.ops[i];
    const OpRecord& r = chip.log().ops[i];
    if (r.start < 0) continue;
    // The op's time shared among the instructions it runs, by each one's roofline estimate alone.
    std::map<int32_t, double> weight;
    double total = 0;
    for (OpId id : e.members) {
      const int32_t src = prog.source_of_op.at(id);
      const Op& op = prog.graph.op(id);
      double w = 1;
      if (!is_communication(op.kind)) {
        const OpCost c = op_cost(prog.graph, op);
        w = std::max({c.flops / (c.unit == Unit::Mxu ? mxu_peak : vpu_rate), (c.bytes_read + c.bytes_written) / hbm_bw,
                      1e-12});
      }
      weight[src] += w;
      total += w;
    }
    const double compute = static_cast<double>(r.busy_cycles) / cfg.clock, memory = (r.hbm_read + r.hbm_write) / hbm_bw;
    const std::string bound = e.unit == Unit::Ici ? "ICI" : compute >= memory ? "Compute" : "HBM";
    for (const auto& [src, w] : weight) {
      const double f = total > 0 ? w / total : 0;
      HloOpStats::Row& row = rows[src];
      ++row.occurrences;
      row.time += f * (r.end - r.start);
      row.self += f * busy[i];
      row.flops += f * e.flops;
      row.bytes += f * (r.hbm_read + r.hbm_write);
      row.bound[bound] += f * busy[i];
    }
  }
  auto st = std::make_shared<HloOpStats>();
  st->role = prog.role;
  std::vector<size_t> order;
  for (size_t k = 0; k < rows.size(); ++k)
    if (rows[k].occurrences > 0) {
      order.push_back(k);
      st->self += rows[k].self;
    }
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows[a].self > rows[b].self; });
  std::map<std::string, HloOpStats::Category> by_category;
  for (size_t k : order) {
    HloOpStats::Row row = std::move(rows[k]);
    row.category = prog.sources[k].category;
    row.name = prog.sources[k].name;
    row.opcode = prog.sources[k].opcode;
    HloOpStats::Category& c = by_category[row.category];
    c.name = row.category;
    ++c.instructions;
    c.add(row);
    st->rows.push_back(std::move(row));
  }
  for (auto& [name, c] : by_category) st->categories.push_back(std::move(c));  // by name
  std::stable_sort(st->categories.begin(), st->categories.end(),
                   [](const HloOpStats::Category& a, const HloOpStats::Category& b) { return a.self > b.self; });
  return st;
}

std::string field(const std::string& t) {
  if (t.find_first_of(",\"\n") == std::string::npos) return t;
  std::string q = "\"";
  for (char c : t) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

double share(double part, double all) { return all > 0 ? 100.0 * part / all : 0.0; }
double rate(double amount, double seconds) { return seconds > 0 ? amount / seconds : 0.0; }

}  // namespace

std::string HloOpStats::Figures::bound_by() const {
  std::string b = "-";
  double longest = -1;
  for (const auto& [name, t] : bound)
    if (t > longest) {
      longest = t;
      b = name;
    }
  return b;
}

void HloOpStats::Figures::add(const Figures& f) {
  occurrences += f.occurrences;
  time += f.time;
  self += f.self;
  flops += f.flops;
  bytes += f.bytes;
  for (const auto& [b, t] : f.bound) bound[b] += t;
}

const HloOpStats* hlo_op_stats(const Prepared& p, const Simulation& s) {
  if (!s.hlo_stats_done) {
    s.hlo_stats = compute(p, s);
    s.hlo_stats_done = true;
  }
  return s.hlo_stats.get();
}

std::string hlo_op_stats_csv(const HloOpStats& st) {
  std::string out =
      "Rank,Program id,HLO op category,HLO op name,HLO op text,#Occurrences,Total time (us),Avg. time (us),"
      "Total self time (us),Avg. self time (us),Total self time (%),Cumulative total self-time (%),Model GFLOP/s,"
      "Measured memory BW (GiB/s),Operational intensity (FLOPs/Byte),Bound by\n";
  double cumulative = 0;
  for (size_t rank = 0; rank < st.rows.size(); ++rank) {
    const HloOpStats::Row& row = st.rows[rank];
    cumulative += row.self;
    const double n = static_cast<double>(row.occurrences);
    out += strprintf("%zu,%s,%s,%s,%s,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%s\n", rank + 1,
                     field(st.role).c_str(), field(row.category).c_str(), field(row.name).c_str(),
                     field(row.opcode).c_str(), static_cast<long long>(row.occurrences), row.time * 1e6,
                     row.time * 1e6 / n, row.self * 1e6, row.self * 1e6 / n, share(row.self, st.self),
                     share(cumulative, st.self), rate(row.flops, row.self) / 1e9,
                     rate(row.bytes, row.self) / 1073741824.0, row.bytes > 0 ? row.flops / row.bytes : 0.0,
                     row.bound_by().c_str());
  }
  return out;
}

std::string hlo_category_stats_csv(const HloOpStats& st) {
  std::string out =
      "Rank,Program id,HLO op category,#Instructions,#Occurrences,Total time (us),Total self time (us),"
      "Total self time (%),Cumulative total self-time (%),Model GFLOP/s,Measured memory BW (GiB/s),"
      "Operational intensity (FLOPs/Byte),Bound by\n";
  double cumulative = 0;
  for (size_t rank = 0; rank < st.categories.size(); ++rank) {
    const HloOpStats::Category& c = st.categories[rank];
    cumulative += c.self;
    out += strprintf("%zu,%s,%s,%lld,%lld,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%s\n", rank + 1, field(st.role).c_str(),
                     field(c.name).c_str(), static_cast<long long>(c.instructions),
                     static_cast<long long>(c.occurrences), c.time * 1e6, c.self * 1e6, share(c.self, st.self),
                     share(cumulative, st.self), rate(c.flops, c.self) / 1e9, rate(c.bytes, c.self) / 1073741824.0,
                     c.bytes > 0 ? c.flops / c.bytes : 0.0, c.bound_by().c_str());
  }
  return out;
}

nlohmann::ordered_json hlo_categories_json(const HloOpStats& st) {
  nlohmann::ordered_json a = nlohmann::ordered_json::array();
  for (const HloOpStats::Category& c : st.categories)
    a.push_back({{"category", c.name},
                 {"instructions", c.instructions},
                 {"occurrences", c.occurrences},
                 {"time_s", c.time},
                 {"self_s", c.self},
                 {"self_fraction", st.self > 0 ? c.self / st.self : 0.0},
                 {"flops", c.flops},
                 {"hbm_bytes", c.bytes},
                 {"bound_by", c.bound_by()}});
  return a;
}

}  // namespace podsim
