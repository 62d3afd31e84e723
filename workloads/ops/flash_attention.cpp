// Fused attention as the Pallas TPU flash-attention kernels run it (jax.experimental.pallas.ops.tpu.flash_attention;
// Dao et al. 2022, "FlashAttention"; docs/model.md): queries in blocks of block_q rows against keys and values in
// blocks of block_kv, an online softmax in fp32 (running row max m and sum l, the accumulator rescaled by
// exp(m_old - m_new) as each key block comes in), the S x T scores never leaving the chip. The forward op stores
// the output and each row's logsumexp (lse = m + log l, fp32), the only statistics the backward needs.
//
//   o[r] = sum_c softmax_c(alpha q[r] . k[c]) v[c]      over the keys c the mask lets row r see
//
// The backward (Dao 2023's FlashAttention-2 formulation, which the Pallas kernels follow) recomputes the scores
// block by block from q, k and lse: with di[r] = do[r] . o[r],
//   p = exp(alpha q[r] . k[c] - lse[r]),  dv[c] += p do[r],  dp = do[r] . v[c],  ds = p (dp - di[r]),
//   dk[c] += alpha ds q[r],  dq[r] += alpha ds k[c].
// Products take bf16 operands when the tensors are bf16 (p and ds are rounded as the kernel casts them to the
// inputs' type for the MXU) and accumulate in fp32.
//
// The fused backward (attrs.blocks.fused_bwd; splash attention's use_fused_bwd_kernel) is the key/value kernel
// alone: it also forms dq's share of each visible block pair, ds k, and writes it per key block (a [T / block_kv]
// stack of dq's shape, in the inputs' type), which an XLA reduction then sums. The scores and dP are computed once
// instead of once per kernel; dq's partial sums go through HBM.
//
// Layouts: q and o [B, S, H, E], k and v [B, T, H, E]; grouped-query attention q and o [B, S, KV, G, E] with query
// head (kv, g) reading key/value head kv, k and v [B, T, KV, E]; lse [B, H, S] or [B, KV, G, S].
//
// Cost (what the kernels do on a TPU): per (batch, query head) and per block pair the mask leaves visible (causal:
// blocks wholly above the diagonal are skipped; a diagonal block is computed whole and masked), the forward runs two
// GEMMs on the MXU (scores block_q x E @ E x block_kv, values block_q x block_kv @ block_kv x E), the backward seven
// (its key/value kernel: scores, dP, dV, dK; its query kernel: scores, dP, dQ). HBM traffic is what the kernels'
// blocks load and store: q, o, lse once, each visible key/value block once per query block (forward); the backward's
// key/value kernel loads q, do, lse and di per visible block pair, its query kernel k and v (fused: no query kernel;
// dq's per-key-block partials written and read back by their sum). Model FLOPs are the
// attention's own products (4 B H S T E forward, 8 backward), counted over the whole square; the causal part is
// what a convention that halves masked attention halves (workloads/graph.h).
#include <algorithm>
#include <cmath>
#include <limits>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// The shapes of one attention op.
struct Geometry {
  int64_t B = 0, S = 0, T = 0, KV = 0, G = 1, E = 0;
  bool grouped = false;
  int64_t heads() const { return KV * G; }
};

Geometry geometry(const ModelGraph& g, const Op& op) {
  const auto& q = g.tensor(op.inputs[0]).shape;
  const auto& k = g.tensor(op.inputs[1]).shape;
  Geometry x;
  x.grouped = q.size() == 5;
  x.B = q[0];
  x.S = q[1];
  x.KV = q[2];
  x.G = x.grouped ? q[3] : 1;
  x.E = q.back();
  x.T = k[1];
  return x;
}

// The first query's position among the keys: 0, or with the queries split over attrs.axes (context parallelism,
// keys and values gathered whole) the device's index times its rows. A cost is one program for every device: it
// takes the last device's, whose queries see the most keys (the step waits for the slowest).
int64_t cost_query_offset(const Geometry& x, const Op& op) { return op.attrs.axes.empty() ? 0 : std::max<int64_t>(0, x.T - x.S); }

