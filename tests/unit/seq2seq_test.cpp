// The sequence-to-sequence models: the encoder-decoder Transformer (workloads/models/encoder_decoder.cpp) and GNMT
// (workloads/models/gnmt.cpp, its LSTM scan and attention in workloads/ops/lstm.cpp, additive_attention.cpp). Their
// structure as MLPerf's implementations build them; the LSTM kernel against a cell computed here step by step; the
// costs of the two new kernels counted by hand; the located error of an LSTM stack without layers; the collectives
// of Megatron counted by hand; and every strategy that applies reproducing the single-device step.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/plan_steps.h"
#include "workloads/builder.h"
#include "workloads/op_def.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// 2 + 2 layers, d_model 16, 4 heads, FFN 32, vocabulary 40, sources of 6 and targets of 5 tokens, 4 examples.
std::string transformer(const std::string& extra = "", int src = 6) {
  return "workload: {model: encoder_decoder, encoder_layers: 2, decoder_layers: 2, d_model: 16, heads: 4, d_ff: 32, "
         "vocab: 40, src_len: " + std::to_string(src) + ", tgt_len: 5, batch: 4, dtype: fp32" + extra +
         "}\nrun: {fusion: none}\n";
}

// 3 + 3 layers of 8 units, vocabulary 30, sources of 5 and targets of 4 tokens, 4 sentence pairs.
std::string gnmt(const std::string& extra = "", int encoder = 3, int decoder = 3) {
  return "workload: {model: gnmt, encoder_layers: " + std::to_string(encoder) + ", decoder_layers: " +
         std::to_string(decoder) + ", hidden: 8, vocab: 30, src_len: 5, tgt_len: 4, batch: 4, dtype: fp32, "
         "clip_norm: 5.0" + extra + "}\nrun: {fusion: none}\n";
}

ModelGraph build(const std::string& yaml) { return one_chip_graph(yaml, "s2s.yaml"); }

std::string input(const ModelGraph& g, const std::string& tensor, size_t i) {
  return g.tensor(producer(g, tensor).inputs.at(i)).name;
}

// ---- the encoder-decoder Transformer ---------------------------------------------------------------------------

// Pre-LN stacks with final layer norms (epsilon 1e-6); the embedding shared by both stacks and the softmax, scaled
// by sqrt(d_model) before the position signal; causal self-attention in the decoder, cross-attention whose keys and
// values come from the encoder's normalized output; no biases in attention.
TEST(EncoderDecoderTest, Structure) {
  const ModelGraph g = build(transformer());
  EXPECT_EQ(producer(g, "enc.embed").kind, OpKind::TimingSignal);
  EXPECT_EQ(producer(g, "enc.embed.scaled").attrs.alpha, 4.0);
  EXPECT_EQ(input(g, "enc.embed.lookup", 0), "embedding");
  EXPECT_EQ(input(g, "dec.embed.lookup", 0), "embedding");
  EXPECT_EQ(input(g, "logits", 1), "embedding");
  EXPECT_EQ(input(g, "enc.layer0.attn.q", 0), "enc.layer0.ln1");
  EXPECT_EQ(input(g, "enc.layer0.attn.residual", 0), "enc.embed");
  EXPECT_EQ(producer(g, "enc.final_ln").attrs.eps, 1e-6);
  EXPECT_EQ(input(g, "dec.layer0.cross.q", 0), "dec.layer0.ln2");
  EXPECT_EQ(input(g, "dec.layer0.cross.k", 0), "enc.final_ln");
  EXPECT_EQ(input(g, "dec.layer1.cross.v", 0), "enc.final_ln");
  EXPECT_TRUE(producer(g, "dec.layer0.self.softmax").attrs.causal);
  EXPECT_FALSE(producer(g, "dec.layer0.cross.softmax").attrs.causal);
  EXPECT_FALSE(producer(g, "enc.layer1.attn.softmax").attrs.causal);
  EXPECT_EQ(g.tensor(g.find_tensor("dec.layer0.cross.scores")).shape, (std::vector<int64_t>{4, 4, 5, 6}));
  EXPECT_LT(g.find_tensor("enc.layer0.attn.q.b"), 0);
  EXPECT_EQ(input(g, "logits", 0), "dec.final_ln");
  // A separate source vocabulary has its own table.
  const ModelGraph s = build(transformer(", src_vocab: 50"));
  EXPECT_EQ(input(s, "enc.embed.lookup", 0), "src_embedding");
  EXPECT_EQ(s.tensor(s.find_tensor("src_embedding")).shape, (std::vector<int64_t>{50, 16}));
}

