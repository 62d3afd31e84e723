#include "hw/pod/pod_context.h"

namespace podsim {

CollectiveGroup PodContext::group(int64_t chip, const std::vector<std::string>& axes) const {
  return plan->mesh.group(chip, axes);
}

}  // namespace podsim