// Block pairs of one (batch, head) the mask leaves to compute, with blocks of bq queries and bk keys.
int64_t visible_pairs(const Geometry& x, bool causal, int64_t q0, int64_t bq, int64_t bk) {
  const int64_t nq = ceil_div64(x.S, bq), nk = ceil_div64(x.T, bk);
  if (!causal) return nq * nk;
  int64_t n = 0;
  for (int64_t i = 0; i < nq; ++i) {
    const int64_t last_row = q0 + std::min((i + 1) * bq, x.S) - 1;  // the block's last query position
    n += std::min(nk, last_row / bk + 1);
  }
  return n;
}

struct Blocks {
  int64_t q = 0, kv = 0;
};
Blocks forward_blocks(const Geometry& x, const Op& op) {
  return {std::min(op.attrs.blocks.q, x.S), std::min(op.attrs.blocks.kv, x.T)};
}
Blocks backward_blocks(const Geometry& x, const Op& op) {
  return {std::min(op.attrs.blocks.q_bwd, x.S), std::min(op.attrs.blocks.kv_bwd, x.T)};
}

// ---- cost ---------------------------------------------------------------------------------------------------------

std::vector<GemmPass> forward_gemms(const ModelGraph& g, const Op& op) {
  const Geometry x = geometry(g, op);
  const Blocks b = forward_blocks(x, op);
  const int64_t n = x.B * x.heads() * visible_pairs(x, op.attrs.causal, cost_query_offset(x, op), b.q, b.kv);
  return {{n, b.q, x.E, b.kv}, {n, b.q, b.kv, x.E}};
}

std::vector<GemmPass> backward_gemms(const ModelGraph& g, const Op& op) {
  const Geometry x = geometry(g, op);
  const Blocks b = backward_blocks(x, op);
  const int64_t n = x.B * x.heads() * visible_pairs(x, op.attrs.causal, cost_query_offset(x, op), b.q, b.kv);
  // Scores twice (one per kernel) and dP twice, or once each when fused; dV and dK (key rows: P^T dO, dS^T Q); dQ.
  const int64_t twice = op.attrs.blocks.fused_bwd ? 1 : 2;
  return {{2 * twice * n, b.q, x.E, b.kv}, {2 * n, b.kv, b.q, x.E}, {n, b.q, b.kv, x.E}};
}

double gemm_flops(const std::vector<GemmPass>& passes) {
  double f = 0;
  for (const GemmPass& p : passes)
    f += 2.0 * static_cast<double>(p.count) * static_cast<double>(p.m) * static_cast<double>(p.k) *
         static_cast<double>(p.n);
  return f;
}

// The attention's products over the whole (query, key) square: 2 B H S T E per product.
double square_flops(const Geometry& x) {
  return 2.0 * static_cast<double>(x.B * x.heads()) * static_cast<double>(x.S) * static_cast<double>(x.T) *
         static_cast<double>(x.E);
}

OpCost flash_cost(const ModelGraph& g, const Op& op) {
  const Geometry x = geometry(g, op);
  const Blocks b = forward_blocks(x, op);
  const int64_t pairs = visible_pairs(x, op.attrs.causal, cost_query_offset(x, op), b.q, b.kv);
  const double bh = static_cast<double>(x.B * x.heads());
  const int elem = dtype_bytes(g.tensor(op.inputs[0]).dtype);
  const double rows = bh * static_cast<double>(x.S);  // query rows
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = gemm_flops(forward_gemms(g, op));
  c.model_flops = 2 * square_flops(x);
  c.causal_flops = op.attrs.causal ? c.model_flops : 0;
  // q once; per visible block pair one key block and one value block (per query head: the kernel's grid runs over
  // query heads); o and lse written once.
  c.bytes_read = rows * static_cast<double>(x.E * elem) +
                 bh * static_cast<double>(pairs) * 2.0 * static_cast<double>(b.kv * x.E * elem);
  c.bytes_written = rows * static_cast<double>(x.E * elem) + rows * 4.0;
  // Per score computed: the subtraction of the running max, the cast of p for the MXU (the scale when the kernel
  // applies it, the mask's compare and select when causal), one exp, the row max and row sum; per accumulator
  // element and key block, the rescale and the add (2 E / block_kv per score).
  c.vector.elements = bh * static_cast<double>(pairs) * static_cast<double>(b.q * b.kv);
  c.vector.simple = 2.0 + (op.attrs.blocks.scale_in_kernel ? 1.0 : 0.0) + (op.attrs.causal ? 2.0 : 0.0) +
                    2.0 * static_cast<double>(x.E) / static_cast<double>(b.kv);
  c.vector.transcendental = 1;
  c.vector.reduce = 2;
  c.vector.reduce_row = static_cast<double>(b.kv);  // the row max and sum run along a block's keys
  return c;
}

