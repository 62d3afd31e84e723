// Embedding lookup: out[t] = table[ids[t]] (a gather of rows, scattered in HBM), and its gradient, a scatter-add
// of the output gradient's rows into a dense table gradient.
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
  Tensor o = ops::out_like(g, op);
  for (size_t t = 0; t < ids.data.size(); ++t) {
    int64_t id = static_cast<int64_t>(ids.data[t]);
    ops::check(id >= 0 && id < v, op, "id " + std::to_string(id) + " outside the table");
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
  const int64_t d = o.shape.back();
  for (size_t t = 0; t < ids.data.size(); ++t) {
    int64_t id = static_cast<int64_t>(ids.data[t]);
    for (int64_t j = 0; j < d; ++j) o.data[id * d + j] += dy.data[t * d + j];
  }
  ops::put(g, op, s, std::move(o));
}

const bool registered =
    register_op_kind({OpKind::Embedding, "embedding", Unit::Vpu, emb_cost, emb_kernel, emb_grad}) &&
    register_op_kind({OpKind::EmbeddingGrad, "embedding_grad", Unit::Vpu, emb_grad_cost, emb_grad_kernel, nullptr});

}  // namespace
}  // namespace podsim
