// workload.model: gnmt — Google's neural machine translation model (Wu et al. 2016) as MLPerf v0.6 trains it, in the
// layout of its reference implementation (PyTorch rnn_translator: 160,671,297 parameters at a 32320-token
// vocabulary, the count its result logs print; docs/model.md has the equations):
//   source ids [B, S] -> x = E[ids]                                    (E shared by source and target)
//   encoder: layer 1 bidirectional (an LSTM forwards and one backwards in time, outputs concatenated: 2H), layer 2
//            an LSTM over them, layers 3 .. L residual (x = x + LSTM(x)): the memory m [B, S, H]
//   target ids [B, T] (shifted right) -> y = E[ids];  h1 = LSTM(y)
//   attention (normalized Bahdanau): s = a . tanh(h1 Wq + m Wk + bias) [B, T, S], p = softmax_S(s), ctx = p m
//   decoder layers 2 .. L: y = LSTM([y; ctx]) (layer 2 from h1), residual from layer 3 on
//   logits [B, T, V] = y Wc + bc -> mean softmax cross-entropy against labels [B, T] -> backward -> optimizer
// Every LSTM is one scanned kernel (workloads/ops/lstm.cpp) after its input projection, one GEMM over all steps
// (x . Wx + b_ih + b_hh, PyTorch's two biases). Cells: the source embedding, each encoder layer, the target
// embedding with decoder layer 1 and the attention, each later decoder layer, the classifier with the loss.
// Not modelled: dropout, label smoothing, the padding masks of length buckets (every position is a token).
#include "base/text.h"
#include "workloads/i_workload.h"
#include "workloads/training.h"

namespace podsim {
namespace {

class GnmtWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    std::vector<ParamSpec> p = {
        ParamSpec::integer("workload.encoder_layers",
                           "Encoder LSTM layers (GNMT: 4): the first bidirectional, the second over its 2H outputs, "
                           "residual connections from the third on.")
            .range(2, 1000)
            .def("4"),
        ParamSpec::integer("workload.decoder_layers",
                           "Decoder LSTM layers (GNMT: 4): the first feeds the attention, the others take [h; "
                           "context], residual from the third on.")
            .range(2, 1000)
            .def("4"),
        ParamSpec::integer("workload.hidden", "LSTM units per layer and direction, and the embedding width (1024).")
            .range(1, 1LL << 16)
            .def("1024"),
        ParamSpec::integer("workload.vocab",
                           "Shared source and target vocabulary (MLPerf's GNMT: 32320, BPE with 4 special tokens "
                           "padded to a multiple of 8).")
            .range(2, 1LL << 24)
            .def("32320"),
        ParamSpec::integer("workload.src_len", "Source tokens per sentence (MLPerf's GNMT trains at most 50).")
            .range(1, 1LL << 16),
        ParamSpec::integer("workload.tgt_len", "Target tokens per sentence.").range(1, 1LL << 16),
        ParamSpec::integer("workload.batch", "Sentence pairs per step.").range(1, 1LL << 20),
    };
    for (auto& s : training_param_specs("adam", "0.001")) p.push_back(s);
    return p;
  }

  void validate(const ParamSet& p) const override { validate_training(p); }

  ModelGraph build(const ParamSet& p) const override {
    const int64_t Le = p.i("workload.encoder_layers"), Ld = p.i("workload.decoder_layers");
    const int64_t H = p.i("workload.hidden"), V = p.i("workload.vocab");
    const int64_t S = p.i("workload.src_len"), T = p.i("workload.tgt_len"), B = p.i("workload.batch");
    ModelGraph g("gnmt");
    GraphBuilder b(g, training_dtype(p), training_weight_dtype(p));
    // An LSTM layer named `n` over x [B, *, I]: the input projection over every step, both biases, the scan.
    auto lstm = [&](TensorId x, const std::string& n, bool reverse = false) {
      const int64_t in = g.tensor(x).shape.back();
      TensorId xw = b.einsum(x, b.param(n + ".wx", {in, 4, H}), "bti,igh->btgh", n + ".xw");
      xw = b.bias_add(b.bias_add(xw, b.param(n + ".b_ih", {4, H}), n + ".xw.b_ih"), b.param(n + ".b_hh", {4, H}),
                      n + ".xw.bias");
      return b.lstm(xw, b.param(n + ".wh", {H, 4, H}), reverse, n);
    };
    TensorId src = b.input("src_tokens", {B, S}, DType::I32);
    TensorId tgt = b.input("tgt_tokens", {B, T}, DType::I32);
    TensorId labels = b.label("labels", {B, T});

    int32_t cell = 0;
    b.set_cell(cell++);
    const TensorId table = b.param("embedding", {V, H});
    TensorId x = b.embedding(table, src, "enc.embed");
    b.set_cell(cell++);
    x = b.concat({lstm(x, "enc.l0.fwd"), lstm(x, "enc.l0.bwd", true)}, "enc.l0");
    for (int64_t l = 1; l < Le; ++l) {
      const std::string n = "enc.l" + std::to_string(l);
      b.set_cell(cell++);
      const TensorId h = lstm(x, n);
      x = l >= 2 ? b.add(x, h, n + ".residual") : h;
    }
    const TensorId memory = x;

    b.set_cell(cell++);
    const TensorId h1 = lstm(b.embedding(table, tgt, "dec.embed"), "dec.l0");
    const TensorId q = b.einsum(h1, b.param("dec.attn.wq", {H, H}), "bth,hk->btk", "dec.attn.q");
    const TensorId k = b.einsum(memory, b.param("dec.attn.wk", {H, H}), "bsh,hk->bsk", "dec.attn.k");
    const TensorId scores = b.additive_attention(q, k, b.param("dec.attn.bias", {H}), b.param("dec.attn.v", {H}),
                                                 b.param("dec.attn.g", {1}), "dec.attn.scores");
    const TensorId probs = b.softmax(scores, 1.0, false, "dec.attn.softmax");
    const TensorId ctx = b.einsum(probs, memory, "bts,bsh->bth", "dec.attn.context");
    TensorId y = h1;
    for (int64_t l = 1; l < Ld; ++l) {
      const std::string n = "dec.l" + std::to_string(l);
      b.set_cell(cell++);
      const TensorId h = lstm(b.concat({y, ctx}, n + ".in"), n);
      y = l >= 2 ? b.add(y, h, n + ".residual") : h;
    }
    b.set_cell(cell);
    TensorId logits = b.bias_add(b.einsum(y, b.param("classifier.w", {H, V}), "bth,hv->btv", "classifier"),
                                 b.param("classifier.b", {V}), "logits");
    TensorId loss = b.softmax_cross_entropy(logits, labels, "loss");
    return finish_training_step(b, loss, p);
  }
};

PODSIM_REGISTER_WORKLOAD(GnmtWorkload, "gnmt",
                         "GNMT (LSTM encoder-decoder with attention and residual connections), a training step");

}  // namespace
}  // namespace podsim