OpCost flash_grad_cost(const ModelGraph& g, const Op& op) {
  const Geometry x = geometry(g, op);
  const Blocks b = backward_blocks(x, op);
  const int64_t pairs = visible_pairs(x, op.attrs.causal, cost_query_offset(x, op), b.q, b.kv);
  const double bh = static_cast<double>(x.B * x.heads());
  const int elem = dtype_bytes(g.tensor(op.inputs[0]).dtype);
  const double rows = bh * static_cast<double>(x.S);
  const double key_rows = bh * static_cast<double>(x.T);  // keys per query head
  const double p = bh * static_cast<double>(pairs);
  const double E = static_cast<double>(x.E);
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = gemm_flops(backward_gemms(g, op));
  c.model_flops = 4 * square_flops(x);
  c.causal_flops = op.attrs.causal ? c.model_flops : 0;
  // di = rowsum(do * o): o and do read, di (fp32) written. Key/value kernel: k and v once per query head, per
  // visible pair a block of q, do, lse and di. Query kernel: q, do, lse, di once, per visible pair a block of k and v.
  // Written: dq, dk, dv once.
  const bool fused = op.attrs.blocks.fused_bwd;
  const double di = 2 * rows * E * elem;
  const double dkv = 2 * key_rows * E * elem + p * static_cast<double>(b.q) * (2 * E * elem + 2 * 4.0);
  // Fused: dq's partials, one per key block of every query row ([T / block_kv] stacked, the inputs' type), written
  // by the kernel and read back by their sum.
  const double partials = fused ? static_cast<double>(ceil_div64(x.T, b.kv)) * rows * E * elem : 0.0;
  const double dq = fused ? partials : rows * (2 * E * elem + 2 * 4.0) + p * 2.0 * static_cast<double>(b.kv) * E * elem;
  c.bytes_read = di + dkv + dq;
  double grads = 0;
  for (TensorId t : op.outputs) grads += g.tensor(t).bytes();
  c.bytes_written = grads + rows * 4.0 + partials;
  // Per score, each kernel recomputes it (subtract lse, exp, and the mask when causal) and forms ds = p (dp - di)
  // and casts it (the key/value kernel casts p too): 9 simple operations, 4 more for the masks, two exps; with the
  // scale in the kernel 4 more (each kernel scales the scores and ds); the accumulators' adds (dk, dv per query
  // block, dq per key block); di's multiply-add per element of o. Fused, the key/value kernel's share: 5, 2 for the
  // mask, 2 for the scale in the kernel, one exp, the dk and dv accumulators, and the sum's add per partial element.
  const double scores = p * static_cast<double>(b.q * b.kv);
  c.vector.elements = scores;
  const double kernels = fused ? 1.0 : 2.0;
  const double per_score = kernels * (4.0 + (op.attrs.blocks.scale_in_kernel ? 2.0 : 0.0) +
                                      (op.attrs.causal ? 2.0 : 0.0)) +
                           1.0 /* the key/value kernel's cast of p */ + 2.0 * E / static_cast<double>(b.q) +
                           (fused ? 0.0 : E / static_cast<double>(b.kv));
  const double partial_adds = fused ? partials / elem : 0.0;
  c.vector.simple = per_score + (scores > 0 ? (2.0 * rows * E + partial_adds) / scores : 0.0);
  c.vector.transcendental = fused ? 1 : 2;
  c.vector.reduce = scores > 0 ? rows * E / scores : 0.0;  // di's row sums
  return c;
}

// ---- kernels ------------------------------------------------------------------------------------------------------

