// tanh, elementwise on the vector unit (BERT's pooler; inside GNMT's attention and LSTM cells the kernels of those
// ops compute their own). Its gradient reads the result, as TensorFlow's TanhGrad(y, dy) = dy (1 - y^2): the input
// need not be kept for the backward pass. Both fusible.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// One transcendental per element.
OpCost tanh_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 0, 1)); }

void tanh_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < x.data.size(); ++i) o.data[i] = std::tanh(x.data[i]);
  ops::put(g, op, s, std::move(o));
}

std::vector<TensorId> tanh_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  return {b.emit(op.name + ".dx", OpKind::TanhGrad, Phase::Backward, {dy[0], op.outputs[0]}, x.shape, x.dtype,
                 TensorRole::Gradient)};
}

// 1 - y^2 (a multiply, a subtraction), times dy.
OpCost tanh_grad_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 3)); }

void tanh_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& y = in(s, op, 1);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < y.data.size(); ++i) o.data[i] = dy.data[i] * (1.0f - y.data[i] * y.data[i]);
  ops::put(g, op, s, std::move(o));
}

OpSharding pointwise_rule(const OpShardingQuery& q) { return sharding::elementwise(q, false); }

const bool registered =
    register_op_kind({OpKind::Tanh, "tanh", Unit::Vpu, tanh_cost, tanh_kernel, tanh_grad, pointwise_rule}) &&
    register_op_kind({OpKind::TanhGrad, "tanh_grad", Unit::Vpu, tanh_grad_cost, tanh_grad_kernel, nullptr, pointwise_rule});

}  // namespace
}  // namespace podsim
