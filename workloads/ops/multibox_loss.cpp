// SSD's MultiBox loss (Liu et al. 2016; MLPerf's TPU SSD, ssd_model.py's _localization_loss and
// _classification_loss), from the per-anchor cross-entropy (anchor_cross_entropy.cpp) and the mined negatives
// (topk_mask.cpp). Inputs: ce [B, A], the negatives' mask [B, A], labels [B, A] (0: background; > 0: a positive,
// matched anchor), matched [B] (each image's matched-anchor count, made by the input pipeline with the labels), the
// encoded box targets [B, A, 4] and the predicted box offsets of each feature map's anchors [B, n_i, 4] (sum n_i = A,
// the maps in order). With pos = label > 0 and w = pos or mask,
//   loss = 1/N sum_b [ sum_a w ce + sum_a pos sum_j huber(box - target) ] / max(matched_b, 1)
// over the step's N images (attrs.count), huber(d) = d^2 / 2 for |d| <= 1, |d| - 1/2 beyond (tf.losses.huber_loss,
// delta 1). Both terms are divided by the image's own matched count before the batch mean, as the TPU code does
// (the max with 1 guards an image without matches). The gradient, d loss / d ce = w / (N n_b) and d loss / d box =
// pos clamp(box - target, -1, 1) / (N n_b), needs neither the forward's values nor the loss.
// Partitioning: the batch may be split (each device adds its images' terms over the global N: a partial loss).
#include <algorithm>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

constexpr size_t kBoxesLoss = 5, kBoxesGrad = 4;  // the first box input of each kind

double denominator(const Op& op, int64_t rows) {
  return op.attrs.count > 0 ? static_cast<double>(op.attrs.count) : static_cast<double>(rows);
}

double huber(double d) { return std::abs(d) <= 1 ? 0.5 * d * d : std::abs(d) - 0.5; }

// Per anchor: the weight (an or of two compares) times ce, summed; per box coordinate a subtraction, the Huber
// branch (abs, compare, two multiplies, a select), masked and summed.
OpCost loss_cost(const ModelGraph& g, const Op& op) {
  const TensorInfo& ce = g.tensor(op.inputs[0]);
  OpCost c;
  c.unit = Unit::Vpu;
  c.vector.elements = static_cast<double>(ce.elements());
  c.vector.simple = 4 + 4 * 7;
  c.vector.reduce = 2;
  c.vector.reduce_row = static_cast<double>(ce.shape.back());
  c.flops = c.vector.elements * (c.vector.simple + c.vector.reduce);
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return ops::reduction(c);
}

void loss_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& ce = in(s, op, 0);
  const Tensor& mask = in(s, op, 1);
  const Tensor& labels = in(s, op, 2);
  const Tensor& matched = in(s, op, 3);
  const Tensor& target = in(s, op, 4);
  const int64_t batch = ce.shape[0], anchors = ce.shape[1];
  std::vector<double> per(static_cast<size_t>(batch), 0.0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t a = 0; a < anchors; ++a) {
      const size_t r = static_cast<size_t>(b * anchors + a);
      if (labels.data[r] > 0 || mask.data[r] > 0) per[b] += ce.data[r];
    }
  int64_t base = 0;
  for (size_t i = kBoxesLoss; i < op.inputs.size(); ++i) {
    const Tensor& box = in(s, op, i);
    const int64_t n = box.shape[1];
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t a = 0; a < n; ++a) {
        const size_t r = static_cast<size_t>(b * anchors + base + a);
        if (labels.data[r] <= 0) continue;
        for (int64_t j = 0; j < 4; ++j)
          per[b] += huber(static_cast<double>(box.data[(b * n + a) * 4 + j]) - target.data[r * 4 + j]);
      }
    base += n;
  }
  ops::check(base == anchors, op, "the maps' anchors do not add up to the labels' " + std::to_string(anchors));
  double total = 0;
  for (int64_t b = 0; b < batch; ++b) total += per[b] / std::max(1.0f, matched.data[b]);
  Tensor loss = ops::out_like(g, op);
  loss.data[0] = static_cast<float>(total / denominator(op, batch));
  ops::put(g, op, s, std::move(loss));
}

