// Optimizer updates, one op per parameter, elementwise (fusible):
//   SGD:  w' = w - lr * g
//   Adam: m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2;  w' = w - lr * (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + eps)
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost sgd_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 2);
  c.fusible = true;
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

void sgd_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  Tensor o = ops::out_like(g, op);
  const float lr = static_cast<float>(op.attrs.alpha);
  for (size_t i = 0; i < w.data.size(); ++i) o.data[i] = w.data[i] - lr * grad.data[i];
  ops::put(g, op, s, std::move(o));
}

OpCost adam_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 12, 1, 1);
  c.fusible = true;
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

void adam_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  const Tensor& m = in(s, op, 2);
  const Tensor& v = in(s, op, 3);
  const OpAttrs& a = op.attrs;
  Tensor w2 = ops::out_like(g, op, 0), m2 = ops::out_like(g, op, 1), v2 = ops::out_like(g, op, 2);
  const double c1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
  const double c2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
  for (size_t i = 0; i < w.data.size(); ++i) {
    double gi = grad.data[i];
    double mi = a.beta1 * m.data[i] + (1 - a.beta1) * gi;
    double vi = a.beta2 * v.data[i] + (1 - a.beta2) * gi * gi;
    m2.data[i] = static_cast<float>(mi);
    v2.data[i] = static_cast<float>(vi);
    w2.data[i] = static_cast<float>(w.data[i] - a.alpha * (mi / c1) / (std::sqrt(vi / c2) + a.eps));
  }
  ops::put(g, op, s, std::move(w2), 0);
  ops::put(g, op, s, std::move(m2), 1);
  ops::put(g, op, s, std::move(v2), 2);
}

// Elementwise on the parameter's spec: the gradient and optimizer state are brought to the spec of the most split
// of them (weight-update sharding: the state is split, so the gradient is reduce-scattered and the parameter
// sliced, and the updated shard gathered afterwards).
OpSharding update_rule(const OpShardingQuery& q) { return sharding::elementwise(q, false); }

const bool registered =
    register_op_kind({OpKind::SgdUpdate, "sgd_update", Unit::Vpu, sgd_cost, sgd_kernel, nullptr, update_rule}) &&
    register_op_kind({OpKind::AdamUpdate, "adam_update", Unit::Vpu, adam_cost, adam_kernel, nullptr, update_rule});

}  // namespace
}  // namespace podsim
