// The pieces of a gated feed-forward layer (SwiGLU: silu(x W_gate) * (x W_up)) on the vector unit: the elementwise
// product and SiLU, x * sigmoid(x), with its gradient. All fusible, like the other elementwise ops.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// ---- mul: a * b; d/da = dy * b, d/db = dy * a ----
OpCost mul_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 1)); }
void mul_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& a = in(s, op, 0);
  const Tensor& b = in(s, op, 1);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < a.data.size(); ++i) o.data[i] = a.data[i] * b.data[i];
  ops::put(g, op, s, std::move(o));
}
std::vector<TensorId> mul_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  return {b.mul(dy[0], op.inputs[1], op.name + ".da"), b.mul(dy[0], op.inputs[0], op.name + ".db")};
}

// ---- SiLU: x sigma(x), sigma(x) = 1 / (1 + exp(-x)); its derivative sigma(x) (1 + x (1 - sigma(x))) ----
double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

// Per element: exp, add, divide, multiply.
OpCost silu_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 2, 1, 1)); }
void silu_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < x.data.size(); ++i) {
    const double v = x.data[i];
    o.data[i] = static_cast<float>(v * sigmoid(v));
  }
  ops::put(g, op, s, std::move(o));
}
std::vector<TensorId> silu_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  return {b.emit(op.name + ".dx", OpKind::SiluGrad, Phase::Backward, {dy[0], op.inputs[0]}, x.shape, x.dtype,
                 TensorRole::Gradient)};
}
// Per element: exp, divide, and five simple operations (1 + exp, 1 - sigma, x (..), 1 + .., sigma .., dy ..).
OpCost silu_grad_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 5, 1, 1)); }
void silu_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& x = in(s, op, 1);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < x.data.size(); ++i) {
    const double v = x.data[i], sg = sigmoid(v);
    o.data[i] = static_cast<float>(dy.data[i] * sg * (1.0 + v * (1.0 - sg)));
  }
  ops::put(g, op, s, std::move(o));
}

// Pointwise, never linear: a product of partial sums is not the partial sum of the product.
OpSharding pointwise_rule(const OpShardingQuery& q) { return sharding::elementwise(q, false); }

const bool registered =
    register_op_kind({OpKind::Mul, "mul", Unit::Vpu, mul_cost, mul_kernel, mul_grad, pointwise_rule}) &&
    register_op_kind({OpKind::Silu, "silu", Unit::Vpu, silu_cost, silu_kernel, silu_grad, pointwise_rule}) &&
    register_op_kind({OpKind::SiluGrad, "silu_grad", Unit::Vpu, silu_grad_cost, silu_grad_kernel, nullptr,
                      pointwise_rule});

}  // namespace
}  // namespace podsim
