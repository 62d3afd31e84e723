// workload.model: bert — BERT pre-training (Devlin et al. 2019) as MLPerf's reference codes it (modeling.py and
// run_pretraining.py of the v0.7 BERT benchmark; docs/model.md has the equations):
//   tokens, segments [B, S] -> x = LN(E[tokens] + T[segments] + P[0:S])         (word, token-type, position tables)
//   per layer (post-LN):  q, k, v [B, S, H, E] = x . Wq, Wk, Wv [D, H, E] + b [H, E]
//                         x = LN(x + (softmax(q k^T / sqrt(E)) v) . Wo [H, E, D] + bo)   (bidirectional: no mask)
//                         x = LN(x + gelu(x . W1 [D, F] + b1) . W2 [F, D] + b2)
//   masked LM: h = LN(gelu(x[b, positions[b, p]] . Wt [D, D] + bt));  logits [B, P, V] = h . E^T + bias (tied)
//   next sentence: pooled = tanh(x[:, 0] . Wp [D, D] + bp);  logits [B, 2] = pooled . Wn^T [2, D] + bn
//   loss = mean cross-entropy of the masked tokens + mean cross-entropy of the sentence pairs
//   -> backward -> optimizer (LAMB by default, as MLPerf's BERT).
// Layer norms use BERT's epsilon 1e-12. The layer names follow the Transformer's (layer<l>.attn.q.w, ...), so the
// strategies' Megatron and vocabulary-parallel rules apply. Dropout is not modelled (no model here has it).
#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/models/attention.h"
#include "workloads/training.h"

