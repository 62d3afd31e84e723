// GNMT's attention scores: normalized Bahdanau attention (Bahdanau et al. 2015; the weight normalization of
// Salimans and Kingma 2016) as MLPerf's GNMT codes it (BahdanauAttention with normalize=True in the PyTorch
// reference; the TPU implementation's normalized_bahdanau):
//   a = g v / ||v||                                   v [H], g [1]
//   s[b, t, r] = sum_h a[h] tanh(q[b, t, h] + k[b, r, h] + bias[h])      q = query . Wq [B, T, H], k = keys . Wk [B, S, H]
// The softmax over r and the context (softmax . keys) are ops of their own. The kernel forms the sum
// q[b, t] + k[b, r] for every (t, r) pair on chip and reduces it over h as it goes: the [B, T, S, H] values never
// reach HBM. The dot with the one vector a runs on the vector unit (XLA rewrites a dot with a vector operand as a
// multiply and a reduction). The backward recomputes the tanh (one more per element) rather than storing it:
//   dz = ds[b, t, r] a[h] (1 - tanh^2),  dq = sum_r dz,  dk = sum_t dz,  dbias = sum dz,
//   da = sum ds tanh,  dg = (v / ||v||) . da,  dv = (g / ||v||) (da - (v / ||v||) (v / ||v||) . da).
#include <algorithm>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

struct Dims {
  int64_t B = 0, T = 0, S = 0, H = 0;
};
Dims dims_of(const ModelGraph& g, const Op& op, size_t q) {
  const auto& sq = g.tensor(op.inputs[q]).shape;
  const auto& sk = g.tensor(op.inputs[q + 1]).shape;
  return {sq[0], sq[1], sk[1], sq[2]};
}

// The scaled direction a = g v / ||v|| and the norm.
std::vector<double> direction(const Tensor& v, const Tensor& g, double& norm) {
  double n2 = 0;
  for (float x : v.data) n2 += static_cast<double>(x) * x;
  norm = std::sqrt(n2);
  std::vector<double> a(v.data.size(), 0.0);
  if (norm > 0)
    for (size_t h = 0; h < a.size(); ++h) a[h] = g.data[0] * v.data[h] / norm;
  return a;
}

// Per (b, t, r, h): two adds, a tanh, the product with a and its sum.
OpCost scores_cost(const ModelGraph& g, const Op& op) {
  const Dims d = dims_of(g, op, 0);
  OpCost c = ops::vpu_cost(g, op, 4, 1);
  c.vector.elements = static_cast<double>(d.B * d.T) * static_cast<double>(d.S * d.H);
  c.flops = 5 * c.vector.elements;
  return c;
}

void scores_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& q = in(s, op, 0);
  const Tensor& k = in(s, op, 1);
  const Tensor& bias = in(s, op, 2);
  const Dims d = dims_of(g, op, 0);
  double norm = 0;
  const std::vector<double> a = direction(in(s, op, 3), in(s, op, 4), norm);
  Tensor out = ops::out_like(g, op);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t t = 0; t < d.T; ++t)
      for (int64_t r = 0; r < d.S; ++r) {
        const float* qv = &q.data[(b * d.T + t) * d.H];
        const float* kv = &k.data[(b * d.S + r) * d.H];
        double sum = 0;
        for (int64_t h = 0; h < d.H; ++h) sum += a[h] * std::tanh(static_cast<double>(qv[h]) + kv[h] + bias.data[h]);
        out.data[(b * d.T + t) * d.S + r] = static_cast<float>(sum);
      }
  ops::put(g, op, s, std::move(out));
}

std::vector<TensorId> scores_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  ModelGraph& g = b.graph();
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::AdditiveAttentionGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {dy[0]};
  grad.inputs.insert(grad.inputs.end(), op.inputs.begin(), op.inputs.end());
  const char* names[] = {".dq", ".dk", ".dbias", ".dv", ".dg"};
  std::vector<TensorId> out;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorInfo x = g.tensor(op.inputs[i]);
    out.push_back(g.add_tensor({op.name + names[i], x.shape, x.dtype, TensorRole::Gradient}));
  }
  grad.outputs = out;
  g.add_op(grad);
  return out;
}

