#include "hw/timing/vpu_timing.h"

#include <cmath>

namespace podsim {

int64_t vpu_cycles(const VpuConfig& vpu, const VectorWork& w) {
  if (w.elements <= 0) return 0;
  double vectors = std::ceil(w.elements / static_cast<double>(vpu.lanes * vpu.sublanes));
  // A reduction along rows of reduce_row elements: per vector of a row, one elementwise combine with the row's
  // next vector, and one cross-lane step for the row group's last (lanes / reduce_row of the vectors).
  const double lanes = static_cast<double>(vpu.lanes);
  const double cross = w.reduce_row > lanes ? lanes / w.reduce_row : 1.0;
  const double reduce = w.reduce * ((1.0 - cross) / static_cast<double>(vpu.alus) + cross * vpu.reduce_cost);
  double per_vector = w.simple / static_cast<double>(vpu.alus) + w.transcendental * vpu.transcendental_cost +
                      w.divide * vpu.divide_cost + reduce;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(vectors * per_vector)));
}

}  // namespace podsim
