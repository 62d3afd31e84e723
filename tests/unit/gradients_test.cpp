// Every differentiable op kind's gradient rule against central finite differences of L = sum(out * R) for a fixed
// random R. Kernels run in fp32; the reference sums in double. Tolerance: |analytic - numeric| <= 2e-3 +
// 2e-2 * |numeric| per checked element (h = 1e-2 on inputs of order 1).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>

#include "sim/config/loader.h"
#include "workloads/builder.h"
#include "workloads/i_workload.h"
#include "workloads/ops/op_kind.h"
#include "workloads/reference.h"
#include "tests/unit/finite_difference.h"

using namespace podsim;

namespace {

struct Setup {
  ModelGraph g{"grad"};
  GraphBuilder b{g, DType::F32};
  OpId op = -1;
  TensorId loss_like = -1;  // for the loss op: its scalar output is L itself
};

// Fills every step input with normal values (positive and away from 0 for ReLU-friendly checks is not needed:
// inputs are random, and elements within h of a kink are skipped by the caller).
void randomise(const ModelGraph& g, TensorStore& s, uint64_t seed) {
  init_step_inputs(g, s, seed);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> nd(0, 1);
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<TensorId>(i));
    if (g.producer(static_cast<TensorId>(i)) >= 0 || t.dtype == DType::I32) continue;
    for (float& x : s.get_mut(static_cast<TensorId>(i)).data) x = static_cast<float>(nd(rng));
  }
}

double objective(const ModelGraph& g, const Op& op, TensorStore& s, TensorId dy) {
  run_op(g, op, s);
  if (dy < 0) return s.get(op.outputs[0]).data[0];  // the loss op: L is its output
  const Tensor& out = s.get(op.outputs[0]);
  const Tensor& r = s.get(dy);
  double l = 0;
  for (size_t i = 0; i < out.data.size(); ++i) l += static_cast<double>(out.data[i]) * r.data[i];
  return l;
}

// Builds the forward op with `make`, applies its gradient rule, and checks every float input's gradient.
void check_gradients(const std::string& what, const std::function<TensorId(GraphBuilder&)>& make,
                     bool loss_op = false, double kink = 0) {
  SCOPED_TRACE(what);
  ModelGraph g("grad");
  GraphBuilder b(g, DType::F32);
  TensorId out = make(b);
  OpId fwd = g.producer(out);
  const Op op = g.op(fwd);
  TensorId dy = -1;
  std::vector<TensorId> out_grads(op.outputs.size(), -1);
  if (loss_op) {
    out_grads[0] = out;
  } else {
    dy = g.add_tensor({"R", g.tensor(op.outputs[0]).shape, DType::F32, TensorRole::Input});
    out_grads[0] = dy;
  }
  std::vector<TensorId> grads = find_op_kind(op.kind)->grad(b, op, out_grads);
  TensorStore s;
  randomise(g, s, 42);
  run_reference(g, s);
  int checked = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    TensorId x = op.inputs[i];
    if (g.tensor(x).dtype == DType::I32) continue;
    ASSERT_LT(i, grads.size());
    ASSERT_GE(grads[i], 0) << "no gradient for input " << i;
    std::vector<float>& xs = s.get_mut(x).data;
    GradientCheck c{.samples = 40};
    if (kink > 0) c.skip = [&](size_t e) { return std::fabs(xs[e]) < kink; };
    checked += expect_gradient(s.get(grads[i]).data, xs, [&] { return objective(g, op, s, dy); }, c,
                               "input " + std::to_string(i));
  }
  EXPECT_GT(checked, 0);
}

}  // namespace

TEST(GradientsTest, MatMulPlain) {
  check_gradients("matmul", [](GraphBuilder& b) { return b.matmul(b.param("a", {5, 7}), b.param("w", {7, 3}), "mm"); });
}

TEST(GradientsTest, MatMulTransposed) {
  check_gradients("trans_a", [](GraphBuilder& b) {
    return b.matmul(b.param("a", {7, 5}), b.param("w", {7, 3}), "mm", true, false);
  });
  check_gradients("trans_b", [](GraphBuilder& b) {
    return b.matmul(b.param("a", {5, 7}), b.param("w", {3, 7}), "mm", false, true);
  });
  check_gradients("both", [](GraphBuilder& b) {
    return b.matmul(b.param("a", {7, 5}), b.param("w", {3, 7}), "mm", true, true);
  });
}

