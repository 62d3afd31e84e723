// RMS normalisation over the last dimension (Zhang and Sennrich 2019, as in T5 and LLaMA): y = x * rstd * gamma,
// rstd = 1 / sqrt(mean(x^2) + eps); no mean subtraction and no offset. The forward op also outputs each row's
// rstd (fp32), which its gradient reuses:
//   xhat = x rstd,  dgamma = sum over rows of dy xhat,  dx = rstd (dy gamma - xhat mean(dy gamma xhat)).
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// Per element: square, accumulate, scale by rstd, scale by gamma; the row sum is one reduction.
OpCost rms_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 3, 0, 0, 1)); }

void rms_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const Tensor& gamma = in(s, op, 1);
  const int64_t d = static_cast<int64_t>(gamma.data.size()), rows = x.elements() / d;
  Tensor y = ops::out_like(g, op, 0), rstd = ops::out_like(g, op, 1);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x.data[r * d];
    double ms = 0;
    for (int64_t j = 0; j < d; ++j) ms += static_cast<double>(xr[j]) * xr[j];
    ms /= static_cast<double>(d);
    const double rs = 1.0 / std::sqrt(ms + op.attrs.eps);
    rstd.data[r] = static_cast<float>(rs);
    for (int64_t j = 0; j < d; ++j) y.data[r * d + j] = static_cast<float>(xr[j] * rs * gamma.data[j]);
  }
  ops::put(g, op, s, std::move(y), 0);
  ops::put(g, op, s, std::move(rstd), 1);
}

std::vector<TensorId> rms_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  ModelGraph& g = b.graph();
  const TensorInfo x = g.tensor(op.inputs[0]);
  const TensorInfo gamma = g.tensor(op.inputs[1]);
  TensorId dx = g.add_tensor({op.name + ".dx", x.shape, x.dtype, TensorRole::Gradient});
  TensorId dgamma = g.add_tensor({op.name + ".dgamma", gamma.shape, gamma.dtype, TensorRole::Gradient});
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::RmsNormGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {dy[0], op.inputs[0], op.inputs[1], op.outputs[1]};
  grad.outputs = {dx, dgamma};
  grad.attrs = op.attrs;
  g.add_op(grad);
  return {dx, dgamma};
}

OpCost rms_grad_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 9, 0, 0, 2)); }

void rms_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& x = in(s, op, 1);
  const Tensor& gamma = in(s, op, 2);
  const Tensor& rstd = in(s, op, 3);
  const int64_t d = static_cast<int64_t>(gamma.data.size()), rows = x.elements() / d;
  Tensor dx = ops::out_like(g, op, 0), dgamma = ops::out_like(g, op, 1);
  std::vector<double> dg(static_cast<size_t>(d), 0.0), xhat(static_cast<size_t>(d)), dxhat(static_cast<size_t>(d));
  for (int64_t r = 0; r < rows; ++r) {
    const double rs = rstd.data[r];
    double sum_dxhat_xhat = 0;
    for (int64_t j = 0; j < d; ++j) {
      xhat[j] = x.data[r * d + j] * rs;
      const double g_ = dy.data[r * d + j];
      dg[j] += g_ * xhat[j];
      dxhat[j] = g_ * gamma.data[j];
      sum_dxhat_xhat += dxhat[j] * xhat[j];
    }
    const double mean_dxhat_xhat = sum_dxhat_xhat / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j)
      dx.data[r * d + j] = static_cast<float>(rs * (dxhat[j] - xhat[j] * mean_dxhat_xhat));
  }
  for (int64_t j = 0; j < d; ++j) dgamma.data[j] = static_cast<float>(dg[j]);
  ops::put(g, op, s, std::move(dx), 0);
  ops::put(g, op, s, std::move(dgamma), 1);
}

// ---- partitioning, as layer norm's: rows may be split, the normalised (last) dimension is gathered whole ----
ShardSpec rows_of(const ShardSpec& s) {
  ShardSpec r = s;
  r.dims.pop_back();
  return r;
}

OpSharding rms_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = sharding::unsplit_last(q.in[0], 1);
  r.in = {x, ShardSpec::replicated(1)};
  r.out = {x, rows_of(x)};
  return r;
}

// dgamma sums over rows: partial over the axes splitting them.
OpSharding rms_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = sharding::unsplit_last(q.in[1], 1);
  r.in = {x, x, ShardSpec::replicated(1), rows_of(x)};
  std::vector<size_t> rows;
  for (size_t d = 0; d + 1 < x.rank(); ++d) rows.push_back(d);
  ShardSpec g = ShardSpec::replicated(1);
  g.partial = sharding::reduced_axes(x, rows);
  r.out = {x, g};
  return r;
}

const bool registered =
    register_op_kind({OpKind::RmsNorm, "rms_norm", Unit::Vpu, rms_cost, rms_kernel, rms_grad, rms_rule}) &&
    register_op_kind(
        {OpKind::RmsNormGrad, "rms_norm_grad", Unit::Vpu, rms_grad_cost, rms_grad_kernel, nullptr, rms_grad_rule});

}  // namespace
}  // namespace podsim
