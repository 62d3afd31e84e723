// The Vision Transformer (workloads/models/vit.cpp) as big_vision's vit.py builds it for "Better plain ViT
// baselines": the patch embedding as one matmul, the 2-D sin-cos position embedding by hand, the pre-LN blocks, global
// average pooling and the pre-logits head; the parameter counts of seed-models.md's hand counts; the forward FLOPs of
// an image by hand; AdamW's decay on the kernels alone; the located errors of bad shapes; and the step reproduced by
// data parallel, fsdp, Megatron tensor sharding and their compositions.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "tests/unit/plan_steps.h"
#include "workloads/builder.h"
#include "workloads/op_def.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// 2 blocks of width 16 (4 heads), MLP 32; 8 x 8 images in 4 x 4 patches (a 2 x 2 grid, 4 tokens of 48 pixels);
// 10 classes; 4 images; AdamW's decay 1e-4. `extra` (", key: value, ...") replaces or adds keys.
std::string vit(const std::string& extra = "") {
  std::vector<std::pair<std::string, std::string>> keys = {
      {"model", "vit"},   {"layers", "2"},       {"d_model", "16"},      {"heads", "4"},
      {"d_ff", "32"},     {"image_size", "8"},   {"patch_size", "4"},    {"classes", "10"},
      {"batch", "4"},     {"pre_logits", "true"}, {"dtype", "fp32"},     {"weight_decay", "0.0001"}};
  std::string rest = extra;
  while (!rest.empty()) {
    rest = rest.substr(rest.find_first_not_of(", "));
    const size_t colon = rest.find(':'), end = std::min(rest.find(','), rest.size());
    const std::string key = rest.substr(0, colon), value = rest.substr(colon + 2, end - colon - 2);
    auto it = std::find_if(keys.begin(), keys.end(), [&](const auto& k) { return k.first == key; });
    if (it != keys.end()) it->second = value;
    else keys.push_back({key, value});
    rest = rest.substr(end);
  }
  std::string w = "workload: {";
  for (size_t i = 0; i < keys.size(); ++i) w += (i ? ", " : "") + keys[i].first + ": " + keys[i].second;
  return w + "}\nrun: {fusion: none}\n";
}

ModelGraph build(const std::string& yaml) { return one_chip_graph(yaml, "vit.yaml"); }

double parameters(const ModelGraph& g) {
  double n = 0;
  for (const TensorInfo& t : g.tensors())
    if (t.role == TensorRole::Parameter) n += static_cast<double>(t.elements());
  return n;
}

// The key projection's bias has a zero gradient in exact arithmetic (softmax cancels q . b, as in BERT's test): its
// gradient and update are rounding noise in any run, so the comparisons leave them out.
bool key_bias(const std::string& name) { return name.find(".attn.k.b") != std::string::npos; }

}  // namespace

