// workload.model: encoder_decoder — the sequence-to-sequence Transformer (Vaswani et al. 2017) as the MLPerf v0.6
// translation benchmark trains it (T2T's transformer_mlperf_tpu on TPU, the TensorFlow reference's
// TransformerBigParams; docs/model.md has the equations):
//   source ids [B, S] -> x = E[ids] sqrt(D) + signal(s)                     (E shared by source, target, softmax)
//   encoder layer (pre-LN): x = x + Attn(LN(x)) . Wo;  x = x + FFN(LN(x))       (bidirectional, no biases in
//                           attention; FFN act(x W1 + b1) W2 + b2); then a final LN: the memory m [B, S, D]
//   target ids [B, T] (the targets shifted right) -> y = E[ids] sqrt(D) + signal(t)
//   decoder layer (pre-LN): y = y + SelfAttn(LN(y)) (causal);  y = y + CrossAttn(LN(y), m) (queries from y, keys
//                           and values from m);  y = y + FFN(LN(y)); then a final LN
//   logits [B, T, V] = y . E^T  -> mean softmax cross-entropy against labels [B, T] -> backward -> optimizer.
// With workload.moe.experts = E > 0 every other layer of each stack (the second, fourth, ...) replaces its FFN by
// a GShard mixture of E experts (workloads/models/moe_layer.h), as GShard's encoder-decoder; the loss adds their
// load-balancing terms. workload.src_vocab gives the source its own table (GShard: 64000 source, 32000 target).
// Names: enc.layer<l>.attn, dec.layer<l>.self, dec.layer<l>.cross (each .q.w [D, H, E], ..., .o.w), .ffn.w1, ...;
// cells: the source embedding, each encoder layer, the memory's LN with the target embedding, each decoder layer,
// the head. Dropout and label smoothing are not modelled, nor T2T's packing of several examples into one row (its
// segment masks; docs/model.md).
#include <cmath>

#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/models/attention.h"
#include "workloads/models/moe_layer.h"
#include "workloads/training.h"

