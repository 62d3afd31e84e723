// strategy.name: single_device — the whole step on chip 0; every other chip of the pod idles. The baseline every
// other strategy is compared with, and the placement whose numerics are the reference.
#include "base/error.h"
#include "strategies/i_strategy.h"

namespace podsim {
namespace {

class SingleDevice : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override {
    for (const Op& op : g.ops())
      if (is_communication(op.kind))
        throw Error(Err::StrategyMismatch, exp.params.where("workload.model"),
                    "workload '" + exp.workload + "' communicates between chips (op '" + op.name +
                        "'); single_device places the step on one chip. Use strategy.name: replicate (or auto)",
                    "strategy.name");
    Plan p;
    p.strategy = "single_device";
    p.mesh = Mesh::torus_axes(Torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices));
    Program prog;
    prog.role = "device";
    prog.graph = g;
    prog.order = g.topological_order();
    // The program is the logical step itself: every tensor is its own logical value, whole.
    for (size_t t = 0; t < g.num_tensors(); ++t) {
      TensorBinding b{static_cast<TensorId>(t), static_cast<TensorId>(t), ShardSpec::replicated(g.tensor(t).shape.size())};
      (g.producer(static_cast<TensorId>(t)) < 0 ? prog.inputs : prog.results).push_back(b);
    }
    p.programs.push_back(std::move(prog));
    p.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), -1);
    p.role_of_chip[0] = 0;
    return p;
  }
};

PODSIM_REGISTER_STRATEGY(SingleDevice, "single_device", "The whole step on chip 0; other chips idle");

}  // namespace
}  // namespace podsim
