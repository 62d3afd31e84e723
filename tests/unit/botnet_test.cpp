// BoTNet (workloads/models/botnet.cpp) and its relative position logits (workloads/ops/rel_pos_logits.cpp): the op
// against the reference implementation's relative_logits and rel_to_abs (pad, reshape, slice, tile, transpose)
// written out below, its gradient as the op's adjoint, its cost by hand; the BoT block's structure; the parameter
// counts of BoT50 and BoTNet-S1 T3..T7 (seed-models.md section 6a.2's hand counts); BoT50's forward multiply-adds
// by hand; the located errors of bad input; and the step reproduced by data parallel (per-replica batch norm), with
// weight-update sharding, fsdp, Megatron's head split of c5's attention (alone and x data) and GPipe (alone and x
// data); a convolutional network without rules under spmd is a located error.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/plan_steps.h"
#include "workloads/builder.h"
#include "workloads/op_def.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

ModelGraph build(const std::string& yaml) { return one_chip_graph(yaml, "botnet.yaml"); }

double parameters(const ModelGraph& g) {
  double n = 0;
  for (const TensorInfo& t : g.tensors())
    if (t.role == TensorRole::Parameter) n += static_cast<double>(t.elements());
  return n;
}

// The reference's rel_to_abs of x [rows, L, 2L - 1] (rows = batch x heads x the other map dimension): a column of
// zeros after each row, flattened, L - 1 zeros after, viewed as [L + 1, 2L - 1], and the first L rows' last L
// columns kept.
std::vector<double> rel_to_abs(const std::vector<double>& x, int64_t rows, int64_t L) {
  std::vector<double> out(static_cast<size_t>(rows * L * L));
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> flat;
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t m = 0; m < 2 * L - 1; ++m) flat.push_back(x[static_cast<size_t>((r * L + i) * (2 * L - 1) + m)]);
      flat.push_back(0);
    }
    for (int64_t k = 0; k < L - 1; ++k) flat.push_back(0);
    for (int64_t i = 0; i < L; ++i)
      for (int64_t j = 0; j < L; ++j)
        out[static_cast<size_t>((r * L + i) * L + j)] = flat[static_cast<size_t>(i * (2 * L - 1) + L - 1 + j)];
  }
  return out;
}

double at(const Tensor& t, int64_t i) { return t.data[static_cast<size_t>(i)]; }

}  // namespace

