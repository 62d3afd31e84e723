// Reshape: the same elements in row-major order under another shape of the same size ([B, S, D] -> [G, S', D]:
// the tokens of a step regrouped). Output element i is input element i, so the op is elementwise for fusion:
// inside a fusion it is free (XLA's bitcast); alone it is a copy through the vector unit.
//
// Partitioning: the dimensions of the two shapes pair up in groups with equal products ([B, S] with [G, S'],
// D with D). A group of one dimension on each side keeps its split as it is (padding included). In a larger
// group only the outermost dimension may stay split, and only when its axes divide both outermost sizes: a
// device's block of B rows is then a block of G rows. Anything else in a group is gathered first.
#include <algorithm>
#include <optional>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost reshape_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 1, 0, 0, 0, 0)); }

void reshape_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  ops::check(x.data.size() == y.data.size(), op, "reshape changes the element count");
  y.data = x.data;
  ops::put(g, op, s, std::move(y));
}

std::vector<TensorId> reshape_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1};
  return {b.reshape(dy[0], b.graph().tensor(op.inputs[0]).shape, op.name + ".grad")};
}

struct DimGroup {
  size_t in_begin, in_end, out_begin, out_end;
};

// Pairs the dimensions of `a` and `b` (equal element counts) into groups with equal products, in order.
std::vector<DimGroup> pair_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<DimGroup> groups;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    DimGroup grp{i, i, j, j};
    int64_t pa = a[i++], pb = b[j++];
    while (pa != pb) {
      if (pa < pb && i < a.size()) pa *= a[i++];
      else if (j < b.size()) pb *= b[j++];
      else break;
    }
    grp.in_end = i;
    grp.out_end = j;
    groups.push_back(grp);
  }
  if (!groups.empty()) {  // trailing dimensions of size 1
    groups.back().in_end = a.size();
    groups.back().out_end = b.size();
  }
  return groups;
}

OpSharding reshape_rule(const OpShardingQuery& q) {
  const std::vector<int64_t>& a = q.g.tensor(q.op.inputs[0]).shape;
  const std::vector<int64_t>& b = q.g.tensor(q.op.outputs[0]).shape;
  const ShardSpec& x = q.in[0];
  const std::optional<ShardSpec> want =
      !q.want.empty() && q.want[0] && !q.want[0]->is_partial() ? q.want[0] : std::nullopt;
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec in = ShardSpec::replicated(a.size()), out = ShardSpec::replicated(b.size());
  in.partial = out.partial = x.partial;  // a reshape is linear: a pending sum stays pending
  for (const DimGroup& grp : pair_dims(a, b)) {
    const size_t ni = grp.in_end - grp.in_begin, no = grp.out_end - grp.out_begin;
    if (ni == 1 && no == 1) {
      in.dims[grp.in_begin] = out.dims[grp.out_begin] = x.dims[grp.in_begin];
      continue;
    }
    auto carries = [&](const std::vector<std::string>& axes) {
      const int64_t p = q.mesh.size(axes);
      return !axes.empty() && a[grp.in_begin] % p == 0 && b[grp.out_begin] % p == 0;
    };
    bool inner_split = false;
    for (size_t d = grp.in_begin + 1; d < grp.in_end; ++d) inner_split = inner_split || x.splits(d);
    std::vector<std::string> axes;
    if (!inner_split && carries(x.dims[grp.in_begin])) axes = x.dims[grp.in_begin];
    // A whole input the output is wanted split: split the input alike (a local slice) rather than the output.
    bool want_inner = false;
    if (want)
      for (size_t d = grp.out_begin + 1; d < grp.out_end; ++d) want_inner = want_inner || want->splits(d);
    if (axes.empty() && want && !want_inner && carries(want->dims[grp.out_begin])) {
      bool free = true;  // the wanted axes must not split another dimension of the input
      for (const auto& ax : want->dims[grp.out_begin])
        for (size_t d = 0; d < a.size(); ++d)
          if ((d < grp.in_begin || d >= grp.in_end) && std::find(x.dims[d].begin(), x.dims[d].end(), ax) != x.dims[d].end())
            free = false;
      if (free && !x.splits(grp.in_begin) && !inner_split) axes = want->dims[grp.out_begin];
    }
    in.dims[grp.in_begin] = out.dims[grp.out_begin] = axes;
  }
  r.in = {in};
  r.out = {out};
  return r;
}

const bool registered =
    register_op_kind({OpKind::Reshape, "reshape", Unit::Vpu, reshape_cost, reshape_kernel, reshape_grad, reshape_rule});

}  // namespace
}  // namespace podsim
