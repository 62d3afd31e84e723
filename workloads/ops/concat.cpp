// Concat: inputs of one shape side by side along the last dimension (the channels of NHWC activations: an
// AmoebaNet cell's output is the concatenation of some of its states). Output [..., K C] holds input k at
// [..., k C, (k + 1) C). Its gradient is K Slices of dy, piece k for input k (workloads/ops/slice.cpp).
//
// Cost: a copy through the vector unit, fusible as XLA fuses a concatenate into its consumers' loops.
// Partitioning: every dimension but the channels may be split (as the first input is, the same for all); the
// channels are whole.
#include <cstring>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost concat_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 1, 0, 0, 0, 0)); }

void concat_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor y = ops::out_like(g, op);
  const size_t k = op.inputs.size();
  const int64_t c = y.shape.back() / static_cast<int64_t>(k), rows = static_cast<int64_t>(y.data.size()) / y.shape.back();
  for (size_t i = 0; i < k; ++i) {
    const Tensor& x = in(s, op, i);
    ops::check(static_cast<int64_t>(x.data.size()) == rows * c, op, "concat input of another shape");
    for (int64_t r = 0; r < rows; ++r)
      std::memcpy(&y.data[static_cast<size_t>(r * c * static_cast<int64_t>(k) + static_cast<int64_t>(i) * c)],
                  &x.data[static_cast<size_t>(r * c)], static_cast<size_t>(c) * sizeof(float));
  }
  ops::put(g, op, s, std::move(y));
}

std::vector<TensorId> concat_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  std::vector<TensorId> dx(op.inputs.size(), -1);
  if (dy[0] < 0) return dx;
  const TensorInfo x = b.graph().tensor(op.inputs[0]);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    OpAttrs at;
    at.dim = static_cast<int64_t>(x.shape.size()) - 1;
    at.offset = static_cast<int64_t>(i);
    dx[i] = b.emit(op.name + ".dx" + std::to_string(i), OpKind::Slice, Phase::Backward, {dy[0]}, x.shape, x.dtype,
                   TensorRole::Gradient, at);
  }
  return dx;
}

OpSharding concat_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec s = sharding::unsplit_last(sharding::settled(q.in[0]), 1);
  r.in.assign(q.op.inputs.size(), s);
  r.out = {s};
  return r;
}

const bool registered =
    register_op_kind({OpKind::Concat, "concat", Unit::Vpu, concat_cost, concat_kernel, concat_grad, concat_rule});

}  // namespace

TensorId GraphBuilder::concat(const std::vector<TensorId>& xs, const std::string& name) {
  if (xs.empty()) throw Error(Err::Internal, "concat '" + name + "' of no tensors");
  const TensorInfo x = m_g.tensor(xs[0]);
  for (TensorId t : xs)
    if (m_g.tensor(t).shape != x.shape || x.shape.empty())
      throw Error(Err::Internal, "concat '" + name + "': inputs " + x.shape_text() + " and " + m_g.tensor(t).shape_text() +
                                     " (it joins tensors of one shape along the last dimension)");
  std::vector<int64_t> shape = x.shape;
  shape.back() *= static_cast<int64_t>(xs.size());
  return forward(name, OpKind::Concat, xs, shape, x.dtype);
}

}  // namespace podsim
