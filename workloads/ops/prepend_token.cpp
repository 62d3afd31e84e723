// A learned token put before a sequence (the Vision Transformer's class token, Dosovitskiy et al. 2021): inputs
// x [B, N, D] and token [D] -> y [B, N + 1, D], y[b, 0] = token, y[b, 1 + n] = x[b, n]: the reference's
// concatenate of the token tiled over the batch with the patch embeddings, along the sequence. Its gradient
// (PrependTokenGrad: dy -> (dx, dtoken)): dx = dy's positions 1..N, dtoken = the sum over the batch of dy[b, 0].
//
// Cost: a copy through the vector unit, fusible as XLA fuses a concatenate (and the broadcast of the token) into
// its consumer's loop. The gradient copies dy's rows and adds one row per example into the token's gradient.
// Partitioning: the batch may be split (the token's gradient is then partial over the batch's axes); positions and
// features whole.
#include <cstring>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost prepend_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 1, 0, 0, 0, 0)); }

void prepend_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Tensor& x = in(st, op, 0);
  const Tensor& t = in(st, op, 1);
  const auto& s = g.tensor(op.inputs[0]).shape;
  const int64_t B = s[0], N = s[1], D = s[2];
  Tensor y = ops::out_like(g, op);
  for (int64_t b = 0; b < B; ++b) {
    std::memcpy(&y.data[static_cast<size_t>(b * (N + 1) * D)], t.data.data(), static_cast<size_t>(D) * sizeof(float));
    std::memcpy(&y.data[static_cast<size_t>((b * (N + 1) + 1) * D)], &x.data[static_cast<size_t>(b * N * D)],
                static_cast<size_t>(N * D) * sizeof(float));
  }
  ops::put(g, op, st, std::move(y));
}

std::vector<TensorId> prepend_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  ModelGraph& g = b.graph();
  const TensorInfo x = g.tensor(op.inputs[0]), t = g.tensor(op.inputs[1]);
  const TensorId dx = g.add_tensor({op.name + ".dx", x.shape, x.dtype, TensorRole::Gradient});
  const TensorId dt = g.add_tensor({op.name + ".dtoken", t.shape, t.dtype, TensorRole::Gradient});
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::PrependTokenGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {dy[0]};
  grad.outputs = {dx, dt};
  g.add_op(grad);
  return {b.wants_grad(op.inputs[0]) ? dx : -1, b.wants_grad(op.inputs[1]) ? dt : -1};
}

// A copy of each element of dy, an add for the token's rows: a reduction over the batch.
OpCost prepend_grad_cost(const ModelGraph& g, const Op& op) {
  return ops::reduction(ops::vpu_cost(g, op, 1, 0, 0, 0, 0));
}

void prepend_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Tensor& dy = in(st, op, 0);
  const auto& s = g.tensor(op.outputs[0]).shape;
  const int64_t B = s[0], N = s[1], D = s[2];
  Tensor dx = ops::out_like(g, op, 0), dt = ops::out_like(g, op, 1);
  std::vector<double> acc(static_cast<size_t>(D), 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t d = 0; d < D; ++d) acc[static_cast<size_t>(d)] += dy.data[static_cast<size_t>(b * (N + 1) * D + d)];
    std::memcpy(&dx.data[static_cast<size_t>(b * N * D)], &dy.data[static_cast<size_t>((b * (N + 1) + 1) * D)],
                static_cast<size_t>(N * D) * sizeof(float));
  }
  for (int64_t d = 0; d < D; ++d) dt.data[static_cast<size_t>(d)] = static_cast<float>(acc[static_cast<size_t>(d)]);
  ops::put(g, op, st, std::move(dx), 0);
  ops::put(g, op, st, std::move(dt), 1);
}

ShardSpec batch_only(const ShardSpec& s) {
  ShardSpec r = ShardSpec::replicated(s.rank());
  if (s.rank() > 0) r.dims[0] = s.dims[0];
  return r;
}

OpSharding prepend_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec x = batch_only(sharding::settled(q.in[0]));
  if (q.op.kind == OpKind::PrependToken) {
    r.in = {x, ShardSpec::replicated(1)};
    r.out = {x};
  } else {
    ShardSpec t = ShardSpec::replicated(1);
    t.partial = sharding::reduced_axes(x, {0});
    r.in = {x};
    r.out = {x, t};
  }
  return r;
}

const bool registered =
    register_op_kind({OpKind::PrependToken, "prepend_token", Unit::Vpu, prepend_cost, prepend_kernel, prepend_grad,
                      prepend_rule}) &&
    register_op_kind({OpKind::PrependTokenGrad, "prepend_token_grad", Unit::Vpu, prepend_grad_cost,
                      prepend_grad_kernel, nullptr, prepend_rule});

}  // namespace

TensorId GraphBuilder::prepend_token(TensorId x, TensorId token, const std::string& name) {
  const auto s = m_g.tensor(x).shape, t = m_g.tensor(token).shape;
  if (s.size() != 3 || t.size() != 1 || t[0] != s[2])
    throw Error(Err::Internal, "prepend_token '" + name + "': " + m_g.tensor(x).shape_text() + " and " +
                                   m_g.tensor(token).shape_text() + " (needs [B, N, D] and [D])");
  return forward(name, OpKind::PrependToken, {x, token}, {s[0], s[1] + 1, s[2]}, m_g.tensor(x).dtype);
}

}  // namespace podsim