// Pre-LN: each sublayer reads the layer norm (epsilon 1e-6) of the residual stream and adds to it; attention is
// bidirectional with biases; the patches are one matmul [B, N, P P 3] x [P P 3, D] plus a bias; the fixed 2-D
// embedding of the 2 x 2 grid is added; the final norm's tokens are averaged over the grid, then the pre-logits
// layer (dense, tanh) and the head.
TEST(VitTest, PreLayerNormEncoderAndHead) {
  const ModelGraph g = build(vit());
  EXPECT_EQ(g.tensor(g.find_tensor("images")).shape, (std::vector<int64_t>{4, 4, 48}));
  EXPECT_EQ(g.tensor(g.find_tensor("embedding.w")).shape, (std::vector<int64_t>{48, 16}));
  const Op& emb = producer(g, "embedding");
  EXPECT_EQ(emb.kind, OpKind::MatMul);
  EXPECT_EQ(input_name(g, emb, 0), "images");
  const Op& pos = producer(g, "posemb");
  EXPECT_EQ(pos.kind, OpKind::TimingSignal);
  EXPECT_EQ(pos.attrs.count, 2);  // the grid's width
  EXPECT_EQ(input_name(g, pos, 0), "embedding.bias");
  const Op& ln1 = producer(g, "layer0.ln1");
  EXPECT_EQ(ln1.kind, OpKind::LayerNorm);
  EXPECT_EQ(ln1.attrs.eps, 1e-6);
  EXPECT_EQ(input_name(g, ln1, 0), "posemb");
  EXPECT_EQ(input_name(g, producer(g, "layer0.attn.q"), 0), "layer0.ln1");
  const Op& res = producer(g, "layer0.attn.residual");
  EXPECT_EQ(input_name(g, res, 0), "posemb");
  EXPECT_EQ(input_name(g, res, 1), "layer0.attn.o.bias");
  EXPECT_FALSE(producer(g, "layer0.attn.softmax").attrs.causal);
  EXPECT_EQ(input_name(g, producer(g, "layer0.ln2"), 0), "layer0.attn.residual");
  EXPECT_EQ(input_name(g, producer(g, "layer0.ffn.up"), 0), "layer0.ln2");
  EXPECT_EQ(producer(g, "layer0.ffn.gelu").kind, OpKind::Gelu);
  EXPECT_EQ(input_name(g, producer(g, "layer0.ffn.residual"), 0), "layer0.attn.residual");
  EXPECT_EQ(input_name(g, producer(g, "layer1.ln1"), 0), "layer0.ffn.residual");
  EXPECT_EQ(input_name(g, producer(g, "encoder_norm"), 0), "layer1.ffn.residual");
  const Op& pool = producer(g, "pool");
  EXPECT_EQ(pool.kind, OpKind::AvgPool);
  EXPECT_EQ(pool.attrs.window.kh, 2);
  EXPECT_EQ(pool.attrs.window.kw, 2);
  EXPECT_EQ(g.tensor(g.find_tensor("pool.rows")).shape, (std::vector<int64_t>{4, 16}));
  EXPECT_EQ(producer(g, "pre_logits.tanh").kind, OpKind::Tanh);
  EXPECT_EQ(input_name(g, producer(g, "head"), 0), "pre_logits.tanh");
  EXPECT_EQ(g.tensor(g.find_tensor("head.bias")).shape, (std::vector<int64_t>{4, 10}));
  // Without the pre-logits layer the head reads the pooled tokens; a learned table replaces the fixed embedding.
  const ModelGraph plain = build(vit(", pre_logits: false, posemb: learned"));
  EXPECT_LT(plain.find_tensor("pre_logits.w"), 0);
  EXPECT_EQ(input_name(plain, producer(plain, "head"), 0), "pool.rows");
  EXPECT_EQ(producer(plain, "posemb").kind, OpKind::BiasAdd);
  EXPECT_EQ(plain.tensor(plain.find_tensor("pos_embedding")).shape, (std::vector<int64_t>{4, 16}));
}

// big_vision's posemb_sincos_2d(h, w, width): y, x = mgrid[:h, :w]; omega = 1 / 1e4^(arange(width/4) / (width/4 - 1));
// per token [sin(x omega), cos(x omega), sin(y omega), cos(y omega)]. A 2 x 3 grid of width 8: omega = [1, 1e-4].
TEST(VitTest, SinCos2dEmbeddingByHand) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  const TensorId x = b.param("x", {1, 6, 8});
  const TensorId y = b.timing_signal(x, "y", 3);
  TensorStore s;
  s.resize(g.num_tensors());
  Tensor in({1, 6, 8});
  for (size_t i = 0; i < in.data.size(); ++i) in.data[i] = 0.25f;
  s.put(x, in);
  run_op(g, g.op(g.producer(y)), s);
  for (int token = 0; token < 6; ++token) {
    const double px = token % 3, py = token / 3;
    const std::vector<double> want = {std::sin(px), std::sin(1e-4 * px), std::cos(px), std::cos(1e-4 * px),
                                      std::sin(py), std::sin(1e-4 * py), std::cos(py), std::cos(1e-4 * py)};
    for (int f = 0; f < 8; ++f) EXPECT_NEAR(s.get(y).data[token * 8 + f], 0.25 + want[f], 1e-6) << token << " " << f;
  }
  // The signal is a constant: the fused add reads it beside x, and it costs one add per element.
  const OpCost c = op_cost(g, g.op(g.producer(y)));
  EXPECT_EQ(c.bytes_read, 2 * 6 * 8 * 4.0);
  EXPECT_EQ(c.bytes_written, 6 * 8 * 4.0);
}

