#include "plan/plan.h"

#include "base/error.h"

namespace podsim {

void validate_plan(const Plan& plan, const ModelGraph& logical, int64_t chips) {
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
  if (plan.mesh.devices() != chips)
    broken("the mesh has " + std::to_string(plan.mesh.devices()) + " devices for " + std::to_string(chips) + " chips");
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
    }
    for (const auto* list : {&p.inputs, &p.results})
      for (const TensorBinding& b : *list) {
        if (b.local < 0 || static_cast<size_t>(b.local) >= g.num_tensors() || b.logical < 0 ||
            static_cast<size_t>(b.logical) >= logical.num_tensors())
          broken("program '" + p.role + "' binds a tensor out of range");
        const TensorInfo& lt = g.tensor(b.local);
        const TensorInfo& gt = logical.tensor(b.logical);
        if (b.spec.is_partial()) broken("binding of '" + lt.name + "' is partial");
        if (b.spec.per_device) {
          if (lt.shape != gt.shape) broken("per-device binding of '" + lt.name + "' changes its shape");
          continue;
        }
        if (b.spec.rank() != gt.shape.size())
          broken("binding of '" + lt.name + "' has a spec of rank " + std::to_string(b.spec.rank()) + " for " +
                 gt.shape_text());
        if (local_shape(gt.shape, b.spec, plan.mesh) != lt.shape)
          broken("local tensor '" + lt.name + "' " + lt.shape_text() + " does not match " + gt.name + " " +
                 gt.shape_text() + " sharded " + b.spec.text());
        for (const auto& a : b.spec.axes())
          if (plan.mesh.axis_index(a) < 0) broken("binding of '" + lt.name + "' names unknown mesh axis '" + a + "'");
      }
  }
}

}  // namespace podsim
