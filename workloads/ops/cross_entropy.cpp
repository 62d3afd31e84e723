// Softmax cross-entropy loss, averaged over rows: loss = mean_t (logsumexp(logits[t]) - logits[t][label[t]]).
// The forward op also outputs each row's log-sum-exp in two fp32 values, its max m and its sum of exponentials
// z = sum exp(logits - m) (lse = m + log z); the gradient, (exp(logits - m) / z - onehot(labels)) / T, is computed
// from the logits and them, as XLA fuses the log-softmax with its reductions and its gradient with the exponential:
// no [T, V] probabilities are ever stored, and the gradient is written over the logits' buffer (the logits die with
// it; OpCost::in_place, hw/compiler/memory_plan.cpp). (Kept apart, m and z give each row's probabilities to fp32
// rounding of z; one fp32 lse would put its own rounding, up to half an ulp of the lse, into every row's sum.)
// T is attrs.count, the step's global row count: a device holding a shard of the rows adds its rows' terms
// divided by the global T (the partial losses sum to the mean), and rows of a padded shard count for nothing.
//
// Classes split across devices (logits [T, V / n], as a vocabulary-parallel unembedding leaves them: Megatron-LM's
// vocab_parallel_cross_entropy) are never gathered. The op runs as three local steps with collectives of one
// value per row between them: each row's max over the local classes, all-reduced by maximum; the local sum of
// exp(x - max) and the label's logit (0 on the devices that do not hold the label's class), each all-reduced by
// sum; then loss = log(sum) + max - target, the max and the sum kept per row. The gradient needs no communication:
// each device takes exp(x - max) / sum on its own classes (0 on padding classes of a vocabulary the axes do not
// divide) and subtracts the one-hot there.
#include <limits>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// The max and the sum of exponentials per row (two reductions), a subtraction and an exponential per element, the
// label's logit picked (a compare and select).
OpCost ce_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 2, 1, 0, 2)); }

// For each local row: whether it is a real row (not padding of an unevenly split dimension).
std::vector<uint8_t> real_rows(const Op& op, const std::vector<int64_t>& shape, const TensorStore& s) {
  const size_t lead = shape.size() - 1;
  int64_t rows = 1;
  for (size_t d = 0; d < lead; ++d) rows *= shape[d];
  std::vector<uint8_t> real(static_cast<size_t>(rows), 1);
  for (const OpAttrs::Padded& p : op.attrs.padded) {
    if (static_cast<size_t>(p.dim) >= lead) continue;  // the classes (real_classes)
    const int64_t local = shape[p.dim];
    const int64_t offset = s.device_index(p.axes) * local;
    int64_t inner = 1;
    for (size_t d = p.dim + 1; d < lead; ++d) inner *= shape[d];
    for (int64_t r = 0; r < rows; ++r)
      if ((r / inner) % local + offset >= p.global) real[r] = 0;
  }
  return real;
}

// For each local class: whether it is a real class (not padding of a vocabulary the class axes do not divide).
std::vector<uint8_t> real_classes(const Op& op, const std::vector<int64_t>& shape, const TensorStore& s) {
  const size_t last = shape.size() - 1;
  std::vector<uint8_t> real(static_cast<size_t>(shape[last]), 1);
  for (const OpAttrs::Padded& p : op.attrs.padded) {
    if (static_cast<size_t>(p.dim) != last) continue;
    const int64_t offset = s.device_index(p.axes) * shape[last];
    for (int64_t j = 0; j < shape[last]; ++j)
      if (offset + j >= p.global) real[static_cast<size_t>(j)] = 0;
  }
  return real;
}

double row_count(const Op& op, int64_t rows) { return op.attrs.count > 0 ? static_cast<double>(op.attrs.count) : static_cast<double>(rows); }

void ce_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& logits = in(s, op, 0);
  const Tensor& labels = in(s, op, 1);
  const int64_t v = logits.shape.back(), rows = logits.elements() / v;
  Tensor loss = ops::out_like(g, op, 0), row_max = ops::out_like(g, op, 1), row_sum = ops::out_like(g, op, 2);
  const std::vector<uint8_t> real = real_rows(op, logits.shape, s);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = &logits.data[r * v];
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < v; ++j) mx = std::max<double>(mx, x[j]);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(x[j] - mx);
    row_max.data[r] = static_cast<float>(mx);
    row_sum.data[r] = static_cast<float>(sum);
    if (!real[r]) continue;
    int64_t label = static_cast<int64_t>(labels.data[r]);
    ops::check(label >= 0 && label < v, op, "label " + std::to_string(label) + " outside the classes");
    total += std::log(sum) + mx - x[label];
  }
  loss.data[0] = static_cast<float>(total / row_count(op, rows));
  ops::put(g, op, s, std::move(loss), 0);
  ops::put(g, op, s, std::move(row_max), 1);
  ops::put(g, op, s, std::move(row_sum), 2);
}

