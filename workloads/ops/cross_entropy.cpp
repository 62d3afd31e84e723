// Softmax cross-entropy loss, averaged over rows: loss = mean_t (logsumexp(logits[t]) - logits[t][label[t]]).
// The forward op also outputs the softmax probabilities (fp32); the gradient is (probs - onehot(labels)) / T.
// T is attrs.count, the step's global row count: a device holding a shard of the rows adds its rows' terms
// divided by the global T (the partial losses sum to the mean), and rows of a padded shard count for nothing.
#include <limits>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost ce_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 4, 2, 1, 2)); }

// For each local row: whether it is a real row (not padding of an unevenly split dimension).
std::vector<uint8_t> real_rows(const Op& op, const std::vector<int64_t>& shape, const TensorStore& s) {
  const size_t lead = shape.size() - 1;
  int64_t rows = 1;
  for (size_t d = 0; d < lead; ++d) rows *= shape[d];
  std::vector<uint8_t> real(static_cast<size_t>(rows), 1);
  for (const OpAttrs::Padded& p : op.attrs.padded) {
    const int64_t local = shape[p.dim];
    const int64_t offset = s.device_index(p.axes) * local;
    int64_t inner = 1;
    for (size_t d = p.dim + 1; d < lead; ++d) inner *= shape[d];
    for (int64_t r = 0; r < rows; ++r)
      if ((r / inner) % local + offset >= p.global) real[r] = 0;
  }
  return real;
}

double row_count(const Op& op, int64_t rows) { return op.attrs.count > 0 ? static_cast<double>(op.attrs.count) : static_cast<double>(rows); }

void ce_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& logits = in(s, op, 0);
  const Tensor& labels = in(s, op, 1);
  const int64_t v = logits.shape.back(), rows = logits.elements() / v;
  Tensor loss = ops::out_like(g, op, 0), probs = ops::out_like(g, op, 1);
  const std::vector<uint8_t> real = real_rows(op, logits.shape, s);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = &logits.data[r * v];
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < v; ++j) mx = std::max<double>(mx, x[j]);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(x[j] - mx);
    for (int64_t j = 0; j < v; ++j) probs.data[r * v + j] = static_cast<float>(std::exp(x[j] - mx) / sum);
    if (!real[r]) continue;
    int64_t label = static_cast<int64_t>(labels.data[r]);
    ops::check(label >= 0 && label < v, op, "label " + std::to_string(label) + " outside the classes");
    total += std::log(sum) + mx - x[label];
  }
  loss.data[0] = static_cast<float>(total / row_count(op, rows));
  ops::put(g, op, s, std::move(loss), 0);
  ops::put(g, op, s, std::move(probs), 1);
}

std::vector<TensorId> ce_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  const TensorInfo& logits = b.graph().tensor(op.inputs[0]);
  OpAttrs at;
  at.count = op.attrs.count;
  return {b.emit(op.name + ".dlogits", OpKind::SoftmaxCrossEntropyGrad, Phase::Backward,
                 {op.outputs[1], op.inputs[1]}, logits.shape, logits.dtype, TensorRole::Gradient, at),
          -1};
}

OpCost ce_grad_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 2)); }

void ce_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& probs = in(s, op, 0);
  const Tensor& labels = in(s, op, 1);
  const int64_t v = probs.shape.back(), rows = probs.elements() / v;
  Tensor d = ops::out_like(g, op);
  const std::vector<uint8_t> real = real_rows(op, probs.shape, s);
  const float inv = static_cast<float>(1.0 / row_count(op, rows));
  for (int64_t r = 0; r < rows; ++r) {
    if (!real[r]) continue;  // padding: no gradient
    for (int64_t j = 0; j < v; ++j) d.data[r * v + j] = probs.data[r * v + j] * inv;
    d.data[r * v + static_cast<int64_t>(labels.data[r])] -= inv;
  }
  ops::put(g, op, s, std::move(d));
}

// ---- partitioning: rows may be split (each device adds its rows' terms over the global count, so the loss is
// partial over the row axes); the classes stay whole ----
OpSharding ce_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const TensorInfo& logits = q.g.tensor(q.op.inputs[0]);
  ShardSpec x = sharding::unsplit_last(q.in[0], 1);
  ShardSpec rows = x;
  rows.dims.pop_back();
  std::vector<size_t> lead;
  for (size_t d = 0; d + 1 < x.rank(); ++d) lead.push_back(d);
  ShardSpec loss = ShardSpec::replicated(1);
  loss.partial = sharding::reduced_axes(x, lead);
  r.attrs.padded = sharding::padding(logits.shape, x, q.mesh, lead.size());
  r.in = {x, rows};
  r.out = {loss, x};
  return r;
}

OpSharding ce_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const TensorInfo& probs = q.g.tensor(q.op.inputs[0]);
  ShardSpec x = sharding::unsplit_last(q.in[0], 1);
  ShardSpec rows = x;
  rows.dims.pop_back();
  r.attrs.padded = sharding::padding(probs.shape, x, q.mesh, x.rank() - 1);
  r.in = {x, rows};
  r.out = {x};
  return r;
}

const bool registered = register_op_kind({OpKind::SoftmaxCrossEntropy, "softmax_cross_entropy", Unit::Vpu, ce_cost,
                                          ce_kernel, ce_grad, ce_rule}) &&
                        register_op_kind({OpKind::SoftmaxCrossEntropyGrad, "softmax_cross_entropy_grad", Unit::Vpu,
                                          ce_grad_cost, ce_grad_kernel, nullptr, ce_grad_rule});

}  // namespace
}  // namespace podsim
