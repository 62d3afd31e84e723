#include "hw/chip/dma_numerics.h"

#include <algorithm>

#include "workloads/tensor.h"

namespace podsim {

std::vector<float> gather_region(const std::vector<float>& buf, const Region& region) {
  std::vector<float> out;
  out.reserve(static_cast<size_t>(region.elements()));
  region.for_blocks([&](int64_t off, int64_t len) { out.insert(out.end(), buf.begin() + off, buf.begin() + off + len); });
  return out;
}

void land_region(std::vector<float>& buf, const Region& region, const std::vector<float>& data, Task::Combine combine,
                 bool bf16, bool max) {
  size_t k = 0;
  region.for_blocks([&](int64_t off, int64_t len) {
    for (int64_t j = 0; j < len; ++j, ++k) {
      float v = combine != Task::Combine::Add ? data[k]
                : max                        ? std::max(buf[off + j], data[k])
                                             : buf[off + j] + data[k];
      buf[off + j] = bf16 ? round_bf16(v) : v;
    }
  });
}

}  // namespace podsim
