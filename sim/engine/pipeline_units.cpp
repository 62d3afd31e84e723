#include "sim/engine/pipeline_units.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "hw/chip/chip.h"
#include "hw/pod/pod.h"
#include "sim/engine/engine.h"

namespace podsim {
namespace {

using J = nlohmann::ordered_json;
using Span = std::pair<double, double>;

// Sorted, disjoint spans covering `v` (spans that touch merge).
std::vector<Span> merged(std::vector<Span> v) {
  std::sort(v.begin(), v.end());
  std::vector<Span> out;
  for (const Span& s : v) {
    if (!out.empty() && s.first <= out.back().second) out.back().second = std::max(out.back().second, s.second);
    else out.push_back(s);
  }
  return out;
}

// Whether `busy` (sorted, disjoint) covers [a, b] without a gap.
bool covered(const std::vector<Span>& busy, double a, double b) {
  auto it = std::upper_bound(busy.begin(), busy.end(), Span{a, 1e300});
  return it != busy.begin() && std::prev(it)->first <= a && std::prev(it)->second >= b;
}

}  // namespace

J pipeline_stage_units(const Prepared& p, const Simulation& s) {
  const PlanPipeline& pp = p.plan.pipeline;
  J stages = J::array();
  const auto& chips = s.pod->chips();
  for (size_t k = 0; k < pp.units.size(); ++k) {
    // Stage k is role k; its first chip, as for the stage's other figures (summary.json roles[]).
    const auto at = std::find(p.plan.role_of_chip.begin(), p.plan.role_of_chip.end(), static_cast<int32_t>(k));
    J list = J::array();
    if (at == p.plan.role_of_chip.end()) {
      stages.push_back(list);
      continue;
    }
    const Chip& chip = *chips[static_cast<size_t>(at - p.plan.role_of_chip.begin())];
    const ExecProgram& ep = p.ctx->programs[k];
    const std::vector<int32_t>& unit_of_op = pp.unit_of_op[k];
    // The ops of each unit: a fused kernel belongs to the unit of its first member that has one; transfers between
    // stages belong to none (a unit is done when what it sends leaves). And when the stage was busy at all: with
    // an op of any kind but a receive (a receive waits for the sender, whose op covers the transfer), as for
    // pipeline.bubble_fraction.
    std::vector<std::vector<Span>> ops_of(pp.units[k].size());
    std::vector<Span> busy;
    for (size_t i = 0; i < ep.ops.size(); ++i) {
      const OpRecord& r = chip.log().ops[i];
      if (r.start < 0 || ep.ops[i].kind == OpKind::Recv) continue;
      busy.push_back({r.start, r.end});
      if (ep.ops[i].kind == OpKind::Send) continue;
      int32_t u = -1;
      for (OpId m : ep.ops[i].members)
        if (u < 0 && static_cast<size_t>(m) < unit_of_op.size()) u = unit_of_op[m];
      if (u >= 0) ops_of[static_cast<size_t>(u)].push_back({r.start, r.end});
    }
    busy = merged(busy);
    for (size_t u = 0; u < pp.units[k].size(); ++u) {
      if (ops_of[u].empty()) continue;  // a unit without ops (a recomputation with nothing to recompute)
      // The unit's time split where the stage idled in between (e.g. the last stage slices its labels at once,
      // then waits for its first activations); the gaps where other work ran (a gradient accumulation) are its.
      std::vector<Span> spans;
      for (const Span& x : merged(ops_of[u])) {
        if (!spans.empty() && covered(busy, spans.back().second, x.first)) spans.back().second = x.second;
        else spans.push_back(x);
      }
      J e = {{"micro_batch", pp.units[k][u].micro_batch},
             {"pass", pipeline_pass_name(pp.units[k][u].pass)},
             {"start_s", spans.front().first},
             {"end_s", spans.back().second}};
      if (spans.size() > 1) {
        J parts = J::array();
        for (const Span& x : spans) parts.push_back({x.first, x.second});
        e["spans_s"] = parts;
      }
      list.push_back(e);
    }
    stages.push_back(list);
  }
  return stages;
}

}  // namespace podsim
