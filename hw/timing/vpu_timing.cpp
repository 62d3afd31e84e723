#include "hw/timing/vpu_timing.h"

#include <cmath>

namespace podsim {

int64_t vpu_cycles(const VpuConfig& vpu, const VectorWork& w) {
  if (w.elements <= 0) return 0;
  double vectors = std::ceil(w.elements / static_cast<double>(vpu.lanes * vpu.sublanes));
  double per_vector = w.simple / static_cast<double>(vpu.alus) + w.transcendental * vpu.transcendental_cost +
                      w.divide * vpu.divide_cost + w.reduce * vpu.reduce_cost;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(vectors * per_vector)));
}

}  // namespace podsim
