// Global-norm gradient clipping, as tf.clip_by_global_norm (which MLPerf's BERT applies with clip_norm 1.0 before
// LAMB, and its GNMT with 5.0 before Adam): every gradient is scaled by c = clip / max(||G||, clip), ||G|| the norm
// of all the step's gradients taken together, so c = 1 when ||G|| <= clip.
//   GradSquaredNorm: g -> [sum g^2] (fp32), one per gradient: a whole-tensor reduction on the vector unit. With the
//     gradient sharded (weight-update sharding, fsdp, a model axis) each device sums its shard (padding is zeros)
//     and the partitioner all-reduces the partial sum over the splitting axes: 4 bytes per gradient, combined by
//     gradient bucketing into one all-reduce.
//   ClipFactor: every squared norm -> c [1]: their sum, its square root, the comparison and the division, once per
//     step (scalar work).
// The updates take c as their last input (optimizer.cpp, lamb.cpp) and use c g. Clipping makes every update wait
// for every gradient: none can start before the last gradient's norm is known.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// A multiply and an add per element.
OpCost squared_norm_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 2, 0, 0, 1);
  c.reduction = true;
  c.whole_tensor = true;  // the update reads the gradient again once the factor is known
  return c;
}

void squared_norm_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  double sum = 0;
  for (float v : x.data) sum += static_cast<double>(v) * v;
  Tensor o = ops::out_like(g, op);
  o.data = {static_cast<float>(sum)};
  ops::put(g, op, s, std::move(o));
}

OpSharding squared_norm_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec x = sharding::settled(q.in.at(0));
  r.in = {x};
  std::vector<size_t> all(x.rank());
  for (size_t d = 0; d < all.size(); ++d) all[d] = d;
  ShardSpec out = ShardSpec::replicated(1);
  out.partial = sharding::reduced_axes(x, all);
  r.out = {out};
  return r;
}

// One add per squared norm, then a square root, a compare and a division: scalar work, counted per input.
OpCost factor_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 1);
  c.vector.elements = static_cast<double>(op.inputs.size());
  c.flops = c.vector.elements + 3;
  return c;
}

void factor_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  double sum = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) sum += in(s, op, i).data.at(0);
  const double clip = op.attrs.alpha, norm = std::sqrt(sum);
  Tensor o = ops::out_like(g, op);
  o.data = {static_cast<float>(clip / std::max(norm, clip))};
  ops::put(g, op, s, std::move(o));
}

// The squared norms whole (all-reduced where they were partial sums); the factor whole on every device.
OpSharding factor_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  r.in.assign(q.in.size(), ShardSpec::replicated(1));
  r.out = {ShardSpec::replicated(1)};
  return r;
}

const bool registered = register_op_kind({OpKind::GradSquaredNorm, "grad_squared_norm", Unit::Vpu, squared_norm_cost,
                                          squared_norm_kernel, nullptr, squared_norm_rule}) &&
                        register_op_kind({OpKind::ClipFactor, "clip_factor", Unit::Vpu, factor_cost, factor_kernel,
                                          nullptr, factor_rule});

}  // namespace
}  // namespace podsim
