#include "plan/shard_data.h"

#include <algorithm>
#include <cstring>

#include "base/error.h"
#include "workloads/reference.h"

namespace podsim {
namespace {

// Calls f(local_flat, global_flat) for every position of the shard inside the logical tensor (not padding).
template <class F>
void for_each_shared(const std::vector<int64_t>& global, const std::vector<int64_t>& local,
                     const std::vector<int64_t>& offset, F f) {
  const size_t r = global.size();
  if (r == 0) {
    f(0, 0, 1);
    return;
  }
  std::vector<int64_t> take(r);
  for (size_t d = 0; d < r; ++d) {
    take[d] = std::max<int64_t>(0, std::min(local[d], global[d] - offset[d]));
    if (take[d] == 0) return;
  }
  // Rows of the last dimension are contiguous on both sides.
  std::vector<int64_t> idx(r, 0);
  for (;;) {
    int64_t lf = 0, gf = 0;
    for (size_t d = 0; d < r; ++d) {
      lf = lf * local[d] + idx[d];
      gf = gf * global[d] + offset[d] + idx[d];
    }
    f(lf, gf, take[r - 1]);
    size_t d = r - 1;
    for (;;) {
      if (d == 0) return;
      --d;
      if (++idx[d] < take[d]) break;
      idx[d] = 0;
    }
  }
}

std::vector<int64_t> offsets(const std::vector<int64_t>& local, const ShardSpec& s, const Mesh& m, int64_t chip) {
  std::vector<int64_t> off(local.size(), 0);
  for (size_t d = 0; d < local.size(); ++d)
    if (s.splits(d)) off[d] = m.index(chip, s.dims[d]) * local[d];
  return off;
}

}  // namespace

Tensor shard_of(const Tensor& logical, const ShardSpec& spec, const Mesh& mesh, int64_t chip) {
  if (spec.per_device || spec.is_replicated()) return logical;
  Tensor out(local_shape(logical.shape, spec, mesh));
  const std::vector<int64_t> off = offsets(out.shape, spec, mesh, chip);
  if (logical.shape.empty()) return logical;
  for_each_shared(logical.shape, out.shape, off, [&](int64_t lf, int64_t gf, int64_t n) {
    std::memcpy(&out.data[lf], &logical.data[gf], static_cast<size_t>(n) * sizeof(float));
  });
  return out;
}

void place_shard(Tensor& logical, const Tensor& shard, const ShardSpec& spec, const Mesh& mesh, int64_t chip) {
  if (spec.per_device || spec.is_replicated()) {
    logical.data = shard.data;
    return;
  }
  if (shard.shape != local_shape(logical.shape, spec, mesh))
    throw Error(Err::Internal, "a shard's shape does not match its spec " + spec.text());
  const std::vector<int64_t> off = offsets(shard.shape, spec, mesh, chip);
  for_each_shared(logical.shape, shard.shape, off, [&](int64_t lf, int64_t gf, int64_t n) {
    std::memcpy(&logical.data[gf], &shard.data[lf], static_cast<size_t>(n) * sizeof(float));
  });
}

Tensor block_of(const Tensor& x, size_t dim, int64_t i, int64_t n) {
  std::vector<int64_t> shape = x.shape;
  if (shape[dim] % n != 0) throw Error(Err::Internal, "block_of: dimension does not divide into the parts");
  shape[dim] /= n;
  Tensor out(shape);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < dim; ++d) outer *= x.shape[d];
  for (size_t d = dim + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  const int64_t run = shape[dim] * inner;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(&out.data[o * run], &x.data[o * x.shape[dim] * inner + i * run], static_cast<size_t>(run) * sizeof(float));
  return out;
}

Tensor concat(const std::vector<const Tensor*>& parts, size_t dim) {
  std::vector<int64_t> shape = parts.front()->shape;
  shape[dim] = 0;
  for (const Tensor* p : parts) shape[dim] += p->shape[dim];
  Tensor out(shape);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < dim; ++d) outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  for (int64_t o = 0; o < outer; ++o) {
    int64_t at = o * shape[dim] * inner;
    for (const Tensor* p : parts) {
      const int64_t run = p->shape[dim] * inner;
      std::memcpy(&out.data[at], &p->data[o * run], static_cast<size_t>(run) * sizeof(float));
      at += run;
    }
  }
  return out;
}

