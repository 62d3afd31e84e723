// MatMul: a contraction given as an einsum equation (workloads/einsum.h), run on the MXU as a batch of
// M x K @ K x N GEMMs. bf16 operands are rounded to bf16 as the MXU takes them and products accumulate in fp32;
// fp32 operands are multiplied in fp32. The operands are brought into [batch, M, K] / [batch, K, N] order and the
// result into the output's order by copies in the numeric kernel only: layouts cost no simulated time (XLA
// assigns layouts so that dots need no transposes).
#include <Eigen/Core>
#include <algorithm>
#include <limits>
#include <optional>

#include "base/error.h"
#include "workloads/einsum.h"
#include "workloads/ops/op_kind.h"

namespace podsim {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapC = Eigen::Map<const RowMat>;
using Map = Eigen::Map<RowMat>;

OpCost cost(const ModelGraph& g, const Op& op) {
  const GemmDims a = gemm_dims(g, op);
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = 2.0 * static_cast<double>(a.batch) * static_cast<double>(a.m) * static_cast<double>(a.k) *
            static_cast<double>(a.n);
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  c.causal_flops = op.attrs.causal ? c.flops : 0;  // attention's scores or context (or their gradients)
  return c;
}

// Copies `src` (dimensions named by `from`, sizes by letter in `sz`) into the order `to`, row-major.
std::vector<float> permute(const float* src, const std::string& from, const std::vector<int64_t>& sz,
                           const std::string& to) {
  const size_t r = to.size();
  std::vector<int64_t> src_stride(26, 0);
  int64_t s = 1;
  for (size_t i = from.size(); i-- > 0;) {
    src_stride[from[i] - 'a'] = s;
    s *= sz[from[i] - 'a'];
  }
  std::vector<int64_t> dims(r), stride(r), idx(r, 0);
  int64_t n = 1;
  for (size_t i = 0; i < r; ++i) {
    dims[i] = sz[to[i] - 'a'];
    stride[i] = src_stride[to[i] - 'a'];
    n *= dims[i];
  }
  std::vector<float> out(static_cast<size_t>(n));
  if (n == 0) return out;
  int64_t off = 0;
  for (int64_t k = 0; k < n; ++k) {
    out[k] = src[off];
    for (size_t d = r; d-- > 0;) {  // odometer, last dimension fastest
      off += stride[d];
      if (++idx[d] < dims[d]) break;
      off -= stride[d] * dims[d];
      idx[d] = 0;
    }
  }
  return out;
}

// An operand in the order `to`: a view of the stored data when it is already in that order and needs no rounding.
struct Operand {
  std::vector<float> copy;
  const float* data = nullptr;
};

Operand operand(const Tensor& t, const TensorInfo& info, const std::string& letters, const std::vector<int64_t>& sz,
                const std::string& to) {
  Operand o;
  const bool bf16 = info.dtype == DType::BF16;
  if (letters == to && !bf16) {
    o.data = t.data.data();
    return o;
  }
  o.copy = letters == to ? t.data : permute(t.data.data(), letters, sz, to);
  if (bf16)
    for (float& x : o.copy) x = round_bf16(x);
  o.data = o.copy.data();
  return o;
}

void kernel(const ModelGraph& g, const Op& op, TensorStore& store) {
  const Einsum e = Einsum::parse(op.attrs.equation);
  const TensorInfo& ia = g.tensor(op.inputs[0]);
  const TensorInfo& ib = g.tensor(op.inputs[1]);
  const TensorInfo& ic = g.tensor(op.outputs[0]);
  const std::vector<int64_t> sz = e.sizes(ia.shape, ib.shape);
  const int64_t B = Einsum::product(sz, e.batch), M = Einsum::product(sz, e.lfree);
  const int64_t K = Einsum::product(sz, e.contract), N = Einsum::product(sz, e.rfree);
  Operand A = operand(store.get(op.inputs[0]), ia, e.lhs, sz, e.batch + e.lfree + e.contract);
  Operand Bm = operand(store.get(op.inputs[1]), ib, e.rhs, sz, e.batch + e.contract + e.rfree);
  const std::string natural = e.batch + e.lfree + e.rfree;
  Tensor out(ic.shape);
  std::vector<float> tmp;
  float* c = out.data.data();
  if (natural != e.out) {
    tmp.resize(out.data.size());
    c = tmp.data();
  }
  for (int64_t b = 0; b < B; ++b)
    Map(c + b * M * N, M, N).noalias() = MapC(A.data + b * M * K, M, K) * MapC(Bm.data + b * K * N, K, N);
  if (natural != e.out) out.data = permute(tmp.data(), natural, sz, e.out);
  if (ic.dtype == DType::BF16)
    for (float& x : out.data) x = round_bf16(x);
  store.put(op.outputs[0], std::move(out));
}

// C = einsum(A, B): dA = einsum(dC, B -> A) and dB = einsum(A, dC -> B), in the operands' own layouts.
std::vector<TensorId> grad(GraphBuilder& bld, const Op& op, const std::vector<TensorId>& dout) {
  TensorId dc = dout[0];
  if (dc < 0) return {-1, -1};
  const Einsum e = Einsum::parse(op.attrs.equation);
  ModelGraph& g = bld.graph();
  const TensorInfo ia = g.tensor(op.inputs[0]), ib = g.tensor(op.inputs[1]);
  std::vector<TensorId> out(2, -1);
  if (bld.wants_grad(op.inputs[0])) {
    OpAttrs at;
    at.causal = op.attrs.causal;
    at.equation = e.out + "," + e.rhs + "->" + e.lhs;
    out[0] = bld.emit(op.name + ".dA", OpKind::MatMul, Phase::Backward, {dc, op.inputs[1]}, ia.shape, ia.dtype,
                      TensorRole::Gradient, at);
  }
  if (bld.wants_grad(op.inputs[1])) {
    OpAttrs at;
    at.causal = op.attrs.causal;
    at.equation = e.lhs + "," + e.out + "->" + e.rhs;
    out[1] = bld.emit(op.name + ".dB", OpKind::MatMul, Phase::Backward, {op.inputs[0], dc}, ib.shape, ib.dtype,
                      TensorRole::Gradient, at);
  }
  return out;
}

// ---- partitioning (GSPMD's dot rule) ------------------------------------------------------------------------------
// Each letter of the equation gets the mesh axes that split it, the same in every tensor that has it: a batch or
// free letter splits the output too; a contracting letter split over axes leaves the output partial over them.
// When the operands' shardings agree (each letter split alike wherever it is split, no axis on two letters), the
// op runs on them as they are, as GSPMD does: a contraction over a split batch gives a partial result (the
// data-parallel gradient). Otherwise candidates for each letter are what the operands and the wanted output use,
// or nothing, and the rule picks the assignment (an axis used by one letter at most) with the least estimated
// cost: bytes the operands and the output must move, plus the local FLOPs at the compute-to-communication rate.

using LetterAxes = std::vector<std::vector<std::string>>;  // per letter (c - 'a')

LetterAxes letters_of(const ShardSpec& s, const std::string& letters) {
  LetterAxes out(26);
  for (size_t d = 0; d < letters.size() && d < s.dims.size(); ++d) out[letters[d] - 'a'] = s.dims[d];
  return out;
}

ShardSpec spec_of(const LetterAxes& la, const std::string& letters) {
  ShardSpec s = ShardSpec::replicated(letters.size());
  for (size_t d = 0; d < letters.size(); ++d) s.dims[d] = la[letters[d] - 'a'];
  return s;
}

// Bytes a device receives to turn `from` into `to` (both settled), as the partitioner reshards: axes that leave
// the innermost place of one dimension's split for the innermost place of another's are an all-to-all (a device
// keeps 1/n of its data, where n is the moved axes' size); every other dimension whose split changes, other than a
// whole dimension becoming split (a local slice), is gathered first.
double reshard_bytes(const ShardSpec& from, const ShardSpec& to, double global_bytes, const Mesh& m) {
  ShardSpec mid = from;
  double cost = 0;
  for (size_t q = 0; q < to.dims.size(); ++q)
    for (size_t p = 0; p < to.dims.size(); ++p) {
      const auto &fq = mid.dims[q], &tq = to.dims[q], &fp = mid.dims[p], &tp = to.dims[p];
      if (p == q || tq.size() <= fq.size() || !std::equal(fq.begin(), fq.end(), tq.begin())) continue;
      const std::vector<std::string> moved(tq.begin() + static_cast<std::ptrdiff_t>(fq.size()), tq.end());
      if (fp.size() != tp.size() + moved.size() || !std::equal(tp.begin(), tp.end(), fp.begin()) ||
          !std::equal(moved.begin(), moved.end(), fp.begin() + static_cast<std::ptrdiff_t>(tp.size())))
        continue;
      const double n = static_cast<double>(m.size(moved));
      cost += global_bytes / static_cast<double>(sharding::pieces(mid, m)) * (n - 1) / n;
      mid.dims[p] = to.dims[p];
      mid.dims[q] = to.dims[q];
    }
  const ShardSpec moved = mid;
  for (size_t d = 0; d < moved.dims.size(); ++d) {
    if (moved.dims[d] == to.dims[d] || moved.dims[d].empty()) continue;
    int64_t p = m.size(moved.dims[d]);
    mid.dims[d].clear();
    cost += global_bytes / static_cast<double>(sharding::pieces(mid, m)) * static_cast<double>(p - 1) /
            static_cast<double>(p);
  }
  return cost;
}

OpSharding partition(const OpShardingQuery& q) {
  const Einsum e = Einsum::parse(q.op.attrs.equation);
  const ShardSpec A = sharding::settled(q.in[0]), B = sharding::settled(q.in[1]);
  const std::optional<ShardSpec> want =
      !q.want.empty() && q.want[0] && !q.want[0]->is_partial() ? q.want[0] : std::nullopt;
  const LetterAxes la = letters_of(A, e.lhs), lb = letters_of(B, e.rhs);
  const LetterAxes lw = want ? letters_of(*want, e.out) : LetterAxes(26);
  const double a_bytes = sharding::tensor_bytes(q.g, q.op.inputs[0]);
  const double b_bytes = sharding::tensor_bytes(q.g, q.op.inputs[1]);
  const double o_bytes = sharding::tensor_bytes(q.g, q.op.outputs[0]);
  const std::vector<int64_t> sz = e.sizes(q.g.tensor(q.op.inputs[0]).shape, q.g.tensor(q.op.inputs[1]).shape);
  const double flops = 2.0 * static_cast<double>(Einsum::product(sz, e.batch + e.lfree + e.contract + e.rfree));

  std::string all = e.batch + e.lfree + e.rfree + e.contract;
  LetterAxes best_axes;
  {  // The operands' own shardings, when they agree.
    LetterAxes natural(26);
    std::vector<std::string> used;
    bool agree = true;
    for (char ch : all) {
      const auto &x = la[ch - 'a'], &y = lb[ch - 'a'];
      const auto& axes = x.empty() ? y : x;
      if (!x.empty() && !y.empty() && x != y) agree = false;
      for (const auto& a : axes) {
        if (std::find(used.begin(), used.end(), a) != used.end()) agree = false;
        used.push_back(a);
      }
      natural[ch - 'a'] = axes;
    }
    if (agree) best_axes = natural;
  }
  std::vector<std::vector<std::vector<std::string>>> options(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    auto& o = options[i];
    auto add = [&](const std::vector<std::string>& axes) {
      if (std::find(o.begin(), o.end(), axes) == o.end()) o.push_back(axes);
    };
    const int c = all[i] - 'a';
    add(la[c]);  // empty when the lhs does not have or split the letter
    add(lb[c]);
    add(lw[c]);
    add({});
  }
  double best_cost = std::numeric_limits<double>::infinity();
  std::vector<size_t> pick(all.size(), 0);
  const bool agreed = !best_axes.empty();
  while (!agreed) {
    LetterAxes cur(26);
    std::vector<std::string> used;
    bool valid = true;
    for (size_t i = 0; i < all.size() && valid; ++i) {
      const auto& axes = options[i][pick[i]];
      for (const auto& a : axes) {
        if (std::find(used.begin(), used.end(), a) != used.end()) valid = false;
        used.push_back(a);
      }
      cur[all[i] - 'a'] = axes;
    }
    if (valid) {
      const ShardSpec ra = spec_of(cur, e.lhs), rb = spec_of(cur, e.rhs), ro = spec_of(cur, e.out);
      std::vector<std::string> partial;
      for (char c : e.contract) partial.insert(partial.end(), cur[c - 'a'].begin(), cur[c - 'a'].end());
      double cost = reshard_bytes(A, ra, a_bytes, q.mesh) + reshard_bytes(B, rb, b_bytes, q.mesh);
      const double out_local = o_bytes / static_cast<double>(sharding::pieces(ro, q.mesh));
      if (!partial.empty()) {
        const double p = static_cast<double>(q.mesh.size(partial));
        cost += (want ? 1.0 : 2.0) * out_local * (p - 1) / p;  // a reduce-scatter into the wanted split, or an all-reduce
      }
      if (want) cost += reshard_bytes(ro, *want, o_bytes, q.mesh);
      cost += flops / static_cast<double>(q.mesh.size(used)) / q.flops_per_comm_byte;
      if (cost < best_cost - 1e-9) {
        best_cost = cost;
        best_axes = cur;
      }
    }
    size_t i = 0;
    while (i < all.size() && ++pick[i] == options[i].size()) pick[i++] = 0;
    if (i == all.size()) break;
  }
  OpSharding r;
  r.attrs = q.op.attrs;
  r.in = {spec_of(best_axes, e.lhs), spec_of(best_axes, e.rhs)};
  ShardSpec out = spec_of(best_axes, e.out);
  for (char c : e.contract) out.partial.insert(out.partial.end(), best_axes[c - 'a'].begin(), best_axes[c - 'a'].end());
  std::sort(out.partial.begin(), out.partial.end());
  r.out = {out};
  return r;
}

}  // namespace

GemmDims gemm_dims(const ModelGraph& g, const Op& op) {
  if (op.kind == OpKind::Conv2d || op.kind == OpKind::Conv2dInputGrad || op.kind == OpKind::Conv2dFilterGrad)
    return conv_gemm_dims(g, op);
  if (const OpKindDef* def = find_op_kind(op.kind); def && def->gemm) return def->gemm(g, op);
  if (op.kind != OpKind::MatMul) throw Error(Err::Internal, "gemm_dims of non-matmul op '" + op.name + "'");
  const Einsum e = Einsum::parse(op.attrs.equation);
  const std::vector<int64_t> sz = e.sizes(g.tensor(op.inputs[0]).shape, g.tensor(op.inputs[1]).shape);
  GemmDims d;
  d.batch = Einsum::product(sz, e.batch);
  d.m = Einsum::product(sz, e.lfree);
  d.k = Einsum::product(sz, e.contract);
  d.n = Einsum::product(sz, e.rfree);
  return d;
}

namespace {

const bool registered = register_op_kind({OpKind::MatMul, "matmul", Unit::Mxu, cost, kernel, grad, partition});

}  // namespace
}  // namespace podsim