TEST(GradientsTest, EinsumBatchedAndMultiDimensional) {
  // Attention scores: batch letters b, h; contracting e; free s and t.
  check_gradients("scores", [](GraphBuilder& b) {
    return b.einsum(b.param("q", {2, 3, 2, 4}), b.param("k", {2, 5, 2, 4}), "bshe,bthe->bhst", "scores");
  });
  // A weight shared by every batch entry, contracting one dimension, producing two: the head projection.
  check_gradients("projection", [](GraphBuilder& b) {
    return b.einsum(b.param("x", {2, 3, 5}), b.param("w", {5, 2, 3}), "bsd,dhe->bshe", "proj");
  });
  // Two contracting dimensions (the output projection) and an output order unlike either operand's.
  check_gradients("two contracted", [](GraphBuilder& b) {
    return b.einsum(b.param("c", {2, 3, 2, 4}), b.param("w", {2, 4, 5}), "bshe,hed->dbs", "out");
  });
}

TEST(GradientsTest, Elementwise) {
  check_gradients("add", [](GraphBuilder& b) { return b.add(b.param("a", {4, 6}), b.param("c", {4, 6}), "add"); });
  check_gradients("scale", [](GraphBuilder& b) { return b.scale(b.param("a", {4, 6}), -1.7, "scale"); });
  check_gradients("bias_add", [](GraphBuilder& b) { return b.bias_add(b.param("x", {4, 6}), b.param("b", {6}), "ba"); });
  // A bias of the trailing shape (BERT's query bias [H, E], its position table [S, D]).
  check_gradients("bias_add trailing", [](GraphBuilder& b) {
    return b.bias_add(b.param("x", {2, 3, 4}), b.param("b", {3, 4}), "ba");
  });
  check_gradients("tanh", [](GraphBuilder& b) { return b.tanh(b.param("x", {5, 8}), "tanh"); });
  check_gradients("relu", [](GraphBuilder& b) { return b.relu(b.param("x", {5, 8}), "relu"); }, false, 0.02);
  check_gradients("gelu", [](GraphBuilder& b) { return b.gelu(b.param("x", {5, 8}), "gelu"); });
  check_gradients("mul", [](GraphBuilder& b) { return b.mul(b.param("a", {4, 6}), b.param("c", {4, 6}), "mul"); });
  check_gradients("silu", [](GraphBuilder& b) { return b.silu(b.param("x", {5, 8}), "silu"); });
}

// ReLU's gradient takes its mask from the ReLU's result (y > 0 exactly where x > 0), as TensorFlow's ReluGrad and
// PyTorch's threshold_backward do: its inputs are (dy, y), never x. So in an MLP (linear -> ReLU -> linear) the
// pre-activation, the bias add's output, is read by the ReLU alone and dies in the forward pass; the backward pass
// reads the ReLU's output (which the next layer's weight gradient reads anyway).
TEST(GradientsTest, ReluGradientReadsTheReluOutput) {
  ModelGraph g("relu");
  GraphBuilder b(g, DType::F32);
  const TensorId x = b.param("x", {5, 8});
  const TensorId y = b.relu(x, "relu");
  const TensorId dy = g.add_tensor({"dy", g.tensor(y).shape, DType::F32, TensorRole::Input});
  const Op relu = g.op(g.producer(y));
  const std::vector<TensorId> dx = find_op_kind(OpKind::Relu)->grad(b, relu, {dy});
  ASSERT_EQ(dx.size(), 1u);
  const Op& grad = g.op(g.producer(dx[0]));
  EXPECT_EQ(grad.kind, OpKind::ReluGrad);
  EXPECT_EQ(grad.inputs, (std::vector<TensorId>{dy, y}));

  Experiment e = load_experiment_text("hardware: {preset: tpu-v3}\nworkload: {model: mlp, batch: 4, input: 6, hidden: "
                                      "8, layers: 1, classes: 3, dtype: fp32}\n",
                                      "mlp.yaml");
  const ModelGraph mlp = WorkloadRegistry::instance().make(e.workload)->build(e.params);
  const TensorId pre = mlp.find_tensor("fc0.bias"), out = mlp.find_tensor("fc0.relu");
  ASSERT_GE(pre, 0);
  ASSERT_GE(out, 0);
  std::vector<std::string> readers;
  for (OpId c : mlp.consumers(pre)) readers.push_back(mlp.op(c).name + " " + phase_name(mlp.op(c).phase));
  EXPECT_EQ(readers, std::vector<std::string>{"fc0.relu forward"});  // no backward reader: not kept
  const Op& mask = mlp.op(mlp.producer(mlp.find_tensor("fc0.relu.dx")));
  EXPECT_EQ(mask.kind, OpKind::ReluGrad);
  EXPECT_EQ(mask.inputs.at(1), out);
}

