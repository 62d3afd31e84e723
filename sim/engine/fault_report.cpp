#include "sim/engine/fault_report.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>

#include "hw/pod/pod.h"
#include "sim/engine/engine.h"

namespace podsim {
namespace {

using J = nlohmann::ordered_json;

double r6(double x) { return std::isfinite(x) ? std::round(x * 1e6) / 1e6 : 0; }
double ps(double s) { return std::round(s * 1e12) / 1e12; }

}  // namespace

std::optional<J> fault_report(const Prepared& p, const Simulation& s) {
  const FaultConfig& f = p.exp.hardware.faults;
  const ParamSet& ps_ = p.exp.params;
  if (!f.any() && !(ps_.has("hardware.faults") && !ps_.strings("hardware.faults").empty())) return std::nullopt;
  const Torus& t = p.ctx->torus;
  const std::vector<Chip*>& chips = s.pod->chips();
  const double T = s.step_time;
  const ChipConfig& cfg = p.exp.hardware.chip;
  J out;
  J jc = J::array(), jl = J::array();
  for (const ChipFault& c : f.chips)
    jc.push_back({{"chip", c.chip}, {"label", t.chip_label(c.chip)}, {"clock_factor", c.clock}, {"hbm_factor", c.hbm}});
  for (const LinkFault& l : f.links)
    jl.push_back({{"chip", l.chip}, {"direction", Torus::direction_name(l.dir)}, {"to", t.neighbor(l.chip, l.dir)},
                  {"bandwidth_factor", l.bandwidth}, {"down", l.down}});
  int64_t slow_chips = 0;
  for (const ChipFault& c : f.chips) slow_chips += c.clock < 1 || c.hbm < 1;
  out["slow_chips"] = slow_chips;
  out["down_links"] = static_cast<int64_t>(std::count_if(f.links.begin(), f.links.end(), [](const LinkFault& l) { return l.down; }));
  out["chips"] = jc;
  out["links"] = jl;

  // The slowest chip: the most TensorCore busy time (MXU and VPU seconds per core).
  int64_t slow = 0;
  double slow_busy = -1;
  for (int64_t c = 0; c < t.chips(); ++c) {
    const ChipLog& l = chips[c]->log();
    const double busy = (l.mxu_busy + l.vpu_busy) / static_cast<double>(cfg.tensorcores);
    if (busy > slow_busy + 1e-15) {
      slow_busy = busy;
      slow = c;
    }
  }
  const ChipFault* sf = f.chip(slow);
  out["slowest_chip"] = {{"chip", slow}, {"label", t.chip_label(slow)}, {"compute_busy_s", ps(slow_busy)},
                         {"clock_factor", sf ? sf->clock : 1.0}, {"hbm_factor", sf ? sf->hbm : 1.0}};

  // Link utilization per chip and direction; the slowest link is the busiest.
  J util = J::array();
  int64_t link_chip = 0;
  int link_dir = 0;
  double link_busy = -1;
  for (int64_t c = 0; c < t.chips(); ++c) {
    const ChipLog& l = chips[c]->log();
    J row = J::array();
    for (int d = 0; d < t.directions(); ++d) {
      const double busy = d < static_cast<int>(l.link_busy.size()) ? l.link_busy[d] : 0;
      row.push_back(r6(T > 0 ? busy / T : 0));
      if (t.neighbor(c, d) >= 0 && busy > link_busy + 1e-15) {
        link_busy = busy;
        link_chip = c;
        link_dir = d;
      }
    }
    util.push_back(row);
  }
  const LinkFault* lf = f.link(link_chip, link_dir);
  const ChipLog& ll = chips[link_chip]->log();
  out["slowest_link"] = {
      {"chip", link_chip}, {"direction", Torus::direction_name(link_dir)}, {"to", t.neighbor(link_chip, link_dir)},
      {"label", t.chip_label(link_chip) + " " + Torus::direction_name(link_dir)},
      {"bandwidth_Bps", p.exp.hardware.ici.link_bandwidth * (lf ? lf->bandwidth : 1.0)},
      {"down", lf ? lf->down : false},
      {"bytes", ll.link_bytes.empty() ? 0.0 : ll.link_bytes[link_dir]},
      {"busy_s", ps(std::max(0.0, link_busy))},
      {"utilization", r6(T > 0 ? link_busy / T : 0)}};
  std::vector<std::string> dirs;
  for (int d = 0; d < t.directions(); ++d) dirs.push_back(Torus::direction_name(d));
  out["link_utilization"] = {{"dims", t.dims()}, {"directions", dirs}, {"per_chip", util}};

  // Per collective (per role, in program order): the time between its first and its last member joining, the
  // largest over its groups; the last to join is its slowest member.
  J waits = J::array();
  double waited = 0;
  for (size_t role = 0; role < p.ctx->programs.size(); ++role) {
    const ExecProgram& ep = p.ctx->programs[role];
    const ModelGraph& g = p.plan.programs[role].graph;
    for (size_t i = 0; i < ep.ops.size(); ++i) {
      if (ep.ops[i].unit != Unit::Ici) continue;
      const Op& op = g.op(ep.ops[i].members.front());
      if (op.kind == OpKind::Send || op.kind == OpKind::Recv || op.kind == OpKind::Traffic) continue;
      struct Span {
        double first = 1e300, last = -1;
        int64_t slowest = -1;
      };
      std::map<int64_t, Span> groups;  // by the group's rank-0 chip
      for (int64_t c = 0; c < t.chips(); ++c) {
        if (p.plan.role_of_chip[c] != static_cast<int>(role)) continue;
        const double start = chips[c]->log().ops[i].start;
        Span& sp = groups[p.ctx->group(c, op.attrs.axes).chip_of(0, t)];
        sp.first = std::min(sp.first, start);
        if (start > sp.last) {
          sp.last = start;
          sp.slowest = c;
        }
      }
      double wait = 0;
      int64_t slowest = -1;
      for (const auto& [leader, sp] : groups)
        if (sp.last - sp.first > wait || slowest < 0) {
          wait = sp.last - sp.first;
          slowest = sp.slowest;
        }
      waited += wait;
      waits.push_back({{"name", op.name}, {"kind", op_kind_name(op.kind)}, {"wait_s", ps(wait)},
                       {"slowest_member", slowest}});
    }
  }
  out["collective_wait_s"] = ps(waited);
  out["collectives"] = waits;
  return out;
}

}  // namespace podsim
