#include "base/params/experiment.h"

namespace podsim {

double ChipConfig::peak_flops() const {
  return 2.0 * static_cast<double>(mxu.rows * mxu.cols * mxus()) * clock;
}

int64_t PodConfig::slice_chips() const {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

int64_t PodConfig::chips() const { return slice_chips() * slices; }

}  // namespace podsim
