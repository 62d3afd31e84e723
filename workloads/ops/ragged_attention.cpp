// RaggedAttention: the attention of decode steps (and of prefill chunks with a cached prefix) as the TPU serving
// engines run it: JetStream's ragged attention and vLLM TPU's ragged paged attention (Pallas kernels;
// docs/model.md, "Decode attention"). Each sequence's fresh queries attend over its own keys only: the cache's
// first cached[i] + fresh[i] places (the fresh keys were written by KvCacheWrite just before), causal among the
// fresh ones, streamed from HBM in blocks of attrs.blocks.kv keys, with an online softmax in fp32 (running row max
// and sum, the accumulator rescaled as each block comes in, as the flash kernel does). Keys past a sequence's
// length are never read; the cache of a long sequence costs what it holds, not the capacity.
//   q, o   [R, S, H, E] (grouped: [R, S, KV, G, E]) as attrs.ragged lays the sequences out (workloads/ragged.h)
//   k, v   [N, C, KV, E], the iteration's sequences in order; int8 or fp8 with scales [N, C, KV] (inputs 3 and 4):
//          each key dequantized as q * scale on its way into the product
//   o[token] = sum_c softmax_c(alpha q . k[c]) v[c]   over c <= the token's position (padding: the sequence's keys)
//
// Cost (what the kernel does on a TPU): the G query heads that share a key/value head are processed together as the
// rows of one block (the decode kernels' grouping of grouped-query attention), the fresh positions in blocks of
// attrs.blocks.q (a decode's block is its one position); per (sequence, key/value head, query block) every key block
// up to the block's last visible key.
// On the MXU each block pair is two products, as the kernels' dots map onto it: the scores q [rows x E] .
// k_block^T [E x bk] and the weighted values p [rows x bk] . v_block [bk x E], the cache block loaded into the array
// as its weights and the few query rows streamed through (a decode is a matrix-vector product: the weight loads, not
// the rows, take the array's time). HBM traffic: q read and o written once, each visible key and value block read once per query
// block (whole blocks: the kernels DMA whole blocks, a sequence's last one included), with its scales when
// quantized. Vector work per score as the flash kernel's (scale, max subtraction, exponential, the cast of p, row
// max and sum, the accumulator's rescale), plus the dequantization's convert and multiply per cache element read.
// Model FLOPs are the products over the visible keys of the real (not padding) queries: 4 E H per (query, key).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "workloads/ops/kernel_util.h"
#include "workloads/ragged.h"

