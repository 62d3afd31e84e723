// Attention head layout changes: SplitHeads [B*S, H*D] -> [B*H, S, D] and its inverse MergeHeads. Data movement
// through the vector unit (a transpose), no arithmetic.
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost heads_cost(const ModelGraph& g, const Op& op) { return ops::vpu_cost(g, op, 1, 0, 0, 0, 0); }

// Index of element (b, s, h, d) in the [B*S, H*D] layout and in the [B*H, S, D] layout.
template <class F>
void for_each_element(const OpAttrs& a, int64_t dim, F f) {
  const int64_t B = a.batch, S = a.seq, H = a.heads;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t s = 0; s < S; ++s)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t d = 0; d < dim; ++d)
          f(((b * S + s) * H + h) * dim + d, ((b * H + h) * S + s) * dim + d);
}

int64_t head_dim(const ModelGraph& g, const Op& op) {
  return g.tensor(op.inputs[0]).elements() / (op.attrs.batch * op.attrs.seq * op.attrs.heads);
}

void split_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  for_each_element(op.attrs, head_dim(g, op), [&](int64_t flat, int64_t split) { y.data[split] = x.data[flat]; });
  ops::put(g, op, s, std::move(y));
}

void merge_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  for_each_element(op.attrs, head_dim(g, op), [&](int64_t flat, int64_t split) { y.data[flat] = x.data[split]; });
  ops::put(g, op, s, std::move(y));
}

std::vector<TensorId> split_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  return {b.merge_heads(dy[0], op.attrs.batch, op.attrs.seq, op.attrs.heads, op.name + ".grad")};
}

std::vector<TensorId> merge_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  return {b.split_heads(dy[0], op.attrs.batch, op.attrs.seq, op.attrs.heads, op.name + ".grad")};
}

const bool registered =
    register_op_kind({OpKind::SplitHeads, "split_heads", Unit::Vpu, heads_cost, split_kernel, split_grad}) &&
    register_op_kind({OpKind::MergeHeads, "merge_heads", Unit::Vpu, heads_cost, merge_kernel, merge_grad});

}  // namespace
}  // namespace podsim
