// The fixed sinusoidal position signal of the Transformer (Vaswani et al. 2017, section 3.5), as T2T's
// add_timing_signal_1d (the MLPerf v0.6 Transformer) and the TensorFlow reference's get_position_encoding compute it:
// with n = D / 2 timescales, inv[i] = exp(-i ln(10^4) / max(n - 1, 1)), position s's signal is
// [sin(s inv[0]), ..., sin(s inv[n-1]), cos(s inv[0]), ..., cos(s inv[n-1])] (zeros in a last odd feature), added to
// every sequence: y[b, s, :] = x[b, s, :] + signal(s). The signal has no parameters: XLA folds it into a constant
// [S, D] of x's type, which the fused add reads once. The gradient is dy.
//
// The 2-D form (attrs.count = the grid's width W > 0): the fixed position embedding of a Vision Transformer's patch
// grid, as big_vision's posemb_sincos_2d computes it (MoCo v3's form; Beyer et al. 2022). Token s is patch (y, x) =
// (s / W, s % W) of an H x W grid (S = H W); with n = D / 4 frequencies omega[i] = 10^4^(-i / max(n - 1, 1)) its
// signal is [sin(x omega), cos(x omega), sin(y omega), cos(y omega)], n features each (D a multiple of 4).
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// An add per element; the folded constant read beside x.
OpCost timing_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::elementwise(ops::vpu_cost(g, op, 1));
  const TensorInfo& x = g.tensor(op.inputs[0]);
  c.bytes_read += static_cast<double>(x.shape[1] * x.shape[2]) * dtype_bytes(x.dtype);
  return c;
}

void timing_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  const int64_t B = x.shape[0], S = x.shape[1], D = x.shape[2], W = op.attrs.count;
  const int64_t n = W > 0 ? D / 4 : D / 2;
  const double step = std::log(1e4) / static_cast<double>(std::max<int64_t>(n - 1, 1));
  std::vector<float> signal(static_cast<size_t>(S * D), 0.0f);
  // The sines and cosines of `pos` at the n frequencies, from feature `first` on.
  auto put = [&](int64_t p, int64_t pos, int64_t first) {
    for (int64_t i = 0; i < n; ++i) {
      const double t = static_cast<double>(pos) * std::exp(-static_cast<double>(i) * step);
      signal[p * D + first + i] = static_cast<float>(std::sin(t));
      signal[p * D + first + n + i] = static_cast<float>(std::cos(t));
    }
  };
  for (int64_t p = 0; p < S; ++p) {
    if (W > 0) {
      put(p, p % W, 0);
      put(p, p / W, 2 * n);
    } else {
      put(p, p, 0);
    }
  }
  for (int64_t b = 0; b < B; ++b)
    for (int64_t k = 0; k < S * D; ++k) y.data[b * S * D + k] = x.data[b * S * D + k] + signal[k];
  ops::put(g, op, s, std::move(y));
}

std::vector<TensorId> timing_grad(GraphBuilder&, const Op&, const std::vector<TensorId>& dy) { return {dy[0]}; }

// Elementwise, the positions and features whole (the signal is computed from the global position and feature).
OpSharding timing_rule(const OpShardingQuery& q) {
  OpSharding r = sharding::elementwise(q, false);
  ShardSpec x = r.out.front();
  x.dims[1].clear();
  x.dims[2].clear();
  r.in = {x};
  r.out = {x};
  return r;
}

const bool registered = register_op_kind(
    {OpKind::TimingSignal, "timing_signal", Unit::Vpu, timing_cost, timing_kernel, timing_grad, timing_rule});

}  // namespace
}  // namespace podsim
