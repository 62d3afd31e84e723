// Squeeze-and-excitation's scaling (Hu et al. 2018; EfficientNet's MBConv blocks): y[b, h, w, c] = x[b, h, w, c] *
// s[b, c], each example's feature maps scaled by its gate, on the vector unit. Fusible: the gate broadcasts over the
// positions as a bias does. Its gradient: dx = dy * s (a channel scale again), ds[b, c] = sum over (h, w) of
// dy * x, a reduction over the positions (features on the lanes: accumulated lane by lane, as a bias gradient).
//
// Partitioning: the batch may be split (the gate with it); rows, width and features whole.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// One multiply per element of x.
OpCost scale_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 1)); }

void scale_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Tensor& x = in(st, op, 0);
  const Tensor& s = in(st, op, 1);
  const auto& shape = g.tensor(op.inputs[0]).shape;
  const int64_t b = shape[0], hw = shape[1] * shape[2], c = shape[3];
  Tensor y = ops::out_like(g, op);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k) y.data[(n * hw + p) * c + k] = x.data[(n * hw + p) * c + k] * s.data[n * c + k];
  ops::put(g, op, st, std::move(y));
}

std::vector<TensorId> scale_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  // Copies: emit() adds to the graph's tensors.
  const TensorInfo x = b.graph().tensor(op.inputs[0]);
  const TensorInfo s = b.graph().tensor(op.inputs[1]);
  std::vector<TensorId> out(2, -1);
  if (b.wants_grad(op.inputs[0]))
    out[0] = b.emit(op.name + ".dx", OpKind::ChannelScale, Phase::Backward, {dy[0], op.inputs[1]}, x.shape, x.dtype,
                    TensorRole::Gradient);
  if (b.wants_grad(op.inputs[1]))
    out[1] = b.emit(op.name + ".ds", OpKind::ChannelScaleGrad, Phase::Backward, {dy[0], op.inputs[0]}, s.shape,
                    s.dtype, TensorRole::Gradient);
  return out;
}

// A multiply and an add per element of dy.
OpCost scale_grad_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 2)); }

void scale_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Tensor& dy = in(st, op, 0);
  const Tensor& x = in(st, op, 1);
  const auto& shape = g.tensor(op.inputs[0]).shape;
  const int64_t b = shape[0], hw = shape[1] * shape[2], c = shape[3];
  std::vector<double> acc(static_cast<size_t>(b * c), 0.0);
  for (int64_t n = 0; n < b; ++n)
    for (int64_t p = 0; p < hw; ++p)
      for (int64_t k = 0; k < c; ++k)
        acc[n * c + k] += double(dy.data[(n * hw + p) * c + k]) * x.data[(n * hw + p) * c + k];
  Tensor ds = ops::out_like(g, op);
  for (size_t i = 0; i < acc.size(); ++i) ds.data[i] = static_cast<float>(acc[i]);
  ops::put(g, op, st, std::move(ds));
}

// x [B, H, W, C] split by its batch only; the gate [B, C] (or ds) with the same batch split.
ShardSpec batch_only(const ShardSpec& s) {
  ShardSpec r = ShardSpec::replicated(s.rank());
  if (s.rank() > 0) r.dims[0] = s.dims[0];
  return r;
}

OpSharding scale_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec x = batch_only(sharding::settled(q.in[0]));
  ShardSpec s = ShardSpec::replicated(2);
  s.dims[0] = x.dims[0];
  r.in = {x, q.op.kind == OpKind::ChannelScale ? s : x};
  r.out = {q.op.kind == OpKind::ChannelScale ? x : s};
  return r;
}

const bool registered =
    register_op_kind({OpKind::ChannelScale, "channel_scale", Unit::Vpu, scale_cost, scale_kernel, scale_grad,
                      scale_rule}) &&
    register_op_kind({OpKind::ChannelScaleGrad, "channel_scale_grad", Unit::Vpu, scale_grad_cost, scale_grad_kernel,
                      nullptr, scale_rule});

}  // namespace
}  // namespace podsim