// The timing signal of position 1, feature pair 0: sin(1), cos(1); of position 0: 0 and 1.
TEST(EncoderDecoderTest, TimingSignalByHand) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  const TensorId x = b.param("x", {1, 2, 4});
  const TensorId y = b.timing_signal(x, "y");
  TensorStore s;
  s.resize(g.num_tensors());
  s.put(x, Tensor({1, 2, 4}));
  run_op(g, g.op(g.producer(y)), s);
  // n = 2 timescales: inv = [1, 1e-4]; position p: [sin p, sin 1e-4 p, cos p, cos 1e-4 p].
  const std::vector<float> want = {0, 0, 1, 1, std::sin(1.0f), std::sin(1e-4f), std::cos(1.0f), std::cos(1e-4f)};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(s.get(y).data[i], want[i], 1e-7) << i;
}

// Megatron over 4: each encoder layer all-reduces its attention output and FFN output forward, each decoder layer its
// self-attention, cross-attention and FFN outputs (B x positions x D fp32).
TEST(EncoderDecoderTest, MegatronCollectivesAndTheStep) {
  const Step s = plan_step(hardware("[4, 1]") + transformer() + "strategy: {name: spmd}\n");
  const std::vector<std::string> all = collectives(s.plan.programs[0]);
  auto has = [&](const std::string& c) { return std::find(all.begin(), all.end(), c) != all.end(); };
  const double src = 4 * 6 * 16 * 4.0, tgt = 4 * 5 * 16 * 4.0;
  for (int l = 0; l < 2; ++l) {
    const std::string e = "enc.layer" + std::to_string(l), d = "dec.layer" + std::to_string(l);
    EXPECT_TRUE(has(ar(e + ".attn.o", "model", src))) << e;
    EXPECT_TRUE(has(ar(e + ".ffn.down", "model", src))) << e;
    EXPECT_TRUE(has(ar(d + ".self.o", "model", tgt))) << d;
    EXPECT_TRUE(has(ar(d + ".cross.o", "model", tgt))) << d;
    EXPECT_TRUE(has(ar(d + ".ffn.down", "model", tgt))) << d;
  }
  EXPECT_EQ(local_tensor(s.plan.programs[0], "dec.layer0.cross.k.w")->shape, (std::vector<int64_t>{16, 1, 4}));
  EXPECT_EQ(local_tensor(s.plan.programs[0], "logits")->shape, (std::vector<int64_t>{4, 5, 10}));
  expect_reproduces_the_step(s);
}

// Data parallel (alone and with weight-update sharding), fsdp, data x model and a pipeline of 2 stages x data.
TEST(EncoderDecoderTest, StrategiesReproduceTheStep) {
  for (const std::string& strategy :
       {std::string("strategy: {name: data_parallel}\n"),
        std::string("strategy: {name: data_parallel, weight_update_sharding: true}\n"),
        std::string("strategy: {name: fsdp}\n"),
        std::string("strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"),
        // The encoder's output crosses from the first stage to every decoder layer on the second.
        std::string("strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], "
                    "shape: [2, 2]}\n")}) {
    SCOPED_TRACE(strategy);
    expect_reproduces_the_step(plan_step(hardware("[4, 1]") + transformer() + strategy));
  }
}

