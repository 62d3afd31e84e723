// Embedding lookup: out[t] = table[ids[t]] (a gather of rows, scattered in HBM), and its gradient, a scatter-add
// of the output gradient's rows into a dense table gradient.
#include <algorithm>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost emb_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 1, 0, 0, 0, 0);
  const TensorInfo& table = g.tensor(op.inputs[0]);
  const TensorInfo& out = g.tensor(op.outputs[0]);
  double row = static_cast<double>(table.shape.back()) * dtype_bytes(table.dtype);
  // Only the gathered rows are read, each a separate run.
  c.bytes_read = static_cast<double>(out.elements()) * dtype_bytes(table.dtype) + g.tensor(op.inputs[1]).bytes();
  c.read_run = row;
  c.pattern = HbmPattern::Gather;
  return c;
}

void emb_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& table = in(s, op, 0);
  const Tensor& ids = in(s, op, 1);
  const int64_t d = table.shape.back(), v = table.shape.front();
  // A table split over attrs.axes holds rows [offset, offset + v); ids outside look up zeros (another shard has
  // them, and the partial results are summed).
  const int64_t offset = s.device_index(op.attrs.axes) * v;
  Tensor o = ops::out_like(g, op);
  for (size_t t = 0; t < ids.data.size(); ++t) {
    int64_t id = static_cast<int64_t>(ids.data[t]) - offset;
    if (id < 0 || id >= v) {
      ops::check(!op.attrs.axes.empty(), op, "id " + std::to_string(id) + " outside the table");
      continue;
    }
    std::copy(table.data.begin() + id * d, table.data.begin() + (id + 1) * d, o.data.begin() + t * d);
  }
  ops::put(g, op, s, std::move(o));
}

std::vector<TensorId> emb_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& table = b.graph().tensor(op.inputs[0]);
  TensorId dt = b.emit(op.name + ".dtable", OpKind::EmbeddingGrad, Phase::Backward, {dy[0], op.inputs[1]},
                       table.shape, table.dtype, TensorRole::Gradient);
  return {dt, -1};
}

OpCost emb_grad_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 1, 0, 0, 0, 1);
  const TensorInfo& dy = g.tensor(op.inputs[0]);
  c.vector.elements = static_cast<double>(dy.elements());
  c.flops = c.vector.elements;
  c.read_run = static_cast<double>(dy.shape.back()) * dtype_bytes(dy.dtype);
  c.write_pattern = HbmPattern::Gather;  // rows scatter-added at the ids' places
  return c;
}

void emb_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& ids = in(s, op, 1);
  Tensor o = ops::out_like(g, op);
  const int64_t d = o.shape.back(), v = o.shape.front();
  const int64_t offset = s.device_index(op.attrs.axes) * v;
  for (size_t t = 0; t < ids.data.size(); ++t) {
    int64_t id = static_cast<int64_t>(ids.data[t]) - offset;
    if (id < 0 || id >= v) continue;  // rows another shard holds
    for (int64_t j = 0; j < d; ++j) o.data[id * d + j] += dy.data[t * d + j];
  }
  ops::put(g, op, s, std::move(o));
}

// ---- partitioning ----
// The output takes the ids' splits and the table's split of D. A table split over vocabulary rows (V) looks up
// only its own rows, so the output is partial over those axes (Megatron's vocabulary-parallel embedding). Axes the
// ids already use cannot split the table as well: the table is gathered along them. When nothing asks for the
// output in some spec (an annotation would have the partial sum reduce-scattered into it), the op all-reduces its
// partial lookup itself, as Megatron-LM's VocabParallelEmbedding does, so that the step carries the whole lookup
// (not a pending sum into the first residual sum).
OpSharding emb_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec table = sharding::settled(q.in[0]);
  ShardSpec ids = sharding::settled(q.in[1]);
  for (auto& dim : table.dims)
    dim.erase(std::remove_if(dim.begin(), dim.end(), [&](const std::string& a) { return ids.uses(a); }), dim.end());
  ShardSpec out = ids;
  out.dims.push_back(table.dims[1]);
  out.partial = table.dims[0];
  std::sort(out.partial.begin(), out.partial.end());
  r.attrs.axes = table.dims[0];
  r.in = {table, ids};
  r.out = {out};
  if (!out.partial.empty() && (q.want.empty() || !q.want[0])) {
    const TensorInfo& info = q.g.tensor(q.op.outputs[0]);
    r.out[0].partial.clear();
    // Slots: 0 table, 1 ids, 2 the output, 3 the partial lookup.
    r.scratch = {{info.name + ".partial", local_shape(info.shape, r.out[0], q.mesh), info.dtype}};
    OpAttrs reduce;
    reduce.axes = out.partial;
    r.steps = {{"", OpKind::Embedding, {0, 1}, {3}, r.attrs}, {"", OpKind::AllReduce, {3}, {2}, reduce}};
  }
  return r;
}

// dtable [V, D]: rows scattered from every device's tokens, so partial over the axes splitting the ids. The
// vocabulary rows stay whole unless the wanted gradient splits them over axes the tokens do not use (each device
// then scatters only the ids of its own rows). D keeps dy's split, or takes the wanted gradient's when dy has none
// (dy is then sliced, and each device reduces only its columns of the table).
OpSharding emb_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec ids = sharding::settled(q.in[1]);
  ShardSpec dy = ids;
  auto free_of = [&](const std::vector<std::string>& axes, const ShardSpec& s) {
    for (const auto& a : axes)
      if (s.uses(a)) return false;
    return true;
  };
  const std::optional<ShardSpec> want =
      !q.want.empty() && q.want[0] && !q.want[0]->is_partial() ? q.want[0] : std::nullopt;
  std::vector<std::string> d_axes = q.in[0].dims.back();
  d_axes.erase(std::remove_if(d_axes.begin(), d_axes.end(), [&](const std::string& a) { return ids.uses(a); }),
               d_axes.end());
  if (d_axes.empty() && want && free_of(want->dims[1], ids)) d_axes = want->dims[1];
  dy.dims.push_back(d_axes);
  std::vector<std::string> v_axes;
  if (want && free_of(want->dims[0], dy)) v_axes = want->dims[0];
  ShardSpec out = ShardSpec::replicated(2);
  out.dims = {v_axes, d_axes};
  out.partial = ids.axes();
  std::sort(out.partial.begin(), out.partial.end());
  r.attrs.axes = v_axes;
  r.in = {dy, ids};
  r.out = {out};
  return r;
}

const bool registered =
    register_op_kind({OpKind::Embedding, "embedding", Unit::Vpu, emb_cost, emb_kernel, emb_grad, emb_rule}) &&
    register_op_kind(
        {OpKind::EmbeddingGrad, "embedding_grad", Unit::Vpu, emb_grad_cost, emb_grad_kernel, nullptr, emb_grad_rule});

}  // namespace
}  // namespace podsim
