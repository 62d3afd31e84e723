// Rotary position embedding (Su et al. 2021) in the half-rotation form of GPT-NeoX and LLaMA, on queries or keys
// [B, S, ..., E] (positions along dimension 1, the head width E last and even): with h = E / 2, position p and
// theta_i = p * 10000^(-2i / E),
//   y[i]     = x[i] cos(theta_i) - x[i + h] sin(theta_i)
//   y[i + h] = x[i + h] cos(theta_i) + x[i] sin(theta_i),   i < h.
// attrs.alpha = +1 rotates by theta, -1 by -theta: the rotation is orthogonal, so the gradient of a rotation is the
// opposite rotation of dy (one kind serves both). In an inference step (attrs.ragged, workloads/ragged.h) a token's
// position is its place in its sequence, after the tokens the sequence's cache holds; attrs.axes then name the mesh
// axes splitting the rows.
#include "workloads/ops/kernel_util.h"
#include "workloads/ragged.h"

namespace podsim {
namespace {

using ops::in;

constexpr double kBase = 10000.0;

// Per element: sin or cos (one transcendental), two multiplies and an add.
OpCost rope_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 3, 1)); }

void rope_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  ops::check(x.shape.size() >= 3 && x.shape.back() % 2 == 0, op, "rope needs [B, S, ..., E] with E even");
  const int64_t e = x.shape.back(), half = e / 2, seq = x.shape[1];
  int64_t inner = 1;  // elements per position
  for (size_t d = 2; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t batch = x.shape[0];
  const OpAttrs::Ragged& ragged = op.attrs.ragged;
  const int64_t row0 = ragged.empty() ? 0 : s.device_index(op.attrs.axes) * batch;
  Tensor y = ops::out_like(g, op);
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < seq; ++p) {
      const int64_t position = ragged.empty() ? p : ragged_token(ragged, row0 + b, p).pos;
      for (int64_t v = 0; v < inner / e; ++v) {
        const int64_t at = ((b * seq + p) * inner) + v * e;
        for (int64_t i = 0; i < half; ++i) {
          const double theta = op.attrs.alpha * static_cast<double>(position) *
                               std::pow(kBase, -2.0 * static_cast<double>(i) / static_cast<double>(e));
          const double c = std::cos(theta), sn = std::sin(theta);
          const double x1 = x.data[at + i], x2 = x.data[at + i + half];
          y.data[at + i] = static_cast<float>(x1 * c - x2 * sn);
          y.data[at + i + half] = static_cast<float>(x2 * c + x1 * sn);
        }
      }
    }
  ops::put(g, op, s, std::move(y));
}

std::vector<TensorId> rope_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  OpAttrs a = op.attrs;
  a.alpha = -op.attrs.alpha;
  return {b.emit(op.name + ".dx", OpKind::Rope, Phase::Backward, {dy[0]}, x.shape, x.dtype, TensorRole::Gradient, a)};
}

// Linear: a partial input stays partial. Any dimension but the positions (1) and the head width (last) may be
// split; those two stay whole (a position's angle and a pair's partner are then local).
OpSharding rope_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = q.in[0];
  if (x.dims.size() >= 2) x.dims[1].clear();
  if (!x.dims.empty()) x.dims.back().clear();
  // A packed iteration's one row holds every sequence; split rows place their tokens by the device's index.
  if (q.op.attrs.ragged.packed) x.dims[0].clear();
  if (!q.op.attrs.ragged.empty()) r.attrs.axes = x.dims[0];
  r.in = {x};
  r.out = {x};
  return r;
}

const bool registered =
    register_op_kind({OpKind::Rope, "rope", Unit::Vpu, rope_cost, rope_kernel, rope_grad, rope_rule});

}  // namespace
}  // namespace podsim
