// KvCacheWrite: an inference step writes each layer's fresh keys (or values) into its KV cache, in place, as the
// serving engines do before attention reads the cache (JetStream's insert and generate steps, vLLM TPU's
// write of the new tokens into their pages; docs/serving.md, "The inference step"):
//   cache [N, C, KV, E]: N sequences (the iteration's, in order), C places each (workload.kv_capacity), KV heads
//   new [R, S, KV, E]: the iteration's keys, laid out as attrs.ragged says (workloads/ragged.h)
//   cache'[i, cached[i] + p] = new[token p of sequence i]   for p < fresh[i] (padding is not written)
// An int8 or fp8 cache (workload.kv_dtype) stores each token's head as E quantized values and one scale
// (absmax / qmax over the E values, workloads/quantization.h) in a second tensor scale [N, C, KV] (JetStream's
// int8 KV cache, quantized per token and head): inputs (cache, scale, new) -> (cache', scale').
//
// Cost: what the kernel moves: each written token's E values per head read and written (plus its scale), in runs of
// one token's heads (KV E elements) scattered over the cache; the quantization's absmax, scale and rounding per
// element on the vector unit. The cache is updated in place (OpCost::in_place): its bytes are the KV cache's.
#include <algorithm>
#include <cmath>

#include "workloads/ops/kernel_util.h"
#include "workloads/quantization.h"
#include "workloads/ragged.h"

namespace podsim {
namespace {

using ops::in;

bool has_scale(const Op& op) { return op.inputs.size() == 3; }

// Fresh tokens of the sequences a device's rows hold (a packed row holds all of them; rows split over devices hold
// their own; `local_rows` of the cost's program): the slowest device's, for a cost that is one program for all.
int64_t written_tokens(const OpAttrs::Ragged& r, int64_t local_rows) {
  const int64_t n = ragged_sequences(r);
  if (r.packed || local_rows >= n) {
    int64_t t = 0;
    for (int64_t i = 0; i < n; ++i) t += r.fresh[static_cast<size_t>(i)];
    return t;
  }
  int64_t most = 0;
  for (int64_t first = 0; first < n; first += local_rows) {
    int64_t t = 0;
    for (int64_t i = first; i < std::min(n, first + local_rows); ++i) t += r.fresh[static_cast<size_t>(i)];
    most = std::max(most, t);
  }
  return most;
}

OpCost write_cost(const ModelGraph& g, const Op& op) {
  const TensorInfo& cache = g.tensor(op.inputs[0]);
  const TensorInfo& fresh = g.tensor(op.inputs.back());
  const int64_t kv = cache.shape[2], e = cache.shape[3];
  const double tokens = static_cast<double>(written_tokens(op.attrs.ragged, fresh.shape[0]));
  const double per_token_in = static_cast<double>(kv * e * dtype_bytes(fresh.dtype));
  const double scale = has_scale(op) ? static_cast<double>(kv * dtype_bytes(g.tensor(op.inputs[1]).dtype)) : 0.0;
  const double per_token_out = static_cast<double>(kv * e * dtype_bytes(cache.dtype)) + scale;
  OpCost c;
  c.unit = Unit::Vpu;
  c.bytes_read = tokens * per_token_in;
  c.bytes_written = tokens * per_token_out;
  c.write_pattern = HbmPattern::Gather;
  c.read_run = static_cast<double>(kv * e * dtype_bytes(cache.dtype));
  c.vector.elements = tokens * static_cast<double>(kv * e);
  // A copy per element; quantized: the absmax (an abs and a reduction step), the scaling, rounding and clip.
  c.vector.simple = has_scale(op) ? 4 : 1;
  c.vector.reduce = has_scale(op) ? 1 : 0;
  c.flops = c.vector.elements * (c.vector.simple + c.vector.reduce);
  c.in_place = true;
  return c;
}

void write_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Tensor& fresh = in(st, op, op.inputs.size() - 1);
  Tensor cache = in(st, op, 0);
  Tensor scale = has_scale(op) ? in(st, op, 1) : Tensor();
  const int64_t rows = fresh.shape[0], s_len = fresh.shape[1], kv = fresh.shape[2], e = fresh.shape[3];
  const int64_t cap = cache.shape[1];
  const OpAttrs::Ragged& rg = op.attrs.ragged;
  // A device holding some of the rows holds their sequences' caches: its first sequence is its first row.
  const int64_t row0 = rg.packed ? 0 : st.device_index(op.attrs.axes) * rows;
  const DType t = g.tensor(op.inputs[0]).dtype;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t p = 0; p < s_len; ++p) {
      const RaggedToken tok = ragged_token(rg, row0 + r, p);
      if (tok.seq < 0 || tok.padding) continue;
      const int64_t slot = rg.packed ? tok.seq : tok.seq - row0;
      ops::check(slot >= 0 && slot < cache.shape[0] && tok.pos < cap, op, "a token outside the cache");
      for (int64_t h = 0; h < kv; ++h) {
        const float* src = &fresh.data[((r * s_len + p) * kv + h) * e];
        float* dst = &cache.data[((slot * cap + tok.pos) * kv + h) * e];
        if (!has_scale(op)) {
          for (int64_t i = 0; i < e; ++i) dst[i] = src[i];
          continue;
        }
        float absmax = 0;
        for (int64_t i = 0; i < e; ++i) absmax = std::max(absmax, std::fabs(src[i]));
        const float s = quant_scale(absmax, t);
        scale.data[(slot * cap + tok.pos) * kv + h] = s;
        for (int64_t i = 0; i < e; ++i) dst[i] = quantize(src[i], s, t);
      }
    }
  ops::put(g, op, st, std::move(cache), 0);
  if (has_scale(op)) ops::put(g, op, st, std::move(scale), 1);
}

