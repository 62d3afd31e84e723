#include "workloads/models/transformer_layer.h"

#include <cmath>

#include "workloads/einsum.h"
#include "workloads/quantization.h"

namespace podsim {

TransformerShape transformer_shape(const ParamSet& p, int64_t moe_batch) {
  TransformerShape s;
  s.L = p.i("workload.layers");
  s.D = p.i("workload.d_model");
  s.F = p.i("workload.d_ff");
  s.H = p.i("workload.heads");
  s.V = p.i("workload.vocab");
  s.dh = p.has("workload.head_dim") ? p.i("workload.head_dim") : s.D / s.H;
  s.KV = p.has("workload.kv_heads") ? p.i("workload.kv_heads") : s.H;
  s.causal = p.b("workload.causal");
  s.ffn = p.s("workload.ffn");
  s.rms = p.s("workload.norm") == "rmsnorm";
  s.parallel = p.b("workload.parallel_block");
  s.rope = p.b("workload.rope");
  s.flash = p.s("workload.attention") == "flash";
  s.tie = p.b("workload.tie_embeddings");
  s.blocks.q = p.i("workload.flash.block_q");
  s.blocks.kv = p.i("workload.flash.block_kv");
  s.blocks.q_bwd = p.i("workload.flash.block_q_bwd");
  s.blocks.kv_bwd = p.i("workload.flash.block_kv_bwd");
  s.blocks.fused_bwd = p.b("workload.flash.fused_bwd");
  s.blocks.scale_in_kernel = p.b("workload.flash.scale_in_kernel");
  s.moe = moe_config(p, moe_batch);
  return s;
}

DecoderBuilder::DecoderBuilder(GraphBuilder& b, const TransformerShape& s, MatmulTypes t) : m_b(b), m_s(s), m_t(t) {}

TensorId DecoderBuilder::weight(const std::string& name, std::vector<int64_t> shape) {
  return m_b.param(name, std::move(shape));
}

TensorId DecoderBuilder::norm(TensorId x, const std::string& name, const std::string& weights) {
  const std::string w = weights.empty() ? name : weights;
  if (m_s.rms) return m_b.rms_norm(x, weight(w + ".gamma", {m_s.D}), name);
  return m_b.layer_norm(x, weight(w + ".gamma", {m_s.D}), weight(w + ".beta", {m_s.D}), name);
}

TensorId DecoderBuilder::linear(TensorId x, const std::string& wname, std::vector<int64_t> shape,
                                const std::string& equation, const std::string& name) {
  if (!quantized_type(m_t.weight)) return m_b.einsum(x, weight(wname, std::move(shape)), equation, name);
  ModelGraph& g = m_b.graph();
  const Einsum e = Einsum::parse(equation);
  // The weight's scale: one per output channel, shaped like the weight with 1 on each contracted dimension.
  std::vector<int64_t> scale_shape = shape;
  for (size_t d = 0; d < e.rhs.size(); ++d)
    if (e.contract.find(e.rhs[d]) != std::string::npos) scale_shape[d] = 1;
  const TensorId w = m_b.param(wname, shape, m_t.weight);
  const TensorId scale = m_b.param(wname + ".scale", scale_shape, DType::F32);
  const DType out = g.tensor(x).dtype;
  const std::vector<int64_t> out_shape = e.out_shape(g.tensor(x).shape, shape);
  OpAttrs rescale;
  rescale.equation = e.out + "," + e.rhs;
  if (!quantized_type(m_t.activation)) {
    // Weight-only: the int8 (fp8) weight read as bf16 (the builder's cast, fused into the matmul as its prologue),
    // the product rescaled per channel.
    const TensorId acc = m_b.einsum(x, w, equation, name + ".acc");
    return m_b.emit(name, OpKind::Rescale, Phase::Forward, {acc, scale}, out_shape, out, TensorRole::Activation,
                    rescale);
  }
  // Weights and activations: each row of x quantized by its absmax over the contracted dimensions (trailing in
  // every layer's matmul), the product of the quantized operands rescaled by both scales.
  std::string rows;  // x's letters that are not contracted
  for (char c : e.lhs)
    if (e.contract.find(c) == std::string::npos) rows += c;
  // Each activation is quantized once, for every matmul that reads it over the same contracted dimensions.
  auto found = m_quantized.find(x);
  if (found == m_quantized.end()) {
    std::vector<int64_t> row_shape(g.tensor(x).shape.begin(),
                                   g.tensor(x).shape.begin() + static_cast<std::ptrdiff_t>(rows.size()));
    OpAttrs absmax;
    absmax.count = static_cast<int64_t>(e.lhs.size() - rows.size());
    const TensorId m = m_b.emit(name + ".x.absmax", OpKind::RowAbsMax, Phase::Forward, {x}, row_shape, DType::F32,
                                TensorRole::Activation, absmax);
    const TensorId xq = m_b.emit(name + ".x.q", OpKind::Quantize, Phase::Forward, {x, m}, g.tensor(x).shape,
                                 m_t.activation, TensorRole::Activation);
    found = m_quantized.emplace(x, std::make_pair(m, xq)).first;
  }
  const auto [m, xq] = found->second;
  OpAttrs mm;
  mm.equation = equation;
  const TensorId acc = m_b.emit(name + ".acc", OpKind::MatMul, Phase::Forward, {xq, w}, out_shape, DType::F32,
                                TensorRole::Activation, mm);
  rescale.equation += "," + rows;
  rescale.alpha = 1.0 / quant_max(m_t.activation);
  return m_b.emit(name, OpKind::Rescale, Phase::Forward, {acc, scale, m}, out_shape, out, TensorRole::Activation,
                  rescale);
}

TensorId DecoderBuilder::layer(TensorId x, int64_t l, const std::string& prefix, const Attend& attend,
                               std::vector<TensorId>* aux, const OpAttrs::Ragged* positions) {
  ModelGraph& g = m_b.graph();
  const int64_t D = m_s.D, F = m_s.F, H = m_s.H, KV = m_s.KV, dh = m_s.dh;
  const std::string w = "layer" + std::to_string(l), n = prefix + w;  // the weights' names, the tensors'
  // MaxText tags the layer's input decoder_layer_input (its custom policy keeps it on the device or offloads it).
  if (g.tensor(x).checkpoint.empty()) g.tensor(x).checkpoint = "decoder_layer_input";
  TensorId h = norm(x, n + ".ln1", w + ".ln1");
  auto proj = [&](const char* what, std::vector<int64_t> heads, const char* equation) {
    heads.insert(heads.begin(), D);
    heads.push_back(dh);
    return linear(h, w + ".attn." + what + ".w", heads, equation, n + ".attn." + what);
  };
  auto rope = [&](TensorId t, const std::string& name) {
    const TensorId r = m_b.rope(t, name);
    if (positions) g.op(g.producer(r)).attrs.ragged = *positions;
    return r;
  };
  // MaxText's checkpoint names (TensorInfo::checkpoint), which its re-materialization policies keep values by:
  // the queries and keys after their rotation, the values, the attention's output (a fused kernel's row
  // statistics with it) and the projections'.
  auto tag = [&](TensorId t, const char* name) {
    g.tensor(t).checkpoint = name;
    if (name == std::string("context") && g.op(g.producer(t)).kind == OpKind::FlashAttention)
      g.tensor(g.op(g.producer(t)).outputs[1]).checkpoint = name;
  };
  auto tag_qkv = [&](TensorId q, TensorId k, TensorId v) {
    tag(q, "query_proj");
    tag(k, "key_proj");
    tag(v, "value_proj");
  };
  TensorId attn;
  if (KV == H) {
    TensorId q = proj("q", {H}, "bsd,dhe->bshe"), k = proj("k", {H}, "bsd,dhe->bshe"),
             v = proj("v", {H}, "bsd,dhe->bshe");
    if (m_s.rope) q = rope(q, n + ".attn.q.rope"), k = rope(k, n + ".attn.k.rope");
    tag_qkv(q, k, v);
    const TensorId ctx = attend(q, k, v, l, n);
    attn = linear(ctx, w + ".attn.o.w", {H, dh, D}, "bshe,hed->bsd", n + ".attn.o");
    tag(ctx, "context");
  } else {
    // Grouped-query attention: query head h = k G + g (the same row-major layout as [D, H, E]) reads key/value
    // head k; queries keep the group apart as a dimension of its own, so nothing is copied or reshaped.
    const int64_t G = H / KV;
    TensorId q = proj("q", {KV, G}, "bsd,dkge->bskge"), k = proj("k", {KV}, "bsd,dke->bske"),
             v = proj("v", {KV}, "bsd,dke->bske");
    if (m_s.rope) q = rope(q, n + ".attn.q.rope"), k = rope(k, n + ".attn.k.rope");
    tag_qkv(q, k, v);
    const TensorId ctx = attend(q, k, v, l, n);
    attn = linear(ctx, w + ".attn.o.w", {KV, G, dh, D}, "bskge,kged->bsd", n + ".attn.o");
    tag(ctx, "context");
  }
  tag(attn, "out_proj");
  // A parallel block (PaLM, GPT-J) feeds the attention's normalised input to the FFN too.
  TensorId h2 = h;
  if (!m_s.parallel) {
    x = m_b.add(x, attn, n + ".attn.residual");
    h2 = norm(x, n + ".ln2", w + ".ln2");
  }
  TensorId f2;
  std::string residual = n + ".ffn.residual";
  if (is_moe_layer(l, m_s.moe)) {
    auto expert = [&](TensorId in, const std::string& name, std::vector<int64_t> shape, const std::string& eq,
                      const std::string& out) { return linear(in, name, std::move(shape), eq, out); };
    MoeBlock m = moe_ffn(m_b, h2, F, m_s.moe, n + ".moe", expert, w + ".moe");
    if (m_s.moe.aux_loss > 0 && aux) aux->push_back(m.aux_loss);
    f2 = m.out;
    residual = n + ".moe.residual";
  } else if (m_s.ffn == "swiglu") {
    // LLaMA's names: w1 the gate, w3 the up projection, w2 the down projection.
    TensorId gate = linear(h2, w + ".ffn.w1", {D, F}, "bsd,df->bsf", n + ".ffn.gate");
    TensorId up = linear(h2, w + ".ffn.w3", {D, F}, "bsd,df->bsf", n + ".ffn.up");
    TensorId act = m_b.mul(m_b.silu(gate, n + ".ffn.silu"), up, n + ".ffn.glu");
    f2 = linear(act, w + ".ffn.w2", {F, D}, "bsf,fd->bsd", n + ".ffn.down");
    tag(gate, "mlpwi_0");
    tag(up, "mlpwi_1");
    tag(f2, "mlpwo");
  } else {
    TensorId f1 = m_b.bias_add(linear(h2, w + ".ffn.w1", {D, F}, "bsd,df->bsf", n + ".ffn.up"),
                               weight(w + ".ffn.b1", {F}), n + ".ffn.up.bias");
    TensorId act = m_s.ffn == "relu" ? m_b.relu(f1, n + ".ffn.relu") : m_b.gelu(f1, n + ".ffn.gelu");
    f2 = m_b.bias_add(linear(act, w + ".ffn.w2", {F, D}, "bsf,fd->bsd", n + ".ffn.down"), weight(w + ".ffn.b2", {D}),
                      n + ".ffn.down.bias");
    tag(g.op(g.producer(f1)).inputs[0], "mlpwi");  // the projections' outputs, before their biases
    tag(g.op(g.producer(f2)).inputs[0], "mlpwo");
  }
  if (m_s.parallel) return m_b.add(x, m_b.add(attn, f2, n + ".block.sum"), n + ".block.residual");
  return m_b.add(x, f2, residual);
}

TensorId DecoderBuilder::logits(TensorId hf, const std::string& rows, const std::string& name) {
  if (m_s.tie) return m_b.einsum(hf, weight("embedding", {m_s.V, m_s.D}), rows + "d,vd->" + rows + "v", name);
  return m_b.einsum(hf, weight("unembed", {m_s.D, m_s.V}), rows + "d,dv->" + rows + "v", name);
}

}  // namespace podsim