// GShard's encoder-decoder: every other layer of both stacks a mixture of experts, the experts split over `expert`.
TEST(EncoderDecoderTest, MixtureOfExpertsReproducesTheStep) {
  const std::string moe = ", moe: {experts: 4, groups: 4, aux_loss: 0.01}";
  const ModelGraph g = build(transformer(moe, 5));
  EXPECT_GE(g.find_tensor("enc.layer1.moe.wi"), 0);
  EXPECT_GE(g.find_tensor("dec.layer1.moe.wi"), 0);
  EXPECT_LT(g.find_tensor("enc.layer0.moe.wi"), 0);
  EXPECT_EQ(producer(g, "loss").phase, Phase::Loss);
  expect_reproduces_the_step(plan_step(hardware("[4, 1]") + transformer(moe, 5) +
                                       "strategy: {name: [data_parallel, moe]}\nmesh: {axes: [data, expert], shape: "
                                       "[2, 2]}\n"));
}

// ---- GNMT --------------------------------------------------------------------------------------------------------

// The encoder's first layer runs both ways and concatenates; the second reads its 2H outputs; residuals from the
// third. The decoder's first layer feeds the attention, whose keys are the encoder's output; later layers read
// [h; context]; residuals from the third.
TEST(GnmtTest, Structure) {
  const ModelGraph g = build(gnmt());
  EXPECT_EQ(producer(g, "enc.l0.fwd").attrs.shift, 1);
  EXPECT_EQ(producer(g, "enc.l0.bwd").attrs.shift, -1);
  EXPECT_EQ(producer(g, "enc.l0").kind, OpKind::Concat);
  EXPECT_EQ(g.tensor(g.find_tensor("enc.l1.wx")).shape, (std::vector<int64_t>{16, 4, 8}));
  EXPECT_EQ(input(g, "enc.l1.xw", 0), "enc.l0");
  EXPECT_LT(g.find_tensor("enc.l1.residual"), 0);
  EXPECT_EQ(input(g, "enc.l2.residual", 0), "enc.l1");
  EXPECT_EQ(input(g, "dec.attn.k", 0), "enc.l2.residual");
  EXPECT_EQ(input(g, "dec.attn.q", 0), "dec.l0");
  EXPECT_EQ(producer(g, "dec.attn.scores").kind, OpKind::AdditiveAttention);
  EXPECT_EQ(input(g, "dec.attn.context", 1), "enc.l2.residual");
  EXPECT_EQ(input(g, "dec.l1.in", 0), "dec.l0");
  EXPECT_EQ(input(g, "dec.l1.in", 1), "dec.attn.context");
  EXPECT_EQ(input(g, "dec.l2.residual", 0), "dec.l1");
  EXPECT_EQ(input(g, "classifier", 0), "dec.l2.residual");
  EXPECT_EQ(g.tensor(g.find_tensor("dec.attn.bias")).param_kind, ParamKind::Bias);
  EXPECT_EQ(g.tensor(g.find_tensor("enc.l0.fwd.b_hh")).param_kind, ParamKind::Bias);
}

// The LSTM kernel against the cell computed here: H = 2 units, 3 steps, one sequence, forwards and backwards.
TEST(GnmtTest, LstmStepsByHand) {
  for (bool reverse : {false, true}) {
    SCOPED_TRACE(reverse ? "backwards" : "forwards");
    ModelGraph g("lstm");
    GraphBuilder b(g, DType::F32);
    const int64_t T = 3, H = 2;
    const TensorId xw = b.param("xw", {1, T, 4, H}), wh = b.param("wh", {H, 4, H});
    const TensorId h = b.lstm(xw, wh, reverse, "l");
    TensorStore s;
    init_step_inputs(g, s, 7);
    const std::vector<float> x = s.get(xw).data, w = s.get(wh).data;
    run_op(g, g.op(g.producer(h)), s);
    auto sig = [](double z) { return 1 / (1 + std::exp(-z)); };
    double hp[2] = {0, 0}, cp[2] = {0, 0};
    for (int64_t k = 0; k < T; ++k) {
      const int64_t t = reverse ? T - 1 - k : k;
      double z[8];
      for (int j = 0; j < 8; ++j) z[j] = x[t * 8 + j] + hp[0] * w[j] + hp[1] * w[8 + j];
      double hn[2], cn[2];
      for (int u = 0; u < 2; ++u) {
        cn[u] = sig(z[2 + u]) * cp[u] + sig(z[u]) * std::tanh(z[4 + u]);
        hn[u] = sig(z[6 + u]) * std::tanh(cn[u]);
        EXPECT_NEAR(s.get(h).data[t * 2 + u], hn[u], 1e-6) << t;
        EXPECT_NEAR(s.get(g.find_tensor("l.c")).data[t * 2 + u], cn[u], 1e-6) << t;
      }
      hp[0] = hn[0], hp[1] = hn[1], cp[0] = cn[0], cp[1] = cn[1];
    }
  }
}