TEST(GradientsTest, LayerNorm) {
  check_gradients("layer_norm", [](GraphBuilder& b) {
    return b.layer_norm(b.param("x", {6, 8}), b.param("gamma", {8}), b.param("beta", {8}), "ln");
  });
}

TEST(GradientsTest, RmsNorm) {
  check_gradients("rms_norm", [](GraphBuilder& b) { return b.rms_norm(b.param("x", {6, 8}), b.param("gamma", {8}), "rms"); });
}

TEST(GradientsTest, Rope) {
  // Positions along dimension 1 (5 of them), 3 heads of width 6: pairs (i, i + 3) rotate.
  check_gradients("rope", [](GraphBuilder& b) { return b.rope(b.param("q", {2, 5, 3, 6}), "rope"); });
}

TEST(GradientsTest, Convert) {
  // The cast of mixed precision: its gradient is dy in the input's type. fp32 -> fp32 and bf16 -> fp32 are exact
  // (bf16 -> fp32 rounds the gradient back to bf16, within the tolerance); an fp32 -> bf16 output is a step
  // function at h's scale, so its rule is checked by the structure tests (mixed_precision_test.cpp).
  for (DType in : {DType::F32, DType::BF16})
    check_gradients(std::string("convert from ") + dtype_name(in), [in](GraphBuilder& b) {
      TensorId x = b.graph().add_tensor({"x", {4, 6}, in, TensorRole::Parameter});
      return b.emit("cast", OpKind::Convert, Phase::Forward, {x}, {4, 6}, DType::F32, TensorRole::Activation);
    });
}

TEST(GradientsTest, Softmax) {
  check_gradients("softmax", [](GraphBuilder& b) { return b.softmax(b.param("s", {2, 5, 5}), 0.7, false, "sm"); });
  check_gradients("causal", [](GraphBuilder& b) { return b.softmax(b.param("s", {2, 5, 5}), 0.7, true, "sm"); });
}

TEST(GradientsTest, FlashAttention) {
  // Blocks smaller than the sequence (5 positions in blocks of 2 forward, 3 x 2 backward: partial blocks, the online
  // softmax rescaling between key blocks, diagonal blocks masked in part), causal or not, with one key/value head
  // per query head and with grouped queries (2 key/value heads of 2 query heads each).
  OpAttrs::Blocks blocks;
  blocks.q = 2, blocks.kv = 2, blocks.q_bwd = 3, blocks.kv_bwd = 2;
  for (bool causal : {false, true}) {
    check_gradients(causal ? "causal" : "full", [&](GraphBuilder& b) {
      return b.flash_attention(b.param("q", {2, 5, 3, 4}), b.param("k", {2, 5, 3, 4}), b.param("v", {2, 5, 3, 4}),
                               0.6, causal, blocks, "attn");
    });
    check_gradients(causal ? "grouped causal" : "grouped", [&](GraphBuilder& b) {
      return b.flash_attention(b.param("q", {1, 5, 2, 2, 4}), b.param("k", {1, 5, 2, 4}), b.param("v", {1, 5, 2, 4}),
                               0.6, causal, blocks, "attn");
    });
  }
}

TEST(GradientsTest, Embedding) {
  check_gradients("embedding", [](GraphBuilder& b) {
    return b.embedding(b.param("table", {7, 4}), b.input("ids", {3, 3}, DType::I32), "emb");
  });
}

TEST(GradientsTest, SoftmaxCrossEntropy) {
  check_gradients("cross_entropy", [](GraphBuilder& b) {
    return b.softmax_cross_entropy(b.param("logits", {6, 5}), b.label("labels", {6}), "loss");
  }, true);
}