// seed-models.md section 5.3, by hand: the patch kernel P P 3 D and its bias; per block two layer norms (2 x 2D),
// q, k, v, o with biases (4 (D D + D)) and the MLP with biases (2 D F + F + D); the final norm; the pre-logits layer
// (D D + D) and the head (D C + C). The fixed embedding has no parameters; a learned one has N D.
TEST(VitTest, ParameterCountsByHand) {
  auto count = [](double D, double F, bool pre_logits, bool learned) {
    const double N = 196, L = 12, C = 1000;
    const double block = 4 * D + 4 * (D * D + D) + 2 * D * F + F + D;
    return 16 * 16 * 3 * D + D + L * block + 2 * D + (pre_logits ? D * D + D : 0) + D * C + C +
           (learned ? N * D : 0);
  };
  EXPECT_EQ(count(384, 1536, true, false), 22122472);  // big_vision's layout, seed-models.md
  EXPECT_EQ(count(768, 3072, true, false), 87006184);
  auto built = [](const std::string& preset, const std::string& extra) {
    return parameters(build("workload: {preset: " + preset + ", batch: 1" + extra + "}\n"));
  };
  EXPECT_EQ(built("vit-s16", ""), 22122472);
  EXPECT_EQ(built("vit-b16", ""), 87006184);
  // Without the class token: a learned table of 196 rows, no pre-logits layer.
  EXPECT_EQ(built("vit-s16", ", posemb: learned, pre_logits: false"), count(384, 1536, false, true));
  // The original ViT's layout (seed-models.md): the class token (D) and its row of the position table (D) more.
  EXPECT_EQ(count(384, 1536, false, true) + 2 * 384, 22050664);
  EXPECT_EQ(count(768, 3072, false, true) + 2 * 768, 86567656);
  EXPECT_EQ(built("vit-s16", ", pool: cls, posemb: learned, pre_logits: false"), 22050664);
  EXPECT_EQ(built("vit-b16", ", pool: cls, posemb: learned, pre_logits: false"), 86567656);
  // With the fixed embedding the token gets no row (big_vision's pool_type tok): D more than the average pool.
  EXPECT_EQ(built("vit-s16", ", pool: cls"), 22122472 + 384);
}

// The class token: put first in every example's sequence (then the learned table of N + 1 rows added), the head
// reading the final norm's first position; the op and its gradient by hand on [2, 2, 3] (dx the positions after
// the first, dtoken the sum over the examples of the first position's gradient).
TEST(VitTest, ClassTokenByHand) {
  const ModelGraph g = build(vit(", pool: cls, posemb: learned"));
  const Op& cls = producer(g, "cls");
  EXPECT_EQ(cls.kind, OpKind::PrependToken);
  EXPECT_EQ(input_name(g, cls, 0), "embedding.bias");
  EXPECT_EQ(g.tensor(g.find_tensor("cls")).shape, (std::vector<int64_t>{4, 5, 16}));
  EXPECT_EQ(input_name(g, producer(g, "posemb"), 0), "cls");
  EXPECT_EQ(g.tensor(g.find_tensor("pos_embedding")).shape, (std::vector<int64_t>{5, 16}));
  EXPECT_EQ(g.tensor(g.find_tensor("layer0.attn.scores")).shape, (std::vector<int64_t>{4, 4, 5, 5}));
  EXPECT_EQ(input_name(g, producer(g, "pool"), 0), "encoder_norm");
  EXPECT_EQ(g.tensor(g.find_tensor("pool.rows")).shape, (std::vector<int64_t>{4, 16}));
  // With the fixed embedding the token comes after it.
  const ModelGraph f = build(vit(", pool: cls"));
  EXPECT_EQ(input_name(f, producer(f, "cls"), 0), "posemb");

  ModelGraph u("u");
  GraphBuilder b(u, DType::F32);
  const TensorId x = b.param("x", {2, 2, 3});
  const TensorId t = b.param("t", {3});
  const TensorId y = b.prepend_token(x, t, "y");
  b.backward(b.softmax_cross_entropy(b.reshape(y, {2, 9}, "flat"), b.label("l", {2}), "loss"));
  TensorStore st;
  st.resize(u.num_tensors());
  Tensor xv({2, 2, 3}), tv({3});
  xv.data = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  tv.data = {-1, -2, -3};
  st.put(x, xv);
  st.put(t, tv);
  run_op(u, u.op(u.producer(y)), st);
  EXPECT_EQ(st.get(y).data, (std::vector<float>{-1, -2, -3, 1, 2, 3, 4, 5, 6, -1, -2, -3, 7, 8, 9, 10, 11, 12}));
  const Op& grad = producer(u, "x.grad");
  EXPECT_EQ(grad.kind, OpKind::PrependTokenGrad);
  Tensor dy({2, 3, 3});
  for (size_t i = 0; i < dy.data.size(); ++i) dy.data[i] = static_cast<float>(i);
  st.put(grad.inputs[0], dy);
  run_op(u, grad, st);
  EXPECT_EQ(st.get(grad.outputs[0]).data, (std::vector<float>{3, 4, 5, 6, 7, 8, 12, 13, 14, 15, 16, 17}));
  EXPECT_EQ(st.get(grad.outputs[1]).data, (std::vector<float>{0 + 9, 1 + 10, 2 + 11}));
  // A copy through the vector unit: reads x and the token, writes y.
  const OpCost c = op_cost(u, u.op(u.producer(y)));
  EXPECT_EQ(c.bytes_read, (12 + 3) * 4.0);
  EXPECT_EQ(c.bytes_written, 18 * 4.0);
  EXPECT_TRUE(c.fusible);
}