// Element offsets: q, o, do [B, S, H, E] (H = KV G, head h = kv G + g), k, v [B, T, KV, E], lse [B, H, S].
struct Index {
  const Geometry& x;
  int64_t q(int64_t b, int64_t s, int64_t h) const { return ((b * x.S + s) * x.heads() + h) * x.E; }
  int64_t k(int64_t b, int64_t t, int64_t kv) const { return ((b * x.T + t) * x.KV + kv) * x.E; }
  int64_t row(int64_t b, int64_t h, int64_t s) const { return (b * x.heads() + h) * x.S + s; }
};

float mxu_operand(float v, bool bf16) { return bf16 ? round_bf16(v) : v; }

float dot(const float* a, const float* b, int64_t n) {
  float s = 0;  // the MXU accumulates in fp32
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

void flash_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Geometry x = geometry(g, op);
  const Index ix{x};
  const Tensor& q = in(st, op, 0);
  const Tensor& k = in(st, op, 1);
  const Tensor& v = in(st, op, 2);
  const bool bf16 = g.tensor(op.inputs[2]).dtype == DType::BF16;
  const int64_t q0 = st.device_index(op.attrs.axes) * x.S;
  const Blocks bl = forward_blocks(x, op);
  const float alpha = static_cast<float>(op.attrs.alpha);
  Tensor o = ops::out_like(g, op, 0), lse = ops::out_like(g, op, 1);
  const int64_t E = x.E;
  std::vector<float> m(static_cast<size_t>(bl.q)), l(static_cast<size_t>(bl.q)), acc(static_cast<size_t>(bl.q * E));
  std::vector<float> s(static_cast<size_t>(bl.q * bl.kv));
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t h = 0; h < x.heads(); ++h) {
      const int64_t kv = h / x.G;
      for (int64_t r0 = 0; r0 < x.S; r0 += bl.q) {
        const int64_t nr = std::min(bl.q, x.S - r0);
        std::fill(m.begin(), m.end(), -std::numeric_limits<float>::infinity());
        std::fill(l.begin(), l.end(), 0.0f);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t c0 = 0; c0 < x.T; c0 += bl.kv) {
          if (op.attrs.causal && c0 > q0 + r0 + nr - 1) break;  // the block lies above the diagonal: skipped
          const int64_t nc = std::min(bl.kv, x.T - c0);
          for (int64_t r = 0; r < nr; ++r) {
            const float* qr = &q.data[ix.q(b, r0 + r, h)];
            const int64_t visible = op.attrs.causal ? std::min(nc, q0 + r0 + r - c0 + 1) : nc;
            // The block's scores and their max; masked keys take no part.
            float mx = m[r];
            for (int64_t c = 0; c < visible; ++c) {
              s[r * bl.kv + c] = alpha * dot(qr, &k.data[ix.k(b, c0 + c, kv)], E);
              mx = std::max(mx, s[r * bl.kv + c]);
            }
            if (visible <= 0) continue;
            const float rescale = std::exp(m[r] - mx);  // 0 for the first block (m = -inf)
            float sum = 0;
            float* a = &acc[r * E];
            for (int64_t e = 0; e < E; ++e) a[e] *= rescale;
            for (int64_t c = 0; c < visible; ++c) {
              const float p = std::exp(s[r * bl.kv + c] - mx);
              sum += p;
              const float pv = mxu_operand(p, bf16);
              const float* vc = &v.data[ix.k(b, c0 + c, kv)];
              for (int64_t e = 0; e < E; ++e) a[e] += pv * vc[e];
            }
            l[r] = l[r] * rescale + sum;
            m[r] = mx;
          }
        }
        for (int64_t r = 0; r < nr; ++r) {
          float* out = &o.data[ix.q(b, r0 + r, h)];
          const float inv = l[r] > 0 ? 1.0f / l[r] : 0.0f;
          for (int64_t e = 0; e < E; ++e) out[e] = acc[r * E + e] * inv;
          lse.data[ix.row(b, h, r0 + r)] =
              l[r] > 0 ? m[r] + std::log(l[r]) : -std::numeric_limits<float>::infinity();
        }
      }
    }
  ops::put(g, op, st, std::move(o), 0);
  ops::put(g, op, st, std::move(lse), 1);
}

