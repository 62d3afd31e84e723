// GShard top-2 gating (Lepikhin et al. 2020, §2.2, Algorithm 1) over logits [G, S, E] (G groups of S tokens, E
// experts), capacity C slots per expert and group (from the output shape). Routing is in workloads/moe_routing.h.
// Outputs, as GShard expresses dispatch and combine as einsums:
//   combine [G, S, E, C]:  w1 at (s, e1, slot1) and w2 at (s, e2, slot2) for the assignments kept, else 0;
//   dispatch [G, S, E, C]: 1 where combine is non-zero (a one-hot mask; stop-gradient);
//   aux_loss [1]:          alpha x l_aux, l_aux = mean over groups of (1/E) sum_e (c_e / S) m_e, where c_e counts
//                          the group's tokens whose first choice is e (before capacity) and m_e is the mean gate of
//                          expert e over the group; a term of the step's loss (d loss / d term = 1, as for the
//                          cross-entropy);
//   routes [G, S, 4]:      {e1, slot1, e2, slot2} per token (stop-gradient), what the report counts.
// The gradient flows through the gates of e1 and e2 (both normalised weights depend on both gates) and, with
// alpha > 0, through the mean gates of the auxiliary loss; c_e is a count and has none.
//
// Partitioning: groups may be split over mesh axes (attrs.axes records them, so a device knows the global index
// of its groups: random routing draws by global token position, and padded groups of an uneven split route
// nothing); tokens and experts of a group stay whole. The auxiliary loss is then a pending sum over those axes,
// each device adding its groups' terms over the global group count (attrs.count).
#include <algorithm>

#include "workloads/moe_routing.h"
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// Work per logit (softmax: max, exp, sum, divide; top-2: compares and selects; slots: a running count) and per
// element of the [G, S, E, C] outputs (writing both masks).
OpCost gating_cost(const ModelGraph& g, const Op& op) {
  const double logits = static_cast<double>(ops::elements(g, op.inputs[0]));
  const double big = static_cast<double>(ops::elements(g, op.outputs[0]));
  const double per = logits / big;
  OpCost c;
  c.unit = Unit::Vpu;
  c.vector.elements = big;
  c.vector.simple = 2 + 6 * per;
  c.vector.transcendental = per;
  c.vector.divide = per;
  c.vector.reduce = 2 * per;
  c.flops = logits * 10;
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return c;
}

// The global index of local group 0 (groups at or past attrs.count are padding).
int64_t group_offset(const Op& op, const TensorStore& s, int64_t local_groups) {
  return s.device_index(op.attrs.axes) * local_groups;
}