std::vector<TensorId> ce_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  const TensorInfo& logits = b.graph().tensor(op.inputs[0]);
  OpAttrs at;
  at.count = op.attrs.count;
  return {b.emit(op.name + ".dlogits", OpKind::SoftmaxCrossEntropyGrad, Phase::Backward,
                 {op.inputs[0], op.outputs[1], op.outputs[2], op.inputs[1]}, logits.shape, logits.dtype,
                 TensorRole::Gradient, at),
          -1};
}

// Per element: subtract the row's max, exponentiate, divide by the row's sum, scale by 1 / T, subtract the one-hot
// (a compare and select); written over the logits' buffer.
OpCost ce_grad_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::elementwise(ops::vpu_cost(g, op, 3, 1, 1));
  c.in_place = true;
  return c;
}

void ce_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& logits = in(s, op, 0);
  const Tensor& row_max = in(s, op, 1);
  const Tensor& row_sum = in(s, op, 2);
  const Tensor& labels = in(s, op, 3);
  const int64_t v = logits.shape.back(), rows = logits.elements() / v;
  Tensor d = ops::out_like(g, op);
  const std::vector<uint8_t> real = real_rows(op, logits.shape, s), cls = real_classes(op, logits.shape, s);
  const float inv = static_cast<float>(1.0 / row_count(op, rows));
  // Classes split over attrs.axes: this device holds classes [offset, offset + v).
  const int64_t offset = s.device_index(op.attrs.axes) * v;
  for (int64_t r = 0; r < rows; ++r) {
    if (!real[r]) continue;  // padding: no gradient
    const double m = row_max.data[r], z = row_sum.data[r];
    for (int64_t j = 0; j < v; ++j)
      if (cls[j]) d.data[r * v + j] = static_cast<float>(std::exp(logits.data[r * v + j] - m) / z) * inv;
    const int64_t label = static_cast<int64_t>(labels.data[r]) - offset;
    if (label >= 0 && label < v) d.data[r * v + label] -= inv;
  }
  ops::put(g, op, s, std::move(d));
}

// ---- the local steps of a cross-entropy over split classes ----
OpCost ce_max_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 0, 0, 0, 1)); }

void ce_max_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& logits = in(s, op, 0);
  const int64_t v = logits.shape.back(), rows = logits.elements() / v;
  const std::vector<uint8_t> cls = real_classes(op, logits.shape, s);
  Tensor mx = ops::out_like(g, op);
  for (int64_t r = 0; r < rows; ++r) {
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < v; ++j)
      if (cls[j]) m = std::max(m, logits.data[r * v + j]);
    mx.data[r] = m;
  }
  ops::put(g, op, s, std::move(mx));
}

// sub, exp, sum; the label's logit picked (a compare and a select per element, summed).
OpCost ce_sums_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 2, 1, 0, 2)); }

void ce_sums_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& logits = in(s, op, 0);
  const Tensor& labels = in(s, op, 1);
  const Tensor& mx = in(s, op, 2);
  const int64_t v = logits.shape.back(), rows = logits.elements() / v;
  const std::vector<uint8_t> real = real_rows(op, logits.shape, s), cls = real_classes(op, logits.shape, s);
  const int64_t offset = s.device_index(op.attrs.axes) * v;
  Tensor sum = ops::out_like(g, op, 0), target = ops::out_like(g, op, 1);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (int64_t j = 0; j < v; ++j)
      if (cls[j]) acc += std::exp(static_cast<double>(logits.data[r * v + j]) - mx.data[r]);
    sum.data[r] = static_cast<float>(acc);
    if (!real[r]) continue;
    const int64_t label = static_cast<int64_t>(labels.data[r]);
    ops::check(label >= 0, op, "label " + std::to_string(label) + " outside the classes");
    if (label - offset >= 0 && label - offset < v) target.data[r] = logits.data[r * v + label - offset];
  }
  ops::put(g, op, s, std::move(sum), 0);
  ops::put(g, op, s, std::move(target), 1);
}

// Per row: the log of the sum, the max added, the target subtracted and summed into the loss; the max and the sum
// kept.
OpCost ce_finish_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 2, 1, 0, 1)); }

