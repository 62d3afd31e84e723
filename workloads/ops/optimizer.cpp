// Optimizer updates, one op per parameter, elementwise (fusible):
//   SGD:  w' = w - lr * g
//   Adam: m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2;  w' = w - lr * (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + eps)
//   AdamW (Loshchilov and Hutter 2019, Algorithm 2 with schedule multiplier 1; big_vision's ViT recipe): Adam's update
//     of a weight minus its decoupled decay, w' = w - lr adam - wd w (attrs.weight_decay; 0 on biases and
//     normalization parameters, whose update is Adam's). The decay is not scaled by the learning rate (optax's and
//     PyTorch's adamw scale it: their wd is this one over lr).
//   Momentum (TensorFlow's MomentumOptimizer, as the MLPerf ResNets): u' = mu u + g;  w' = w - lr u'
//     With weight_decay (attrs.weight_decay), the gradient of an L2 term wd/2 ||w||^2 of the loss on every variable
//     (MLPerf's TPU SSD adds wd tf.nn.l2_loss of all trainable variables): u' = mu u + (g + wd w).
//   LARS (You, Gitman, Ginsburg 2017; TensorFlow's LARSOptimizer as the MLPerf ResNet-50 submissions use it), per
//     weight: the trust ratio tau = eta ||w|| / (||g|| + wd ||w||) (1 when either norm is 0), then
//     u' = mu u + lr tau (g + wd w);  w' = w - u'. Biases and normalization parameters (ParamKind, tensor_info.h)
//     take the momentum update at lr without decay (the MLPerf skip list). The norms come from a LarsNorms op, a
//     reduction giving [sum w^2, sum g^2]: with the weight split, each device sums its shard and the partitioner
//     all-reduces the two partial sums over the splitting axes (8 bytes per weight).
//   RMSProp (TensorFlow's RMSPropOptimizer with momentum, as GPipe's AmoebaNet; decay rho): ms' = rho ms + (1 - rho)
//     g^2;  u' = mu u + lr g / sqrt(ms' + eps);  w' = w - u'. Two fp32 states (ms, u): with an fp32 weight, 12 bytes
//     per parameter, GPipe's figure (Huang et al. 2019, Table 1). The state starts at 0 (TensorFlow 1 starts ms at 1).
// With global-norm clipping (workload.clip_norm) each update takes the clipping factor c as its last input and uses
// c g for g (one multiply more per element), as tf.clip_by_global_norm scales the gradients before apply_gradients.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// One multiply per element more when the op scales its gradient by a clipping factor (its input `base`).
double clip_ops(const Op& op, size_t base) { return op.inputs.size() > base ? 1 : 0; }

OpCost sgd_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 2 + clip_ops(op, 2));
  c.fusible = true;
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

void sgd_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  Tensor o = ops::out_like(g, op);
  const float lr = static_cast<float>(op.attrs.alpha), c = ops::clip_factor(s, op, 2);
  for (size_t i = 0; i < w.data.size(); ++i) o.data[i] = w.data[i] - lr * (c * grad.data[i]);
  ops::put(g, op, s, std::move(o));
}

OpCost adam_cost(const ModelGraph& g, const Op& op) {
  // AdamW's decay: a multiply and a subtract more.
  OpCost c = ops::vpu_cost(g, op, 12 + clip_ops(op, 4) + (op.attrs.weight_decay > 0 ? 2 : 0), 1, 1);
  c.fusible = true;
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

void adam_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  const Tensor& m = in(s, op, 2);
  const Tensor& v = in(s, op, 3);
  const OpAttrs& a = op.attrs;
  Tensor w2 = ops::out_like(g, op, 0), m2 = ops::out_like(g, op, 1), v2 = ops::out_like(g, op, 2);
  const double c1 = 1.0 - std::pow(a.beta1, static_cast<double>(a.step));
  const double c2 = 1.0 - std::pow(a.beta2, static_cast<double>(a.step));
  const float clip = ops::clip_factor(s, op, 4);
  for (size_t i = 0; i < w.data.size(); ++i) {
    double gi = clip * grad.data[i];
    double mi = a.beta1 * m.data[i] + (1 - a.beta1) * gi;
    double vi = a.beta2 * v.data[i] + (1 - a.beta2) * gi * gi;
    m2.data[i] = static_cast<float>(mi);
    v2.data[i] = static_cast<float>(vi);
    w2.data[i] = static_cast<float>(w.data[i] - a.alpha * (mi / c1) / (std::sqrt(vi / c2) + a.eps) -
                                    a.weight_decay * w.data[i]);
  }
  ops::put(g, op, s, std::move(w2), 0);
  ops::put(g, op, s, std::move(m2), 1);
  ops::put(g, op, s, std::move(v2), 2);
}

