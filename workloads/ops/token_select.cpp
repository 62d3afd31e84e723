// TokenSelect: x [R, S, D] -> [N, D], each sequence's last fresh token (workloads/ragged.h): the only one whose
// logits an inference step samples (vLLM computes the logits of those rows alone; a prompt's first token comes from
// its last position). Rows split over devices (attrs.axes) select their own sequences; the features may stay split.
// Cost: one copy of each selected row, read as a gather of rows of D elements.
#include "workloads/ops/kernel_util.h"
#include "workloads/ragged.h"

namespace podsim {
namespace {

using ops::in;

OpCost select_cost(const ModelGraph& g, const Op& op) {
  const TensorInfo& out = g.tensor(op.outputs[0]);
  OpCost c;
  c.unit = Unit::Vpu;
  c.bytes_read = c.bytes_written = out.stored_bytes();
  c.pattern = HbmPattern::Gather;
  c.read_run = static_cast<double>(out.shape.back() * dtype_bytes(out.dtype));
  c.vector.elements = static_cast<double>(out.elements());
  c.vector.simple = 1;
  c.flops = c.vector.elements;
  return c;
}

void select_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const OpAttrs::Ragged& rg = op.attrs.ragged;
  const int64_t S = x.shape[1], D = x.shape[2];
  Tensor y = ops::out_like(g, op);
  const int64_t n = y.shape[0];
  const int64_t seq0 = rg.packed ? 0 : s.device_index(op.attrs.axes) * n;
  for (int64_t j = 0; j < n; ++j) {
    const int64_t seq = seq0 + j;
    if (seq >= ragged_sequences(rg)) continue;  // a padded row of the last device
    if (rg.fresh[static_cast<size_t>(seq)] == 0) continue;  // an empty sequence (batch padding): its row discarded
    const int64_t row = rg.packed ? 0 : j;
    const int64_t at = ragged_start(rg, seq) + rg.fresh[static_cast<size_t>(seq)] - 1;
    for (int64_t d = 0; d < D; ++d) y.data[j * D + d] = x.data[(row * S + at) * D + d];
  }
  ops::put(g, op, s, std::move(y));
}

OpSharding select_rule(const OpShardingQuery& q) {
  ShardSpec x = sharding::settled(q.in[0]);
  x.dims[1].clear();
  if (q.op.attrs.ragged.packed) x.dims[0].clear();
  OpSharding r;
  r.attrs = q.op.attrs;
  r.attrs.axes = x.dims[0];
  ShardSpec y = ShardSpec::replicated(2);
  y.dims[0] = x.dims[0];
  y.dims[1] = x.dims[2];
  r.in = {x};
  r.out = {y};
  return r;
}

const bool registered =
    register_op_kind({OpKind::TokenSelect, "token_select", Unit::Vpu, select_cost, select_kernel, nullptr, select_rule});

}  // namespace
}  // namespace podsim