// relative_logits as the reference computes it, on a 3 x 2 map (H != W, so a swapped axis shows), 2 heads, 2
// examples: the width logits rel_to_abs'd per map row and tiled over the key rows, the height logits of the
// transposed map rel_to_abs'd and tiled over the key columns, then transposed back and added. The op computes the
// same from the queries' products with the two embeddings, and its gradient is its adjoint (a linear map):
// <dout, op(rh, rw)> = <drh, rh> + <drw, rw>.
TEST(BotNetTest, RelativeLogitsAreTheReferenceRelToAbs) {
  const int64_t B = 2, N = 2, H = 3, W = 2, S = H * W;
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  const TensorId rh = b.param("rh", {B, N, S, 2 * H - 1});
  const TensorId rw = b.param("rw", {B, N, S, 2 * W - 1});
  const TensorId y = b.rel_pos_logits(rh, rw, "rel");
  EXPECT_EQ(g.tensor(y).shape, (std::vector<int64_t>{B, N, S, S}));
  const TensorId dy = b.param("dy", {B, N, S, S});
  const TensorId drh = g.add_tensor({"drh", {B, N, S, 2 * H - 1}, DType::F32, TensorRole::Gradient});
  const TensorId drw = g.add_tensor({"drw", {B, N, S, 2 * W - 1}, DType::F32, TensorRole::Gradient});
  Op grad;
  grad.name = "rel.grad";
  grad.kind = OpKind::RelPosLogitsGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {dy};
  grad.outputs = {drh, drw};
  g.add_op(grad);
  TensorStore st;
  st.resize(g.num_tensors());
  auto filled = [](std::vector<int64_t> shape, double seed) {
    Tensor t(std::move(shape));
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(std::sin(0.37 * double(i) + seed));
    return t;
  };
  st.put(rh, filled({B, N, S, 2 * H - 1}, 1));
  st.put(rw, filled({B, N, S, 2 * W - 1}, 2));
  st.put(dy, filled({B, N, S, S}, 3));
  run_op(g, g.op(g.producer(y)), st);
  run_op(g, producer(g, "drh"), st);
  const Tensor &a = st.get(rh), &c = st.get(rw), &out = st.get(y);
  // Width: logits [B, N, H (x), W (y), 2W - 1] -> rel_to_abs over rows (b, n, x) -> [.., x, y, q], tiled over p.
  std::vector<double> wl, hl;
  for (int64_t i = 0; i < B * N * S * (2 * W - 1); ++i) wl.push_back(at(c, i));
  const std::vector<double> wabs = rel_to_abs(wl, B * N * H, W);
  // Height: the map transposed, [B, N, W (y), H (x), 2H - 1] -> rel_to_abs over rows (b, n, y) -> [.., y, x, p].
  for (int64_t bn = 0; bn < B * N; ++bn)
    for (int64_t yy = 0; yy < W; ++yy)
      for (int64_t x = 0; x < H; ++x)
        for (int64_t m = 0; m < 2 * H - 1; ++m) hl.push_back(at(a, ((bn * S) + x * W + yy) * (2 * H - 1) + m));
  const std::vector<double> habs = rel_to_abs(hl, B * N * W, H);
  for (int64_t bn = 0; bn < B * N; ++bn)
    for (int64_t x = 0; x < H; ++x)
      for (int64_t yy = 0; yy < W; ++yy)
        for (int64_t p = 0; p < H; ++p)
          for (int64_t q = 0; q < W; ++q) {
            const double want = wabs[static_cast<size_t>(((bn * H + x) * W + yy) * W + q)] +
                                habs[static_cast<size_t>(((bn * W + yy) * H + x) * H + p)];
            EXPECT_NEAR(at(out, ((bn * S) + x * W + yy) * S + p * W + q), want, 1e-6) << bn << x << yy << p << q;
          }
  double lhs = 0, rhs = 0;
  for (size_t i = 0; i < out.data.size(); ++i) lhs += double(out.data[i]) * st.get(dy).data[i];
  for (size_t i = 0; i < a.data.size(); ++i) rhs += double(a.data[i]) * st.get(drh).data[i];
  for (size_t i = 0; i < c.data.size(); ++i) rhs += double(c.data[i]) * st.get(drw).data[i];
  EXPECT_NEAR(lhs, rhs, 1e-4);
  // An offset no query reaches gets nothing: query (0, 0) sees height offsets 0..H - 1 only (m >= H - 1).
  EXPECT_EQ(st.get(drh).data[0], 0.0f);
  EXPECT_EQ(st.get(drh).data[1], 0.0f);
}

// Costs by hand for bf16 rh [2, 4, 196, 27], rw [2, 4, 196, 27] (a 14 x 14 map, BoT50's first c5 block, batch 2):
// forward one add per logit (2 x 4 x 196^2 of them), reading both products and writing the logits, fusible; the
// gradient two adds per logit and a cross-lane sum per row of 14 keys, a reduction.
TEST(BotNetTest, RelativeLogitsCostByHand) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::BF16);
  const TensorId rh = b.param("rh", {2, 4, 196, 27}, DType::BF16);
  const TensorId rw = b.param("rw", {2, 4, 196, 27}, DType::BF16);
  const TensorId y = b.rel_pos_logits(rh, rw, "rel");
  b.backward(b.softmax_cross_entropy(b.reshape(y, {2, 4 * 196 * 196}, "flat"), b.label("l", {2}), "loss"));
  const double logits = 2.0 * 4 * 196 * 196, rel = 2.0 * 4 * 196 * 27;
  const OpCost f = op_cost(g, g.op(g.producer(y)));
  EXPECT_EQ(f.unit, Unit::Vpu);
  EXPECT_EQ(f.vector.elements, logits);
  EXPECT_EQ(f.vector.simple, 1);
  EXPECT_EQ(f.flops, logits);
  EXPECT_EQ(f.bytes_read, 2 * rel * 2);
  EXPECT_EQ(f.bytes_written, logits * 2);
  EXPECT_TRUE(f.fusible);
  const Op& grad = producer(g, "rh.grad");
  EXPECT_EQ(grad.kind, OpKind::RelPosLogitsGrad);
  const OpCost d = op_cost(g, grad);
  EXPECT_EQ(d.vector.elements, logits);
  EXPECT_EQ(d.vector.simple, 2);
  EXPECT_EQ(d.vector.reduce, 1);
  EXPECT_EQ(d.vector.reduce_row, 14);
  EXPECT_EQ(d.flops, 2 * logits);
  EXPECT_EQ(d.bytes_read, logits * 2);
  EXPECT_EQ(d.bytes_written, 2 * rel * 2);
  EXPECT_TRUE(d.reduction);
}