std::vector<TensorId> loss_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  std::vector<TensorId> out(op.inputs.size(), -1);
  if (dy[0] < 0) return out;
  ModelGraph& g = b.graph();
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::MultiboxLossGrad;
  grad.phase = Phase::Backward;
  grad.attrs = op.attrs;
  grad.inputs = {op.inputs[1], op.inputs[2], op.inputs[3], op.inputs[4]};
  const TensorInfo ce = g.tensor(op.inputs[0]);
  out[0] = g.add_tensor({ce.name + ".grad", ce.shape, DType::F32, TensorRole::Gradient});
  grad.outputs = {out[0]};
  for (size_t i = kBoxesLoss; i < op.inputs.size(); ++i) {
    const TensorInfo box = g.tensor(op.inputs[i]);
    grad.inputs.push_back(op.inputs[i]);
    out[i] = g.add_tensor({box.name + ".dboxes", box.shape, box.dtype, TensorRole::Gradient});
    grad.outputs.push_back(out[i]);
  }
  g.add_op(grad);
  return out;
}

// Per anchor: the weight over N n_b (an or, a divide folded into one multiply); per box coordinate a subtraction,
// a clamp (two) and the masked scale (two).
OpCost loss_grad_cost(const ModelGraph& g, const Op& op) {
  const TensorInfo& mask = g.tensor(op.inputs[0]);
  OpCost c;
  c.unit = Unit::Vpu;
  c.vector.elements = static_cast<double>(mask.elements());
  c.vector.simple = 3 + 4 * 5;
  c.flops = c.vector.elements * c.vector.simple;
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return c;
}

void loss_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& mask = in(s, op, 0);
  const Tensor& labels = in(s, op, 1);
  const Tensor& matched = in(s, op, 2);
  const Tensor& target = in(s, op, 3);
  const int64_t batch = mask.shape[0], anchors = mask.shape[1];
  const double n = denominator(op, batch);
  std::vector<double> scale(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) scale[b] = 1.0 / (n * std::max(1.0f, matched.data[b]));
  Tensor dce = ops::out_like(g, op, 0);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t a = 0; a < anchors; ++a) {
      const size_t r = static_cast<size_t>(b * anchors + a);
      if (labels.data[r] > 0 || mask.data[r] > 0) dce.data[r] = static_cast<float>(scale[b]);
    }
  ops::put(g, op, s, std::move(dce), 0);
  int64_t base = 0;
  for (size_t i = kBoxesGrad; i < op.inputs.size(); ++i) {
    const Tensor& box = in(s, op, i);
    const int64_t m = box.shape[1];
    Tensor d = ops::out_like(g, op, i - kBoxesGrad + 1);
    for (int64_t b = 0; b < batch; ++b)
      for (int64_t a = 0; a < m; ++a) {
        const size_t r = static_cast<size_t>(b * anchors + base + a);
        if (labels.data[r] <= 0) continue;
        for (int64_t j = 0; j < 4; ++j) {
          const size_t e = static_cast<size_t>((b * m + a) * 4 + j);
          const double diff = static_cast<double>(box.data[e]) - target.data[r * 4 + j];
          d.data[e] = static_cast<float>(std::clamp(diff, -1.0, 1.0) * scale[b]);
        }
      }
    ops::put(g, op, s, std::move(d), i - kBoxesGrad + 1);
    base += m;
  }
}

// The batch of every operand as the first input has it, the rest whole; the loss partial over the batch's axes.
OpSharding loss_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const std::vector<std::string> batch = sharding::settled(q.in[0]).dims[0];
  auto spec = [&](TensorId t) {
    ShardSpec s = ShardSpec::replicated(q.g.tensor(t).shape.size());
    s.dims[0] = batch;
    return s;
  };
  for (TensorId t : q.op.inputs) r.in.push_back(spec(t));
  if (q.op.kind == OpKind::MultiboxLoss) {
    ShardSpec loss = ShardSpec::replicated(1);
    loss.partial = sharding::reduced_axes(r.in[0], {0});
    r.out = {loss};
  } else {
    for (TensorId t : q.op.outputs) r.out.push_back(spec(t));
  }
  return r;
}

const bool registered =
    register_op_kind({OpKind::MultiboxLoss, "multibox_loss", Unit::Vpu, loss_cost, loss_kernel, loss_grad,
                      loss_rule}) &&
    register_op_kind({OpKind::MultiboxLossGrad, "multibox_loss_grad", Unit::Vpu, loss_grad_cost, loss_grad_kernel,
                      nullptr, loss_rule});

}  // namespace
}  // namespace podsim