void gating_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& logits = in(s, op, 0);
  const int64_t G = logits.shape[0], S = logits.shape[1], E = logits.shape[2];
  const int64_t C = g.tensor(op.outputs[0]).shape[3];
  Tensor combine = ops::out_like(g, op, 0), dispatch = ops::out_like(g, op, 1), aux = ops::out_like(g, op, 2);
  Tensor routes = ops::out_like(g, op, 3);
  const int64_t offset = group_offset(op, s, G);
  // A re-materialized gating (workloads/remat.h) draws what the original drew: the same name without "/remat".
  std::string routing_name = op.name;
  if (op.recompute && routing_name.size() > 6 && routing_name.compare(routing_name.size() - 6, 6, "/remat") == 0)
    routing_name.resize(routing_name.size() - 6);
  std::vector<double> gates(static_cast<size_t>(S * E));
  double aux_sum = 0;
  for (int64_t grp = 0; grp < G; ++grp) {
    float* rt = &routes.data[static_cast<size_t>(grp * S * 4)];
    if (offset + grp >= op.attrs.count) {  // padding of an uneven split: no tokens
      std::fill(rt, rt + S * 4, -1.0f);
      continue;
    }
    for (int64_t t = 0; t < S; ++t) gate_softmax(&logits.data[static_cast<size_t>((grp * S + t) * E)], E, &gates[t * E]);
    const int64_t first_token = (offset + grp) * S;
    const std::vector<Route> r = route_group(gates, S, E, C, op.attrs.sample_second, [&](int64_t t) {
      return routing_uniform(op.attrs.seed, routing_name, first_token + t);
    });
    std::vector<double> first(static_cast<size_t>(E), 0), mean(static_cast<size_t>(E), 0);
    for (int64_t t = 0; t < S; ++t) {
      const Route& x = r[t];
      first[x.e1] += 1;
      for (int64_t e = 0; e < E; ++e) mean[e] += gates[t * E + e];
      const size_t base = static_cast<size_t>((grp * S + t) * E);
      if (x.slot1 >= 0) {
        combine.data[(base + x.e1) * C + x.slot1] = static_cast<float>(x.w1);
        dispatch.data[(base + x.e1) * C + x.slot1] = 1.0f;
      }
      if (x.slot2 >= 0) {
        combine.data[(base + x.e2) * C + x.slot2] = static_cast<float>(x.w2);
        dispatch.data[(base + x.e2) * C + x.slot2] = 1.0f;
      }
      rt[t * 4 + 0] = static_cast<float>(x.e1);
      rt[t * 4 + 1] = static_cast<float>(x.slot1);
      rt[t * 4 + 2] = static_cast<float>(x.e2);
      rt[t * 4 + 3] = static_cast<float>(x.slot2);
    }
    double l = 0;
    for (int64_t e = 0; e < E; ++e) l += first[e] / static_cast<double>(S) * mean[e] / static_cast<double>(S);
    aux_sum += l / static_cast<double>(E);
  }
  aux.data[0] = static_cast<float>(op.attrs.alpha * aux_sum / static_cast<double>(op.attrs.count));
  ops::put(g, op, s, std::move(combine), 0);
  ops::put(g, op, s, std::move(dispatch), 1);
  ops::put(g, op, s, std::move(aux), 2);
  ops::put(g, op, s, std::move(routes), 3);
}

std::vector<TensorId> gating_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const bool aux = dy[2] >= 0 && op.attrs.alpha != 0;
  if (dy[0] < 0 && !aux) return {-1};
  const TensorInfo& logits = b.graph().tensor(op.inputs[0]);
  OpAttrs at;
  at.alpha = aux ? op.attrs.alpha : 0.0;
  at.count = op.attrs.count;
  std::vector<TensorId> inputs = {op.inputs[0], op.outputs[3]};
  if (dy[0] >= 0) inputs.push_back(dy[0]);
  return {b.emit(op.name + ".dlogits", OpKind::Top2GatingGrad, Phase::Backward, inputs, logits.shape, logits.dtype,
                 TensorRole::Gradient, at)};
}

// Reads dcombine at the two slots of each token; recomputes the gates per logit.
OpCost gating_grad_cost(const ModelGraph& g, const Op& op) {
  const double logits = static_cast<double>(ops::elements(g, op.inputs[0]));
  OpCost c;
  c.unit = Unit::Vpu;
  c.vector.elements = logits;
  c.vector.simple = 8;
  c.vector.transcendental = 1;
  c.vector.divide = 1;
  c.vector.reduce = 3;
  c.flops = logits * 13;
  c.bytes_read = g.tensor(op.inputs[0]).bytes() + g.tensor(op.inputs[1]).bytes();
  if (op.inputs.size() > 2) {  // two elements of dcombine per token, at random places
    const TensorInfo& dc = g.tensor(op.inputs[2]);
    c.bytes_read += 2.0 * static_cast<double>(g.tensor(op.inputs[1]).elements()) / 4 * dtype_bytes(dc.dtype);
    c.read_run = dtype_bytes(dc.dtype);
    c.pattern = HbmPattern::Gather;
  }
  c.bytes_written = output_bytes(g, op);
  return c;
}

