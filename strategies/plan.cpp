#include "strategies/plan.h"

namespace podsim {

int64_t Mesh::devices() const {
  int64_t n = 1;
  for (auto s : axis_sizes) n *= s;
  return n;
}

int Mesh::axis_index(const std::string& name) const {
  for (size_t i = 0; i < axis_names.size(); ++i)
    if (axis_names[i] == name) return static_cast<int>(i);
  return -1;
}

}  // namespace podsim