void flash_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Geometry x = geometry(g, op);
  const Index ix{x};
  const Tensor& q = in(st, op, 0);
  const Tensor& k = in(st, op, 1);
  const Tensor& v = in(st, op, 2);
  const Tensor& o = in(st, op, 3);
  const Tensor& lse = in(st, op, 4);
  const Tensor& dout = in(st, op, 5);
  const bool bf16 = g.tensor(op.inputs[0]).dtype == DType::BF16;
  const int64_t q0 = st.device_index(op.attrs.axes) * x.S;
  const Blocks bl = backward_blocks(x, op);
  const float alpha = static_cast<float>(op.attrs.alpha);
  const int64_t E = x.E;
  Tensor dq = ops::out_like(g, op, 0), dk = ops::out_like(g, op, 1), dv = ops::out_like(g, op, 2);
  // Fused, each key block's share of dq leaves the kernel in the inputs' type before the sum adds it (fp32).
  const bool round_partials = op.attrs.blocks.fused_bwd && bf16;
  std::vector<float> part(round_partials ? static_cast<size_t>(E) : 0);
  std::vector<float> di(static_cast<size_t>(x.B * x.heads() * x.S));
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t h = 0; h < x.heads(); ++h)
      for (int64_t r = 0; r < x.S; ++r)
        di[ix.row(b, h, r)] = dot(&dout.data[ix.q(b, r, h)], &o.data[ix.q(b, r, h)], E);
  // Block by block as the key/value kernel walks them (key blocks outer, query blocks inner); the query kernel's
  // dq sums the same terms.
  for (int64_t b = 0; b < x.B; ++b)
    for (int64_t h = 0; h < x.heads(); ++h) {
      const int64_t kv = h / x.G;
      for (int64_t c0 = 0; c0 < x.T; c0 += bl.kv) {
        const int64_t nc = std::min(bl.kv, x.T - c0);
        for (int64_t r0 = 0; r0 < x.S; r0 += bl.q) {
          const int64_t nr = std::min(bl.q, x.S - r0);
          if (op.attrs.causal && c0 > q0 + r0 + nr - 1) continue;  // above the diagonal
          for (int64_t r = 0; r < nr; ++r) {
            const int64_t row = r0 + r;
            const float* qr = &q.data[ix.q(b, row, h)];
            const float* dor = &dout.data[ix.q(b, row, h)];
            float* const dq_row = &dq.data[ix.q(b, row, h)];
            if (round_partials) std::fill(part.begin(), part.end(), 0.0f);
            float* dqr = round_partials ? part.data() : dq_row;
            const float lr = lse.data[ix.row(b, h, row)], dr = di[ix.row(b, h, row)];
            const int64_t visible = op.attrs.causal ? std::min(nc, q0 + row - c0 + 1) : nc;
            for (int64_t c = 0; c < visible; ++c) {
              const float* kc = &k.data[ix.k(b, c0 + c, kv)];
              const float* vc = &v.data[ix.k(b, c0 + c, kv)];
              const float p = std::exp(alpha * dot(qr, kc, E) - lr);
              const float dp = dot(dor, vc, E);
              const float ds = mxu_operand(alpha * p * (dp - dr), bf16);
              const float pm = mxu_operand(p, bf16);
              float* dkc = &dk.data[ix.k(b, c0 + c, kv)];
              float* dvc = &dv.data[ix.k(b, c0 + c, kv)];
              for (int64_t e = 0; e < E; ++e) {
                dvc[e] += pm * dor[e];
                dkc[e] += ds * qr[e];
                dqr[e] += ds * kc[e];
              }
            }
            if (round_partials)
              for (int64_t e = 0; e < E; ++e) dq_row[e] += round_bf16(part[static_cast<size_t>(e)]);
          }
        }
      }
    }
  ops::put(g, op, st, std::move(dq), 0);
  ops::put(g, op, st, std::move(dk), 1);
  ops::put(g, op, st, std::move(dv), 2);
}

std::vector<TensorId> flash_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1, -1};
  ModelGraph& g = b.graph();
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::FlashAttentionGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {op.inputs[0], op.inputs[1], op.inputs[2], op.outputs[0], op.outputs[1], dy[0]};
  grad.attrs = op.attrs;
  const char* names[] = {".dq", ".dk", ".dv"};
  for (int i = 0; i < 3; ++i) {
    const TensorInfo& t = g.tensor(op.inputs[static_cast<size_t>(i)]);
    grad.outputs.push_back(g.add_tensor({op.name + names[i], t.shape, t.dtype, TensorRole::Gradient}));
  }
  g.add_op(grad);
  return grad.outputs;
}