// d loss / d logits: through w1 = g1 / (g1 + g2) and w2 = g2 / (g1 + g2) at the slots kept, plus alpha x
// d l_aux / d gates = alpha c_e / (G E S^2), then back through the softmax.
void gating_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& logits = in(s, op, 0);
  const Tensor& routes = in(s, op, 1);
  const Tensor* dcombine = op.inputs.size() > 2 ? &in(s, op, 2) : nullptr;
  const int64_t G = logits.shape[0], S = logits.shape[1], E = logits.shape[2];
  const int64_t C = dcombine ? dcombine->shape[3] : 0;
  Tensor dl = ops::out_like(g, op);
  const int64_t offset = group_offset(op, s, G);
  const double aux_scale = op.attrs.alpha / (static_cast<double>(op.attrs.count) * static_cast<double>(E) *
                                             static_cast<double>(S) * static_cast<double>(S));
  std::vector<double> gates(static_cast<size_t>(E)), dg(static_cast<size_t>(E)), first(static_cast<size_t>(E));
  for (int64_t grp = 0; grp < G; ++grp) {
    if (offset + grp >= op.attrs.count) continue;  // padding: no gradient
    const float* rt = &routes.data[static_cast<size_t>(grp * S * 4)];
    std::fill(first.begin(), first.end(), 0.0);
    for (int64_t t = 0; t < S; ++t) first[static_cast<int64_t>(rt[t * 4])] += 1;
    for (int64_t t = 0; t < S; ++t) {
      const size_t row = static_cast<size_t>((grp * S + t) * E);
      gate_softmax(&logits.data[row], E, gates.data());
      for (int64_t e = 0; e < E; ++e) dg[e] = aux_scale * first[e];
      const auto e1 = static_cast<int64_t>(rt[t * 4]), s1 = static_cast<int64_t>(rt[t * 4 + 1]);
      const auto e2 = static_cast<int64_t>(rt[t * 4 + 2]), s2 = static_cast<int64_t>(rt[t * 4 + 3]);
      if (dcombine) {
        const double dw1 = s1 >= 0 ? dcombine->data[(row + e1) * C + s1] : 0.0;
        const double dw2 = s2 >= 0 ? dcombine->data[(row + e2) * C + s2] : 0.0;
        const double g1 = gates[e1], g2 = gates[e2], d2 = (g1 + g2) * (g1 + g2);
        dg[e1] += (dw1 - dw2) * g2 / d2;
        dg[e2] += (dw2 - dw1) * g1 / d2;
      }
      double dot = 0;
      for (int64_t e = 0; e < E; ++e) dot += gates[e] * dg[e];
      for (int64_t e = 0; e < E; ++e) dl.data[row + e] = static_cast<float>(gates[e] * (dg[e] - dot));
    }
  }
  ops::put(g, op, s, std::move(dl));
}

// ---- partitioning: groups split as the logits are; tokens and experts whole ----
ShardSpec groups_only(size_t rank, const std::vector<std::string>& group_axes) {
  ShardSpec out = ShardSpec::replicated(rank);
  out.dims[0] = group_axes;
  return out;
}

OpSharding gating_rule(const OpShardingQuery& q) {
  const std::vector<std::string> axes = sharding::settled(q.in[0]).dims[0];
  OpSharding r;
  r.attrs = q.op.attrs;
  r.attrs.axes = axes;
  r.in = {groups_only(3, axes)};
  ShardSpec aux = ShardSpec::replicated(1);
  aux.partial = axes;
  std::sort(aux.partial.begin(), aux.partial.end());
  r.out = {groups_only(4, axes), groups_only(4, axes), aux, groups_only(3, axes)};
  return r;
}

OpSharding gating_grad_rule(const OpShardingQuery& q) {
  const std::vector<std::string> axes = sharding::settled(q.in[0]).dims[0];
  OpSharding r;
  r.attrs = q.op.attrs;
  r.attrs.axes = axes;
  for (size_t i = 0; i < q.in.size(); ++i) r.in.push_back(groups_only(q.in[i].rank(), axes));
  r.out = {groups_only(3, axes)};
  return r;
}

const bool registered = register_op_kind({OpKind::Top2Gating, "top2_gating", Unit::Vpu, gating_cost, gating_kernel,
                                          gating_grad, gating_rule}) &&
                        register_op_kind({OpKind::Top2GatingGrad, "top2_gating_grad", Unit::Vpu, gating_grad_cost,
                                          gating_grad_kernel, nullptr, gating_grad_rule});

}  // namespace
}  // namespace podsim
