// Layer normalisation over the last dimension, with learned gain (gamma) and bias (beta). The forward op also
// outputs each row's mean and reciprocal standard deviation (fp32), which its gradient reuses.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost ln_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 7, 0, 0, 2)); }

void ln_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const Tensor& gamma = in(s, op, 1);
  const Tensor& beta = in(s, op, 2);
  const int64_t d = static_cast<int64_t>(gamma.data.size()), rows = x.elements() / d;
  Tensor y = ops::out_like(g, op, 0), mean = ops::out_like(g, op, 1), rstd = ops::out_like(g, op, 2);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x.data[r * d];
    double m = 0, v = 0;
    for (int64_t j = 0; j < d; ++j) m += xr[j];
    m /= static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j) v += (xr[j] - m) * (xr[j] - m);
    v /= static_cast<double>(d);
    double rs = 1.0 / std::sqrt(v + op.attrs.eps);
    mean.data[r] = static_cast<float>(m);
    rstd.data[r] = static_cast<float>(rs);
    for (int64_t j = 0; j < d; ++j)
      y.data[r * d + j] = static_cast<float>((xr[j] - m) * rs * gamma.data[j] + beta.data[j]);
  }
  ops::put(g, op, s, std::move(y), 0);
  ops::put(g, op, s, std::move(mean), 1);
  ops::put(g, op, s, std::move(rstd), 2);
}

std::vector<TensorId> ln_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1, -1};
  ModelGraph& g = b.graph();
  const TensorInfo x = g.tensor(op.inputs[0]);
  const TensorInfo gamma = g.tensor(op.inputs[1]);
  const TensorInfo beta = g.tensor(op.inputs[2]);
  TensorId dx = g.add_tensor({op.name + ".dx", x.shape, x.dtype, TensorRole::Gradient});
  TensorId dgamma = g.add_tensor({op.name + ".dgamma", gamma.shape, gamma.dtype, TensorRole::Gradient});
  TensorId dbeta = g.add_tensor({op.name + ".dbeta", beta.shape, beta.dtype, TensorRole::Gradient});
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::LayerNormGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {dy[0], op.inputs[0], op.inputs[1], op.outputs[1], op.outputs[2]};
  grad.outputs = {dx, dgamma, dbeta};
  grad.attrs = op.attrs;
  g.add_op(grad);
  return {dx, dgamma, dbeta};
}

OpCost ln_grad_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 12, 0, 0, 2)); }

void ln_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& x = in(s, op, 1);
  const Tensor& gamma = in(s, op, 2);
  const Tensor& mean = in(s, op, 3);
  const Tensor& rstd = in(s, op, 4);
  const int64_t d = static_cast<int64_t>(gamma.data.size()), rows = x.elements() / d;
  Tensor dx = ops::out_like(g, op, 0), dgamma = ops::out_like(g, op, 1), dbeta = ops::out_like(g, op, 2);
  std::vector<double> dg(static_cast<size_t>(d), 0.0), db(static_cast<size_t>(d), 0.0);
  std::vector<double> xhat(static_cast<size_t>(d)), dxhat(static_cast<size_t>(d));
  for (int64_t r = 0; r < rows; ++r) {
    double m = mean.data[r], rs = rstd.data[r];
    double sum_dxhat = 0, sum_dxhat_xhat = 0;
    for (int64_t j = 0; j < d; ++j) {
      xhat[j] = (x.data[r * d + j] - m) * rs;
      double g_ = dy.data[r * d + j];
      dg[j] += g_ * xhat[j];
      db[j] += g_;
      dxhat[j] = g_ * gamma.data[j];
      sum_dxhat += dxhat[j];
      sum_dxhat_xhat += dxhat[j] * xhat[j];
    }
    double inv_d = 1.0 / static_cast<double>(d);
    for (int64_t j = 0; j < d; ++j)
      dx.data[r * d + j] =
          static_cast<float>(rs * (dxhat[j] - sum_dxhat * inv_d - xhat[j] * sum_dxhat_xhat * inv_d));
  }
  for (int64_t j = 0; j < d; ++j) {
    dgamma.data[j] = static_cast<float>(dg[j]);
    dbeta.data[j] = static_cast<float>(db[j]);
  }
  ops::put(g, op, s, std::move(dx), 0);
  ops::put(g, op, s, std::move(dgamma), 1);
  ops::put(g, op, s, std::move(dbeta), 2);
}

// ---- partitioning: rows may be split, the normalised (last) dimension is gathered whole ----
ShardSpec rows_of(const ShardSpec& s) {
  ShardSpec r = s;
  r.dims.pop_back();
  return r;
}

OpSharding ln_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = sharding::unsplit_last(q.in[0], 1);
  r.in = {x, ShardSpec::replicated(1), ShardSpec::replicated(1)};
  r.out = {x, rows_of(x), rows_of(x)};
  return r;
}

// dgamma and dbeta sum over rows: partial over the axes splitting them.
OpSharding ln_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = sharding::unsplit_last(q.in[1], 1);
  r.in = {x, x, ShardSpec::replicated(1), rows_of(x), rows_of(x)};
  std::vector<size_t> rows;
  for (size_t d = 0; d + 1 < x.rank(); ++d) rows.push_back(d);
  ShardSpec g = ShardSpec::replicated(1);
  g.partial = sharding::reduced_axes(x, rows);
  r.out = {x, g, g};
  return r;
}

const bool registered =
    register_op_kind({OpKind::LayerNorm, "layer_norm", Unit::Vpu, ln_cost, ln_kernel, ln_grad, ln_rule}) &&
    register_op_kind(
        {OpKind::LayerNormGrad, "layer_norm_grad", Unit::Vpu, ln_grad_cost, ln_grad_kernel, nullptr, ln_grad_rule});

}  // namespace
}  // namespace podsim