// A crop (piece 0: BERT's first token, the rows of its position table a sequence uses): the gradient pads with zeros.
TEST(GradientsTest, Crop) {
  check_gradients("crop", [](GraphBuilder& b) { return b.crop(b.param("x", {3, 5, 4}), 1, 2, "first"); });
  check_gradients("crop rows", [](GraphBuilder& b) { return b.crop(b.param("x", {6, 4}), 0, 3, "rows"); });
}

// The rows at given positions of each example (BERT's masked positions): the gradient scatters them back.
TEST(GradientsTest, GatherPositions) {
  check_gradients("gather_positions", [](GraphBuilder& b) {
    return b.gather_positions(b.param("x", {3, 7, 4}), b.input("positions", {3, 5}, DType::I32), "gather");
  });
}

// The Transformer's sinusoidal position signal: its gradient is dy.
TEST(GradientsTest, TimingSignal) {
  check_gradients("timing_signal", [](GraphBuilder& b) { return b.timing_signal(b.param("x", {2, 5, 6}), "signal"); });
}

// GNMT's normalized Bahdanau scores: the gradients of the queries, keys, bias, direction v and gain g.
TEST(GradientsTest, AdditiveAttention) {
  check_gradients("additive_attention", [](GraphBuilder& b) {
    return b.additive_attention(b.param("q", {2, 3, 4}), b.param("k", {2, 5, 4}), b.param("bias", {4}),
                                b.param("v", {4}), b.param("g", {1}), "scores");
  });
}

// An LSTM layer as one scanned kernel, forwards and backwards in time: the gradients of the input projection and of
// the recurrent weight through every step.
TEST(GradientsTest, Lstm) {
  for (bool reverse : {false, true})
    check_gradients(reverse ? "lstm backwards" : "lstm", [reverse](GraphBuilder& b) {
      return b.lstm(b.param("xw", {2, 4, 4, 3}), b.param("wh", {3, 4, 3}), reverse, "lstm");
    });
}

TEST(GradientsTest, Reshape) {
  check_gradients("reshape", [](GraphBuilder& b) { return b.reshape(b.param("x", {4, 6, 2}), {2, 12, 2}, "rs"); });
}

// Top-2 gating: L = sum(combine * R) + aux_loss (the aux output is a loss term, its gradient taken as 1). Routing is
// piecewise constant in the logits: elements whose +-h perturbation changes any routing decision are skipped.
TEST(GradientsTest, Top2Gating) {
  for (bool sample : {false, true}) {
    SCOPED_TRACE(sample ? "random routing" : "all");
    ModelGraph g("grad");
    GraphBuilder b(g, DType::F32);
    // 2 groups of 6 tokens, 4 experts, capacity 2: some assignments are dropped. alpha 20 makes the aux loss's
    // gradient (alpha c_e / (G E S^2) through the softmax) as large as the combine weights'.
    TensorId logits = b.param("logits", {2, 6, 4});
    GraphBuilder::Gating gate = b.top2_gating(logits, 2, 20.0, sample, 11, "gating");
    const Op op = g.op(g.producer(gate.combine));
    TensorId r = g.add_tensor({"R", g.tensor(gate.combine).shape, DType::F32, TensorRole::Input});
    std::vector<TensorId> grads = find_op_kind(op.kind)->grad(b, op, {r, -1, gate.aux_loss, -1});
    ASSERT_EQ(grads.size(), 1u);
    ASSERT_GE(grads[0], 0);
    TensorStore s;
    randomise(g, s, 5);
    for (float& x : s.get_mut(logits).data) x *= 2;  // gates far from uniform
    run_reference(g, s);
    const std::vector<float> analytic = s.get(grads[0]).data;
    const std::vector<float> routes = s.get(gate.routes).data;
    bool rerouted = false;  // a perturbation moved an assignment: no derivative there
    auto objective = [&]() {
      run_op(g, op, s);
      rerouted = rerouted || s.get(gate.routes).data != routes;
      double l = s.get(gate.aux_loss).data[0];
      const Tensor& c = s.get(gate.combine);
      for (size_t i = 0; i < c.data.size(); ++i) l += static_cast<double>(c.data[i]) * s.get(r).data[i];
      return l;
    };
    std::vector<float>& xs = s.get_mut(logits).data;
    const double h = 1e-2;
    int checked = 0, dropped = 0;
    for (float v : routes) dropped += v == -1.0f;
    EXPECT_GT(dropped, 0) << "capacity 2 should drop assignments";
    for (size_t e = 0; e < xs.size(); ++e) {
      rerouted = false;
      const double numeric = central_difference(xs, e, h, objective);
      if (rerouted) continue;
      EXPECT_NEAR(analytic[e], numeric, 2e-3 + 2e-2 * std::fabs(numeric)) << "element " << e;
      ++checked;
    }
    EXPECT_GT(checked, 36);  // most of the 48 logits
  }
}