namespace podsim {
namespace {

constexpr double kEps = 1e-12;  // BERT's layer-norm epsilon

class BertWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::integer("workload.layers", "Encoder layers.").range(1, 10000),
        ParamSpec::integer("workload.d_model", "Hidden width.").range(1, 1LL << 20),
        ParamSpec::integer("workload.d_ff", "Feed-forward hidden width (BERT's intermediate size).").range(1, 1LL << 22),
        ParamSpec::integer("workload.heads", "Attention heads; must divide d_model.").range(1, 1LL << 16),
        ParamSpec::integer("workload.vocab", "Word-piece vocabulary (BERT's uncased vocabulary: 30522).")
            .range(2, 1LL << 24)
            .def("30522"),
        ParamSpec::integer("workload.seq_len", "Tokens per sequence (MLPerf's BERT: 512).").range(1, 1LL << 20),
        ParamSpec::integer("workload.max_positions",
                           "Rows of the learned position table (BERT's max_position_embeddings, 512); a sequence "
                           "uses the first seq_len of them.")
            .range(1, 1LL << 20)
            .def("512"),
        ParamSpec::integer("workload.type_vocab", "Token types (segments A and B: 2).").range(1, 1024).def("2"),
        ParamSpec::integer("workload.max_predictions",
                           "Masked positions per sequence the masked-LM head predicts (max_predictions_per_seq: "
                           "MLPerf 76 at seq_len 512; 20 at 128 and 80 at 512 in the original recipes).")
            .range(1, 1LL << 20),
        ParamSpec::integer("workload.batch", "Sequences per step.").range(1, 1LL << 20),
    };
    for (auto& s : training_param_specs("lamb", "0.001")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override {
    validate_training(p);
    const int64_t d = p.i("workload.d_model"), h = p.i("workload.heads");
    if (d % h != 0)
      throw Error(Err::NotDivisible, p.where("workload.heads"),
                  strprintf("workload.d_model = %lld is not divisible by workload.heads = %lld; each head gets "
                            "d_model / heads features",
                            static_cast<long long>(d), static_cast<long long>(h)),
                  "workload.heads");
    const int64_t s = p.i("workload.seq_len");
    if (p.i("workload.max_predictions") > s)
      throw Error(Err::OutOfRange, p.where("workload.max_predictions"),
                  strprintf("workload.max_predictions = %lld masked positions do not fit in a sequence of "
                            "workload.seq_len = %lld tokens; give at most %lld (MLPerf: 76 of 512)",
                            static_cast<long long>(p.i("workload.max_predictions")), static_cast<long long>(s),
                            static_cast<long long>(s)),
                  "workload.max_predictions");
    if (s > p.i("workload.max_positions"))
      throw Error(Err::OutOfRange, p.where("workload.seq_len"),
                  strprintf("workload.seq_len = %lld is longer than the position table's workload.max_positions = "
                            "%lld rows; shorten the sequence or enlarge the table",
                            static_cast<long long>(s), static_cast<long long>(p.i("workload.max_positions"))),
                  "workload.seq_len");
  }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t L = p.i("workload.layers"), D = p.i("workload.d_model"), F = p.i("workload.d_ff");
    const int64_t H = p.i("workload.heads"), V = p.i("workload.vocab"), S = p.i("workload.seq_len");
    const int64_t B = p.i("workload.batch"), P = p.i("workload.max_predictions");
    const int64_t positions = p.i("workload.max_positions"), types = p.i("workload.type_vocab");
    ModelGraph g("bert");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    auto norm = [&](TensorId x, const std::string& name) {
      return b.layer_norm(x, b.param(name + ".gamma", {D}), b.param(name + ".beta", {D}), name, kEps);
    };
    auto dense = [&](TensorId x, int64_t out, const char* equation, const std::string& name) {
      const int64_t in = g.tensor(x).shape.back();
      return b.bias_add(b.einsum(x, b.param(name + ".w", {in, out}), equation, name), b.param(name + ".b", {out}),
                        name + ".bias");
    };
    TensorId tokens = b.input("tokens", {B, S}, DType::I32);
    TensorId segments = b.input("segments", {B, S}, DType::I32);
    TensorId masked = b.input("mlm_positions", {B, P}, DType::I32);
    TensorId mlm_labels = b.label("mlm_labels", {B, P});
    TensorId nsp_labels = b.label("nsp_labels", {B});

    // Cells (what a pipeline cuts between): the embeddings, each layer, and the two heads with the loss.
    b.set_cell(0);
    const TensorId table = b.param("embedding", {V, D});
    TensorId x = b.add(b.embedding(table, tokens, "embed.words"),
                       b.embedding(b.param("token_type_embedding", {types, D}), segments, "embed.types"),
                       "embed.sum");
    // The position table's first S rows, added to every sequence (a weight, though added like a bias).
    const TensorId pos = b.param("position_embedding", {positions, D});
    x = b.bias_add(x, S < positions ? b.crop(pos, 0, S, "embed.positions") : pos, "embed");
    b.set_param_kind(pos, ParamKind::Weight);
    x = norm(x, "embed.ln");

    AttentionSpec attn;
    attn.heads = H;
    attn.head_dim = D / H;
    attn.bias = true;
    for (int64_t l = 0; l < L; ++l) {
      const std::string n = "layer" + std::to_string(l);
      b.set_cell(static_cast<int32_t>(l + 1));
      x = norm(b.add(x, attention(b, x, x, attn, n + ".attn"), n + ".attn.residual"), n + ".ln1");
      x = norm(b.add(x, dense_ffn(b, x, F, "gelu", true, n + ".ffn"), n + ".ffn.residual"), n + ".ln2");
    }

    b.set_cell(static_cast<int32_t>(L + 1));
    // Masked LM: the transform, then the logits over the vocabulary from the word table (tied) and a bias.
    TensorId h = b.gather_positions(x, masked, "mlm.gather");
    h = norm(b.gelu(dense(h, D, "bpd,de->bpe", "mlm.transform"), "mlm.gelu"), "mlm.ln");
    TensorId logits = b.bias_add(b.einsum(h, table, "bpd,vd->bpv", "mlm.logits"), b.param("mlm.bias", {V}), "mlm.out");
    TensorId mlm = b.softmax_cross_entropy(logits, mlm_labels, "loss.mlm");
    // Next sentence: the first token, pooled.
    TensorId first = b.reshape(b.crop(x, 1, 1, "pooler.first"), {B, D}, "pooler.first.rows");
    TensorId pooled = b.tanh(dense(first, D, "bd,de->be", "pooler"), "pooler.tanh");
    TensorId nsp_logits = b.bias_add(b.einsum(pooled, b.param("nsp.w", {2, D}), "bd,cd->bc", "nsp.logits"),
                                     b.param("nsp.b", {2}), "nsp.out");
    TensorId nsp = b.softmax_cross_entropy(nsp_logits, nsp_labels, "loss.nsp");
    TensorId loss = add_loss_terms(b, mlm, {nsp});
    return finish_training_step(b, loss, p);
  }
};

PODSIM_REGISTER_WORKLOAD(BertWorkload, "bert",
                         "BERT encoder pre-training (bidirectional attention, masked-LM and next-sentence heads), a "
                         "training step");

}  // namespace
}  // namespace podsim
