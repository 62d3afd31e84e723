// Resharding (partitioner_impl.h): the local tensor holding a logical tensor in the spec an op asks for, made from
// the version the tensor has by the collectives (or the local slice) the two specs imply.
#include <algorithm>

#include "base/error.h"
#include "partition/partitioner_impl.h"

namespace podsim::partition_detail {

TensorId Partitioner::resize(TensorId t, TensorId x, size_t d, int64_t n) {
  std::vector<int64_t> sh = m_res.program.graph.tensor(x).shape;
  if (sh[d] == n) return x;
  sh[d] = n;
  TensorId y = temp(t, sh, m_g.tensor(t).name + "/resized" + std::to_string(m_counter));
  OpAttrs at;
  at.dim = static_cast<int64_t>(d);
  emit1(op_name(t, n > m_res.program.graph.tensor(x).shape[d] ? "pad" : "crop"), OpKind::Slice, x, y, at);
  return y;
}

Partitioner::Version Partitioner::record(TensorId t, const ShardSpec& s, TensorId local) {
  m_versions[t].push_back({s, local, m_pass});
  return m_versions[t].back();
}

TensorId Partitioner::get(TensorId t, const ShardSpec& want) {
  for (const Version& v : m_versions[t])
    if (v.spec == want && (v.pass < 0 || v.pass == m_pass)) return v.local;
  if (m_versions[t].empty()) throw Error(Err::Internal, "partitioner: tensor '" + m_g.tensor(t).name + "' used before it exists");
  Version cur = m_versions[t].front();
  const std::vector<int64_t>& global = m_g.tensor(t).shape;
  const std::string base = m_g.tensor(t).name;
  const TensorRole role = copy_role(m_g.tensor(t).role);
  auto version_name = [&](const ShardSpec& s) { return base + "@" + s.text(); };
  // 1. A pending sum: reduce-scatter into every dimension the target splits further by pending axes (after the
  //    axes that already split it, if any), then all-reduce over the axes still pending. A sum is never reduced
  //    whole only to be sliced.
  if (cur.spec.is_partial() && cur.spec.partial != want.partial) {
    for (size_t d = 0; d < want.rank() && want.partial.empty() && cur.spec.is_partial(); ++d) {
      std::vector<std::string> axes;
      if (!extends(cur.spec.dims[d], want.dims[d], global[d], axes)) continue;
      bool pending = true;
      for (const auto& a : axes)
        pending = pending && std::find(cur.spec.partial.begin(), cur.spec.partial.end(), a) != cur.spec.partial.end();
      if (!pending) continue;
      ShardSpec next = cur.spec;
      for (const auto& a : axes) next.partial.erase(std::find(next.partial.begin(), next.partial.end(), a));
      next.dims[d] = want.dims[d];
      OpAttrs at;
      at.axes = axes;
      at.dim = static_cast<int64_t>(d);
      const int64_t p = m_m.size(axes), local = local_shape(global, next, m_m)[d];
      TensorId x = resize(t, cur.local, d, local * p);
      TensorId y = add_local(t, next, version_name(next), role);
      emit1(op_name(t, "reduce_scatter[" + axes_text(at.axes) + "]"), OpKind::ReduceScatter, x, y, at);
      cur = record(t, next, y);
    }
    if (cur.spec.is_partial() && cur.spec.partial != want.partial) {
      ShardSpec next = cur.spec;
      next.partial.clear();
      OpAttrs at;
      at.axes = cur.spec.partial;
      TensorId y = add_local(t, next, version_name(next), role);
      emit1(op_name(t, "all_reduce[" + axes_text(at.axes) + "]"), OpKind::AllReduce, cur.local, y, at);
      cur = record(t, next, y);
    }
    if (cur.spec == want) return cur.local;
  }
  if (cur.spec.is_partial())
    throw Error(Err::Internal, "partitioner: cannot turn " + cur.spec.text() + " of '" + base + "' into " + want.text());
  // 2. A split moving from one dimension to another over the same axes: all-to-all. The axes moved are the
  //    innermost of the source dimension's split and become the innermost of the target's, so a dimension split
  //    over (data, expert) can hand `expert` to another dimension and keep `data` (each device's blocks stay
  //    contiguous). With other axes on either dimension, both must divide evenly (else step 3 gathers).
  for (size_t q = 0; q < want.rank(); ++q) {
    for (size_t p = 0; p < want.rank(); ++p) {
      std::vector<std::string> moved;
      if (p == q || !moves_innermost(cur.spec, want, p, q, moved)) continue;
      const bool whole = cur.spec.dims[q].empty() && want.dims[p].empty();
      if (!whole && (global[q] % m_m.size(want.dims[q]) != 0 || global[p] % m_m.size(cur.spec.dims[p]) != 0)) continue;
      OpAttrs at;
      at.axes = moved;
      at.dim = static_cast<int64_t>(q);   // split
      at.dim2 = static_cast<int64_t>(p);  // concatenated
      const int64_t n = m_m.size(at.axes);
      ShardSpec next = cur.spec;
      next.dims[p] = want.dims[p];
      next.dims[q] = want.dims[q];
      const int64_t local_q = m_res.program.graph.tensor(cur.local).shape[q];
      TensorId x = resize(t, cur.local, q, ceil_div64(local_q, n) * n);
      std::vector<int64_t> sh = m_res.program.graph.tensor(x).shape;
      sh[q] /= n;
      sh[p] *= n;
      TensorId y = temp(t, sh, base + "/all_to_all" + std::to_string(m_counter));
      emit1(op_name(t, "all_to_all[" + axes_text(at.axes) + "]"), OpKind::AllToAll, x, y, at);
      TensorId z = resize(t, y, p, local_shape(global, next, m_m)[p]);
      // Name the result as the version it is.
      m_res.program.graph.tensor(z).name = version_name(next);
      m_res.program.graph.tensor(z).role = role;
      m_res.local_logical[z] = t;
      m_res.local_spec[z] = next;
      cur = record(t, next, z);
      break;
    }
  }
  // 3. Gather every dimension whose split differs: only the innermost axes when the target keeps the outer ones,
  //    none when it splits the dimension further (step 4 slices it).
  for (size_t d = 0; d < want.rank(); ++d) {
    if (cur.spec.dims[d].empty() || cur.spec.dims[d] == want.dims[d]) continue;
    std::vector<std::string> inner;
    if (extends(cur.spec.dims[d], want.dims[d], global[d], inner)) continue;
    OpAttrs at;
    at.axes = cur.spec.dims[d];
    ShardSpec next = cur.spec;
    next.dims[d].clear();
    if (extends(want.dims[d], cur.spec.dims[d], global[d], inner)) {
      at.axes = inner;
      next.dims[d] = want.dims[d];
    }
    at.dim = static_cast<int64_t>(d);
    const int64_t p = m_m.size(at.axes);
    std::vector<int64_t> sh = m_res.program.graph.tensor(cur.local).shape;
    sh[d] *= p;
    const int64_t whole = local_shape(global, next, m_m)[d];
    TensorId y = sh[d] == whole ? add_local(t, next, version_name(next), role)
                                : temp(t, sh, base + "/gathered" + std::to_string(m_counter));
    emit1(op_name(t, "all_gather[" + axes_text(at.axes) + "]"), OpKind::AllGather, cur.local, y, at);
    if (sh[d] != whole) {
      y = resize(t, y, d, whole);
      m_res.program.graph.tensor(y).name = version_name(next);
      m_res.program.graph.tensor(y).role = role;
      m_res.local_logical[y] = t;
      m_res.local_spec[y] = next;
    }
    cur = record(t, next, y);
  }
  // 4. Slice every dimension the target splits further than the current value (whole, or split over the
  //    target's outer axes): each device keeps its piece, no communication.
  for (size_t d = 0; d < want.rank(); ++d) {
    std::vector<std::string> axes;
    if (!extends(cur.spec.dims[d], want.dims[d], global[d], axes)) continue;
    ShardSpec next = cur.spec;
    next.dims[d] = want.dims[d];
    OpAttrs at;
    at.axes = axes;
    at.dim = static_cast<int64_t>(d);
    TensorId y = add_local(t, next, version_name(next), role);
    emit1(op_name(t, "slice[" + axes_text(at.axes) + "]"), OpKind::Slice, cur.local, y, at);
    cur = record(t, next, y);
  }
  if (cur.spec != want)
    throw Error(Err::Internal, "partitioner: resharding '" + base + "' ended at " + cur.spec.text() + ", not " + want.text());
  return cur.local;
}

bool Partitioner::extends(const std::vector<std::string>& from, const std::vector<std::string>& to, int64_t n,
                          std::vector<std::string>& inner) const {
  if (to.size() <= from.size() || !std::equal(from.begin(), from.end(), to.begin())) return false;
  if (!from.empty() && n % m_m.size(to) != 0) return false;
  inner.assign(to.begin() + static_cast<std::ptrdiff_t>(from.size()), to.end());
  return true;
}

bool Partitioner::moves_innermost(const ShardSpec& from, const ShardSpec& to, size_t p, size_t q,
                                  std::vector<std::string>& moved) {
  const auto &fq = from.dims[q], &tq = to.dims[q], &fp = from.dims[p], &tp = to.dims[p];
  if (tq.size() <= fq.size() || !std::equal(fq.begin(), fq.end(), tq.begin())) return false;
  moved.assign(tq.begin() + static_cast<std::ptrdiff_t>(fq.size()), tq.end());
  return fp.size() == tp.size() + moved.size() && std::equal(tp.begin(), tp.end(), fp.begin()) &&
         std::equal(moved.begin(), moved.end(), fp.begin() + static_cast<std::ptrdiff_t>(tp.size()));
}

}  // namespace podsim::partition_detail