// BoT50's c5: each block's 3x3 convolution replaced by attention over the map, 4 heads of 128, q, k, v without
// biases and no output projection; relative embeddings [2H - 1, 128] per block (27 rows at 14 x 14, 13 at 7 x 7);
// the first block's 2x2/2 average pool after the attention and its stride-2 projection shortcut.
TEST(BotNetTest, BotBlocks) {
  const ModelGraph g = build("workload: {preset: botnet-50, batch: 2}\n");
  EXPECT_EQ(g.tensor(g.find_tensor("layer3.5.b.conv.w")).shape, (std::vector<int64_t>{3, 3, 256, 256}));
  EXPECT_LT(g.find_tensor("layer4.0.b.conv.w"), 0);
  EXPECT_EQ(g.tensor(g.find_tensor("layer4.0.mhsa.q.w")).shape, (std::vector<int64_t>{512, 4, 128}));
  EXPECT_LT(g.find_tensor("layer4.0.mhsa.q.b"), 0);
  EXPECT_LT(g.find_tensor("layer4.0.mhsa.o.w"), 0);
  EXPECT_EQ(g.tensor(g.find_tensor("layer4.0.mhsa.rel_h")).shape, (std::vector<int64_t>{27, 128}));
  EXPECT_EQ(g.tensor(g.find_tensor("layer4.0.mhsa.rel_w")).shape, (std::vector<int64_t>{27, 128}));
  EXPECT_EQ(g.tensor(g.find_tensor("layer4.2.mhsa.rel_h")).shape, (std::vector<int64_t>{13, 128}));
  EXPECT_EQ(g.tensor(g.find_tensor("layer4.0.mhsa.scores")).shape, (std::vector<int64_t>{2, 4, 196, 196}));
  const Op& logits = producer(g, "layer4.0.mhsa.logits");
  EXPECT_EQ(input_name(g, logits, 0), "layer4.0.mhsa.scores");
  EXPECT_EQ(input_name(g, logits, 1), "layer4.0.mhsa.rel");
  const Op& rel = producer(g, "layer4.0.mhsa.rel");
  EXPECT_EQ(rel.kind, OpKind::RelPosLogits);
  EXPECT_EQ(input_name(g, rel, 0), "layer4.0.mhsa.rel_h.logits");
  EXPECT_EQ(input_name(g, producer(g, "layer4.0.mhsa.rel_h.logits"), 0), "layer4.0.mhsa.q");
  EXPECT_DOUBLE_EQ(producer(g, "layer4.0.mhsa.softmax").attrs.alpha, 1 / std::sqrt(128.0));
  const Op& pool = producer(g, "layer4.0.mhsa.pool");
  EXPECT_EQ(pool.kind, OpKind::AvgPool);
  EXPECT_EQ(input_name(g, pool, 0), "layer4.0.mhsa.map");
  EXPECT_EQ(g.tensor(pool.outputs[0]).shape, (std::vector<int64_t>{2, 7, 7, 512}));
  EXPECT_EQ(input_name(g, producer(g, "layer4.0.b.bn"), 0), "layer4.0.mhsa.pool");
  EXPECT_EQ(producer(g, "layer4.0.down.conv").attrs.window.sh, 2);
  EXPECT_LT(g.find_tensor("layer4.1.mhsa.pool"), 0);
  EXPECT_EQ(producer(g, "layer4.2.out").kind, OpKind::Relu);
  EXPECT_LT(g.find_tensor("layer4.0.se.gate"), 0);
  // BoTNet-S1: stride 1 (16 x 16 at 256 pixels, no pool), SiLU, squeeze-and-excitation of 2048 / 16 = 128.
  const ModelGraph t = build("workload: {preset: botnet-s1-t4, batch: 1}\n");
  EXPECT_EQ(t.tensor(t.find_tensor("layer4.0.mhsa.scores")).shape, (std::vector<int64_t>{1, 4, 256, 256}));
  EXPECT_LT(t.find_tensor("layer4.0.mhsa.pool"), 0);
  EXPECT_EQ(producer(t, "layer4.5.out").kind, OpKind::Silu);
  EXPECT_EQ(t.tensor(t.find_tensor("layer4.5.se.reduce.w")).shape, (std::vector<int64_t>{2048, 128}));
  EXPECT_EQ(t.tensor(t.find_tensor("layer1.0.se.reduce.w")).shape, (std::vector<int64_t>{256, 16}));
  EXPECT_EQ(input_name(t, producer(t, "layer4.5.add"), 0), "layer4.5.se.scale");
  EXPECT_LT(t.find_tensor("layer4.6.a.conv"), 0);
}

