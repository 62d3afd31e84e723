// workload.model: transformer — a decoder-style Transformer training step (docs/model.md has the equations):
//   token ids [B, S] -> x [B, S, D] = embedding [V, D]
//   per layer (pre-LN):  q, k, v [B, S, H, E] = LN1(x) . Wq, Wk, Wv [D, H, E]   (E = head_dim, default D / H)
//                        x = x + ctx . Wo [H, E, D],  ctx = softmax(q k^T / sqrt(E), causal) v
//                        (attention: einsum stores the scores; flash runs one fused kernel, ops/flash_attention.cpp)
//   with kv_heads = KV < H (grouped-query attention, G = H / KV query heads per key/value head):
//                        q [B, S, KV, G, E] = LN1(x) . Wq [D, KV, G, E],  k, v [B, S, KV, E] = LN1(x) . Wk, Wv [D, KV, E]
//                        scores [B, KV, G, S, T],  x = x + ctx . Wo [KV, G, E, D]
//                        x = x + gelu(LN2(x) . W1 [D, F] + b1) . W2 [F, D] + b2   (ffn: gelu; relu likewise)
//                        x = x + (silu(LN2(x) . W1) * (LN2(x) . W3 [D, F])) . W2   (ffn: swiglu)
//   (norm: rmsnorm puts RMSNorm(x) . gamma in every LN's place, without beta; parallel_block: x = x + attn(LN1(x))
//   + FFN(LN1(x)), no LN2)
//   final LN -> logits [B, S, V] = x . unembed [D, V] (tie_embeddings: x . embedding^T)
//   -> mean softmax cross-entropy against labels [B, S]
//   -> backward -> optimizer.
// With workload.moe.experts = E > 0, every other layer (the second, fourth, ...) replaces its FFN by a GShard
// mixture of E experts, x = x + MoE(LN2(x)) (workloads/models/moe_layer.h, docs/moe.md), and the loss becomes
// "loss" = cross-entropy ("loss.nll") + the layers' weighted load-balancing terms.
// Every tensor keeps its dimensions apart (batch, sequence, heads, head width), so a strategy can split any of
// them: the matmuls are einsums over named dimensions.
// With workload.step other than train, the step is an inference iteration instead (prefill, decode, mixed or
// generate: workloads/models/transformer_inference.cpp); both build their layers with workloads/models/
// transformer_layer.h.
// By default there is no positional embedding (causal attention still tells positions apart); rope: true rotates
// queries and keys by their position (workloads/ops/rope.cpp).
#include <cmath>

#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/inference.h"
#include "workloads/models/transformer_inference.h"
#include "workloads/models/transformer_layer.h"
#include "workloads/training.h"

