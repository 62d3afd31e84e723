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
// By default there is no positional embedding (causal attention still tells positions apart); rope: true rotates
// queries and keys by their position (workloads/ops/rope.cpp).
#include <cmath>

#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/models/attention.h"
#include "workloads/models/moe_layer.h"
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
        ParamSpec::boolean("workload.tie_embeddings",
                           "The unembedding is the embedding's transpose: one [vocab, d_model] parameter whose "
                           "gradient sums both uses.")
            .def("false"),
    };
    for (auto& s : training_param_specs("adam", "0.001")) p.push_back(s);
    for (auto& s : moe_param_specs()) p.push_back(s);
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
    const int64_t batch = p.i("workload.batch");
    validate_moe(p, batch, batch * p.i("workload.seq_len"), p.i("workload.layers"));
  }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t L = p.i("workload.layers"), D = p.i("workload.d_model"), F = p.i("workload.d_ff");
    const int64_t H = p.i("workload.heads"), V = p.i("workload.vocab"), S = p.i("workload.seq_len");
    const int64_t B = p.i("workload.batch");
    const int64_t dh = p.has("workload.head_dim") ? p.i("workload.head_dim") : D / H;
    const int64_t KV = p.has("workload.kv_heads") ? p.i("workload.kv_heads") : H;
    const bool causal = p.b("workload.causal");
    const std::string ffn = p.s("workload.ffn");
    const bool rms = p.s("workload.norm") == "rmsnorm";
    const bool parallel = p.b("workload.parallel_block");
    const bool rope = p.b("workload.rope");
    const bool flash = p.s("workload.attention") == "flash";
    OpAttrs::Blocks blocks;
    blocks.q = p.i("workload.flash.block_q");
    blocks.kv = p.i("workload.flash.block_kv");
    blocks.q_bwd = p.i("workload.flash.block_q_bwd");
    blocks.kv_bwd = p.i("workload.flash.block_kv_bwd");
    const MoeConfig moe = moe_config(p, B);
    std::vector<TensorId> aux_terms;
    ModelGraph g("transformer");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    // The normalisation named `name` with its parameters `name.gamma` (and `name.beta` for layer norm).
    auto norm = [&](TensorId in, const std::string& name) {
      if (rms) return b.rms_norm(in, b.param(name + ".gamma", {D}), name);
      return b.layer_norm(in, b.param(name + ".gamma", {D}), b.param(name + ".beta", {D}), name);
    };
    TensorId ids = b.input("tokens", {B, S}, DType::I32);
    TensorId labels = b.label("labels", {B, S});
    // Cells (what a pipeline cuts between): the embedding, each layer, and the head (final norm, logits, loss).
    b.set_cell(0);
    const TensorId table = b.param("embedding", {V, D});
    TensorId x = b.embedding(table, ids, "embed");
    for (int64_t l = 0; l < L; ++l) {
      std::string n = "layer" + std::to_string(l);
      b.set_cell(static_cast<int32_t>(l + 1));
      TensorId h = norm(x, n + ".ln1");
      auto proj = [&](const char* what, std::vector<int64_t> heads, const char* equation) {
        std::string name = n + ".attn." + what;
        heads.insert(heads.begin(), D);
        heads.push_back(dh);
        return b.einsum(h, b.param(name + ".w", heads), equation, name);
      };
      const double scale = 1.0 / std::sqrt(static_cast<double>(dh));
      // The scores and context matmuls of causal attention are marked so (OpAttrs::causal): conventions of model
      // FLOPs that count the mask's triangle count half of them.
      auto causal_einsum = [&](TensorId a, TensorId c, const char* equation, const std::string& name) {
        TensorId t = b.einsum(a, c, equation, name);
        g.op(g.producer(t)).attrs.causal = causal;
        return t;
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
        attn = attention(b, h, h, {.heads = H, .head_dim = dh, .causal = causal, .rope = rope, .flash = flash,
                                   .blocks = blocks},
                         n + ".attn");
      } else {
        // Grouped-query attention: query head h = k G + g (the same row-major layout as [D, H, E]) reads key/value
        // head k; queries keep the group apart as a dimension of its own, so nothing is copied or reshaped.
        const int64_t G = H / KV;
        TensorId q = proj("q", {KV, G}, "bsd,dkge->bskge"), k = proj("k", {KV}, "bsd,dke->bske"),
                 v = proj("v", {KV}, "bsd,dke->bske");
        if (rope) q = b.rope(q, n + ".attn.q.rope"), k = b.rope(k, n + ".attn.k.rope");
        tag_qkv(q, k, v);
        TensorId ctx;
        if (flash) {
          ctx = b.flash_attention(q, k, v, scale, causal, blocks, n + ".attn.context");
        } else {
          TensorId scores = causal_einsum(q, k, "bskge,btke->bkgst", n + ".attn.scores");
          TensorId probs = b.softmax(scores, scale, causal, n + ".attn.softmax");
          ctx = causal_einsum(probs, v, "bkgst,btke->bskge", n + ".attn.context");
        }
        attn = b.einsum(ctx, b.param(n + ".attn.o.w", {KV, G, dh, D}), "bskge,kged->bsd", n + ".attn.o");
        tag(ctx, "context");
      }
      tag(attn, "out_proj");
      // A parallel block (PaLM, GPT-J) feeds the attention's normalised input to the FFN too.
      TensorId h2 = h;
      if (!parallel) {
        x = b.add(x, attn, n + ".attn.residual");
        h2 = norm(x, n + ".ln2");
      }
      TensorId f2;
      std::string residual = n + ".ffn.residual";
      if (is_moe_layer(l, moe)) {
        MoeBlock m = moe_ffn(b, h2, F, moe, n + ".moe");
        if (moe.aux_loss > 0) aux_terms.push_back(m.aux_loss);
        f2 = m.out;
        residual = n + ".moe.residual";
      } else if (ffn == "swiglu") {
        // LLaMA's names: w1 the gate, w3 the up projection, w2 the down projection.
        TensorId gate = b.einsum(h2, b.param(n + ".ffn.w1", {D, F}), "bsd,df->bsf", n + ".ffn.gate");
        TensorId up = b.einsum(h2, b.param(n + ".ffn.w3", {D, F}), "bsd,df->bsf", n + ".ffn.up");
        TensorId act = b.mul(b.silu(gate, n + ".ffn.silu"), up, n + ".ffn.glu");
        f2 = b.einsum(act, b.param(n + ".ffn.w2", {F, D}), "bsf,fd->bsd", n + ".ffn.down");
        tag(gate, "mlpwi_0");
        tag(up, "mlpwi_1");
        tag(f2, "mlpwo");
      } else {
        f2 = dense_ffn(b, h2, F, ffn, true, n + ".ffn");
      }
      if (parallel) x = b.add(x, b.add(attn, f2, n + ".block.sum"), n + ".block.residual");
      else x = b.add(x, f2, residual);
    }
    b.set_cell(static_cast<int32_t>(L + 1));
    TensorId hf = norm(x, "final_ln");
    TensorId logits = p.b("workload.tie_embeddings") ? b.einsum(hf, table, "bsd,vd->bsv", "logits")
                                                     : b.einsum(hf, b.param("unembed", {D, V}), "bsd,dv->bsv", "logits");
    TensorId loss = b.softmax_cross_entropy(logits, labels, aux_terms.empty() ? "loss" : "loss.nll");
    if (!aux_terms.empty()) loss = add_loss_terms(b, loss, aux_terms);
    b.backward(loss);
    b.optimizer(training_optimizer(p));
    return training_remat(g, p);
  }
};

PODSIM_REGISTER_WORKLOAD(TransformerWorkload, "transformer",
                         "Decoder Transformer (attention, FFN, layer norm, cross-entropy), a training step");

}  // namespace
}  // namespace podsim