namespace {

// The trainable count by hand, independent of the builder: the stem 7 x 7 x 3 x 64 and its batch norm; per block
// the 1x1 to the width, the 3x3 (or q, k, v 3 w^2 and the relative embeddings 2 (2L - 1) 128 at map side L), the
// 1x1 to 4 w, a batch norm (2 features) after each, the projection shortcut where the shape changes, and
// squeeze-and-excitation (2 (4w)(4w / 16) weights, 4w / 16 + 4w biases); the classifier with its bias.
double hand_count(const std::vector<int>& blocks, int size, int c5_stride, bool se, bool se_bot) {
  double n = 7 * 7 * 3 * 64 + 2 * 64, cin = 64;
  int side = size / 4;
  for (int st = 0; st < 4; ++st) {
    const double w = 64 << st, cout = 4 * w;
    for (int blk = 0; blk < blocks[st]; ++blk) {
      const int stride = blk == 0 && st > 0 ? (st == 3 ? c5_stride : 2) : 1;
      n += cin * w + 2 * w + w * cout + 2 * cout + 2 * w;
      n += st == 3 ? 3 * w * w + 2 * (2 * side - 1) * 128.0 : 9 * w * w;
      if (cin != cout || stride != 1) n += cin * cout + 2 * cout;
      if (se && (st < 3 || se_bot)) n += 2 * cout * (cout / 16) + cout / 16 + cout;
      side /= stride;
      cin = cout;
    }
  }
  return n + 2048 * 1000 + 1000;
}

}  // namespace

