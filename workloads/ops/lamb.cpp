// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning: Training BERT in 76 minutes", Algorithm 2),
// as MLPerf's BERT codes it (lamb_optimizer_v1.py of the v0.7 reference; the Google TPU submissions' copy is the
// same per variable). Per weight w with gradient g (after global-norm clipping, workload.clip_norm), at step t:
//   m' = b1 m + (1 - b1) g;  v' = b2 v + (1 - b2) g^2
//   u  = (m' / (1 - b1^t)) / (sqrt(v' / (1 - b2^t)) + eps) + wd w
//   r  = ||w|| / ||u|| when both norms are > 0, else 1   (the trust ratio, phi(z) = z)
//   w' = w - lr r u
// The parameters the MLPerf code excludes by name ("LayerNorm", "layer_norm", "bias": ParamKind Bias and Norm) take
// neither the decay nor the ratio: w' = w - lr u with wd = 0, which is Adam's update (AdamUpdate, optimizer.cpp).
//
// The ratio needs the whole weight's norms before any element is updated, so LAMB runs as two kernels, as XLA fuses
// the TensorFlow graph: LambMoments reads w, g, m, v and writes m', v' and the two sums of squares (a multi-output
// reduction over the whole tensor); LambUpdate reads w, m', v' and the sums and writes w', recomputing u. With the
// weight sharded (weight-update sharding, fsdp, a model axis) each device sums its shard's squares (padding is
// zeros: its u is 0), and the partitioner all-reduces the two partial sums over the splitting axes: 8 bytes per
// weight, one all-reduce per weight that gradient bucketing combines into one (docs/model.md, "LAMB").
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

constexpr size_t kMomentsInputs = 4;  // w, g, m, v; then the clipping factor, when clipping

struct Corrections {
  double c1, c2;
};
Corrections corrections(const OpAttrs& a) {
  return {1.0 - std::pow(a.beta1, static_cast<double>(a.step)), 1.0 - std::pow(a.beta2, static_cast<double>(a.step))};
}

// u for one element, from the new moments.
double lamb_direction(const OpAttrs& a, const Corrections& c, double w, double m, double v) {
  return (m / c.c1) / (std::sqrt(v / c.c2) + a.eps) + a.weight_decay * w;
}

// Per element: the clip multiply (when clipping), m' (2 multiplies, an add), v' (the square, 2 multiplies, an add),
// u (two multiplies by the corrections' reciprocals, + eps, the division; wd w and its add), and each square summed
// (a multiply and an add for w and for u); one square root and one division. Both sums are whole-tensor reductions.
OpCost moments_cost(const ModelGraph& g, const Op& op) {
  const double clip = op.inputs.size() > kMomentsInputs ? 1 : 0;
  OpCost c = ops::vpu_cost(g, op, 16 + clip, 1, 1, 2);
  c.reduction = true;
  c.whole_tensor = true;  // the update reads w again after its norm: a kernel of its own
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

void moments_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& grad = in(s, op, 1);
  const Tensor& m = in(s, op, 2);
  const Tensor& v = in(s, op, 3);
  const OpAttrs& a = op.attrs;
  const Corrections c = corrections(a);
  const double clip = ops::clip_factor(s, op, kMomentsInputs);
  Tensor m2 = ops::out_like(g, op, 0), v2 = ops::out_like(g, op, 1), norms = ops::out_like(g, op, 2);
  double sw = 0, su = 0;
  for (size_t i = 0; i < w.data.size(); ++i) {
    const double gi = clip * grad.data[i];
    // Stored in fp32, and the update reads them back: the direction is computed from the stored values.
    m2.data[i] = static_cast<float>(a.beta1 * m.data[i] + (1 - a.beta1) * gi);
    v2.data[i] = static_cast<float>(a.beta2 * v.data[i] + (1 - a.beta2) * gi * gi);
    const double u = lamb_direction(a, c, w.data[i], m2.data[i], v2.data[i]);
    sw += static_cast<double>(w.data[i]) * w.data[i];
    su += u * u;
  }
  norms.data = {static_cast<float>(sw), static_cast<float>(su)};
  ops::put(g, op, s, std::move(m2), 0);
  ops::put(g, op, s, std::move(v2), 1);
  ops::put(g, op, s, std::move(norms), 2);
}

// The trust ratio from the two sums of squares (MLPerf's lamb_optimizer_v1.py: 1.0 unless both norms are > 0).
double trust_ratio(double sum_w2, double sum_u2) {
  const double wn = std::sqrt(sum_w2), un = std::sqrt(sum_u2);
  return wn > 0 && un > 0 ? wn / un : 1.0;
}

// u again (two multiplies, + eps, the division, wd w and its add: 5 simple, a square root, a division), then
// w - (lr r) u (a multiply and a subtraction; lr r is one number per op).
OpCost update_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 7, 1, 1);
  c.fusible = true;
  c.pattern = c.write_pattern = HbmPattern::ReadModifyWrite;
  return c;
}

void update_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& w = in(s, op, 0);
  const Tensor& m = in(s, op, 1);
  const Tensor& v = in(s, op, 2);
  const Tensor& norms = in(s, op, 3);
  ops::check(norms.data.size() == 2, op, "LAMB's update takes the two sums of squares");
  const OpAttrs& a = op.attrs;
  const Corrections c = corrections(a);
  const double step = a.alpha * trust_ratio(norms.data[0], norms.data[1]);
  Tensor w2 = ops::out_like(g, op);
  for (size_t i = 0; i < w.data.size(); ++i)
    w2.data[i] = static_cast<float>(w.data[i] - step * lamb_direction(a, c, w.data[i], m.data[i], v.data[i]));
  ops::put(g, op, s, std::move(w2));
}

// The moments elementwise on the spec of the most split of w, g, m, v (weight-update sharding splits the state: the
// gradient is reduce-scattered into it, as for Adam); the sums partial over every axis that splits that spec.
OpSharding moments_rule(const OpShardingQuery& q) {
  OpSharding r = ops::with_clip_factor(sharding::elementwise(q, false), kMomentsInputs);
  const ShardSpec target = r.out.front();
  std::vector<size_t> all(target.rank());
  for (size_t d = 0; d < all.size(); ++d) all[d] = d;
  ShardSpec sums = ShardSpec::replicated(1);
  sums.partial = sharding::reduced_axes(target, all);
  r.out = {target, target, sums};
  return r;
}

// Elementwise on the weight's spec; the sums whole (all-reduced where the moments ran on shards).
OpSharding update_rule(const OpShardingQuery& q) {
  OpSharding r = sharding::elementwise(q, false);
  r.in.at(3) = ShardSpec::replicated(1);
  return r;
}

const bool registered =
    register_op_kind({OpKind::LambMoments, "lamb_moments", Unit::Vpu, moments_cost, moments_kernel, nullptr,
                      moments_rule}) &&
    register_op_kind({OpKind::LambUpdate, "lamb_update", Unit::Vpu, update_cost, update_kernel, nullptr, update_rule});

}  // namespace
}  // namespace podsim