std::vector<float> pack_collective(const Op& op, const Tensor& x, int64_t n) {
  size_t split = 0;
  if (op.kind == OpKind::ReduceScatter) split = static_cast<size_t>(op.attrs.dim);
  else if (op.kind == OpKind::AllToAll) split = static_cast<size_t>(op.attrs.dim);
  else return x.data;
  if (split == 0 || n <= 1) return x.data;
  std::vector<float> out;
  out.reserve(x.data.size());
  for (int64_t r = 0; r < n; ++r) {
    Tensor b = block_of(x, split, r, n);
    out.insert(out.end(), b.data.begin(), b.data.end());
  }
  return out;
}

Tensor unpack_collective(const Op& op, std::vector<float> flat, const std::vector<int64_t>& out_shape, int64_t n) {
  Tensor out;
  out.shape = out_shape;
  size_t join = 0;
  if (op.kind == OpKind::AllGather) join = static_cast<size_t>(op.attrs.dim);
  else if (op.kind == OpKind::AllToAll) join = static_cast<size_t>(op.attrs.dim2);
  if (join == 0 || n <= 1) {
    out.data = std::move(flat);
    return out;
  }
  // The flat result holds n equal blocks, each a tensor of the output's shape with `join` divided by n.
  std::vector<int64_t> part = out_shape;
  part[join] /= n;
  const int64_t per = static_cast<int64_t>(flat.size()) / n;
  std::vector<Tensor> parts(static_cast<size_t>(n));
  std::vector<const Tensor*> ptrs;
  for (int64_t r = 0; r < n; ++r) {
    parts[r].shape = part;
    parts[r].data.assign(flat.begin() + r * per, flat.begin() + (r + 1) * per);
    ptrs.push_back(&parts[r]);
  }
  return concat(ptrs, join);
}

CombinedLayout combined_layout(OpKind kind, const std::vector<int64_t>& elements, int64_t group, int64_t pieces) {
  if (kind != OpKind::AllReduce && kind != OpKind::ReduceScatter)
    throw Error(Err::Internal, std::string("a combined ") + op_kind_name(kind) +
                                   ": only all-reduce and reduce-scatter carry several tensors");
  CombinedLayout l;
  l.group = std::max<int64_t>(1, group);
  l.pieces = std::max<int64_t>(1, pieces);
  // An all-reduce whose order is not known by block and piece: the tensors one after another.
  if (kind == OpKind::AllReduce && pieces <= 0) l.group = 1;
  for (int64_t e : elements) {
    if (kind == OpKind::ReduceScatter && e % l.group != 0)
      throw Error(Err::Internal, "combined reduce-scatter: a tensor of " + std::to_string(e) +
                                     " elements is not " + std::to_string(l.group) + " equal blocks");
    const int64_t B = (e + l.group - 1) / l.group;  // an all-reduce pads its count to equal blocks
    const int64_t P = std::max<int64_t>(1, std::min(B, l.pieces));
    l.elements.push_back(e);
    l.block.push_back(B);
    l.parts.push_back(P);
    l.offset.push_back(l.piece);
    l.piece += (B + P - 1) / P;
  }
  return l;
}

namespace {

// Calls f(tensor offset, combined offset, length) for each run of tensor i in block b.
template <class F>
void for_runs(const CombinedLayout& l, size_t i, int64_t b, F f) {
  const int64_t B = l.block[i], P = l.parts[i];
  for (int64_t q = 0; q < P; ++q) {
    const int64_t lo = B * q / P, hi = B * (q + 1) / P;
    const int64_t src = b * B + lo, n = std::min(hi, l.elements[i] - b * B) - lo;
    if (n > 0) f(src, b * l.block_elements() + q * l.piece + l.offset[i], n);
  }
}

}  // namespace

std::vector<float> pack_combined(const CombinedLayout& l, const std::vector<std::vector<float>>& inputs) {
  std::vector<float> out(static_cast<size_t>(l.total()), 0.0f);
  for (size_t i = 0; i < inputs.size(); ++i)
    for (int64_t b = 0; b < l.group; ++b)
      for_runs(l, i, b, [&](int64_t src, int64_t dst, int64_t n) {
        std::copy_n(inputs[i].begin() + src, n, out.begin() + dst);
      });
  return out;
}

