// Numeric tensors for numeric mode and the reference executor: fp32 storage (token ids are stored as exact integral
// floats), row-major, with a shape. Kernels (workloads/ops/*.cpp) view them through Eigen; this header stays light.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "workloads/tensor_info.h"

namespace podsim {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(std::vector<int64_t> s);  // zero-filled
  int64_t elements() const;
};

// Tensor values by TensorId; absent until produced or initialised.
class TensorStore {
 public:
  explicit TensorStore(size_t n = 0) : m_slots(n) {}
  void resize(size_t n) { m_slots.resize(n); }
  bool has(TensorId id) const { return id >= 0 && static_cast<size_t>(id) < m_slots.size() && m_slots[id]; }
  const Tensor& get(TensorId id) const;  // throws Error(Internal) when absent
  Tensor& get_mut(TensorId id);
  Tensor& put(TensorId id, Tensor t);
  void share(TensorId id, std::shared_ptr<Tensor> t) { m_slots.at(id) = std::move(t); }
  std::shared_ptr<Tensor> shared(TensorId id) const { return m_slots.at(id); }
  void drop(TensorId id) { m_slots.at(id).reset(); }
  size_t size() const { return m_slots.size(); }

 private:
  std::vector<std::shared_ptr<Tensor>> m_slots;
};

// bf16 rounding as the MXU does on its inputs (round to nearest even), kept in fp32 storage.
float round_bf16(float x);

}  // namespace podsim
