#include "hw/pod/pod_context.h"

#include "base/error.h"

namespace podsim {

CollectiveGroup PodContext::group(int64_t chip, const std::vector<std::string>& axes, int64_t block) const {
  return plan->mesh.group(chip, axes, block);
}

int64_t PodContext::p2p_peer(int64_t chip, const Op& op) const {
  if (op.attrs.axes.empty()) return op.attrs.peer;
  // Mesh-relative: the chip `shift` steps away along the op's mesh axes (a pipeline's next or previous stage).
  const CollectiveGroup g = group(chip, op.attrs.axes);
  const int64_t rank = g.rank + op.attrs.shift;
  if (rank < 0 || rank >= g.shape.size())
    throw Error(Err::Internal, "'" + op.name + "' on chip " + std::to_string(chip) + " has no peer " +
                                   std::to_string(op.attrs.shift) + " steps along its mesh axes");
  return g.chip_of(rank, torus);
}

}  // namespace podsim
