// Slice: one piece of dimension attrs.dim, the size of the output's. With mesh axes (attrs.axes) the piece is the
// device's own shard: it starts at index(axes) * size, as a sharded dimension is laid out (plan/sharding.h). With
// none it is piece attrs.offset (0: a crop, or a zero pad to a larger output; m: a pipeline's micro-batch m, the
// m-th block of whatever a device holds). Positions past the input are zeros (the
// padding of an unevenly split dimension). The partitioner inserts slices when a whole tensor becomes a shard;
// data movement through the vector unit, no arithmetic. A model's crop (GraphBuilder::crop: piece 0, e.g. BERT's
// first token and the rows of its position table a sequence uses) has a gradient: the same slice back to the input's
// shape, which pads the rest with zeros.
#include <cstring>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost slice_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 1, 0, 0, 0, 0);
  c.bytes_read = std::min(input_bytes(g, op), output_bytes(g, op));  // only the piece is read
  c.fusible = true;
  return c;
}

void slice_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  const size_t d = static_cast<size_t>(op.attrs.dim);
  ops::check(d < x.shape.size() && x.shape.size() == y.shape.size(), op, "slice dimension out of range");
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < d; ++k) outer *= x.shape[k];
  for (size_t k = d + 1; k < x.shape.size(); ++k) inner *= x.shape[k];
  const int64_t n_in = x.shape[d], n_out = y.shape[d];
  const int64_t offset = (op.attrs.axes.empty() ? op.attrs.offset : s.device_index(op.attrs.axes)) * n_out;
  const int64_t take = std::max<int64_t>(0, std::min(n_out, n_in - offset));
  for (int64_t o = 0; o < outer && take > 0; ++o)
    std::memcpy(&y.data[(o * n_out) * inner], &x.data[(o * n_in + offset) * inner],
                static_cast<size_t>(take * inner) * sizeof(float));
  ops::put(g, op, s, std::move(y));
}

// The gradient of a crop (piece 0 of a larger dimension): dy padded back to the input's shape with zeros.
std::vector<TensorId> slice_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo x = b.graph().tensor(op.inputs[0]);
  ops::check(op.attrs.axes.empty() && op.attrs.offset == 0, op, "only a crop (piece 0) has a gradient");
  OpAttrs at;
  at.dim = op.attrs.dim;
  return {b.emit(op.name + ".dx", OpKind::Slice, Phase::Backward, {dy[0]}, x.shape, x.dtype, TensorRole::Gradient, at)};
}

// A static piece of the batch (dimension 0: a pipeline's micro-batch) that mesh axes split is taken from every
// device's own shard: micro-batch m of a data-parallel replica is the m-th block of that replica's examples. Which
// examples form a micro-batch then depends on the split, not the step's result (every example is in exactly one).
// A crop or pad of another dimension, or of a weight (a model's slices: the first token, a position table's rows),
// is a piece of the logical tensor: that dimension stays whole.
OpSharding slice_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = sharding::settled(q.in[0]);
  const TensorRole role = q.g.tensor(q.op.inputs[0]).role;
  const size_t d = static_cast<size_t>(q.op.attrs.dim);
  const bool weight = role == TensorRole::Parameter || role == TensorRole::WeightCopy;
  if (q.op.attrs.axes.empty() && (d > 0 || weight) && d < x.rank()) x.dims[d].clear();
  r.in = {x};
  r.out = {x};
  return r;
}

const bool registered =
    register_op_kind({OpKind::Slice, "slice", Unit::Vpu, slice_cost, slice_kernel, slice_grad, slice_rule});

}  // namespace
}  // namespace podsim
