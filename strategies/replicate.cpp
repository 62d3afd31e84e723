// strategy.name: replicate — every chip runs the same program, as written. The mesh is the torus itself (axes
// x, y, z), so communication ops in the graph (the collective and traffic microbenchmarks) span torus dimensions.
// Each chip draws its own inputs (per-device values: chip 0 draws the reference executor's), and a training step
// is computed independently on every chip (no gradient exchange). Results are the result chip's own tensors.
#include "strategies/i_strategy.h"

namespace podsim {
namespace {

class Replicate : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override {
    Plan p;
    p.strategy = "replicate";
    p.mesh = Mesh::torus_axes(Torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices));
    Program prog;
    prog.role = "replica";
    prog.graph = g;
    prog.order = g.topological_order();
    ShardSpec own;
    own.per_device = true;
    for (size_t t = 0; t < g.num_tensors(); ++t) {
      TensorBinding b{static_cast<TensorId>(t), static_cast<TensorId>(t), own};
      (g.producer(static_cast<TensorId>(t)) < 0 ? prog.inputs : prog.results).push_back(b);
    }
    p.programs.push_back(std::move(prog));
    p.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), 0);
    return p;
  }
};

PODSIM_REGISTER_STRATEGY(Replicate, "replicate", "Every chip runs the same program as written (mesh = torus axes)");

}  // namespace
}  // namespace podsim