// Costs by hand: the forward scan runs T GEMMs of B x H by H x 4H and reads the recurrent weight once per step; the
// backward T of B x 4H by 4H x H and one H x BT by BT x 4H for the weight's gradient; the vector unit's counts per
// unit and step. The attention's scores: 4 simple operations and a tanh per (b, t, s, h), nothing on the MXU.
TEST(GnmtTest, KernelCostsByHand) {
  const ModelGraph g = build(gnmt());
  const double B = 4, S = 5, T = 4, H = 8, F32 = 4;
  const Op& fwd = producer(g, "dec.l1");
  const OpCost c = op_cost(g, fwd);
  EXPECT_EQ(c.unit, Unit::Mxu);
  EXPECT_EQ(c.flops, 2 * T * B * H * 4 * H);
  EXPECT_EQ(c.bytes_read, B * T * 4 * H * F32 + T * H * 4 * H * F32);
  EXPECT_EQ(c.bytes_written, (2 * B * T * H + B * T * 4 * H) * F32);
  EXPECT_EQ(c.vector.elements, B * T * H);
  EXPECT_EQ(c.vector.simple, 14);
  EXPECT_EQ(c.vector.transcendental, 5);
  EXPECT_EQ(c.vector.divide, 3);
  const std::vector<GemmPass> f = kernel_gemms(g, fwd);
  ASSERT_EQ(f.size(), 1u);
  EXPECT_EQ(std::vector<int64_t>({f[0].count, f[0].m, f[0].k, f[0].n}), std::vector<int64_t>({4, 4, 8, 32}));
  const Op& bwd = producer(g, "dec.l1.dxw");
  const std::vector<GemmPass> bg = kernel_gemms(g, bwd);
  ASSERT_EQ(bg.size(), 2u);
  EXPECT_EQ(std::vector<int64_t>({bg[0].count, bg[0].m, bg[0].k, bg[0].n}), std::vector<int64_t>({4, 4, 32, 8}));
  EXPECT_EQ(std::vector<int64_t>({bg[1].count, bg[1].m, bg[1].k, bg[1].n}), std::vector<int64_t>({1, 8, 16, 32}));
  const OpCost cb = op_cost(g, bwd);
  EXPECT_EQ(cb.flops, 2 * T * B * 4 * H * H + 2 * H * B * T * 4 * H);
  // dh, h, c, the gates and the weight, which T - 1 more steps read again; dxw and dWh written.
  EXPECT_EQ(cb.bytes_read, (3 * B * T * H + B * T * 4 * H + T * H * 4 * H) * F32);
  EXPECT_EQ(cb.bytes_written, (B * T * 4 * H + H * 4 * H) * F32);
  const OpCost a = op_cost(g, producer(g, "dec.attn.scores"));
  EXPECT_EQ(a.unit, Unit::Vpu);
  EXPECT_EQ(a.vector.elements, B * T * S * H);
  EXPECT_EQ(a.vector.simple, 4);
  EXPECT_EQ(a.vector.transcendental, 1);
  EXPECT_EQ(a.bytes_written, B * T * S * F32);
}

