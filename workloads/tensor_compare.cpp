#include "workloads/tensor_compare.h"

#include <algorithm>
#include <cmath>

namespace podsim {

TensorDiff compare_tensors(const Tensor& a, const Tensor& b) {
  TensorDiff d;
  if (a.shape != b.shape || a.data.size() != b.data.size()) {
    d.shape_differs = true;
    d.rel_norm = d.max_rel = INFINITY;
    return d;
  }
  double diff2 = 0, ref2 = 0, max_diff = 0, max_ref = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double x = a.data[i], y = b.data[i];
    if (!std::isfinite(x) || !std::isfinite(y)) d.finite = false;
    diff2 += (x - y) * (x - y);
    ref2 += y * y;
    max_diff = std::max(max_diff, std::fabs(x - y));
    max_ref = std::max(max_ref, std::fabs(y));
  }
  d.rel_norm = ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2);
  d.max_rel = max_ref > 0 ? max_diff / max_ref : max_diff;
  if (!d.finite) d.rel_norm = d.max_rel = INFINITY;
  return d;
}

}  // namespace podsim