// seed-models.md 6a.2: BoT50 at 224 is ResNet-50 (25,557,032) less three 3x3 convolutions of 512 (2,359,296 each),
// plus three q, k, v (786,432 each), the first block's relative embeddings at 14 x 14 (2 x 27 x 128) and the
// others' at 7 x 7 (2 x 13 x 128 each): 20,852,008 (the paper: 20.8M). BoTNet-S1 T3..T7 (blocks [3, 4, 6, 6],
// [3, 4, 23, 6], [3, 4, 23, 12], [3, 4, 6, 12], [3, 4, 23, 12]; at 224, 256, 256, 256 and 384 pixels, the
// resolutions whose embeddings give seed-models.md's hand counts): 33.66 / 54.90 / 75.45 / 54.21 / 75.50M with
// squeeze-and-excitation in every block (the presets, the paper's convention: 33.5 / 54.7 / 75.1 / 53.9 / 75.1M),
// 30.50 / 51.75 / 69.13 / 47.89 / 69.18M with it in the ResNet blocks only (NZ99's 30.4 / 51.6 / 69.0 / 47.8 /
// 69.0M).
TEST(BotNetTest, ParameterCounts) {
  EXPECT_EQ(25557032.0 - 3 * 2359296 + 3 * 786432 + 2 * 27 * 128 + 2 * 2 * 13 * 128, 20852008);
  EXPECT_EQ(hand_count({3, 4, 6, 3}, 224, 2, false, false), 20852008);
  EXPECT_EQ(parameters(build("workload: {preset: botnet-50, batch: 1}\n")), 20852008);
  struct T {
    const char* preset;
    std::vector<int> blocks;
    int size;
    double every, resnet_only;  // seed-models.md, millions
  };
  const T variants[] = {{"botnet-s1-t3", {3, 4, 6, 6}, 224, 33.66, 30.50},
                        {"botnet-s1-t4", {3, 4, 23, 6}, 256, 54.90, 51.75},
                        {"botnet-s1-t5", {3, 4, 23, 12}, 256, 75.45, 69.13},
                        {"botnet-s1-t6", {3, 4, 6, 12}, 256, 54.21, 47.89},
                        {"botnet-s1-t7", {3, 4, 23, 12}, 384, 75.50, 69.18}};
  const double exact[] = {33659480, 54904472, 75449240, 54210392, 75498392};
  for (size_t i = 0; i < std::size(variants); ++i) {
    const T& v = variants[i];
    SCOPED_TRACE(v.preset);
    const double every = hand_count(v.blocks, v.size, 1, true, true);
    const double resnet_only = hand_count(v.blocks, v.size, 1, true, false);
    EXPECT_EQ(every, exact[i]);
    EXPECT_NEAR(every, v.every * 1e6, 0.005e6);
    EXPECT_NEAR(resnet_only, v.resnet_only * 1e6, 0.005e6);
    EXPECT_EQ(parameters(build(std::string("workload: {preset: ") + v.preset + ", batch: 1}\n")), every);
    EXPECT_EQ(parameters(build(std::string("workload: {preset: ") + v.preset +
                               ", batch: 1, se_in_bot_blocks: false}\n")),
              resnet_only);
  }
}

// BoT50's forward multiply-adds of a 224-pixel image by hand: the stem 112^2 147 64; per bottleneck the 1x1 at the
// input's side, the 3x3 at the output's, the 1x1 to 4 w and a projection shortcut at the output's; in c5 instead of
// the 3x3, at the map of S = side^2 positions: q, k, v 3 S 512^2, the scores and the weighted values 2 S^2 512, the
// relative products 2 S 4 (2 side - 1) 128; the classifier 2048 x 1000: 4,024,557,568 (ResNet-50's 3x3
// convolutions of c5 were 7^2 9 512^2 each). Every op counts 2 per multiply-add, all of them on the MXU.
TEST(BotNetTest, BoT50MultiplyAddsPerImageByHand) {
  const ModelGraph g = build("workload: {preset: botnet-50, batch: 2}\n");
  double macs = 112.0 * 112 * 147 * 64, cin = 64, side = 56;
  const int blocks[] = {3, 4, 6, 3};
  for (int st = 0; st < 4; ++st) {
    const double w = 64 << st, cout = 4 * w;
    for (int blk = 0; blk < blocks[st]; ++blk) {
      const double out = blk == 0 && st > 0 ? side / 2 : side;
      macs += side * side * cin * w;
      if (st == 3) {
        const double S = side * side;
        macs += 3 * S * w * w + 2 * S * S * w + 2 * S * 4 * (2 * side - 1) * 128;
      } else {
        macs += out * out * 9 * w * w;
      }
      macs += out * out * w * cout;
      if (cin != cout || out != side) macs += out * out * cin * cout;
      side = out;
      cin = cout;
    }
  }
  macs += 2048.0 * 1000;
  EXPECT_EQ(macs, 4024557568);
  double forward = 0;
  for (const Op& op : g.ops()) {
    const OpCost c = op_cost(g, op);
    if (op.phase == Phase::Forward && c.unit == Unit::Mxu) forward += c.flops;
  }
  EXPECT_EQ(forward, 2 * 2 * macs);
}

