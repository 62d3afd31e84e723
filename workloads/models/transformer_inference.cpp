// The Transformer's inference steps (docs/serving.md, "The inference step"):
//   tokens [R, S] (the iteration's sequences as attrs.ragged lays them out: workloads/ragged.h)
//   x = embedding(tokens); per layer, as training's (workloads/models/transformer_layer.h), with its attention
//     prefill, one row per prompt:  k, v written into the layer's cache, ctx = flash(q, k, v) (the fused kernel)
//     otherwise (decode, chunks):   k, v written into the cache, ctx = ragged_attention(q, cache) over each
//                                   sequence's own cached and new keys (workloads/ops/ragged_attention.cpp)
//   the final norm, each sequence's last new token (token_select), logits [N, V], the next tokens sampled [N]
// The caches, layer<l>.attn.k_cache and .v_cache [N, C, KV, E] (with .scale [N, C, KV] when int8 or fp8), are
// resident for the step (tensor role kv_cache) and updated in place; the caches of sequences resident but not in
// the iteration (workload.kv_sequences) are one more tensor, kv_cache.resident [L, 2, n, C, KV, E].
// The generate form chains a prefill and workload.generate - 1 decodes, decode j (tensors prefixed "gen<j>.") fed
// the tokens decode j - 1 sampled; "generated" [B, generate] holds every sampled token.
#include "workloads/models/transformer_inference.h"

#include <cmath>

#include "base/error.h"
#include "base/text.h"
#include "workloads/inference.h"
#include "workloads/models/transformer_layer.h"
#include "workloads/quantization.h"
#include "workloads/ragged.h"
#include "workloads/training.h"

namespace podsim {
namespace {

// A layer's cache of keys or values: the tensor the step starts from, its scale, and the versions written so far.
struct Cache {
  TensorId base = -1, base_scale = -1;  // the step's inputs
  TensorId now = -1, now_scale = -1;    // the latest version
};

struct Builder {
  const ParamSet& p;
  const InferenceStep& it;
  const TransformerShape& s;
  ModelGraph& g;
  GraphBuilder& b;
  DecoderBuilder& d;
  std::vector<Cache> k, v;  // per layer

  // The layer's caches, resident for the step.
  void make_caches() {
    const int64_t n = ragged_sequences(it.seqs);
    const std::vector<int64_t> shape = {n, it.capacity, s.KV, s.dh};
    for (int64_t l = 0; l < s.L; ++l)
      for (auto* c : {&k, &v}) {
        const std::string name = "layer" + std::to_string(l) + ".attn." + (c == &k ? "k_cache" : "v_cache");
        Cache x;
        x.base = x.now = g.add_tensor({name, shape, it.kv, TensorRole::KvCache});
        if (quantized_type(it.kv))
          x.base_scale = x.now_scale =
              g.add_tensor({name + ".scale", {n, it.capacity, s.KV}, DType::F32, TensorRole::KvCache});
        c->push_back(x);
      }
    if (it.resident > n) {  // the engine's other sequences: memory only
      g.add_tensor({"kv_cache.resident", {s.L, 2, it.resident - n, it.capacity, s.KV, s.dh}, it.kv,
                    TensorRole::KvCache});
      if (quantized_type(it.kv))
        g.add_tensor({"kv_cache.resident.scale", {s.L, 2, it.resident - n, it.capacity, s.KV}, DType::F32,
                      TensorRole::KvCache});
    }
  }

  // Writes the fresh keys or values into the cache (in place: the new versions update the step's cache tensors).
  void write(Cache& c, TensorId fresh, const OpAttrs::Ragged& seqs, const std::string& name) {
    const TensorInfo base = g.tensor(c.base);
    TensorInfo out{name, base.shape, base.dtype, TensorRole::Updated};
    out.updates = c.base;
    Op op;
    op.name = name;
    op.kind = OpKind::KvCacheWrite;
    op.phase = Phase::Forward;
    op.cell = g.op(g.producer(fresh)).cell;
    op.attrs.ragged = seqs;
    op.inputs = {c.now};
    if (c.now_scale >= 0) op.inputs.push_back(c.now_scale);
    op.inputs.push_back(fresh);
    const TensorId cache = g.add_tensor(out);
    op.outputs = {cache};
    TensorId scale = -1;
    if (c.now_scale >= 0) {
      TensorInfo so{name + ".scale", g.tensor(c.base_scale).shape, DType::F32, TensorRole::Updated};
      so.updates = c.base_scale;
      scale = g.add_tensor(so);
      op.outputs.push_back(scale);
    }
    g.add_op(op);
    c.now = cache;
    c.now_scale = scale;
  }