OpCost momentum_cost(const ModelGraph& g, const Op& op) {
  // u' = mu u + g (2), w' = w - lr u' (2); the L2 term's gradient wd w added (2).
  OpCost c = ops::vpu_cost(g, op, 4 + clip_ops(op, 3) + (op.attrs.weight_decay > 0 ? 2 : 0));
  c.fusible = true;
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

void momentum_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  const Tensor& u = in(s, op, 2);
  Tensor w2 = ops::out_like(g, op, 0), u2 = ops::out_like(g, op, 1);
  const double lr = op.attrs.alpha, mu = op.attrs.beta1, wd = op.attrs.weight_decay;
  const float clip = ops::clip_factor(s, op, 3);
  for (size_t i = 0; i < w.data.size(); ++i) {
    const double ui = mu * u.data[i] + clip * grad.data[i] + wd * w.data[i];
    u2.data[i] = static_cast<float>(ui);
    w2.data[i] = static_cast<float>(w.data[i] - lr * ui);
  }
  ops::put(g, op, s, std::move(w2), 0);
  ops::put(g, op, s, std::move(u2), 1);
}

// Two sums of squares over the whole tensor (a reduction fusion: w^2 and g^2, each a multiply and an add per element).
OpCost lars_norms_cost(const ModelGraph& g, const Op& op) {
  return ops::reduction(ops::vpu_cost(g, op, 4 + clip_ops(op, 2), 0, 0, 2, 4));
}

void lars_norms_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  const double clip = ops::clip_factor(s, op, 2);
  double sw = 0, sg = 0;
  for (size_t i = 0; i < w.data.size(); ++i) {
    sw += static_cast<double>(w.data[i]) * w.data[i];
    const double gi = clip * grad.data[i];
    sg += gi * gi;
  }
  Tensor o = ops::out_like(g, op);
  o.data = {static_cast<float>(sw), static_cast<float>(sg)};
  ops::put(g, op, s, std::move(o));
}

// On the local shards of w and g: partial sums over every axis that splits them (the partitioner all-reduces them
// where the update reads them whole).
OpSharding lars_norms_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec target = sharding::settled(q.in.at(0));  // w and g in the spec of the more split (the update's)
  const ShardSpec sg = sharding::settled(q.in.at(1));
  const int64_t pw = sharding::pieces(target, q.mesh), pg = sharding::pieces(sg, q.mesh);
  if (pg > pw || (pg == pw && sg.axes().size() > target.axes().size())) target = sg;
  r.in = {target, target};
  if (q.in.size() > 2) r.in.push_back(ShardSpec::replicated(1));  // the clipping factor
  std::vector<size_t> all(target.rank());
  for (size_t d = 0; d < all.size(); ++d) all[d] = d;
  ShardSpec out = ShardSpec::replicated(1);
  out.partial = sharding::reduced_axes(target, all);
  r.out = {out};
  return r;
}