namespace {

void expect_error(const std::string& yaml, Err id, const std::string& key, const std::string& words) {
  try {
    build(yaml);
    FAIL() << "accepted: " << key;
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), error_info(id).id) << e.what();
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(e.where().file, "botnet.yaml") << e.what();
    EXPECT_EQ(e.where().line, 2) << e.what();
  }
}

}  // namespace

TEST(BotNetTest, BadInputIsALocatedError) {
  expect_error("workload: {preset: botnet-50, batch: 2, image_size: 200}\n", Err::NotDivisible,
               "workload.image_size = 200 is not a multiple of 32", "choose 192 or 224");
  expect_error("workload: {preset: botnet-s1-t3, batch: 2, image_size: 200}\n", Err::NotDivisible,
               "workload.image_size = 200 is not a multiple of 16", "choose 192 or 208");
  expect_error("workload: {preset: botnet-50, batch: 2, heads: 3}\n", Err::NotDivisible,
               "workload.heads = 3 does not divide c5's width 512", "4 heads of 128");
  expect_error("workload: {preset: botnet-50, batch: 6, bn_batch: 4}\n", Err::NotDivisible,
               "workload.bn_batch = 4 does not divide workload.batch = 6", "choose a divisor");
  expect_error("workload: {preset: botnet-50, batch: 2, blocks: [3, 4, 6]}\n", Err::OutOfRange,
               "workload.blocks has 3 entries", "it must have 4");
}

namespace {

// A small BoTNet at full width: one block in c2..c4, c5's two (the first pooled), 64 x 64 images (c5's attention
// over 4 x 4, then 2 x 2), 4 images, 10 classes, fp32; `extra` adds keys.
std::string tiny(const std::string& extra, const std::string& blocks = "[1, 1, 1, 2]", int size = 64) {
  return "workload: {model: botnet, blocks: " + blocks + ", image_size: " + std::to_string(size) +
         ", classes: 10, batch: 4, dtype: fp32, learning_rate: 0.01" + extra + "}\n";
}

}  // namespace

// Data parallel over 4 replicas with the batch norm per replica (one image each), with weight-update sharding, and
// fsdp: each reproduces the single-device step (SGD with momentum); BoTNet-S1's block (stride 1, SiLU, SE; 32
// pixels, c5's attention over 2 x 2) too.
TEST(BotNetTest, StrategiesReproduceTheStep) {
  for (const std::string& s : {tiny(", bn_batch: 1") + "strategy: {name: data_parallel}\n",
                               tiny(", bn_batch: 1") + "strategy: {name: data_parallel, weight_update_sharding: true}\n",
                               tiny(", bn_batch: 1") + "strategy: {name: fsdp}\n",
                               tiny(", bn_batch: 1, c5_stride: 1, activation: silu, se_ratio: 0.0625",
                                    "[1, 1, 1, 1]", 32) +
                                   "strategy: {name: data_parallel}\n"}) {
    SCOPED_TRACE(s);
    expect_reproduces_the_step(plan_step(hardware("[4, 1]") + s));
  }
}

