#include "workloads/tensor_info.h"

#include "workloads/tensor.h"
#include "base/error.h"

#include <algorithm>
#include <cctype>
#include <cstring>

namespace podsim {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::I32: return "int32";
    case DType::Pred: return "pred";
    case DType::I8: return "int8";
    case DType::I16: return "int16";
    case DType::I64: return "int64";
    case DType::F16: return "fp16";
    case DType::F64: return "fp64";
    case DType::F8: return "fp8";
  }
  return "?";
}

std::string tensor_file_stem(const std::string& name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-') ? c : '_';
  return out;
}

int dtype_bytes(DType t) {
  switch (t) {
    case DType::Pred: case DType::I8: case DType::F8: return 1;
    case DType::BF16: case DType::I16: case DType::F16: return 2;
    case DType::F32: case DType::I32: return 4;
    case DType::I64: case DType::F64: return 8;
  }
  return 4;
}

bool dtype_is_integer(DType t) {
  return t == DType::I32 || t == DType::Pred || t == DType::I8 || t == DType::I16 || t == DType::I64;
}

const char* role_name(TensorRole r) {
  switch (r) {
    case TensorRole::Parameter: return "parameter";
    case TensorRole::Input: return "input";
    case TensorRole::Label: return "label";
    case TensorRole::Activation: return "activation";
    case TensorRole::Gradient: return "gradient";
    case TensorRole::OptimizerState: return "optimizer_state";
    case TensorRole::Loss: return "loss";
    case TensorRole::Updated: return "updated";
    case TensorRole::Temporary: return "temporary";
    case TensorRole::WeightCopy: return "weight_copy";
    case TensorRole::KvCache: return "kv_cache";
  }
  return "?";
}

int64_t TensorInfo::elements() const {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Logical: return "logical";
    case Layout::Tiled: return "tiled";
    case Layout::Image: return "image";
    case Layout::ImageBatchMinor: return "image_batch_minor";
    case Layout::ImageLeastPadded: return "image_least_padded";
  }
  return "?";
}

namespace {

int64_t pad_to(int64_t n, int64_t to) { return (n + to - 1) / to * to; }
// The sublane tile a second-minor dimension of n takes: 1, 2, 4 or 8 rows, or a multiple of 8.
int64_t sublanes(int64_t n) {
  for (int64_t t : {1, 2, 4}) if (n <= t) return t;
  return pad_to(n, 8);
}

}  // namespace

double TensorInfo::stored_bytes() const {
  const double e = dtype_bytes(dtype);
  if (!tiles.empty() && tile_order.size() == shape.size() && !shape.empty()) {
    // XLA's tiling: the physical dimensions, each tile padding the minor dimensions it covers to its multiples and
    // splitting them into (tile count, tile size); the next tile applies to the minor dimensions of the result.
    std::vector<int64_t> dims;
    for (int64_t d : tile_order) dims.push_back(shape.at(static_cast<size_t>(d)));
    for (const std::vector<int64_t>& tile : tiles) {
      if (tile.empty() || tile.size() > dims.size()) continue;
      const size_t first = dims.size() - tile.size();
      std::vector<int64_t> next(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(first));
      for (size_t i = 0; i < tile.size(); ++i) {
        const int64_t t = std::max<int64_t>(1, tile[i]);
        next.push_back((dims[first + i] + t - 1) / t);
      }
      for (int64_t t : tile) next.push_back(std::max<int64_t>(1, t));
      dims = std::move(next);
    }
    double n = 1;
    for (int64_t d : dims) n *= static_cast<double>(d);
    return n * e;
  }
  if (layout == Layout::Logical || shape.empty()) return bytes();
  if (image_layout(layout) && shape.size() == 4) {
    const int64_t n = shape[0], h = shape[1], w = shape[2], c = shape[3];
    const double tile = batch_minor() ? static_cast<double>(sublanes(c) * pad_to(n, 128))
                                      : static_cast<double>(sublanes(n) * pad_to(c, 128));
    return static_cast<double>(h * w) * tile * e;
  }
  double n = static_cast<double>(pad_to(shape.back(), 128));
  if (shape.size() >= 2) n *= static_cast<double>(sublanes(shape[shape.size() - 2]));
  for (size_t d = 0; d + 2 < shape.size(); ++d) n *= static_cast<double>(shape[d]);
  return n * e;
}

bool TensorInfo::batch_minor() const {
  if (layout == Layout::ImageBatchMinor) return true;
  if (layout != Layout::ImageLeastPadded || shape.size() != 4) return false;
  const int64_t n = shape[0], c = shape[3];
  return sublanes(c) * pad_to(n, 128) < sublanes(n) * pad_to(c, 128);  // a tie stays features-minor
}

std::string TensorInfo::shape_text() const {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Tensor::Tensor(std::vector<int64_t> s) : shape(std::move(s)) {
  int64_t n = 1;
  for (auto d : shape) n *= d;
  data.assign(static_cast<size_t>(n), 0.0f);
}

int64_t Tensor::elements() const { return static_cast<int64_t>(data.size()); }

const Tensor& TensorStore::get(TensorId id) const {
  if (!has(id)) throw Error(Err::Internal, "tensor " + std::to_string(id) + " read before it was produced");
  return *m_slots[id];
}

Tensor& TensorStore::get_mut(TensorId id) {
  if (!has(id)) throw Error(Err::Internal, "tensor " + std::to_string(id) + " read before it was produced");
  return *m_slots[id];
}

Tensor& TensorStore::put(TensorId id, Tensor t) {
  m_slots.at(id) = std::make_shared<Tensor>(std::move(t));
  return *m_slots[id];
}

float round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7f800000u) == 0x7f800000u) {  // inf / nan: truncate, keep nan quiet
    if (u & 0x007fffffu) u |= 0x00400000u;
    u &= 0xffff0000u;
  } else {
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb;
    u &= 0xffff0000u;
  }
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

}  // namespace podsim