namespace podsim {
namespace {

class TransformerWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::integer("workload.layers", "Transformer layers.").range(1, 10000),
        ParamSpec::integer("workload.d_model", "Model (embedding) width.").range(1, 1LL << 20),
        ParamSpec::integer("workload.d_ff", "Feed-forward hidden width.").range(1, 1LL << 22),
        ParamSpec::integer("workload.heads", "Attention heads; must divide d_model unless workload.head_dim is set.")
            .range(1, 1LL << 16),
        ParamSpec::integer("workload.head_dim",
                           "Width of each attention head (default d_model / heads): the query, key and value "
                           "projections map d_model to heads x head_dim, the output projection back to d_model.")
            .range(1, 1LL << 16)
            .optional(),
        ParamSpec::integer("workload.kv_heads",
                           "Key/value heads (default heads; must divide heads): grouped-query attention, each "
                           "group of heads / kv_heads query heads shares one key/value head; 1 is multi-query.")
            .range(1, 1LL << 16)
            .optional(),
        ParamSpec::integer("workload.vocab", "Vocabulary size.").range(2, 1LL << 24),
        ParamSpec::integer("workload.seq_len", "Tokens per sequence.").range(1, 1LL << 20),
        ParamSpec::integer("workload.batch", "Sequences per step.").range(1, 1LL << 20),
        ParamSpec::boolean("workload.causal", "Causal attention mask (a decoder).").def("true"),
        ParamSpec::choice("workload.ffn", {"gelu", "swiglu", "relu"},
                          "Feed-forward layer: gelu or relu, act(x W1 + b1) W2 + b2; swiglu, (silu(x W1) * "
                          "(x W3)) W2 with three d_model x d_ff matrices and no biases (docs/model.md).")
            .def("gelu"),
        ParamSpec::choice("workload.norm", {"layernorm", "rmsnorm"},
                          "Normalisation before attention, the FFN and the head: layernorm, or rmsnorm "
                          "(x / sqrt(mean(x^2) + eps) * gamma: no mean subtraction, no offset).")
            .def("layernorm"),
        ParamSpec::boolean("workload.parallel_block",
                           "Parallel attention and FFN (PaLM, GPT-J): both read the same normalised input and "
                           "their sum joins the residual, x + attn(LN(x)) + FFN(LN(x)); no second norm.")
            .def("false"),
        ParamSpec::boolean("workload.rope",
                           "Rotary position embedding on queries and keys (half rotation, as GPT-NeoX and LLaMA; "
                           "base 10000); the head width must be even.")
            .def("false"),
        ParamSpec::choice("workload.attention", {"einsum", "flash"},
                          "How attention runs: einsum, the scores [B, H, S, S] as matmuls and a softmax stored in "
                          "HBM (as the 2018-2020 papers' trainers did); flash, one fused kernel per pass (the Pallas "
                          "TPU flash-attention kernels: online softmax over blocks, the scores never stored, the "
                          "backward recomputing them; docs/model.md).")
            .def("einsum"),
        ParamSpec::integer("workload.flash.block_q",
                           "attention: flash, forward: query rows per block (the Pallas TPU kernel's default 128; "
                           "MaxText's splash attention uses 512).")
            .range(1, 1LL << 20)
            .def("128"),
        ParamSpec::integer("workload.flash.block_kv", "attention: flash, forward: key rows per block (default 128).")
            .range(1, 1LL << 20)
            .def("128"),
        ParamSpec::integer("workload.flash.block_q_bwd", "attention: flash, backward: query rows per block (default 128).")
            .range(1, 1LL << 20)
            .def("128"),
        ParamSpec::integer("workload.flash.block_kv_bwd", "attention: flash, backward: key rows per block (default 128).")
            .range(1, 1LL << 20)
            .def("128"),
        ParamSpec::boolean("workload.flash.fused_bwd",
                           "attention: flash, the backward as one kernel (splash attention's use_fused_bwd_kernel, "
                           "MaxText's sa_use_fused_bwd_kernel): the key/value kernel also forms each block's dq, "
                           "written per key block and summed after it, so the scores and dP are computed once, not "
                           "once per kernel (docs/model.md). Off: a key/value kernel and a query kernel.")
            .def("false"),
        ParamSpec::boolean("workload.flash.scale_in_kernel",
                           "attention: flash, the kernel multiplies every score by the softmax scale (forward once, "
                           "backward the scores and ds in each kernel), as the Pallas flash kernel does when called "
                           "with an sm_scale other than 1. Off (the frameworks' way): the queries arrive scaled "
                           "(MaxText folds 1/sqrt(head_dim) into the query projection; splash attention has no "
                           "scale), no per-score multiply (docs/model.md).")
            .def("false"),
        ParamSpec::boolean("workload.tie_embeddings",
                           "The unembedding is the embedding's transpose: one [vocab, d_model] parameter whose "
                           "gradient sums both uses.")
            .def("false"),
    };
    for (auto& s : training_param_specs("adam", "0.001")) p.push_back(s);
    for (auto& s : moe_param_specs()) p.push_back(s);
    for (auto& s : inference_param_specs()) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    int64_t d = p.i("workload.d_model"), h = p.i("workload.heads");
    if (!p.has("workload.head_dim") && d % h != 0)
      throw Error(Err::NotDivisible, p.where("workload.heads"),
                  strprintf("workload.d_model = %lld is not divisible by workload.heads = %lld; each head gets "
                            "d_model / heads features (or set workload.head_dim)",
                            static_cast<long long>(d), static_cast<long long>(h)),
                  "workload.heads");
    if (p.has("workload.kv_heads") && h % p.i("workload.kv_heads") != 0)
      throw Error(Err::NotDivisible, p.where("workload.kv_heads"),
                  strprintf("workload.heads = %lld is not divisible by workload.kv_heads = %lld; each key/value "
                            "head serves heads / kv_heads query heads",
                            static_cast<long long>(h), static_cast<long long>(p.i("workload.kv_heads"))),
                  "workload.kv_heads");
    if (p.s("workload.ffn") != "gelu" && p.i("workload.moe.experts") > 0)
      throw Error(Err::BadChoice, p.where("workload.ffn"),
                  "workload.ffn = " + p.s("workload.ffn") + " with workload.moe.experts > 0: the mixture-of-experts "
                  "layers' experts are GELU FFNs, so the dense layers must be too (workload.ffn: gelu)",
                  "workload.ffn");
    const int64_t width = p.has("workload.head_dim") ? p.i("workload.head_dim") : d / h;
    if (p.b("workload.rope") && width % 2 != 0)
      throw Error(Err::NotDivisible, p.where("workload.rope"),
                  strprintf("workload.rope rotates pairs of features, but the head width (%s) is %lld, odd",
                            p.has("workload.head_dim") ? "workload.head_dim" : "d_model / heads",
                            static_cast<long long>(width)),
                  "workload.rope");
    if (inference_step(p)) {
      validate_transformer_inference(p);
      return;
    }
    const int64_t batch = p.i("workload.batch");
    validate_moe(p, batch, batch * p.i("workload.seq_len"), p.i("workload.layers"));
  }

  ModelGraph build(const ParamSet& p) const override {
    if (inference_step(p)) return build_transformer_inference(p);
    const TransformerShape s = transformer_shape(p, p.i("workload.batch"));
    const int64_t S = p.i("workload.seq_len"), B = p.i("workload.batch");
    std::vector<TensorId> aux_terms;
    ModelGraph g("transformer");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    DecoderBuilder d(b, s);
    TensorId ids = b.input("tokens", {B, S}, DType::I32);
    TensorId labels = b.label("labels", {B, S});
    // Cells (what a pipeline cuts between): the embedding, each layer, and the head (final norm, logits, loss).
    b.set_cell(0);
    const TensorId table = b.param("embedding", {s.V, s.D});
    TensorId x = b.embedding(table, ids, "embed");
    const double scale = 1.0 / std::sqrt(static_cast<double>(s.dh));
    // The scores and context matmuls of causal attention are marked so (OpAttrs::causal): conventions of model
    // FLOPs that count the mask's triangle count half of them.
    auto causal_einsum = [&](TensorId a, TensorId c, const char* equation, const std::string& name) {
      TensorId t = b.einsum(a, c, equation, name);
      g.op(g.producer(t)).attrs.causal = s.causal;
      return t;
    };
    // Attention by einsum (the scores stored) or the fused kernel; grouped queries [B, S, KV, G, E] keep the group
    // apart as a dimension of its own.
    auto attend = [&](TensorId q, TensorId k, TensorId v, int64_t, const std::string& n) {
      if (s.flash) return b.flash_attention(q, k, v, scale, s.causal, s.blocks, n + ".attn.context");
      const bool grouped = g.tensor(q).shape.size() == 5;
      TensorId scores = causal_einsum(q, k, grouped ? "bskge,btke->bkgst" : "bshe,bthe->bhst", n + ".attn.scores");
      TensorId probs = b.softmax(scores, scale, s.causal, n + ".attn.softmax");
      return causal_einsum(probs, v, grouped ? "bkgst,btke->bskge" : "bhst,bthe->bshe", n + ".attn.context");
    };
    for (int64_t l = 0; l < s.L; ++l) {
      b.set_cell(static_cast<int32_t>(l + 1));
      x = d.layer(x, l, "", attend, &aux_terms, nullptr);
    }
    b.set_cell(static_cast<int32_t>(s.L + 1));
    TensorId logits = d.logits(d.norm(x, "final_ln"), "bs", "logits");
    const TensorId loss = cross_entropy_loss(b, logits, labels, aux_terms);
    return finish_training_step(b, loss, p);
  }
};

PODSIM_REGISTER_WORKLOAD(TransformerWorkload, "transformer",
                         "Decoder Transformer (attention, FFN, layer norm, cross-entropy), a training step");

}  // namespace
}  // namespace podsim