// Per (b, t, r, h): the sum again (two adds), the tanh, 1 - tanh^2 (2), times ds a (2), the three sums into dq,
// dk, dbias, and ds tanh into da (2).
OpCost scores_grad_cost(const ModelGraph& g, const Op& op) {
  const Dims d = dims_of(g, op, 1);
  OpCost c = ops::vpu_cost(g, op, 11, 1);
  c.vector.elements = static_cast<double>(d.B * d.T) * static_cast<double>(d.S * d.H);
  c.flops = 12 * c.vector.elements;
  return c;
}

void scores_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& ds = in(s, op, 0);
  const Tensor& q = in(s, op, 1);
  const Tensor& k = in(s, op, 2);
  const Tensor& bias = in(s, op, 3);
  const Tensor& v = in(s, op, 4);
  const Tensor& gain = in(s, op, 5);
  const Dims d = dims_of(g, op, 1);
  double norm = 0;
  const std::vector<double> a = direction(v, gain, norm);
  std::vector<double> dq(q.data.size(), 0.0), dk(k.data.size(), 0.0), db(d.H, 0.0), da(d.H, 0.0);
  for (int64_t b = 0; b < d.B; ++b)
    for (int64_t t = 0; t < d.T; ++t)
      for (int64_t r = 0; r < d.S; ++r) {
        const double dsv = ds.data[(b * d.T + t) * d.S + r];
        const float* qv = &q.data[(b * d.T + t) * d.H];
        const float* kv = &k.data[(b * d.S + r) * d.H];
        for (int64_t h = 0; h < d.H; ++h) {
          const double th = std::tanh(static_cast<double>(qv[h]) + kv[h] + bias.data[h]);
          const double dz = dsv * a[h] * (1 - th * th);
          dq[(b * d.T + t) * d.H + h] += dz;
          dk[(b * d.S + r) * d.H + h] += dz;
          db[h] += dz;
          da[h] += dsv * th;
        }
      }
  // a = g u, u = v / ||v||: dg = u . da, dv = (g / ||v||) (da - u (u . da)).
  double u_da = 0;
  for (int64_t h = 0; h < d.H; ++h) u_da += (norm > 0 ? v.data[h] / norm : 0.0) * da[h];
  auto store = [&](size_t i, const std::vector<double>& x) {
    Tensor o = ops::out_like(g, op, i);
    for (size_t e = 0; e < x.size(); ++e) o.data[e] = static_cast<float>(x[e]);
    ops::put(g, op, s, std::move(o), i);
  };
  std::vector<double> dv(d.H, 0.0);
  for (int64_t h = 0; h < d.H && norm > 0; ++h) dv[h] = gain.data[0] / norm * (da[h] - v.data[h] / norm * u_da);
  store(0, dq);
  store(1, dk);
  store(2, db);
  store(3, dv);
  store(4, {u_da});
}

// The batch split as the queries come (the keys take the same split); positions and units whole; the vector
// parameters whole on every device.
OpSharding scores_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec rows = ShardSpec::replicated(3);
  rows.dims[0] = sharding::settled(q.in[0]).dims[0];
  r.in = {rows, rows, ShardSpec::replicated(1), ShardSpec::replicated(1), ShardSpec::replicated(1)};
  r.out = {rows};
  return r;
}

// dq, dk split as ds's batch; dbias, dv, dg partial sums over the axes that split it.
OpSharding scores_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec rows = ShardSpec::replicated(3);
  rows.dims[0] = sharding::settled(q.in[1]).dims[0];
  ShardSpec sums = ShardSpec::replicated(1);
  sums.partial = rows.dims[0];
  std::sort(sums.partial.begin(), sums.partial.end());
  r.in = {rows, rows, rows, ShardSpec::replicated(1), ShardSpec::replicated(1), ShardSpec::replicated(1)};
  r.out = {rows, rows, sums, sums, sums};
  return r;
}

const bool registered = register_op_kind({OpKind::AdditiveAttention, "additive_attention", Unit::Vpu, scores_cost,
                                          scores_kernel, scores_grad, scores_rule}) &&
                        register_op_kind({OpKind::AdditiveAttentionGrad, "additive_attention_grad", Unit::Vpu,
                                          scores_grad_cost, scores_grad_kernel, nullptr, scores_grad_rule});

}  // namespace
}  // namespace podsim
