#include "plan/op_sharding.h"

#include <algorithm>

namespace podsim::sharding {

ShardSpec settled(ShardSpec s) {
  s.partial.clear();
  return s;
}

int64_t pieces(const ShardSpec& s, const Mesh& m) { return m.size(s.axes()); }

double tensor_bytes(const ModelGraph& g, TensorId t) { return g.tensor(t).bytes(); }

OpSharding replicated(const OpShardingQuery& q) {
  OpSharding r;
  for (TensorId t : q.op.inputs) r.in.push_back(ShardSpec::replicated(q.g.tensor(t).shape.size()));
  for (TensorId t : q.op.outputs) r.out.push_back(ShardSpec::replicated(q.g.tensor(t).shape.size()));
  r.attrs = q.op.attrs;
  return r;
}

OpSharding elementwise(const OpShardingQuery& q, bool linear) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const size_t rank = q.g.tensor(q.op.outputs.front()).shape.size();
  // Linear ops whose inputs are all partial over the same axes with the same splits stay partial.
  if (linear) {
    bool all_same_partial = !q.in.empty() && q.in.front().is_partial();
    for (const ShardSpec& s : q.in) all_same_partial = all_same_partial && s == q.in.front();
    if (all_same_partial) {
      r.in = q.in;
      r.out.assign(q.op.outputs.size(), q.in.front());
      return r;
    }
  }
  // The most split input shape-alike with the output decides (ties: the first); a wanted output spec wins when it
  // splits at least as much.
  ShardSpec target = ShardSpec::replicated(rank);
  int64_t best = 1;
  for (size_t i = 0; i < q.in.size(); ++i) {
    if (q.g.tensor(q.op.inputs[i]).shape.size() != rank) continue;
    ShardSpec s = settled(q.in[i]);
    int64_t p = pieces(s, q.mesh);
    // Ties go to the spec naming more axes (an axis of size 1 splits nothing but still says where work belongs).
    if (p > best || (p == best && s.axes().size() > target.axes().size())) {
      best = p;
      target = s;
    }
  }
  if (!q.want.empty() && q.want.front() && q.want.front()->rank() == rank && !q.want.front()->is_partial() &&
      pieces(*q.want.front(), q.mesh) >= best)
    target = *q.want.front();
  for (size_t i = 0; i < q.in.size(); ++i) {
    size_t ri = q.g.tensor(q.op.inputs[i]).shape.size();
    r.in.push_back(ri == rank ? target : ShardSpec::replicated(ri));
  }
  r.out.assign(q.op.outputs.size(), target);
  return r;
}

ShardSpec unsplit_last(ShardSpec s, size_t whole) {
  s.partial.clear();
  for (size_t k = 0; k < whole && k < s.dims.size(); ++k) s.dims[s.dims.size() - 1 - k].clear();
  return s;
}

std::vector<std::string> reduced_axes(const ShardSpec& s, const std::vector<size_t>& reduced) {
  std::vector<std::string> out = s.partial;
  for (size_t d : reduced)
    if (d < s.dims.size()) out.insert(out.end(), s.dims[d].begin(), s.dims[d].end());
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<OpAttrs::Padded> padding(const std::vector<int64_t>& global, const ShardSpec& s, const Mesh& m,
                                     size_t first_dims) {
  std::vector<OpAttrs::Padded> out;
  for (size_t d = 0; d < first_dims && d < global.size(); ++d) {
    int64_t p = split_count(s, d, m);
    if (p > 1 && global[d] % p != 0) out.push_back({static_cast<int>(d), global[d], s.dims[d]});
  }
  return out;
}

}  // namespace podsim::sharding