// ---- partitioning -------------------------------------------------------------------------------------------------
// Heads (the key/value heads, and for grouped queries the query heads of a group) and the batch split as the inputs
// come; the head width and the keys' positions stay whole; the queries' positions may stay split (context
// parallelism, as MaxText's: keys and values are gathered whole, and each device masks by its queries' offset,
// attrs.axes). With the queries' positions or a group's query heads split, the keys' and values' gradients are
// partial sums over those axes (each device's queries contribute to every key).

struct Split {
  std::vector<std::string> batch, seq, heads, group;
};

Split choose(const OpShardingQuery& q) {
  const ShardSpec qs = sharding::settled(q.in[0]), ks = sharding::settled(q.in[1]);
  const bool grouped = qs.rank() == 5;
  Split s;
  std::vector<std::string> used;
  auto take = [&](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<std::string> axes = a.empty() ? b : a;
    for (const std::string& ax : axes)
      if (std::find(used.begin(), used.end(), ax) != used.end()) return std::vector<std::string>{};
    used.insert(used.end(), axes.begin(), axes.end());
    return axes;
  };
  s.batch = take(qs.dims[0], ks.dims[0]);
  s.heads = take(qs.dims[2], ks.dims[2]);
  if (grouped) s.group = take(qs.dims[3], {});
  s.seq = take(qs.dims[1], {});
  return s;
}

ShardSpec query_spec(const Split& s, bool grouped) {
  ShardSpec r = ShardSpec::replicated(grouped ? 5 : 4);
  r.dims[0] = s.batch;
  r.dims[1] = s.seq;
  r.dims[2] = s.heads;
  if (grouped) r.dims[3] = s.group;
  return r;
}

ShardSpec key_spec(const Split& s) {
  ShardSpec r = ShardSpec::replicated(4);
  r.dims[0] = s.batch;
  r.dims[2] = s.heads;
  return r;
}

ShardSpec rows_spec(const Split& s, bool grouped) {
  ShardSpec r = ShardSpec::replicated(grouped ? 4 : 3);
  r.dims[0] = s.batch;
  r.dims[1] = s.heads;
  if (grouped) r.dims[2] = s.group;
  r.dims.back() = s.seq;
  return r;
}

OpSharding flash_rule(const OpShardingQuery& q) {
  const Split s = choose(q);
  const bool grouped = q.g.tensor(q.op.inputs[0]).shape.size() == 5;
  OpSharding r;
  r.attrs = q.op.attrs;
  r.attrs.axes = s.seq;
  r.in = {query_spec(s, grouped), key_spec(s), key_spec(s)};
  r.out = {query_spec(s, grouped), rows_spec(s, grouped)};
  return r;
}

OpSharding flash_grad_rule(const OpShardingQuery& q) {
  const Split s = choose(q);
  const bool grouped = q.g.tensor(q.op.inputs[0]).shape.size() == 5;
  const ShardSpec qs = query_spec(s, grouped), ks = key_spec(s);
  OpSharding r;
  r.attrs = q.op.attrs;
  r.attrs.axes = s.seq;
  r.in = {qs, ks, ks, qs, rows_spec(s, grouped), qs};
  ShardSpec dk = ks;
  dk.partial = s.seq;
  dk.partial.insert(dk.partial.end(), s.group.begin(), s.group.end());
  std::sort(dk.partial.begin(), dk.partial.end());
  r.out = {qs, dk, dk};
  return r;
}

const bool registered =
    register_op_kind({OpKind::FlashAttention, "flash_attention", Unit::Mxu, flash_cost, flash_kernel, flash_grad,
                      flash_rule, forward_gemms}) &&
    register_op_kind({OpKind::FlashAttentionGrad, "flash_attention_grad", Unit::Mxu, flash_grad_cost,
                      flash_grad_kernel, nullptr, flash_grad_rule, backward_gemms});

}  // namespace
}  // namespace podsim