  // The attention of layer l: the fresh keys and values written into its caches, then read by the fused kernel
  // (a prefill) or by the ragged kernel over the cache.
  TensorId attend(TensorId q, TensorId key, TensorId value, int64_t l, const std::string& n,
                  const OpAttrs::Ragged& seqs, bool flash) {
    write(k[static_cast<size_t>(l)], key, seqs, n + ".attn.k_cache.new");
    write(v[static_cast<size_t>(l)], value, seqs, n + ".attn.v_cache.new");
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.dh));
    if (flash) return b.flash_attention(q, key, value, scale, true, s.blocks, n + ".attn.context");
    const Cache &kc = k[static_cast<size_t>(l)], &vc = v[static_cast<size_t>(l)];
    Op op;
    op.name = n + ".attn.context";
    op.kind = OpKind::RaggedAttention;
    op.phase = Phase::Forward;
    op.cell = g.op(g.producer(q)).cell;
    op.attrs.alpha = scale;
    op.attrs.causal = true;
    op.attrs.ragged = seqs;
    op.attrs.blocks.q = s.blocks.q;
    op.attrs.blocks.kv = it.kv_block;
    op.inputs = {q, kc.now, vc.now};
    if (kc.now_scale >= 0) op.inputs.insert(op.inputs.end(), {kc.now_scale, vc.now_scale});
    const TensorInfo& qi = g.tensor(q);
    op.outputs = {g.add_tensor({op.name, qi.shape, qi.dtype, TensorRole::Activation})};
    g.add_op(op);
    return op.outputs[0];
  }

  // One pass of the model over `tokens` [R, S] placed as `seqs` says: the next token of each sequence [N].
  TensorId pass(TensorId tokens, const OpAttrs::Ragged& seqs, bool flash, const std::string& prefix) {
    b.set_cell(0);
    TensorId x = b.embedding(b.param("embedding", {s.V, s.D}), tokens, prefix + "embed");
    auto attention = [&](TensorId q, TensorId key, TensorId value, int64_t l, const std::string& n) {
      return attend(q, key, value, l, n, seqs, flash);
    };
    for (int64_t l = 0; l < s.L; ++l) {
      b.set_cell(static_cast<int32_t>(l + 1));
      x = d.layer(x, l, prefix, attention, nullptr, &seqs);
    }
    b.set_cell(static_cast<int32_t>(s.L + 1));
    const TensorId hf = d.norm(x, prefix + "final_ln", "final_ln");
    const int64_t n = ragged_sequences(seqs);
    const auto& shape = g.tensor(hf).shape;
    TensorId last;
    if (!seqs.packed && shape[1] == 1) {
      last = b.reshape(hf, {n, s.D}, prefix + "final_ln.last");  // one token a row: each row's is its last
    } else {
      OpAttrs a;
      a.ragged = seqs;
      last = b.emit(prefix + "final_ln.last", OpKind::TokenSelect, Phase::Forward, {hf}, {n, s.D}, g.tensor(hf).dtype,
                    TensorRole::Activation, a);
    }
    const TensorId logits = d.logits(last, "n", prefix + "logits");
    g.tensor(logits).result = true;
    OpAttrs a = it.sampling;
    a.seed = fnv(it.sampling.seed, prefix + "next_tokens");
    const TensorId ids =
        b.emit(prefix + "next_tokens", OpKind::Sample, Phase::Forward, {logits}, {n}, DType::I32, TensorRole::Activation, a);
    g.tensor(ids).result = true;
    return ids;
  }

  // The draws of a sampling op depend on the run's seed and the op's name only.
  static uint64_t fnv(uint64_t seed, const std::string& name) {
    uint64_t h = 1469598103934665603ull ^ (seed * 0x9e3779b97f4a7c15ull);
    for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
    return h;
  }
};

}  // namespace

void validate_transformer_inference(const ParamSet& p) {
  const InferenceStep it = inference_config(p);
  if (p.s("workload.remat") != "none")
    throw Error(Err::BadChoice, p.where("workload.remat"),
                "workload.remat re-materializes a training step's activations for its backward pass; an inference "
                "step (workload.step: " + p.s("workload.step") + ") has none (set remat: none)",
                "workload.remat");
  validate_moe(p, it.rows, it.rows * it.row_len, p.i("workload.layers"));
}

ModelGraph build_transformer_inference(const ParamSet& p) {
  const InferenceStep it = inference_config(p);
  const TransformerShape s = transformer_shape(p, it.rows);
  ModelGraph g("transformer");
  GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
  DecoderBuilder d(b, s, {it.weight, it.activation});
  Builder x{p, it, s, g, b, d, {}, {}};
  const TensorId tokens = b.input("tokens", {it.rows, it.row_len}, DType::I32);
  x.make_caches();
  TensorId ids = x.pass(tokens, it.seqs, it.flash, "");
  if (it.kind != StepKind::Generate) return g;
  // Generate: each decode fed the tokens the pass before sampled, one position further.
  const int64_t n = it.rows;
  std::vector<TensorId> columns = {b.reshape(ids, {n, 1}, "next_tokens.column")};
  for (int64_t j = 1; j < it.generate; ++j) {
    const std::string prefix = "gen" + std::to_string(j) + ".";
    OpAttrs::Ragged seqs;
    seqs.fresh.assign(static_cast<size_t>(n), 1);
    seqs.width.assign(static_cast<size_t>(n), 1);
    for (int64_t i = 0; i < n; ++i)
      seqs.cached.push_back(it.seqs.cached[static_cast<size_t>(i)] + it.seqs.fresh[static_cast<size_t>(i)] + j - 1);
    b.set_cell(0);
    const TensorId fed = b.reshape(ids, {n, 1}, prefix + "tokens");
    ids = x.pass(fed, seqs, false, prefix);
    columns.push_back(b.reshape(ids, {n, 1}, prefix + "next_tokens.column"));
  }
  const TensorId all = columns.size() > 1 ? b.concat(columns, "generated") : b.reshape(ids, {n, 1}, "generated");
  g.tensor(all).result = true;
  return g;
}

}  // namespace podsim