void ce_finish_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& mx = in(s, op, 0);
  const Tensor& sum = in(s, op, 1);
  const Tensor& target = in(s, op, 2);
  const int64_t rows = mx.elements();
  std::vector<int64_t> shape = mx.shape;
  shape.push_back(1);  // the rows' shape and one class: which rows are real
  const std::vector<uint8_t> real = real_rows(op, shape, s);
  Tensor loss = ops::out_like(g, op, 0), row_max = ops::out_like(g, op, 1), row_sum = ops::out_like(g, op, 2);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const double m = mx.data[r], z = sum.data[r];
    row_max.data[r] = mx.data[r];
    row_sum.data[r] = sum.data[r];
    if (real[r]) total += std::log(z) + m - target.data[r];
  }
  loss.data[0] = static_cast<float>(total / row_count(op, rows));
  ops::put(g, op, s, std::move(loss), 0);
  ops::put(g, op, s, std::move(row_max), 1);
  ops::put(g, op, s, std::move(row_sum), 2);
}

// ---- partitioning: rows may be split (each device adds its rows' terms over the global count, so the loss is
// partial over the row axes). Classes split over some axes stay split and the op runs as the steps above, with
// an all-reduce by maximum and two by sum over those axes, of one value per local row each. ----
OpSharding ce_split_classes(const OpShardingQuery& q, const ShardSpec& x) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const TensorInfo& logits = q.g.tensor(q.op.inputs[0]);
  ShardSpec rows = x;
  rows.dims.pop_back();
  std::vector<size_t> lead;
  for (size_t d = 0; d + 1 < x.rank(); ++d) lead.push_back(d);
  ShardSpec loss = ShardSpec::replicated(1);
  loss.partial = sharding::reduced_axes(rows, lead);
  r.attrs.padded = sharding::padding(logits.shape, x, q.mesh, x.rank());
  r.attrs.axes = x.dims.back();
  r.in = {x, rows};
  r.out = {loss, rows, rows};
  std::vector<int64_t> global_rows(logits.shape.begin(), logits.shape.end() - 1);
  const std::vector<int64_t> local_rows = local_shape(global_rows, rows, q.mesh);
  // Slots: 0 logits, 1 labels, 2 loss, 3 the rows' max, 4 their sum of exponentials, then the scratch values 5..
  // below.
  const std::string& n = q.op.name;
  r.scratch = {{n + ".max", local_rows},    {n + ".max.global", local_rows},    {n + ".sumexp", local_rows},
               {n + ".sumexp.global", local_rows}, {n + ".target", local_rows}, {n + ".target.global", local_rows}};
  OpAttrs max_reduce, sum_reduce;
  max_reduce.axes = sum_reduce.axes = x.dims.back();
  max_reduce.reduce_max = true;
  r.steps = {{"max", OpKind::CrossEntropyMax, {0}, {5}, r.attrs},
             {"", OpKind::AllReduce, {5}, {6}, max_reduce},
             {"sums", OpKind::CrossEntropySums, {0, 1, 6}, {7, 9}, r.attrs},
             {"", OpKind::AllReduce, {7}, {8}, sum_reduce},
             {"", OpKind::AllReduce, {9}, {10}, sum_reduce},
             {"", OpKind::CrossEntropyFinish, {6, 8, 10}, {2, 3, 4}, r.attrs}};
  return r;
}

OpSharding ce_rule(const OpShardingQuery& q) {
  if (!q.in[0].dims.back().empty()) return ce_split_classes(q, sharding::settled(q.in[0]));
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
  r.out = {loss, rows, rows};
  return r;
}

OpSharding ce_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const TensorInfo& logits = q.g.tensor(q.op.inputs[0]);
  // Classes split (the logits of a cross-entropy over split classes) stay split: each device exponentiates its own
  // classes and subtracts the one-hot of the labels there.
  ShardSpec x = sharding::settled(q.in[0]);
  ShardSpec rows = x;
  rows.dims.pop_back();
  r.attrs.axes = x.dims.back();
  r.attrs.padded = sharding::padding(logits.shape, x, q.mesh, x.rank());
  r.in = {x, rows, rows, rows};
  r.out = {x};
  return r;
}

const bool registered = register_op_kind({OpKind::SoftmaxCrossEntropy, "softmax_cross_entropy", Unit::Vpu, ce_cost,
                                          ce_kernel, ce_grad, ce_rule}) &&
                        register_op_kind({OpKind::SoftmaxCrossEntropyGrad, "softmax_cross_entropy_grad", Unit::Vpu,
                                          ce_grad_cost, ce_grad_kernel, nullptr, ce_grad_rule}) &&
                        register_op_kind({OpKind::CrossEntropyMax, "softmax_cross_entropy_max", Unit::Vpu,
                                          ce_max_cost, ce_max_kernel, nullptr}) &&
                        register_op_kind({OpKind::CrossEntropySums, "softmax_cross_entropy_sums", Unit::Vpu,
                                          ce_sums_cost, ce_sums_kernel, nullptr}) &&
                        register_op_kind({OpKind::CrossEntropyFinish, "softmax_cross_entropy_finish", Unit::Vpu,
                                          ce_finish_cost, ce_finish_kernel, nullptr});

}  // namespace
}  // namespace podsim
