#include "workloads/reference.h"

#include <cmath>
#include <algorithm>
#include <limits>
#include <random>

#include "base/error.h"
#include "workloads/einsum.h"
#include "workloads/op_def.h"
#include "workloads/quantization.h"

namespace podsim {
namespace {

// Values depend only on (seed, tensor name), never on graph order: a tensor keeps its values when a strategy
// rebuilds the graph around it.
uint64_t tensor_seed(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t s) : m_gen(s) {}
  double uniform() { return static_cast<double>(m_gen() >> 11) * (1.0 / 9007199254740992.0); }
  // Box-Muller, so values do not depend on the standard library's distribution implementation.
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  std::mt19937_64 m_gen;
};

// How a parameter is used decides its initial values.
enum class Init { Normal, Ones, Zeros };

Init param_init(const ModelGraph& g, TensorId t, double& std_dev) {
  std_dev = 0.02;
  for (OpId c : g.consumers(t)) {
    const Op& op = g.op(c);
    // A quantized weight read through its cast to the compute type (weight-only int8, fp8): drawn as the weight the
    // cast's reader takes.
    if (op.kind == OpKind::Convert && quantized_type(g.tensor(t).dtype)) return param_init(g, op.outputs[0], std_dev);
    for (size_t i = 0; i < op.inputs.size(); ++i) {
      if (op.inputs[i] != t) continue;
      if (op.kind == OpKind::LayerNorm) return i == 1 ? Init::Ones : Init::Zeros;
      if (op.kind == OpKind::RmsNorm) return Init::Ones;
      // A bias; a table added like one (BERT's position embeddings, a weight) is drawn as weights are.
      if (op.kind == OpKind::BiasAdd && i == 1 && g.tensor(t).param_kind == ParamKind::Bias) return Init::Zeros;
      if (op.kind == OpKind::BatchNormApply && (i == 3 || i == 4)) return i == 3 ? Init::Ones : Init::Zeros;
      if (op.kind == OpKind::Conv2d && i == 1) {  // scaled by the fan-in KH * KW * Ci
        const auto& s = g.tensor(t).shape;
        std_dev = 1.0 / std::sqrt(static_cast<double>(s[0] * s[1] * s[2]));
        return Init::Normal;
      }
      if (op.kind == OpKind::Embedding && i == 0) {
        std_dev = 1.0;
        return Init::Normal;
      }
      if (op.kind == OpKind::MatMul) {
        // Scaled by the fan-in: the dimensions of this operand that the product contracts.
        const Einsum e = Einsum::parse(op.attrs.equation);
        const std::string& letters = i == 0 ? e.lhs : e.rhs;
        const auto& s = g.tensor(t).shape;
        double fan_in = 1;
        for (size_t d = 0; d < letters.size(); ++d)
          if (e.contract.find(letters[d]) != std::string::npos) fan_in *= static_cast<double>(s[d]);
        std_dev = 1.0 / std::sqrt(fan_in);
        return Init::Normal;
      }
    }
  }
  return Init::Normal;
}

// The exclusive upper bound of integer values a tensor must hold: the rows of the table it indexes, the classes of
// the loss it labels, or a detector's matched-anchor counts.
int64_t id_range(const ModelGraph& g, TensorId t) {
  for (OpId c : g.consumers(t)) {
    const Op& op = g.op(c);
    if (op.kind == OpKind::Embedding && op.inputs[1] == t) return g.tensor(op.inputs[0]).shape.front();
    if (op.kind == OpKind::SoftmaxCrossEntropy && op.inputs[1] == t) return g.tensor(op.inputs[0]).shape.back();
    if (op.kind == OpKind::GatherPositions && op.inputs[1] == t) return g.tensor(op.inputs[0]).shape[1];
    // A detector's matched-anchor counts (SSD): up to a quarter of the anchors, so that the mined negatives
    // (alpha per match) fit in the rest.
    if (op.kind == OpKind::TopKMask && op.inputs[1] == t)
      return std::max<int64_t>(2, g.tensor(op.inputs[0]).shape.back() / static_cast<int64_t>(op.attrs.alpha + 1));
    // Data movement (a micro-batch's slice) passes the ids on: their use decides.
    if (op.kind == OpKind::Slice && op.inputs[0] == t) return id_range(g, op.outputs[0]);
  }
  return 2;
}

// A quantized weight w (int8, fp8) and its scale "<w>.scale" (w's shape with 1 on the contracted dimensions): the
// weight drawn as its unquantized self, each output channel's scale its absmax / qmax, the weight those values on
// the type's grid (AQT's quantization of a trained checkpoint; workloads/quantization.h).
void quantize_weight(const ModelGraph& g, TensorStore& store, TensorId w) {
  const TensorId sid = g.find_tensor(g.tensor(w).name + ".scale");
  if (sid < 0) return;
  Tensor& q = store.get_mut(w);
  Tensor& scale = store.get_mut(sid);
  const std::vector<int64_t>& shape = q.shape;
  const DType t = g.tensor(w).dtype;
  // Element i of the weight belongs to the channel of its indices on the dimensions the scale keeps.
  auto channel = [&](int64_t i) {
    int64_t c = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      const int64_t stride = [&] {
        int64_t s = 1;
        for (size_t e = d + 1; e < shape.size(); ++e) s *= shape[e];
        return s;
      }();
      const int64_t idx = (i / stride) % shape[d];
      c = c * scale.shape[d] + (scale.shape[d] == 1 ? 0 : idx);
    }
    return c;
  };
  std::vector<float> absmax(static_cast<size_t>(scale.elements()), 0.0f);
  for (int64_t i = 0; i < q.elements(); ++i) {
    float& m = absmax[static_cast<size_t>(channel(i))];
    m = std::max(m, std::fabs(q.data[i]));
  }
  for (int64_t c = 0; c < scale.elements(); ++c) scale.data[c] = quant_scale(absmax[static_cast<size_t>(c)], t);
  for (int64_t i = 0; i < q.elements(); ++i) q.data[i] = quantize(q.data[i], scale.data[channel(i)], t);
}