namespace podsim {
namespace {

using ops::in;

struct Geometry {
  int64_t R = 0, S = 0, KV = 0, G = 1, E = 0, C = 0;
  bool grouped = false, quantized = false;
  int64_t heads() const { return KV * G; }
};

Geometry geometry(const ModelGraph& g, const Op& op) {
  const auto& q = g.tensor(op.inputs[0]).shape;
  Geometry x;
  x.grouped = q.size() == 5;
  x.R = q[0];
  x.S = q[1];
  x.KV = q[2];
  x.G = x.grouped ? q[3] : 1;
  x.E = q.back();
  x.C = g.tensor(op.inputs[1]).shape[1];
  x.quantized = op.inputs.size() == 5;
  return x;
}

// The sequences one device's rows hold: all of them in a packed row, else `rows` consecutive ones from `first`.
struct Span {
  int64_t first = 0, count = 0;
};
std::vector<Span> device_spans(const OpAttrs::Ragged& rg, int64_t rows) {
  const int64_t n = ragged_sequences(rg);
  if (rg.packed || rows >= n) return {{0, n}};
  std::vector<Span> out;
  for (int64_t f = 0; f < n; f += rows) out.push_back({f, std::min(rows, n - f)});
  return out;
}

// Per key/value head: the block pairs by the query positions their block holds (a decode's block has one, a chunk's
// up to block_q), the visible (query, key) pairs of real queries, and the query tokens.
struct Work {
  std::map<int64_t, int64_t> pairs;  // query positions per block -> block pairs
  double visible = 0;
  double query_tokens = 0;
  int64_t total() const {
    int64_t n = 0;
    for (const auto& [rows, count] : pairs) n += count;
    return n;
  }
};

void add_sequence(Work& w, const OpAttrs::Ragged& rg, int64_t seq, int64_t block_q, int64_t block_kv) {
  const int64_t cached = rg.cached[static_cast<size_t>(seq)], fresh = rg.fresh[static_cast<size_t>(seq)];
  const int64_t width = ragged_width(rg, seq), keys = cached + fresh;
  for (int64_t a = 0; a < width; a += block_q) {
    const int64_t last = std::min(keys, cached + std::min(width, a + block_q));  // keys the block's last row sees
    w.pairs[std::min(block_q, width - a)] += ceil_div64(last, block_kv);
  }
  for (int64_t p = 0; p < fresh; ++p) w.visible += static_cast<double>(cached + p + 1);
  w.query_tokens += static_cast<double>(width);
}

// The slowest device's work (a cost is one program for every device).
Work device_work(const ModelGraph& g, const Op& op) {
  const Geometry x = geometry(g, op);
  Work most;
  for (const Span& sp : device_spans(op.attrs.ragged, x.R)) {
    Work w;
    for (int64_t i = sp.first; i < sp.first + sp.count; ++i)
      add_sequence(w, op.attrs.ragged, i, op.attrs.blocks.q, op.attrs.blocks.kv);
    if (w.total() > most.total()) most = w;
  }
  return most;
}

// Per block height, the scores and the values products of its block pairs over every key/value head.
std::vector<GemmPass> ragged_gemms(const ModelGraph& g, const Op& op) {
  const Geometry x = geometry(g, op);
  const int64_t bk = op.attrs.blocks.kv;
  std::vector<GemmPass> out;
  for (const auto& [positions, count] : device_work(g, op).pairs) {
    const int64_t rows = positions * x.G, n = count * x.KV;
    out.push_back({n, rows, x.E, bk});
    out.push_back({n, rows, bk, x.E});
  }
  return out;
}

OpCost ragged_cost(const ModelGraph& g, const Op& op) {
  const Geometry x = geometry(g, op);
  const Work w = device_work(g, op);
  const double E = static_cast<double>(x.E), bk = static_cast<double>(op.attrs.blocks.kv);
  const double blocks = static_cast<double>(w.total() * x.KV);  // block pairs over every key/value head
  double scores = 0;                                             // rows x keys of every block pair
  for (const auto& [positions, count] : w.pairs)
    scores += static_cast<double>(count * x.KV * positions * x.G) * bk;
  const int q_elem = dtype_bytes(g.tensor(op.inputs[0]).dtype);
  const int kv_elem = dtype_bytes(g.tensor(op.inputs[1]).dtype);
  const double scale_bytes = x.quantized ? 2.0 * bk * dtype_bytes(g.tensor(op.inputs[3]).dtype) : 0.0;
  OpCost c;
  c.unit = Unit::Mxu;
  for (const GemmPass& p : ragged_gemms(g, op))
    c.flops += 2.0 * static_cast<double>(p.count) * static_cast<double>(p.m * p.k * p.n);
  c.model_flops = 4.0 * E * static_cast<double>(x.heads()) * w.visible;
  const double q_bytes = w.query_tokens * static_cast<double>(x.heads()) * E * q_elem;
  c.bytes_read = q_bytes + blocks * (2.0 * bk * E * kv_elem + scale_bytes);
  c.bytes_written = q_bytes;
  // Per score the flash kernel's work; per cache element read (2 bk E a block pair) the dequantization's two.
  c.vector.elements = scores;
  c.vector.simple = 3.0 + 2.0 * E / bk + (x.quantized && scores > 0 ? 4.0 * E * bk * blocks / scores : 0.0);
  c.vector.transcendental = 1;
  c.vector.reduce = 2;
  c.vector.reduce_row = bk;  // the row max and sum along a block's keys, as the flash kernel's
  return c;
}

// ---- kernel -------------------------------------------------------------------------------------------------------

void ragged_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Geometry x = geometry(g, op);
  const Tensor& q = in(st, op, 0);
  const Tensor& k = in(st, op, 1);
  const Tensor& v = in(st, op, 2);
  const Tensor* ks = x.quantized ? &in(st, op, 3) : nullptr;
  const Tensor* vs = x.quantized ? &in(st, op, 4) : nullptr;
  const bool bf16 = g.tensor(op.inputs[0]).dtype == DType::BF16;
  const OpAttrs::Ragged& rg = op.attrs.ragged;
  const int64_t row0 = rg.packed ? 0 : st.device_index(op.attrs.axes) * x.R;
  const int64_t bk = op.attrs.blocks.kv, E = x.E, C = x.C;
  const float alpha = static_cast<float>(op.attrs.alpha);
  auto operand = [&](float f) { return bf16 ? round_bf16(f) : f; };
  // Key or value c of slot `slot`, head `h`, element e, dequantized.
  auto cached = [&](const Tensor& t, const Tensor* s, int64_t slot, int64_t c, int64_t h, int64_t e) {
    const float val = t.data[((slot * C + c) * x.KV + h) * E + e];
    return s ? operand(val * s->data[(slot * C + c) * x.KV + h]) : val;
  };
  Tensor o = ops::out_like(g, op);
  std::vector<float> acc(static_cast<size_t>(E)), sc(static_cast<size_t>(bk));
  for (int64_t r = 0; r < x.R; ++r)
    for (int64_t p = 0; p < x.S; ++p) {
      const RaggedToken tok = ragged_token(rg, row0 + r, p);
      if (tok.seq < 0) continue;
      const int64_t slot = rg.packed ? tok.seq : tok.seq - row0;
      const int64_t keys = std::min(tok.pos + 1, ragged_context(rg, tok.seq));  // padding sees the real keys
      for (int64_t h = 0; h < x.heads(); ++h) {
        const int64_t kv = h / x.G;
        const float* qr = &q.data[((r * x.S + p) * x.heads() + h) * E];
        float m = -std::numeric_limits<float>::infinity(), l = 0;
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (int64_t c0 = 0; c0 < keys; c0 += bk) {
          const int64_t nc = std::min(bk, keys - c0);
          float mx = m;
          for (int64_t c = 0; c < nc; ++c) {
            float d = 0;  // the MXU accumulates in fp32
            for (int64_t e = 0; e < E; ++e) d += qr[e] * cached(k, ks, slot, c0 + c, kv, e);
            sc[static_cast<size_t>(c)] = alpha * d;
            mx = std::max(mx, sc[static_cast<size_t>(c)]);
          }
          const float rescale = std::exp(m - mx);  // 0 for the first block (m = -inf)
          for (float& a : acc) a *= rescale;
          float sum = 0;
          for (int64_t c = 0; c < nc; ++c) {
            const float pr = std::exp(sc[static_cast<size_t>(c)] - mx);
            sum += pr;
            const float pv = operand(pr);
            for (int64_t e = 0; e < E; ++e) acc[static_cast<size_t>(e)] += pv * cached(v, vs, slot, c0 + c, kv, e);
          }
          l = l * rescale + sum;
          m = mx;
        }
        float* out = &o.data[((r * x.S + p) * x.heads() + h) * E];
        for (int64_t e = 0; e < E; ++e) out[e] = l > 0 ? acc[static_cast<size_t>(e)] / l : 0.0f;
      }
    }
  ops::put(g, op, st, std::move(o));
}

// ---- partitioning -------------------------------------------------------------------------------------------------
// The cache keeps its layout: the sequences split as its rows (strategy.kv_sharding: batch, Pope et al.'s
// multi-query attention sharded over the batch: the queries then come over by an all-to-all) and the key/value
// heads as its heads; the queries' rows and heads follow it, and a group's query heads may split over axes left
// (multi-query attention whose one key/value head every device holds whole). Nothing else splits.
OpSharding ragged_rule(const OpShardingQuery& q) {
  const ShardSpec qs = sharding::settled(q.in[0]), ks = sharding::settled(q.in[1]);
  const bool grouped = qs.rank() == 5, packed = q.op.attrs.ragged.packed;
  std::vector<std::string> used;
  auto take = [&](const std::vector<std::string>& a, const std::vector<std::string>& b) {
    std::vector<std::string> axes = a.empty() ? b : a;
    for (const std::string& ax : axes)
      if (std::find(used.begin(), used.end(), ax) != used.end()) return std::vector<std::string>{};
    used.insert(used.end(), axes.begin(), axes.end());
    return axes;
  };
  const std::vector<std::string> batch = packed ? std::vector<std::string>{} : take(ks.dims[0], qs.dims[0]);
  const std::vector<std::string> heads = take(ks.dims[2], qs.dims[2]);
  const std::vector<std::string> group = grouped ? take(qs.dims[3], {}) : std::vector<std::string>{};
  ShardSpec query = ShardSpec::replicated(qs.rank());
  query.dims[0] = batch;
  query.dims[2] = heads;
  if (grouped) query.dims[3] = group;
  ShardSpec cache = ShardSpec::replicated(4);
  cache.dims[0] = batch;
  cache.dims[2] = heads;
  ShardSpec scale = cache;
  scale.dims.pop_back();
  OpSharding r;
  r.attrs = q.op.attrs;
  r.attrs.axes = batch;
  r.in = {query, cache, cache};
  if (q.op.inputs.size() == 5) r.in.insert(r.in.end(), {scale, scale});
  r.out = {query};
  return r;
}

const bool registered = register_op_kind({OpKind::RaggedAttention, "ragged_attention", Unit::Mxu, ragged_cost,
                                          ragged_kernel, nullptr, ragged_rule, ragged_gemms});

}  // namespace
}  // namespace podsim