// At GNMT's size (H = 1024, 64 rows a step, bf16) the products do not fit VMEM whole: the kernel streams them in
// blocks of at most 8 MiB (double-buffered operands, fp32 results), N split first, so the MXU's folds are the whole
// products' (the FLOPs sum to the GEMMs').
TEST(GnmtTest, LstmProductsInBlocksThatFitVmem) {
  const ModelGraph g = build("workload: {model: gnmt, hidden: 1024, vocab: 64, src_len: 48, tgt_len: 48, batch: 64}\n");
  const double B = 64, T = 48, H = 1024;
  for (const char* name : {"enc.l1", "enc.l1.dxw"}) {
    SCOPED_TRACE(name);
    const Op& op = producer(g, name);
    double flops = 0;
    for (const GemmPass& p : kernel_gemms(g, op)) {
      const double block = 2.0 * (p.m * p.k + p.k * p.n) * 2 + 2.0 * p.m * p.n * 4;
      EXPECT_LE(block, 8.0 * 1024 * 1024) << p.m << " x " << p.k << " x " << p.n;
      EXPECT_EQ(p.k % 128, 0);
      EXPECT_EQ(p.n % 128, 0);
      flops += 2.0 * p.count * p.m * p.k * p.n;
    }
    EXPECT_EQ(flops, op_cost(g, op).flops);
    EXPECT_EQ(flops, std::string(name) == "enc.l1" ? 2 * T * B * H * 4 * H : 2 * T * B * 4 * H * H + 2 * H * B * T * 4 * H);
  }
}

// An LSTM stack without layers (or with fewer than GNMT's structure needs: a bidirectional layer and one over it) is
// an error at the key.
TEST(GnmtTest, AStackWithoutLayersIsALocatedError) {
  for (const std::string key : {"encoder_layers", "decoder_layers"}) {
    try {
      build(key == "encoder_layers" ? gnmt("", 0, 3) : gnmt("", 3, 0));
      FAIL() << key << ": 0 was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.id(), error_info(Err::OutOfRange).id) << e.what();
      EXPECT_NE(std::string(e.what()).find("workload." + key), std::string::npos) << e.what();
      EXPECT_EQ(e.where().line, 2) << e.what();
    }
  }
}

// Data parallel (alone and with weight-update sharding; global-norm clipping at GNMT's 5.0), fsdp, the vocabulary split
// over `model` (the embedding and classifier; the LSTMs whole), a pipeline of 2 stages.
TEST(GnmtTest, StrategiesReproduceTheStep) {
  for (const std::string& strategy :
       {std::string("strategy: {name: data_parallel}\n"),
        std::string("strategy: {name: data_parallel, weight_update_sharding: true}\n"),
        std::string("strategy: {name: fsdp}\n"),
        std::string("strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"),
        std::string("strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], "
                    "shape: [2, 2]}\n")}) {
    SCOPED_TRACE(strategy);
    const Step s = plan_step(hardware("[4, 1]") + gnmt() + strategy);
    expect_reproduces_the_step(s);
  }
  const Step m = plan_step(hardware("[4, 1]") + gnmt() + "strategy: {name: spmd}\n");
  EXPECT_EQ(local_tensor(m.plan.programs[0], "classifier.w")->shape, (std::vector<int64_t>{8, 8}));  // 30 -> 4 x 8
  EXPECT_EQ(local_tensor(m.plan.programs[0], "enc.l1.wh")->shape, (std::vector<int64_t>{8, 4, 8}));
}

// The recurrence never runs split: each step of a layer needs the whole previous state. A recurrent weight the user
// splits over `model` (strategy.shard) is stored split and all-gathered whole once for its scans ([8, 4, 8] fp32:
// 256 of 1024 bytes a chip; the backward scan reads the same gathered copy); its gradient, computed whole on every
// chip (the batch is not split), is sliced into the shard without communication. The step is the single-device
// one.
TEST(GnmtTest, AnnotatedRecurrentWeightsAreGatheredForTheScan) {
  const Step s = plan_step(hardware("[4, 1]") + gnmt() +
                           "strategy: {name: spmd, shard: [\"enc.l1.wh = [-, -, model]\"]}\n");
  const Program& p = s.plan.programs[0];
  std::vector<std::string> wh;
  for (const std::string& c : collectives(p))
    if (c.find("enc.l1.wh") != std::string::npos) wh.push_back(c);
  EXPECT_EQ(wh, (std::vector<std::string>{ag("enc.l1.wh", "model", 2, 256, 1024)}));
  EXPECT_EQ(local_tensor(p, "enc.l1.wh")->shape, (std::vector<int64_t>{8, 4, 2}));
  expect_reproduces_the_step(s);
}

}  // namespace