// A quantized KV cache [..., E] and its scale "<cache>.scale" [...]: each token's head quantized with one scale, as
// the cache write stores it (workloads/ops/kv_cache.cpp).
void quantize_cache(const ModelGraph& g, TensorStore& store, TensorId c) {
  const TensorId sid = g.find_tensor(g.tensor(c).name + ".scale");
  if (sid < 0) return;
  Tensor& q = store.get_mut(c);
  Tensor& scale = store.get_mut(sid);
  const DType t = g.tensor(c).dtype;
  const int64_t e = q.shape.back();
  for (int64_t r = 0; r < scale.elements(); ++r) {
    float m = 0;
    for (int64_t i = 0; i < e; ++i) m = std::max(m, std::fabs(q.data[r * e + i]));
    scale.data[r] = quant_scale(m, t);
    for (int64_t i = 0; i < e; ++i) q.data[r * e + i] = quantize(q.data[r * e + i], scale.data[r], t);
  }
}

}  // namespace

void init_step_inputs(const ModelGraph& g, TensorStore& store, uint64_t seed) {
  store.resize(g.num_tensors());
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    TensorId id = static_cast<TensorId>(i);
    if (g.producer(id) >= 0) continue;
    const TensorInfo& info = g.tensor(id);
    Tensor t(info.shape);
    Rng rng(tensor_seed(seed, info.name));
    switch (info.role) {
      case TensorRole::Parameter: {
        double sd;
        Init how = param_init(g, id, sd);
        for (float& x : t.data) x = how == Init::Ones ? 1.0f : how == Init::Zeros ? 0.0f : static_cast<float>(sd * rng.normal());
        break;
      }
      case TensorRole::OptimizerState: break;  // zeros
      case TensorRole::KvCache:  // keys and values of earlier tokens: normal, quantized below when int8 or fp8
        for (float& x : t.data) x = static_cast<float>(rng.normal());
        break;
      default: {
        if (dtype_is_integer(info.dtype)) {
          int64_t range = id_range(g, id);
          for (float& x : t.data) x = static_cast<float>(std::min<int64_t>(range - 1, static_cast<int64_t>(rng.uniform() * range)));
        } else {
          for (float& x : t.data) x = static_cast<float>(rng.normal());
        }
      }
    }
    if (info.dtype == DType::BF16)
      for (float& x : t.data) x = round_bf16(x);
    store.put(id, std::move(t));
  }
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& info = g.tensor(static_cast<TensorId>(i));
    if (!quantized_type(info.dtype) || g.producer(static_cast<TensorId>(i)) >= 0) continue;
    if (info.role == TensorRole::Parameter) quantize_weight(g, store, static_cast<TensorId>(i));
    if (info.role == TensorRole::KvCache) quantize_cache(g, store, static_cast<TensorId>(i));
  }
}

void run_reference(const ModelGraph& g, TensorStore& store) {
  store.resize(g.num_tensors());
  for (OpId id : g.topological_order()) {
    const Op& op = g.op(id);
    if (is_communication(op.kind))
      throw Error(Err::Internal, "the reference executor runs one device; op '" + op.name + "' communicates");
    run_op(g, op, store);
  }
}

void apply_updates(const ModelGraph& g, TensorStore& store) {
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<TensorId>(i));
    if (t.role == TensorRole::Updated && t.updates >= 0 && store.has(static_cast<TensorId>(i)))
      store.put(t.updates, store.get(static_cast<TensorId>(i)));
  }
}

double step_loss(const ModelGraph& g, const TensorStore& store) {
  for (size_t i = 0; i < g.num_tensors(); ++i)
    if (g.tensor(static_cast<TensorId>(i)).role == TensorRole::Loss && store.has(static_cast<TensorId>(i)))
      return store.get(static_cast<TensorId>(i)).data.at(0);
  return std::numeric_limits<double>::quiet_NaN();
}

}  // namespace podsim