// The scalar work (two square roots, a divide) is per op, not per element.
OpCost lars_cost(const ModelGraph& g, const Op& op) {
  // g + wd w (2), x lr tau (1), u' = mu u + that (2), w' = w - u' (1)
  OpCost c = ops::vpu_cost(g, op, 6 + clip_ops(op, 4));
  c.fusible = true;
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

// The learning rate scaled by LARS's trust ratio, from the squared norms (TensorFlow's LARSOptimizer.compute_lr).
double lars_rate(const OpAttrs& a, double sum_w2, double sum_g2) {
  const double wn = std::sqrt(sum_w2), gn = std::sqrt(sum_g2);
  const double trust = wn > 0 && gn > 0 ? a.eta * wn / (gn + a.weight_decay * wn) : 1.0;
  return a.alpha * trust;
}

void lars_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  const Tensor& u = in(s, op, 2);
  const Tensor& norms = in(s, op, 3);
  ops::check(norms.data.size() == 2, op, "LARS takes two squared norms");
  const double rate = lars_rate(op.attrs, norms.data[0], norms.data[1]);
  const double mu = op.attrs.beta1, wd = op.attrs.weight_decay;
  const float clip = ops::clip_factor(s, op, 4);
  Tensor w2 = ops::out_like(g, op, 0), u2 = ops::out_like(g, op, 1);
  for (size_t i = 0; i < w.data.size(); ++i) {
    const double ui = mu * u.data[i] + rate * (clip * grad.data[i] + wd * w.data[i]);
    u2.data[i] = static_cast<float>(ui);
    w2.data[i] = static_cast<float>(w.data[i] - ui);
  }
  ops::put(g, op, s, std::move(w2), 0);
  ops::put(g, op, s, std::move(u2), 1);
}

OpCost rmsprop_cost(const ModelGraph& g, const Op& op) {
  // ms' (g^2, two products, an add: 4), + eps, x lr, x g (3), u' (2), w' (1); one reciprocal square root.
  OpCost c = ops::vpu_cost(g, op, 10 + clip_ops(op, 4), 1);
  c.fusible = true;
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

void rmsprop_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  const Tensor& ms = in(s, op, 2);
  const Tensor& u = in(s, op, 3);
  const OpAttrs& a = op.attrs;
  Tensor w2 = ops::out_like(g, op, 0), ms2 = ops::out_like(g, op, 1), u2 = ops::out_like(g, op, 2);
  const float clip = ops::clip_factor(s, op, 4);
  for (size_t i = 0; i < w.data.size(); ++i) {
    const double gi = clip * grad.data[i];
    const double mi = a.beta2 * ms.data[i] + (1 - a.beta2) * gi * gi;
    const double ui = a.beta1 * u.data[i] + a.alpha * gi / std::sqrt(mi + a.eps);
    ms2.data[i] = static_cast<float>(mi);
    u2.data[i] = static_cast<float>(ui);
    w2.data[i] = static_cast<float>(w.data[i] - ui);
  }
  ops::put(g, op, s, std::move(w2), 0);
  ops::put(g, op, s, std::move(ms2), 1);
  ops::put(g, op, s, std::move(u2), 2);
}

// Elementwise on the parameter's spec: the gradient and optimizer state are brought to the spec of the most split
// of them (weight-update sharding: the state is split, so the gradient is reduce-scattered and the parameter
// sliced, and the updated shard gathered afterwards).
// The clipping factor, when there is one, is whole.
template <size_t Base>
OpSharding update_rule(const OpShardingQuery& q) {
  return ops::with_clip_factor(sharding::elementwise(q, false), Base);
}

// LARS's update: elementwise, its squared norms whole (all-reduced when the norms op ran on shards).
OpSharding lars_rule(const OpShardingQuery& q) {
  OpSharding r = ops::with_clip_factor(sharding::elementwise(q, false), 4);
  r.in.at(3) = ShardSpec::replicated(1);
  return r;
}

const bool registered =
    register_op_kind({OpKind::SgdUpdate, "sgd_update", Unit::Vpu, sgd_cost, sgd_kernel, nullptr, update_rule<2>}) &&
    register_op_kind({OpKind::AdamUpdate, "adam_update", Unit::Vpu, adam_cost, adam_kernel, nullptr, update_rule<4>}) &&
    register_op_kind({OpKind::MomentumUpdate, "momentum_update", Unit::Vpu, momentum_cost, momentum_kernel, nullptr,
                      update_rule<3>}) &&
    register_op_kind(
        {OpKind::LarsNorms, "lars_norms", Unit::Vpu, lars_norms_cost, lars_norms_kernel, nullptr, lars_norms_rule}) &&
    register_op_kind({OpKind::LarsUpdate, "lars_update", Unit::Vpu, lars_cost, lars_kernel, nullptr, lars_rule}) &&
    register_op_kind(
        {OpKind::RmsPropUpdate, "rmsprop_update", Unit::Vpu, rmsprop_cost, rmsprop_kernel, nullptr, update_rule<4>});

}  // namespace
}  // namespace podsim
