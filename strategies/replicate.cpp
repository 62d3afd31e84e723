// strategy.name: replicate — every chip runs the same program, as written. The mesh is the torus itself (axes
// x, y, z), so communication ops in the graph (the collective and traffic microbenchmarks) span torus dimensions.
// A training step under replicate is computed independently on every chip (no gradient exchange).
#include "strategies/i_strategy.h"

namespace podsim {
namespace {

class Replicate : public IStrategy {
 public:
  Plan plan(const ModelGraph& g, const Experiment& exp) const override {
    Plan p;
    p.strategy = "replicate";
    for (size_t d = 0; d < exp.hardware.pod.dims.size(); ++d) {
      p.mesh.axis_names.push_back(std::string(1, "xyz"[d]));
      p.mesh.axis_sizes.push_back(exp.hardware.pod.dims[d]);
      p.mesh.axis_dim.push_back(static_cast<int>(d));
    }
    Program prog;
    prog.role = "replica";
    prog.graph = g;
    prog.order = g.topological_order();
    p.programs.push_back(std::move(prog));
    p.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), 0);
    return p;
  }
};

PODSIM_REGISTER_STRATEGY(Replicate, "replicate", "Every chip runs the same program as written (mesh = torus axes)");

}  // namespace
}  // namespace podsim
