// Numeric tensors for numeric mode and the reference executor: fp32 storage (token ids are stored as exact integral
// floats), row-major, with a shape. Kernels (workloads/ops/*.cpp) view them through Eigen; this header stays light.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
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

// Where the device owning a store sits in the mesh, for the kernels of partitioned programs whose work depends on
// it (a device's own slice of a tensor, the vocabulary rows its table shard holds, which rows of a shard are
// padding): its index along named mesh axes (mixed radix, the last axis fastest).
class DeviceIndex {
 public:
  virtual ~DeviceIndex() = default;
  virtual int64_t index(const std::vector<std::string>& axes) const = 0;
};

// Tensor values by TensorId; absent until produced or initialised. A store belongs to one device: index 0 on
// every mesh axis unless set_device() says otherwise (the single-device reference).
class TensorStore {
 public:
  explicit TensorStore(size_t n = 0) : m_slots(n) {}
  void set_device(std::shared_ptr<const DeviceIndex> d) { m_device = std::move(d); }
  int64_t device_index(const std::vector<std::string>& axes) const {
    return m_device && !axes.empty() ? m_device->index(axes) : 0;
  }
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
  std::shared_ptr<const DeviceIndex> m_device;
};

// bf16 rounding as the MXU does on its inputs (round to nearest even), kept in fp32 storage.
float round_bf16(float x);

}  // namespace podsim
