// The logistic sigmoid, elementwise on the vector unit (squeeze-and-excitation's gate in EfficientNet's MBConv
// blocks). Its gradient reads the result, as TensorFlow's SigmoidGrad(y, dy) = dy y (1 - y): the input need not be
// kept for the backward pass. Both fusible.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// Per element: exp(-x), 1 + exp, a divide (as SiLU's sigmoid is counted, workloads/ops/gated.cpp, less its multiply).
OpCost sigmoid_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 1, 1, 1)); }

void sigmoid_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < x.data.size(); ++i) o.data[i] = static_cast<float>(1.0 / (1.0 + std::exp(-double(x.data[i]))));
  ops::put(g, op, s, std::move(o));
}

std::vector<TensorId> sigmoid_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  return {b.emit(op.name + ".dx", OpKind::SigmoidGrad, Phase::Backward, {dy[0], op.outputs[0]}, x.shape, x.dtype,
                 TensorRole::Gradient)};
}

// 1 - y, y (..), dy (..): a subtraction and two multiplies.
OpCost sigmoid_grad_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 3)); }

void sigmoid_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& y = in(s, op, 1);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < y.data.size(); ++i) o.data[i] = dy.data[i] * y.data[i] * (1.0f - y.data[i]);
  ops::put(g, op, s, std::move(o));
}

OpSharding pointwise_rule(const OpShardingQuery& q) { return sharding::elementwise(q, false); }

const bool registered =
    register_op_kind({OpKind::Sigmoid, "sigmoid", Unit::Vpu, sigmoid_cost, sigmoid_kernel, sigmoid_grad,
                      pointwise_rule}) &&
    register_op_kind({OpKind::SigmoidGrad, "sigmoid_grad", Unit::Vpu, sigmoid_grad_cost, sigmoid_grad_kernel, nullptr,
                      pointwise_rule});

}  // namespace
}  // namespace podsim
