#include "sim/engine/moe_report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "hw/chip/chip.h"
#include "hw/pod/pod.h"
#include "plan/shard_data.h"
#include "sim/engine/engine.h"
#include "workloads/moe_routing.h"

namespace podsim {
namespace {

// The logical value of step result `t` from the chips holding its shards; nullopt when no program binds it.
std::optional<Tensor> assemble(const Prepared& p, const Simulation& s, TensorId t) {
  const auto& chips = s.pod->chips();
  Tensor out(p.graph.tensor(t).shape);
  bool found = false;
  for (size_t c = 0; c < chips.size(); ++c) {
    const int role = chips[c]->role();
    if (role < 0) continue;
    for (const TensorBinding& b : p.plan.programs[role].results) {
      if (b.logical != t || !chips[c]->store().has(b.local)) continue;
      const Tensor& shard = chips[c]->store().get(b.local);
      if (b.spec.per_device || b.spec.is_replicated()) return shard;
      place_shard(out, shard, b.spec, p.plan.mesh, static_cast<int64_t>(c));
      found = true;
    }
  }
  if (!found) return std::nullopt;
  return out;
}

double r6(double x) { return std::isfinite(x) ? std::round(x * 1e6) / 1e6 : 0; }

}  // namespace

std::optional<nlohmann::ordered_json> moe_report(const Prepared& p, const Simulation& s) {
  using J = nlohmann::ordered_json;
  if (!p.exp.run.numeric) return std::nullopt;
  J layers = J::array();
  for (const Op& op : p.graph.ops()) {
    if (op.kind != OpKind::Top2Gating) continue;
    const TensorId routes = op.outputs[3];
    std::optional<Tensor> r = assemble(p, s, routes);
    if (!r) continue;
    const std::vector<int64_t>& shape = p.graph.tensor(op.outputs[0]).shape;  // [G, S, E, C]
    const int64_t E = shape[2];
    const ExpertLoad l = expert_load(*r, E);
    const double mean = static_cast<double>(l.routed) / static_cast<double>(E);
    const int64_t most = *std::max_element(l.per_expert.begin(), l.per_expert.end());
    std::string name = op.name;
    if (name.size() > 7 && name.compare(name.size() - 7, 7, ".gating") == 0) name.resize(name.size() - 7);
    layers.push_back({{"name", name},
                      {"experts", E},
                      {"groups", shape[0]},
                      {"group_size", shape[1]},
                      {"capacity", shape[3]},
                      {"tokens", l.tokens},
                      {"assignments_requested", l.requested},
                      {"assignments_routed", l.routed},
                      {"assignments_dropped", l.requested - l.routed},
                      {"dropped_tokens", l.dropped_tokens},
                      {"second_not_sampled", l.second_not_sampled},
                      {"max_load_over_mean", mean > 0 ? r6(static_cast<double>(most) / mean) : 0.0},
                      {"tokens_per_expert", l.per_expert},
                      {"first_choice_per_expert", l.first_choice}});
  }
  if (layers.empty()) return std::nullopt;
  return J{{"layers", layers}};
}

}  // namespace podsim