// The forward's MXU FLOPs of one 224-pixel image of ViT-S/16, by hand: the patches 196 x 768 x 384; per block q, k,
// v, o (4 x 196 x 384^2), the scores and the weighted values (2 x 196^2 x 384) and the MLP (2 x 196 x 384 x 1536);
// pre-logits 384^2 and the head 384 x 1000 multiply-adds: 4.574e9 (seed-models.md: 4.57e9 MACs). The backward
// does twice the forward's, less the patches' input gradient (the images take none).
TEST(VitTest, FlopsPerImageByHand) {
  const ModelGraph g = build("workload: {preset: vit-s16, batch: 2}\n");
  double forward = 0, backward = 0;
  for (const Op& op : g.ops()) {
    const OpCost c = op_cost(g, op);
    if (c.unit != Unit::Mxu) continue;
    if (op.phase == Phase::Forward) forward += c.flops;
    if (op.phase == Phase::Backward) backward += c.flops;
  }
  const double N = 196, D = 384, F = 1536;
  const double patches = N * 768 * D;
  const double macs = patches + 12 * (4 * N * D * D + 2 * N * N * D + 2 * N * D * F) + D * D + D * 1000;
  EXPECT_EQ(forward, 2 * 2 * macs);
  EXPECT_NEAR(macs, 4.57e9, 0.01e9);
  EXPECT_EQ(backward, 2 * forward - 2 * 2 * patches);
}

// AdamW as big_vision applies it: the decoupled decay on the kernels (".*/kernel": the patch kernel, the
// projections, the MLP, pre-logits and head), none on biases, layer norms or a learned position table; by hand on
// one element: w' = w - lr m^ / (sqrt(v^) + eps) - wd w, with m^ = g and v^ = g^2 at step 1.
TEST(VitTest, AdamWDecaysTheKernelsOnly) {
  const ModelGraph g = build(vit(", posemb: learned"));
  std::map<std::string, double> decay;
  for (const Op& op : g.ops())
    if (op.phase == Phase::Optimizer && op.kind == OpKind::AdamUpdate)
      decay[g.tensor(op.inputs.front()).name] = op.attrs.weight_decay;
  for (const char* w : {"embedding.w", "layer0.attn.q.w", "layer1.attn.o.w", "layer0.ffn.w1", "pre_logits.w", "head.w"})
    EXPECT_EQ(decay.at(w), 1e-4) << w;
  for (const char* x : {"embedding.b", "pos_embedding", "layer0.attn.q.b", "layer0.ln1.gamma", "encoder_norm.beta",
                        "head.b", "pre_logits.b"})
    EXPECT_EQ(decay.at(x), 0) << x;

  ModelGraph u("u");
  GraphBuilder b(u, DType::F32);
  b.backward(b.softmax_cross_entropy(b.matmul(b.input("x", {1, 1}, DType::F32), b.param("v", {1, 2}), "y"),
                                     b.label("l", {1}), "loss"));
  OptimizerConfig cfg;
  cfg.kind = Optimizer::AdamW;
  cfg.learning_rate = 0.01;
  cfg.weight_decay = 0.1;
  b.optimizer(cfg);
  const Op* update = nullptr;
  for (const Op& op : u.ops())
    if (op.name == "v.update") update = &op;
  ASSERT_NE(update, nullptr);
  TensorStore s;
  s.resize(u.num_tensors());
  auto put = [&](const std::string& name, std::vector<float> v) {
    Tensor t({1, 2});
    t.data = std::move(v);
    s.put(u.find_tensor(name), t);
  };
  put("v", {2.0f, -1.0f});
  put("v.grad", {0.5f, -0.25f});
  put("v.m", {0, 0});
  put("v.v", {0, 0});
  run_op(u, *update, s);
  const auto& got = s.get(update->outputs[0]).data;
  EXPECT_NEAR(got[0], 2.0 - 0.01 * 0.5 / (0.5 + 1e-8) - 0.1 * 2.0, 1e-6);
  EXPECT_NEAR(got[1], -1.0 - 0.01 * -0.25 / (0.25 + 1e-8) - 0.1 * -1.0, 1e-6);
  // Two more vector operations per element than Adam's update: the decay's multiply and subtract.
  EXPECT_EQ(op_cost(u, *update).vector.simple, 14);
}

