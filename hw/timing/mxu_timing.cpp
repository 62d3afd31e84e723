#include "hw/timing/mxu_timing.h"

#include <algorithm>

namespace podsim {

int64_t mxu_cycles(const MxuShape& s, int64_t folds, int64_t m) {
  if (folds <= 0 || m <= 0) return 0;
  const int64_t R = s.rows, C = s.cols;
  if (!s.double_buffer) return folds * (2 * R + C + m - 2);
  const int64_t load = s.weight_rows > 0 ? std::min(s.weight_rows, R) : R;
  return R + m + (folds - 1) * std::max(m + s.weight_push, load) + (R + C - 2);
}

int64_t gemm_cycles(const MxuShape& s, int64_t batch, int64_t m, int64_t k, int64_t n, int64_t mxus) {
  int64_t folds = batch * gemm_folds(s, k, n);
  return mxu_cycles(s, ceil_div(folds, std::max<int64_t>(1, mxus)), m);
}

}  // namespace podsim
