#include "strategies/plan.h"

#include "sim/common/error.h"

namespace podsim {

int64_t Mesh::devices() const {
  int64_t n = 1;
  for (auto s : axis_sizes) n *= s;
  return n;
}

int Mesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < axis_names.size(); ++i)
    if (axis_names[i] == name) return static_cast<int>(i);
  return -1;
}

void validate_plan(const Plan& plan, int64_t chips) {
  auto broken = [&](const std::string& what) {
    throw Error(Err::Internal, "strategy '" + plan.strategy + "' returned an invalid plan: " + what);
  };
  if (static_cast<int64_t>(plan.role_of_chip.size()) != chips)
    broken("role_of_chip has " + std::to_string(plan.role_of_chip.size()) + " entries for " + std::to_string(chips) +
           " chips");
  for (int32_t r : plan.role_of_chip)
    if (r < -1 || r >= static_cast<int32_t>(plan.programs.size())) broken("a chip has role " + std::to_string(r));
  if (plan.result_chip < 0 || plan.result_chip >= chips || plan.role_of_chip[plan.result_chip] < 0)
    broken("the result chip " + std::to_string(plan.result_chip) + " runs no program");
  if (plan.mesh.axis_names.size() != plan.mesh.axis_sizes.size() ||
      plan.mesh.axis_names.size() != plan.mesh.axis_dim.size())
    broken("mesh axis names, sizes and dimensions differ in length");
  for (const Program& p : plan.programs) {
    const ModelGraph& g = p.graph;
    if (p.order.size() != g.num_ops()) broken("program '" + p.role + "' orders " + std::to_string(p.order.size()) +
                                              " of its " + std::to_string(g.num_ops()) + " ops");
    std::vector<int> pos(g.num_ops(), -1);
    for (size_t i = 0; i < p.order.size(); ++i) {
      OpId id = p.order[i];
      if (id < 0 || static_cast<size_t>(id) >= g.num_ops() || pos[id] >= 0)
        broken("program '" + p.role + "' lists op " + std::to_string(id) + " twice or out of range");
      pos[id] = static_cast<int>(i);
    }
    for (size_t id = 0; id < g.num_ops(); ++id) {
      for (OpId pred : g.predecessors(static_cast<OpId>(id)))
        if (pos[pred] > pos[id]) broken("program '" + p.role + "' issues '" + g.op(id).name + "' before its input");
      const Op& op = g.op(static_cast<OpId>(id));
      for (const auto& a : op.attrs.axes)
        if (plan.mesh.axis_index(a) < 0) broken("op '" + op.name + "' communicates over unknown mesh axis '" + a + "'");
      if ((op.kind == OpKind::Send || op.kind == OpKind::Recv) && (op.attrs.peer < 0 || op.attrs.peer >= chips))
        broken("op '" + op.name + "' names peer chip " + std::to_string(op.attrs.peer));
    }
  }
}

}  // namespace podsim