namespace podsim {
namespace {

constexpr double kEps = 1e-6;  // T2T's layer-norm epsilon

class EncoderDecoderWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::integer("workload.encoder_layers", "Encoder layers.").range(1, 10000),
        ParamSpec::integer("workload.decoder_layers", "Decoder layers.").range(1, 10000),
        ParamSpec::integer("workload.d_model", "Model (embedding) width.").range(1, 1LL << 20),
        ParamSpec::integer("workload.d_ff", "Feed-forward hidden width.").range(1, 1LL << 22),
        ParamSpec::integer("workload.heads", "Attention heads; must divide d_model unless workload.head_dim is set.")
            .range(1, 1LL << 16),
        ParamSpec::integer("workload.head_dim",
                           "Width of each attention head (default d_model / heads; GShard: 128 with 16 heads of a "
                           "1024-wide model).")
            .range(1, 1LL << 16)
            .optional(),
        ParamSpec::integer("workload.vocab",
                           "Vocabulary (shared by source and target, and the softmax's, unless workload.src_vocab "
                           "is set; the MLPerf reference's 33708).")
            .range(2, 1LL << 24),
        ParamSpec::integer("workload.src_vocab",
                           "A separate source vocabulary with its own table (GShard: 64000 source, 32000 target); "
                           "unset: the source shares the target's table.")
            .range(2, 1LL << 24)
            .optional(),
        ParamSpec::integer("workload.src_len", "Source tokens per example.").range(1, 1LL << 20),
        ParamSpec::integer("workload.tgt_len", "Target tokens per example.").range(1, 1LL << 20),
        ParamSpec::integer("workload.batch", "Examples (sentence pairs, or rows of packed examples) per step.")
            .range(1, 1LL << 20),
        ParamSpec::choice("workload.ffn", {"relu", "gelu"},
                          "Feed-forward activation: relu (the Transformer's and T2T's) or gelu.")
            .def("relu"),
        ParamSpec::choice("workload.attention", {"einsum", "flash"},
                          "How attention runs: einsum (the scores stored, as the 2017-2020 trainers) or flash (one "
                          "fused kernel per pass, default blocks of 128; docs/model.md).")
            .def("einsum"),
    };
    for (auto& s : training_param_specs("adam", "0.001")) p.push_back(s);
    for (auto& s : moe_param_specs()) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    const int64_t d = p.i("workload.d_model"), h = p.i("workload.heads");
    if (!p.has("workload.head_dim") && d % h != 0)
      throw Error(Err::NotDivisible, p.where("workload.heads"),
                  strprintf("workload.d_model = %lld is not divisible by workload.heads = %lld; each head gets "
                            "d_model / heads features (or set workload.head_dim)",
                            static_cast<long long>(d), static_cast<long long>(h)),
                  "workload.heads");
    const int64_t batch = p.i("workload.batch");
    const int64_t tokens = batch * std::min(p.i("workload.src_len"), p.i("workload.tgt_len"));
    validate_moe(p, batch, tokens, std::min(p.i("workload.encoder_layers"), p.i("workload.decoder_layers")));
    if (p.i("workload.moe.experts") > 0 && p.i("workload.src_len") != p.i("workload.tgt_len"))
      throw Error(Err::BadChoice, p.where("workload.tgt_len"),
                  "the mixture-of-experts layers group both stacks' tokens alike (workload.moe.groups per step), so "
                  "workload.src_len and workload.tgt_len must be equal with workload.moe.experts > 0",
                  "workload.tgt_len");
  }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t Le = p.i("workload.encoder_layers"), Ld = p.i("workload.decoder_layers");
    const int64_t D = p.i("workload.d_model"), F = p.i("workload.d_ff"), H = p.i("workload.heads");
    const int64_t V = p.i("workload.vocab"), S = p.i("workload.src_len"), T = p.i("workload.tgt_len");
    const int64_t B = p.i("workload.batch");
    const std::string act = p.s("workload.ffn");
    const MoeConfig moe = moe_config(p, B);
    AttentionSpec self;
    self.heads = H;
    self.head_dim = p.has("workload.head_dim") ? p.i("workload.head_dim") : D / H;
    self.flash = p.s("workload.attention") == "flash";
    AttentionSpec causal = self;
    causal.causal = true;

    ModelGraph g("encoder_decoder");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    std::vector<TensorId> aux_terms;
    auto norm = [&](TensorId x, const std::string& name) {
      return b.layer_norm(x, b.param(name + ".gamma", {D}), b.param(name + ".beta", {D}), name, kEps);
    };
    // The embedding scaled by sqrt(D), plus the position signal.
    auto embed = [&](TensorId table, TensorId ids, const std::string& name) {
      TensorId e = b.scale(b.embedding(table, ids, name + ".lookup"), std::sqrt(static_cast<double>(D)), name + ".scaled");
      return b.timing_signal(e, name);
    };
    // The FFN of layer `l` of a stack: dense, or a mixture of experts in every other layer.
    auto ffn = [&](TensorId x, int64_t l, const std::string& n) {
      if (!is_moe_layer(l, moe)) return dense_ffn(b, x, F, act, true, n + ".ffn");
      MoeBlock m = moe_ffn(b, x, F, moe, n + ".moe");
      if (moe.aux_loss > 0) aux_terms.push_back(m.aux_loss);
      return m.out;
    };
    TensorId src = b.input("src_tokens", {B, S}, DType::I32);
    TensorId tgt = b.input("tgt_tokens", {B, T}, DType::I32);
    TensorId labels = b.label("labels", {B, T});

    int32_t cell = 0;
    b.set_cell(cell++);
    const TensorId table = b.param("embedding", {V, D});
    const TensorId src_table = p.has("workload.src_vocab") ? b.param("src_embedding", {p.i("workload.src_vocab"), D}) : table;
    TensorId x = embed(src_table, src, "enc.embed");
    for (int64_t l = 0; l < Le; ++l) {
      const std::string n = "enc.layer" + std::to_string(l);
      b.set_cell(cell++);
      const TensorId h = norm(x, n + ".ln1");
      x = b.add(x, attention(b, h, h, self, n + ".attn"), n + ".attn.residual");
      x = b.add(x, ffn(norm(x, n + ".ln2"), l, n), n + ".ffn.residual");
    }
    b.set_cell(cell++);
    const TensorId memory = norm(x, "enc.final_ln");
    TensorId y = embed(table, tgt, "dec.embed");
    for (int64_t l = 0; l < Ld; ++l) {
      const std::string n = "dec.layer" + std::to_string(l);
      b.set_cell(cell++);
      const TensorId h = norm(y, n + ".ln1");
      y = b.add(y, attention(b, h, h, causal, n + ".self"), n + ".self.residual");
      y = b.add(y, attention(b, norm(y, n + ".ln2"), memory, self, n + ".cross"), n + ".cross.residual");
      y = b.add(y, ffn(norm(y, n + ".ln3"), l, n), n + ".ffn.residual");
    }
    b.set_cell(cell);
    TensorId logits = b.einsum(norm(y, "dec.final_ln"), table, "btd,vd->btv", "logits");
    const TensorId loss = cross_entropy_loss(b, logits, labels, aux_terms);
    return finish_training_step(b, loss, p);
  }
};

PODSIM_REGISTER_WORKLOAD(EncoderDecoderWorkload, "encoder_decoder",
                         "Encoder-decoder Transformer (self- and cross-attention, shared embeddings), a training step");

}  // namespace
}  // namespace podsim