namespace {

void expect_error(const std::string& yaml, const std::string& key, const std::string& words) {
  try {
    build(yaml);
    FAIL() << "accepted: " << key;
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), error_info(Err::NotDivisible).id) << e.what();
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(e.where().file, "vit.yaml") << e.what();
    EXPECT_EQ(e.where().line, 2) << e.what();
  }
}

}  // namespace

TEST(VitTest, BadShapesAreLocatedErrors) {
  expect_error(vit(", patch_size: 3"), "workload.patch_size = 3 does not divide workload.image_size = 8",
               "multiple of the patch (6 or 9)");
  expect_error(vit(", d_model: 18, heads: 3"), "workload.d_model must be a multiple of 4, not 18", "posemb: learned");
  expect_error(vit(", heads: 3"), "workload.heads = 3", "each head gets d_model / heads");
  // A learned table has no such constraint.
  EXPECT_GT(parameters(build(vit(", d_model: 18, heads: 3, posemb: learned"))), 0);
}

// Megatron over 4 chips: the heads and the MLP's hidden units split (q, k, v biases with their heads), so each
// block all-reduces its attention output and its MLP output forward (B N D fp32 each); the patch embedding, norms,
// pooling and head stay whole.
TEST(VitTest, MegatronBlockCollectivesAndTheStep) {
  const Step s = plan_step(hardware("[4, 1]") + vit() + "strategy: {name: spmd}\n");
  const Program& p = s.plan.programs[0];
  const std::vector<std::string> all = collectives(p);
  const double act = 4 * 4 * 16 * 4.0;  // B N D fp32
  for (const char* t : {"layer0.attn.o", "layer0.ffn.down", "layer1.attn.o", "layer1.ffn.down"})
    EXPECT_NE(std::find(all.begin(), all.end(), ar(t, "model", act)), all.end()) << t;
  EXPECT_EQ(local_tensor(p, "layer0.attn.q.b")->shape, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(local_tensor(p, "layer0.ffn.w1")->shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(local_tensor(p, "embedding.w")->shape, (std::vector<int64_t>{48, 16}));
  expect_reproduces_the_step(s, key_bias);
}

// Data parallel (the paper's TPU v3-8 setup), with weight-update sharding, fsdp, data x model and a pipeline of 2
// stages reproduce the single-device step, with global-norm clipping at 1.0 as the recipe clips.
TEST(VitTest, StrategiesReproduceTheStep) {
  for (const std::string& strategy :
       {std::string("strategy: {name: data_parallel}\n"),
        std::string("strategy: {name: data_parallel, weight_update_sharding: true}\n"),
        std::string("strategy: {name: fsdp}\n"),
        std::string("strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: [2, 2]}\n"),
        std::string("strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], "
                    "shape: [2, 2]}\n")}) {
    SCOPED_TRACE(strategy);
    expect_reproduces_the_step(plan_step(hardware("[4, 1]") + vit(", clip_norm: 1.0") + strategy), key_bias);
  }
  // The learned table too, under fsdp (its rows split with the other weights).
  expect_reproduces_the_step(plan_step(hardware("[4, 1]") + vit(", posemb: learned") + "strategy: {name: fsdp}\n"),
                             key_bias);
  // The class token under data parallel (its gradient summed over the replicas), fsdp and Megatron.
  for (const char* strategy : {"strategy: {name: data_parallel}\n", "strategy: {name: fsdp}\n", "strategy: {name: spmd}\n"}) {
    SCOPED_TRACE(strategy);
    expect_reproduces_the_step(plan_step(hardware("[4, 1]") + vit(", pool: cls, posemb: learned") + strategy),
                               key_bias);
  }
}