// Megatron over 4 chips: c5's attention splits by heads (one head of 128 a chip; q, k, v column-parallel), the
// relative embeddings, shared by the heads, stay whole. BoTNet has no output projection, so each block's heads are
// all-gathered into the map (B x H x W x 512 fp32: 4 x 4 x 4 x 512 x 4 B in the first block, before its pool; 4 x 2
// x 2 x 512 x 4 B in the second); backward, the tokens' gradient (the three projections' input gradients, partial
// over the heads) and the two embeddings' gradients are all-reduced ([2H - 1, 128] fp32: H = 4, then 2). Nothing
// else: the convolutions, batch norms and head run whole. The step is reproduced, alone, x data, and for
// BoTNet-S1's block (SE on c5's blocks, SiLU, stride 1).
TEST(BotNetTest, MegatronSplitsTheAttentionHeads) {
  const Step s = plan_step(hardware("[4, 1]") + tiny(", bn_batch: 4") + "strategy: {name: spmd}\n");
  const Program& p = s.plan.programs[0];
  const double map0 = 4 * 4 * 4 * 512 * 4.0, map1 = 4 * 2 * 2 * 512 * 4.0;
  EXPECT_EQ(collectives(p), sorted({ag("layer4.0.mhsa.map", "model", 3, map0 / 4, map0),
                                    ag("layer4.1.mhsa.map", "model", 3, map1 / 4, map1),
                                    ar("layer4.0.mhsa.tokens.grad", "model", map0),
                                    ar("layer4.1.mhsa.tokens.grad", "model", map1),
                                    ar("layer4.0.mhsa.rel_h.grad", "model", 7 * 128 * 4.0),
                                    ar("layer4.0.mhsa.rel_w.grad", "model", 7 * 128 * 4.0),
                                    ar("layer4.1.mhsa.rel_h.grad", "model", 3 * 128 * 4.0),
                                    ar("layer4.1.mhsa.rel_w.grad", "model", 3 * 128 * 4.0)}));
  EXPECT_EQ(local_tensor(p, "layer4.0.mhsa.q.w")->shape, (std::vector<int64_t>{512, 1, 128}));
  EXPECT_EQ(local_tensor(p, "layer4.0.mhsa.rel")->shape, (std::vector<int64_t>{4, 1, 16, 16}));
  expect_reproduces_the_step(s);
  expect_reproduces_the_step(plan_step(hardware("[4, 1]") + tiny(", bn_batch: 2") +
                                       "strategy: {name: [data_parallel, spmd]}\nmesh: {axes: [data, model], shape: "
                                       "[2, 2]}\n"));
  expect_reproduces_the_step(
      plan_step(hardware("[4, 1]") +
                tiny(", bn_batch: 4, c5_stride: 1, activation: silu, se_ratio: 0.0625", "[1, 1, 1, 1]", 32) +
                "strategy: {name: spmd}\n"));
}

// GPipe over 2 stages of BoTNet's blocks (2 micro-batches; the batch norm per example, which a micro-batch of 1
// image per replica allows), alone and x data: the moving averages, kept per example, are joined with each
// replica's micro-batches inside its rows.
TEST(BotNetTest, PipelineReproducesTheStep) {
  for (const std::string& strategy :
       {std::string("strategy: {name: pipeline, micro_batches: 2}\nmesh: {axes: [pipe], shape: [2]}\n"),
        std::string("strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], "
                    "shape: [2, 2]}\n")}) {
    SCOPED_TRACE(strategy);
    const Step s = plan_step(hardware(strategy.find("data") != std::string::npos ? "[4, 1]" : "[2, 1]") +
                             tiny(", bn_batch: 1") + strategy);
    EXPECT_EQ(s.plan.pipeline.stages, 2);
    expect_reproduces_the_step(s);
  }
}

// spmd on a convolutional network whose scheme has no rules for it (EfficientNet, ResNet, SSD, AmoebaNet; BoTNet's
// are its attention's) would run the whole step on every chip: an error at the strategy, naming what splits it.
TEST(BotNetTest, SpmdWithoutRulesIsALocatedError) {
  for (const char* w : {"workload: {model: resnet, depth: 18, image_size: 64, batch: 4, classes: 10}\n",
                        "workload: {model: botnet, blocks: [1, 1, 1, 2], image_size: 64, batch: 4, classes: 10}\n"}) {
    const std::string scheme = std::string(w).find("botnet") != std::string::npos ? ", scheme: 2d, spmd_axes: [a, b]}\n"
                                                                                   "mesh: {axes: [a, b], shape: [2, 2]" : "";
    try {
      plan_step(hardware("[4, 1]") + w + "strategy: {name: spmd" + scheme + "}\n");
      FAIL() << w;
    } catch (const Error& e) {
      EXPECT_EQ(e.err(), Err::StrategyMismatch) << e.what();
      EXPECT_NE(e.message().find("has no tensor-sharding rules for the"), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("strategy.spatial: true"), std::string::npos) << e.message();
      EXPECT_EQ(e.where().file, "plan.yaml") << e.what();
      EXPECT_EQ(e.where().line, 3) << e.what();
    }
  }
}