std::vector<std::vector<float>> unpack_combined(const CombinedLayout& l, const std::vector<float>& flat, bool scattered) {
  std::vector<std::vector<float>> out;
  for (size_t i = 0; i < l.elements.size(); ++i) {
    out.emplace_back(static_cast<size_t>(scattered ? l.block[i] : l.elements[i]), 0.0f);
    if (scattered) {
      // This rank's block alone, as if it were block 0.
      for_runs(l, i, 0, [&](int64_t src, int64_t dst, int64_t n) {
        std::copy_n(flat.begin() + dst, n, out.back().begin() + src);
      });
    } else {
      for (int64_t b = 0; b < l.group; ++b)
        for_runs(l, i, b, [&](int64_t src, int64_t dst, int64_t n) {
          std::copy_n(flat.begin() + dst, n, out.back().begin() + src);
        });
    }
  }
  return out;
}

void bind_inputs(const Plan& plan, const ModelGraph& logical, const TensorStore& logical_values, int64_t chip,
                 TensorStore& store, uint64_t seed) {
  const int32_t role = plan.role_of_chip.at(static_cast<size_t>(chip));
  if (role < 0) return;
  const Program& prog = plan.programs[role];
  store.resize(prog.graph.num_tensors());
  // Per-device inputs, and inputs a hand-made plan did not bind: drawn for this chip alone.
  std::vector<bool> logical_value(prog.graph.num_tensors(), false);
  for (const TensorBinding& b : prog.inputs) logical_value[b.local] = !b.spec.per_device;
  bool own = false;
  for (size_t t = 0; t < prog.graph.num_tensors(); ++t)
    own = own || (prog.graph.producer(static_cast<TensorId>(t)) < 0 && !logical_value[t]);
  if (own) {
    TensorStore mine;
    init_step_inputs(prog.graph, mine, seed + static_cast<uint64_t>(chip) * 0x9e3779b9ull);
    for (size_t t = 0; t < prog.graph.num_tensors(); ++t)
      if (prog.graph.producer(static_cast<TensorId>(t)) < 0 && !logical_value[t])
        store.share(static_cast<TensorId>(t), mine.shared(static_cast<TensorId>(t)));
  }
  for (const TensorBinding& b : prog.inputs) {
    if (b.spec.per_device) continue;
    (void)logical;
    if (b.spec.is_replicated()) store.share(b.local, logical_values.shared(b.logical));  // read-only: shared
    else store.put(b.local, shard_of(logical_values.get(b.logical), b.spec, plan.mesh, chip));
  }
}

void assemble_results(const Plan& plan, const ModelGraph& logical,
                      const std::function<const TensorStore*(int64_t chip)>& store_of, TensorStore& out) {
  out.resize(logical.num_tensors());
  const int64_t chips = static_cast<int64_t>(plan.role_of_chip.size());
  for (size_t r = 0; r < plan.programs.size(); ++r) {
    std::vector<int64_t> members;
    for (int64_t c = 0; c < chips; ++c)
      if (plan.role_of_chip[c] == static_cast<int32_t>(r)) members.push_back(c);
    if (members.empty()) continue;
    const bool has_result_chip = plan.role_of_chip[plan.result_chip] == static_cast<int32_t>(r);
    std::vector<TensorBinding> bound = plan.programs[r].inputs;
    bound.insert(bound.end(), plan.programs[r].results.begin(), plan.programs[r].results.end());
    for (const TensorBinding& b : bound) {
      if (out.has(b.logical)) continue;
      if (b.spec.per_device || b.spec.is_replicated()) {
        const TensorStore* s = store_of(has_result_chip ? plan.result_chip : members.front());
        if (s && s->has(b.local)) out.put(b.logical, s->get(b.local));
        continue;
      }
      Tensor t(logical.tensor(b.logical).shape);
      bool complete = true;
      for (int64_t c : members) {
        const TensorStore* s = store_of(c);
        if (!s || !s->has(b.local)) {
          complete = false;
          break;
        }
        place_shard(t, s->get(b.local), b.spec, plan.mesh, c);
      }
      if (complete) out.put(b.logical, std::move(t));
    }
  }
}

}  // namespace podsim
