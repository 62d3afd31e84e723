// The rows of each example at given positions (BERT's masked-LM head, `gather_indexes` of MLPerf's
// run_pretraining.py: the encoder's output at the masked positions), and its gradient:
//   GatherPositions:  y[b, p, :] = x[b, positions[b, p], :]       x [B, S, D], positions [B, P] int32, y [B, P, D]
//   ScatterPositions: dx[b, s, :] = sum over p with positions[b, p] = s of dy[b, p, :]   (zeros elsewhere)
// The gather reads P rows of D features per example (each a separate run in HBM); the scatter writes the whole
// dx (mostly zeros, as XLA's scatter into a zero-initialised buffer) and adds P rows into it. The positions' values
// are what the data gives; duplicates add in the scatter.
#include <algorithm>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost gather_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 1, 0, 0, 0, 0);
  const TensorInfo& x = g.tensor(op.inputs[0]);
  const TensorInfo& y = g.tensor(op.outputs[0]);
  c.vector.elements = static_cast<double>(y.elements());
  c.bytes_read = y.bytes() + g.tensor(op.inputs[1]).bytes();  // only the gathered rows
  c.read_run = static_cast<double>(x.shape.back()) * dtype_bytes(x.dtype);
  c.pattern = HbmPattern::Gather;
  return c;
}

void gather_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const Tensor& pos = in(s, op, 1);
  Tensor y = ops::out_like(g, op);
  const int64_t B = x.shape[0], S = x.shape[1], D = x.shape[2], P = pos.shape[1];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < P; ++p) {
      const int64_t at = static_cast<int64_t>(pos.data[b * P + p]);
      ops::check(at >= 0 && at < S, op, "position " + std::to_string(at) + " outside the sequence");
      std::copy(x.data.begin() + (b * S + at) * D, x.data.begin() + (b * S + at + 1) * D, y.data.begin() + (b * P + p) * D);
    }
  ops::put(g, op, s, std::move(y));
}

std::vector<TensorId> gather_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  OpAttrs at;
  at.dim = x.shape[1];
  return {b.emit(op.name + ".dx", OpKind::ScatterPositions, Phase::Backward, {dy[0], op.inputs[1]}, x.shape, x.dtype,
                 TensorRole::Gradient, at),
          -1};
}

// An add per gathered element; the zeros of dx and its P rows written.
OpCost scatter_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 1, 0, 0, 0, 1);
  const TensorInfo& dy = g.tensor(op.inputs[0]);
  c.vector.elements = static_cast<double>(dy.elements());
  c.flops = c.vector.elements;
  c.read_run = static_cast<double>(dy.shape.back()) * dtype_bytes(dy.dtype);
  c.write_pattern = HbmPattern::Gather;  // rows added at the positions' places
  return c;
}

void scatter_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& pos = in(s, op, 1);
  Tensor dx = ops::out_like(g, op);
  const int64_t B = dx.shape[0], S = dx.shape[1], D = dx.shape[2], P = pos.shape[1];
  for (int64_t b = 0; b < B; ++b)
    for (int64_t p = 0; p < P; ++p) {
      const int64_t at = static_cast<int64_t>(pos.data[b * P + p]);
      ops::check(at >= 0 && at < S, op, "position " + std::to_string(at) + " outside the sequence");
      for (int64_t d = 0; d < D; ++d) dx.data[(b * S + at) * D + d] += dy.data[(b * P + p) * D + d];
    }
  ops::put(g, op, s, std::move(dx));
}

// The examples split as the positions are (each device gathers its own examples' rows), the features as x's; the
// sequence whole (a position may point anywhere in it).
OpSharding gather_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = sharding::settled(q.in[0]);
  const ShardSpec pos = sharding::settled(q.in[1]);
  x.dims[0] = pos.dims[0];
  x.dims[1].clear();
  for (auto& a : x.dims[2])
    if (pos.uses(a)) a.clear();
  x.dims[2].erase(std::remove(x.dims[2].begin(), x.dims[2].end(), std::string()), x.dims[2].end());
  ShardSpec p = ShardSpec::replicated(2);
  p.dims[0] = pos.dims[0];
  r.in = {x, p};
  r.out = {x};
  return r;
}

// The converse: dx takes dy's split of the examples and features, the sequence whole; a partial dy stays partial.
OpSharding scatter_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec dy = q.in[0];
  const ShardSpec pos = sharding::settled(q.in[1]);
  dy.dims[0] = pos.dims[0];
  dy.dims[1].clear();
  ShardSpec p = ShardSpec::replicated(2);
  p.dims[0] = pos.dims[0];
  r.in = {dy, p};
  r.out = {dy};
  return r;
}

const bool registered = register_op_kind({OpKind::GatherPositions, "gather_positions", Unit::Vpu, gather_cost,
                                          gather_kernel, gather_grad, gather_rule}) &&
                        register_op_kind({OpKind::ScatterPositions, "scatter_positions", Unit::Vpu, scatter_cost,
                                          scatter_kernel, nullptr, scatter_rule});

}  // namespace
}  // namespace podsim