// EfficientNet's pieces: a depthwise convolution (3x3 stride 2, SAME's odd padding after), sigmoid, and the
// squeeze-and-excitation scale of a map by a per-example, per-feature gate.
TEST(GradientsTest, DepthwiseSigmoidAndChannelScale) {
  check_gradients("depthwise 3x3 stride 2", [](GraphBuilder& b) {
    OpAttrs::Window w;
    w.sh = w.sw = 2;
    w.pb = w.pr = 1;
    return b.depthwise_conv2d(b.param("x", {2, 6, 5, 3}), b.param("w", {3, 3, 3}), w, "dw");
  });
  check_gradients("depthwise 5x5", [](GraphBuilder& b) {
    OpAttrs::Window w;
    w.pt = w.pb = w.pl = w.pr = 2;
    return b.depthwise_conv2d(b.param("x", {1, 4, 4, 2}), b.param("w", {5, 5, 2}), w, "dw");
  });
  check_gradients("sigmoid", [](GraphBuilder& b) { return b.sigmoid(b.param("x", {5, 8}), "sigmoid"); });
  check_gradients("channel_scale", [](GraphBuilder& b) {
    return b.channel_scale(b.param("x", {2, 3, 2, 4}), b.param("s", {2, 4}), "scale");
  });
}

// BoTNet's relative position logits of a 3 x 2 map (2 heads) and the Vision Transformer's class token.
TEST(GradientsTest, RelativeLogitsAndClassToken) {
  check_gradients("rel_pos_logits", [](GraphBuilder& b) {
    return b.rel_pos_logits(b.param("rh", {2, 2, 6, 5}), b.param("rw", {2, 2, 6, 3}), "rel");
  });
  check_gradients("prepend_token", [](GraphBuilder& b) {
    return b.prepend_token(b.param("x", {2, 3, 4}), b.param("t", {4}), "cls");
  });
}

TEST(GradientsTest, EveryDifferentiableKindIsCovered) {
  // The forward kinds with a gradient rule; a new one must get a finite-difference case above.
  std::vector<OpKind> covered = {OpKind::MatMul, OpKind::Add, OpKind::Scale, OpKind::BiasAdd, OpKind::Relu,
                                 OpKind::Gelu, OpKind::LayerNorm, OpKind::Softmax,
                                 OpKind::Embedding, OpKind::SoftmaxCrossEntropy, OpKind::Reshape,
                                 OpKind::Top2Gating, OpKind::Mul, OpKind::Silu, OpKind::RmsNorm, OpKind::Rope, OpKind::Convert,
                                 OpKind::FlashAttention, OpKind::Slice, OpKind::Tanh, OpKind::GatherPositions,
                                 OpKind::TimingSignal, OpKind::AdditiveAttention, OpKind::LstmScan,
                                 // tests/unit/cnn_ops_test.cpp
                                 OpKind::Conv2d, OpKind::MaxPool, OpKind::AvgPool, OpKind::BatchNormStats,
                                 OpKind::BatchNormApply,
                                 // tests/unit/amoebanet_test.cpp
                                 OpKind::Concat,
                                 // DepthwiseSigmoidAndChannelScale
                                 OpKind::DepthwiseConv2d, OpKind::Sigmoid, OpKind::ChannelScale,
                                 // tests/unit/ssd_test.cpp
                                 OpKind::AnchorCrossEntropy, OpKind::MultiboxLoss,
                                 // RelativeLogitsAndClassToken
                                 OpKind::RelPosLogits, OpKind::PrependToken};
  for (int k = 0; k <= static_cast<int>(OpKind::Traffic); ++k) {
    const OpKindDef* d = find_op_kind(static_cast<OpKind>(k));
    ASSERT_NE(d, nullptr) << "op kind " << k << " has no definition";
    if (d->grad) {
      EXPECT_NE(std::find(covered.begin(), covered.end(), d->kind), covered.end()) << d->name << " has no check";
    }
  }
}
