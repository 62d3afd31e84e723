// Softmax over the last dimension of attention scores [..., S, S]: y = softmax(alpha * x), with an optional causal
// mask (query i sees keys j <= i). Its gradient: dx = alpha * y * (dy - sum(dy * y)).
#include <limits>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost softmax_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 4, 1, 1, 2)); }

void softmax_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const int64_t n = x.shape.back(), rows = x.elements() / n;
  const int64_t seq = x.shape.size() >= 2 ? x.shape[x.shape.size() - 2] : 1;
  Tensor y = ops::out_like(g, op);
  std::vector<double> e(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    int64_t visible = op.attrs.causal ? std::min(n, r % seq + 1) : n;
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < visible; ++j) mx = std::max(mx, op.attrs.alpha * x.data[r * n + j]);
    double sum = 0;
    for (int64_t j = 0; j < visible; ++j) sum += e[j] = std::exp(op.attrs.alpha * x.data[r * n + j] - mx);
    for (int64_t j = 0; j < n; ++j) y.data[r * n + j] = j < visible ? static_cast<float>(e[j] / sum) : 0.0f;
  }
  ops::put(g, op, s, std::move(y));
}

std::vector<TensorId> softmax_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  OpAttrs a;
  a.alpha = op.attrs.alpha;
  return {b.emit(op.name + ".dx", OpKind::SoftmaxGrad, Phase::Backward, {dy[0], op.outputs[0]}, x.shape, x.dtype,
                 TensorRole::Gradient, a)};
}

OpCost softmax_grad_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 4, 0, 0, 1)); }

void softmax_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& y = in(s, op, 1);
  const int64_t n = y.shape.back(), rows = y.elements() / n;
  Tensor dx = ops::out_like(g, op);
  for (int64_t r = 0; r < rows; ++r) {
    double dot = 0;
    for (int64_t j = 0; j < n; ++j) dot += static_cast<double>(dy.data[r * n + j]) * y.data[r * n + j];
    for (int64_t j = 0; j < n; ++j)
      dx.data[r * n + j] = static_cast<float>(op.attrs.alpha * y.data[r * n + j] * (dy.data[r * n + j] - dot));
  }
  ops::put(g, op, s, std::move(dx));
}

// ---- partitioning: any leading dimension may be split; the softmax dimension stays whole, and so does the query
// dimension of a causal mask (the mask compares the two positions) ----
OpSharding softmax_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = sharding::unsplit_last(q.in[0], q.op.attrs.causal ? 2 : 1);
  r.in = {x};
  r.out = {x};
  return r;
}

OpSharding softmax_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec y = sharding::unsplit_last(q.in[1], 1);
  r.in = {y, y};
  r.out = {y};
  return r;
}

const bool registered =
    register_op_kind(
        {OpKind::Softmax, "softmax", Unit::Vpu, softmax_cost, softmax_kernel, softmax_grad, softmax_rule}) &&
    register_op_kind({OpKind::SoftmaxGrad, "softmax_grad", Unit::Vpu, softmax_grad_cost, softmax_grad_kernel,
                      nullptr, softmax_grad_rule});

}  // namespace
}  // namespace podsim
