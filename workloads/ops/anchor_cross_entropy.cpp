// Per-anchor softmax cross-entropy of a detector's class logits (SSD's MultiBox classification term, before hard-
// negative mining): the logits of each feature map's anchors [B, n_i, C] (i = 0 .. m-1, the maps' anchors taken in
// order, A = sum n_i) against labels [B, A] (class 0 the background), giving per anchor
//   ce[b, a] = lse[b, a] - logits[b, a, label]         lse = log sum_c exp(logits[b, a, c])
//   negatives[b, a] = ce[b, a] where label == 0, else 0  (the scores hard-negative mining ranks, topk_mask.cpp)
// and lse itself (fp32), which is all the gradient needs beside the logits: dlogits = dce (exp(x - lse) - onehot),
// as XLA fuses the log-softmax with its reductions and its gradient with the exponential (MLPerf's TPU SSD computes
// tf.losses.sparse_softmax_cross_entropy with reduction NONE over the concatenated [B, 8732, 81] logits). The maps are
// read in place, their concatenation fused into the loss (podsim stores no [B, A, C] copy).
// Partitioning: the batch may be split; anchors and classes whole (a row-split feature map's logits are gathered).
#include <limits>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// The logits' inputs: all but the last (the labels) forward; all after (dce, lse, labels) in the gradient.
size_t first_logits(const Op& op) { return op.kind == OpKind::AnchorCrossEntropy ? 0 : 3; }
size_t end_logits(const Op& op) { return op.kind == OpKind::AnchorCrossEntropy ? op.inputs.size() - 1 : op.inputs.size(); }

double logit_elements(const ModelGraph& g, const Op& op) {
  double n = 0;
  for (size_t i = first_logits(op); i < end_logits(op); ++i) n += static_cast<double>(g.tensor(op.inputs[i]).elements());
  return n;
}

OpCost with_elements(const ModelGraph& g, const Op& op, double simple, double transcendental, double reduce) {
  OpCost c;
  c.unit = Unit::Vpu;
  c.vector.elements = logit_elements(g, op);
  c.vector.simple = simple;
  c.vector.transcendental = transcendental;
  c.vector.reduce = reduce;
  c.vector.reduce_row = static_cast<double>(g.tensor(op.inputs[first_logits(op)]).shape.back());
  c.flops = c.vector.elements * (simple + transcendental + reduce);
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return c;
}

// Per logit: the row's max and sum of exponentials (two reductions), a subtraction and an exponential, the label's
// logit picked (a compare and a select).
OpCost ace_cost(const ModelGraph& g, const Op& op) { return ops::reduction(with_elements(g, op, 3, 1, 2)); }

void ace_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& labels = in(s, op, op.inputs.size() - 1);
  const int64_t batch = labels.shape[0], anchors = labels.shape[1];
  Tensor ce = ops::out_like(g, op, 0), neg = ops::out_like(g, op, 1), lse = ops::out_like(g, op, 2);
  int64_t base = 0;
  for (size_t i = 0; i + 1 < op.inputs.size(); ++i) {
    const Tensor& x = in(s, op, i);
    const int64_t n = x.shape[1], c = x.shape[2];
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t a = 0; a < n; ++a) {
        const float* row = &x.data[(b * n + a) * c];
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < c; ++j) mx = std::max<double>(mx, row[j]);
        double sum = 0;
        for (int64_t j = 0; j < c; ++j) sum += std::exp(row[j] - mx);
        const size_t r = static_cast<size_t>(b * anchors + base + a);
        const int64_t label = static_cast<int64_t>(labels.data[r]);
        ops::check(label >= 0 && label < c, op, "label " + std::to_string(label) + " outside the classes");
        const double l = mx + std::log(sum);
        lse.data[r] = static_cast<float>(l);
        ce.data[r] = static_cast<float>(l - row[label]);
        neg.data[r] = label == 0 ? ce.data[r] : 0.0f;
      }
    base += n;
  }
  ops::check(base == anchors, op, "the maps' anchors do not add up to the labels' " + std::to_string(anchors));
  ops::put(g, op, s, std::move(ce), 0);
  ops::put(g, op, s, std::move(neg), 1);
  ops::put(g, op, s, std::move(lse), 2);
}

std::vector<TensorId> ace_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  std::vector<TensorId> out(op.inputs.size(), -1);
  if (dy[0] < 0) return out;
  ModelGraph& g = b.graph();
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::AnchorCrossEntropyGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {dy[0], op.outputs[2], op.inputs.back()};
  for (size_t i = 0; i + 1 < op.inputs.size(); ++i) {
    const TensorInfo x = g.tensor(op.inputs[i]);
    grad.inputs.push_back(op.inputs[i]);
    out[i] = g.add_tensor({x.name + ".dlogits", x.shape, x.dtype, TensorRole::Gradient});
    grad.outputs.push_back(out[i]);
  }
  g.add_op(grad);
  return out;
}

// Per logit: subtract the lse, exponentiate, subtract the one-hot (a compare and a select), scale by dce.
OpCost ace_grad_cost(const ModelGraph& g, const Op& op) { return with_elements(g, op, 4, 1, 0); }

void ace_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dce = in(s, op, 0);
  const Tensor& lse = in(s, op, 1);
  const Tensor& labels = in(s, op, 2);
  const int64_t batch = labels.shape[0], anchors = labels.shape[1];
  int64_t base = 0;
  for (size_t i = 3; i < op.inputs.size(); ++i) {
    const Tensor& x = in(s, op, i);
    const int64_t n = x.shape[1], c = x.shape[2];
    Tensor d = ops::out_like(g, op, i - 3);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t a = 0; a < n; ++a) {
        const size_t r = static_cast<size_t>(b * anchors + base + a);
        const double l = lse.data[r], scale = dce.data[r];
        const int64_t label = static_cast<int64_t>(labels.data[r]);
        for (int64_t j = 0; j < c; ++j) {
          const size_t e = static_cast<size_t>((b * n + a) * c + j);
          d.data[e] = static_cast<float>(scale * (std::exp(x.data[e] - l) - (j == label ? 1.0 : 0.0)));
        }
      }
    ops::put(g, op, s, std::move(d), i - 3);
    base += n;
  }
}

// The batch (dimension 0 of every operand) as the first input has it; everything else whole.
ShardSpec batch_of(const ShardSpec& s, size_t rank) {
  ShardSpec r = ShardSpec::replicated(rank);
  r.dims[0] = sharding::settled(s).dims[0];
  return r;
}

OpSharding ace_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec& lead = q.in[0];
  for (TensorId t : q.op.inputs) r.in.push_back(batch_of(lead, q.g.tensor(t).shape.size()));
  for (TensorId t : q.op.outputs) r.out.push_back(batch_of(lead, q.g.tensor(t).shape.size()));
  return r;
}

const bool registered =
    register_op_kind({OpKind::AnchorCrossEntropy, "anchor_cross_entropy", Unit::Vpu, ace_cost, ace_kernel, ace_grad,
                      ace_rule}) &&
    register_op_kind({OpKind::AnchorCrossEntropyGrad, "anchor_cross_entropy_grad", Unit::Vpu, ace_grad_cost,
                      ace_grad_kernel, nullptr, ace_rule});

}  // namespace
}  // namespace podsim