// The cache keeps its layout (it is the largest thing the step holds): the sequences split as its rows and the
// heads as its heads; the fresh values follow it (a packed row holds every sequence and splits no rows). A cache
// whose heads are whole takes the fresh values' head split only over axes its rows leave free: a cache split over
// the batch (strategy.kv_sharding: batch) keeps every head of its sequences, so fresh keys split by heads over the
// same axis come over by an all-to-all (heads -> sequences) rather than splitting the cache twice over one axis.
OpSharding write_rule(const OpShardingQuery& q) {
  const ShardSpec cs = sharding::settled(q.in[0]), ns = sharding::settled(q.in.back());
  ShardSpec cache = ShardSpec::replicated(4);
  cache.dims[0] = q.op.attrs.ragged.packed ? std::vector<std::string>{} : cs.dims[0];
  cache.dims[2] = cs.dims[2];
  if (cache.dims[2].empty()) {
    bool free = true;
    for (const std::string& ax : ns.dims[2])
      free = free && std::find(cache.dims[0].begin(), cache.dims[0].end(), ax) == cache.dims[0].end();
    if (free) cache.dims[2] = ns.dims[2];
  }
  ShardSpec fresh = ShardSpec::replicated(4);
  fresh.dims[0] = cache.dims[0];
  fresh.dims[2] = cache.dims[2];
  ShardSpec scale = cache;
  scale.dims.pop_back();
  OpSharding r;
  r.attrs = q.op.attrs;
  r.attrs.axes = cache.dims[0];
  r.in = has_scale(q.op) ? std::vector<ShardSpec>{cache, scale, fresh} : std::vector<ShardSpec>{cache, fresh};
  r.out = has_scale(q.op) ? std::vector<ShardSpec>{cache, scale} : std::vector<ShardSpec>{cache};
  return r;
}

const bool registered = register_op_kind(
    {OpKind::KvCacheWrite, "kv_cache_write", Unit::Vpu, write_cost, write_kernel, nullptr, write_rule});

}  // namespace
}  // namespace podsim
