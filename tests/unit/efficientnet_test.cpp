// EfficientNet (workloads/models/efficientnet.cpp) and the op kinds its MBConv blocks add: the depthwise convolution
// against the dense convolution of a diagonal filter (forward, input and filter gradients) and its vector-unit cost
// by hand; sigmoid and the squeeze-and-excitation scale by hand; the block structure; the parameter counts of
// B0..B7 (seed-models.md's hand counts); B0's forward multiply-adds of a 224-pixel image by hand; the located
// errors of bad input; and the step reproduced by data parallel (per-replica and cross-replica batch norm) and fsdp.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/plan_steps.h"
#include "workloads/builder.h"
#include "workloads/op_def.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

ModelGraph build(const std::string& yaml) { return one_chip_graph(yaml, "efficientnet.yaml"); }

double parameters(const ModelGraph& g) {
  double n = 0;
  for (const TensorInfo& t : g.tensors())
    if (t.role == TensorRole::Parameter) n += static_cast<double>(t.elements());
  return n;
}

Tensor filled(std::vector<int64_t> shape, int seed) {
  Tensor t(std::move(shape));
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = static_cast<float>(std::sin(0.7 * double(i) + seed));
  return t;
}

void expect_near(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.data.size(), b.data.size());
  for (size_t i = 0; i < a.data.size(); ++i) EXPECT_NEAR(a.data[i], b.data[i], 1e-5) << i;
}

}  // namespace

// A depthwise convolution is the dense convolution whose filter is diagonal in its features: w'[i, j, c, c] =
// w[i, j, c], zero elsewhere. On a 3x3 stride-2 window with TensorFlow's SAME padding (odd: the extra row and column
// after), forward, input gradient and filter gradient (the diagonal of the dense one) agree with conv2d's kernels.
TEST(EfficientNetTest, DepthwiseConvolutionIsTheDiagonalDenseConvolution) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  const int64_t B = 2, H = 8, W = 6, C = 3;
  OpAttrs::Window win;
  win.sh = win.sw = 2;
  win.pt = win.pl = 0;
  win.pb = win.pr = 1;
  const TensorId x = b.param("x", {B, H, W, C});
  const TensorId w = b.param("w", {3, 3, C});
  const TensorId wd = b.param("wd", {3, 3, C, C});
  const TensorId y = b.depthwise_conv2d(x, w, win, "dw");
  const TensorId yd = b.conv2d(x, wd, win, "dense");
  EXPECT_EQ(g.tensor(y).shape, (std::vector<int64_t>{B, 4, 3, C}));
  const TensorId dy = b.param("dy", {B, 4, 3, C});
  const OpAttrs at = g.op(g.producer(y)).attrs;
  const TensorId dx = b.emit("dx", OpKind::DepthwiseConv2dInputGrad, Phase::Backward, {dy, w}, {B, H, W, C},
                             DType::F32, TensorRole::Gradient, at);
  const TensorId dw = b.emit("dwf", OpKind::DepthwiseConv2dFilterGrad, Phase::Backward, {x, dy}, {3, 3, C},
                             DType::F32, TensorRole::Gradient, at);
  const TensorId dxd = b.emit("dxd", OpKind::Conv2dInputGrad, Phase::Backward, {dy, wd}, {B, H, W, C}, DType::F32,
                              TensorRole::Gradient, at);
  const TensorId dwd = b.emit("dwd", OpKind::Conv2dFilterGrad, Phase::Backward, {x, dy}, {3, 3, C, C}, DType::F32,
                              TensorRole::Gradient, at);
  TensorStore s;
  s.resize(g.num_tensors());
  s.put(x, filled({B, H, W, C}, 1));
  const Tensor wv = filled({3, 3, C}, 2);
  Tensor dense({3, 3, C, C});
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t c = 0; c < C; ++c) dense.data[(t * C + c) * C + c] = wv.data[t * C + c];
  s.put(w, wv);
  s.put(wd, dense);
  s.put(dy, filled({B, 4, 3, C}, 3));
  for (TensorId t : {y, yd, dx, dw, dxd, dwd}) run_op(g, g.op(g.producer(t)), s);
  expect_near(s.get(y), s.get(yd));
  expect_near(s.get(dx), s.get(dxd));
  Tensor diag({3, 3, C});
  for (int64_t t = 0; t < 9; ++t)
    for (int64_t c = 0; c < C; ++c) diag.data[t * C + c] = s.get(dwd).data[(t * C + c) * C + c];
  expect_near(s.get(dw), diag);
}

// The cost on the vector unit, by hand, for a bf16 [2, 8, 8, 144] map stored features-minor (H, W, N, C: 144
// features on 256 lanes, the 2 examples on a tile of 2 sublanes): per tap a multiply and an add on each of the
// 8 * 8 * 2 * 256 stored elements; the model FLOPs 2 * 2 * 8 * 8 * 144 * 9; bytes: the stored map, the filter
// [3, 3, 144] tiled ((3, 144) on (4, 256) tiles), the stored output. The three kinds do the same work.
TEST(EfficientNetTest, DepthwiseCostOnTheVectorUnitByHand) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::BF16);
  OpAttrs::Window win;
  win.pt = win.pb = win.pl = win.pr = 1;
  const TensorId x = b.param("x", {2, 8, 8, 144}, DType::BF16);
  const TensorId w = b.param("w", {3, 3, 144}, DType::BF16);
  const TensorId y = b.depthwise_conv2d(x, w, win, "dw");
  const OpAttrs at = g.op(g.producer(y)).attrs;
  const TensorId dx = b.emit("dx", OpKind::DepthwiseConv2dInputGrad, Phase::Backward, {y, w}, {2, 8, 8, 144},
                             DType::BF16, TensorRole::Gradient, at);
  const TensorId dw = b.emit("dwf", OpKind::DepthwiseConv2dFilterGrad, Phase::Backward, {x, y}, {3, 3, 144},
                             DType::BF16, TensorRole::Gradient, at);
  for (TensorId t : {x, y, dx}) g.tensor(t).layout = Layout::Image;
  for (TensorId t : {w, dw}) g.tensor(t).layout = Layout::Tiled;
  const double map = 8 * 8 * 2 * 256 * 2.0, filter = 3 * 4 * 256 * 2.0;
  for (TensorId t : {y, dx, dw}) {
    const Op& op = g.op(g.producer(t));
    const OpCost c = op_cost(g, op);
    EXPECT_EQ(c.unit, Unit::Vpu) << op.name;
    EXPECT_EQ(c.vector.elements, 8 * 8 * 2 * 256) << op.name;
    EXPECT_EQ(c.vector.simple, 18) << op.name;
    EXPECT_EQ(c.flops, 2.0 * 2 * 8 * 8 * 144 * 9) << op.name;
    EXPECT_EQ(c.bytes_read, op.kind == OpKind::DepthwiseConv2dFilterGrad ? 2 * map : map + filter) << op.name;
    EXPECT_EQ(c.bytes_written, op.kind == OpKind::DepthwiseConv2dFilterGrad ? filter : map) << op.name;
  }
}

// sigmoid and its gradient from the result; the squeeze-and-excitation scale x[b, h, w, c] s[b, c] and its two
// gradients (dy s; the sum over positions of dy x), by hand on a [2, 1, 2, 2] map.
TEST(EfficientNetTest, SigmoidAndChannelScaleByHand) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  const TensorId x = b.param("x", {2, 1, 2, 2});
  const TensorId z = b.param("z", {2, 2});
  const TensorId s = b.sigmoid(z, "gate");
  const TensorId y = b.channel_scale(x, s, "scale");
  b.backward(b.softmax_cross_entropy(b.reshape(y, {2, 4}, "flat"), b.label("l", {2}), "loss"));
  TensorStore st;
  st.resize(g.num_tensors());
  Tensor xv({2, 1, 2, 2});
  xv.data = {1, 2, 3, 4, 5, 6, 7, 8};
  Tensor zv({2, 2});
  zv.data = {0, 1, -1, 2};
  st.put(x, xv);
  st.put(z, zv);
  run_op(g, g.op(g.producer(s)), st);
  run_op(g, g.op(g.producer(y)), st);
  auto sg = [](double v) { return 1 / (1 + std::exp(-v)); };
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(st.get(s).data[i], sg(zv.data[i]), 1e-7);
  for (int n = 0; n < 2; ++n)
    for (int p = 0; p < 2; ++p)
      for (int c = 0; c < 2; ++c)
        EXPECT_NEAR(st.get(y).data[(n * 2 + p) * 2 + c], xv.data[(n * 2 + p) * 2 + c] * sg(zv.data[n * 2 + c]), 1e-6);
  // The backward: dx by a channel scale of dy, ds by the sum over positions, dz = ds s (1 - s).
  const Op& ds = producer(g, "scale.ds");
  EXPECT_EQ(ds.kind, OpKind::ChannelScaleGrad);
  EXPECT_EQ(producer(g, "x.grad").kind, OpKind::ChannelScale);
  EXPECT_EQ(producer(g, "z.grad").kind, OpKind::SigmoidGrad);
  EXPECT_EQ(input_name(g, producer(g, "z.grad"), 1), "gate");
  Tensor dyv({2, 1, 2, 2});
  dyv.data = {0.5f, -1, 2, 0.25f, 1, 1, -2, 3};
  st.put(ds.inputs[0], dyv);
  run_op(g, ds, st);
  const Tensor& got = st.get(ds.outputs[0]);
  EXPECT_NEAR(got.data[0], 0.5 * 1 + 2 * 3, 1e-6);
  EXPECT_NEAR(got.data[1], -1 * 2 + 0.25 * 4, 1e-6);
  EXPECT_NEAR(got.data[2], 1 * 5 - 2 * 7, 1e-6);
  EXPECT_NEAR(got.data[3], 1 * 6 + 3 * 8, 1e-6);
  // Costs: sigmoid an exp, an add and a divide per element; the scale one multiply, its filter-like gradient a
  // multiply and an add per element of dy (a reduction over positions).
  const OpCost cs = op_cost(g, g.op(g.producer(s)));
  EXPECT_EQ(cs.vector.transcendental, 1);
  EXPECT_EQ(cs.vector.divide, 1);
  EXPECT_EQ(cs.vector.simple, 1);
  EXPECT_TRUE(cs.fusible);
  const OpCost cy = op_cost(g, g.op(g.producer(y)));
  EXPECT_EQ(cy.vector.elements, 8);
  EXPECT_EQ(cy.vector.simple, 1);
  EXPECT_EQ(cy.bytes_read, (8 + 4) * 4.0);
  const OpCost cd = op_cost(g, ds);
  EXPECT_EQ(cd.vector.simple, 2);
  EXPECT_TRUE(cd.reduction);
}

// B0's first blocks as efficientnet_model.py's MBConvBlock: the stem (3x3/2, 32, SAME: 224 -> 112), block 0 without
// expansion (e = 1), a depthwise 3x3 of the 32 stem features, SE of max(1, 32 / 4) = 8, the projection to 16 with
// no residual (32 != 16); block 1 expands 16 to 96, its depthwise is stride 2 (112 -> 56, SAME padding 0 before and
// 1 after), SE of 4 (its input 16 / 4); block 2 (24 -> 24, stride 1) adds its input. Swish is SiLU; batch norms
// epsilon 1e-3 and momentum 0.99; the head 1x1 to 1280 and the 1000-class dense layer.
TEST(EfficientNetTest, MBConvBlocks) {
  const ModelGraph g = build("workload: {preset: efficientnet-b0, batch: 2}\n");
  EXPECT_EQ(g.tensor(g.find_tensor("stem.conv")).shape, (std::vector<int64_t>{2, 112, 112, 32}));
  const Op& stem = producer(g, "stem.conv");
  EXPECT_EQ(stem.attrs.window.pt, 0);
  EXPECT_EQ(stem.attrs.window.pb, 1);
  EXPECT_EQ(producer(g, "stem.swish").kind, OpKind::Silu);
  EXPECT_EQ(producer(g, "stem.bn").attrs.eps, 1e-3);
  EXPECT_EQ(producer(g, "stem.bn").attrs.alpha, 0.99);
  EXPECT_LT(g.find_tensor("blocks.0.expand"), 0);
  EXPECT_EQ(input_name(g, producer(g, "blocks.0.depthwise"), 0), "stem.swish");
  EXPECT_EQ(g.tensor(g.find_tensor("blocks.0.depthwise.w")).shape, (std::vector<int64_t>{3, 3, 32}));
  EXPECT_EQ(g.tensor(g.find_tensor("blocks.0.se.reduce.w")).shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(g.tensor(g.find_tensor("blocks.0.se.expand.w")).shape, (std::vector<int64_t>{8, 32}));
  EXPECT_EQ(input_name(g, producer(g, "blocks.0.se.pool"), 0), "blocks.0.depthwise.swish");
  EXPECT_EQ(producer(g, "blocks.0.se.swish").kind, OpKind::Silu);
  EXPECT_EQ(producer(g, "blocks.0.se.gate").kind, OpKind::Sigmoid);
  const Op& scale = producer(g, "blocks.0.se.scale");
  EXPECT_EQ(input_name(g, scale, 0), "blocks.0.depthwise.swish");
  EXPECT_EQ(input_name(g, scale, 1), "blocks.0.se.gate");
  EXPECT_EQ(input_name(g, producer(g, "blocks.0.project"), 0), "blocks.0.se.scale");
  EXPECT_LT(g.find_tensor("blocks.0.add"), 0);
  EXPECT_EQ(g.tensor(g.find_tensor("blocks.1.expand.w")).shape, (std::vector<int64_t>{1, 1, 16, 96}));
  const Op& dw1 = producer(g, "blocks.1.depthwise");
  EXPECT_EQ(dw1.kind, OpKind::DepthwiseConv2d);
  EXPECT_EQ(dw1.attrs.window.sh, 2);
  EXPECT_EQ(dw1.attrs.window.pt, 0);
  EXPECT_EQ(dw1.attrs.window.pb, 1);
  EXPECT_EQ(g.tensor(dw1.outputs[0]).shape, (std::vector<int64_t>{2, 56, 56, 96}));
  EXPECT_EQ(g.tensor(g.find_tensor("blocks.1.se.reduce.w")).shape, (std::vector<int64_t>{96, 4}));
  const Op& add = producer(g, "blocks.2.add");
  EXPECT_EQ(input_name(g, add, 0), "blocks.2.project.bn");
  EXPECT_EQ(input_name(g, add, 1), "blocks.1.project.bn");
  EXPECT_EQ(g.tensor(g.find_tensor("head.conv.w")).shape, (std::vector<int64_t>{1, 1, 320, 1280}));
  EXPECT_EQ(g.tensor(g.find_tensor("fc.w")).shape, (std::vector<int64_t>{1280, 1000}));
  EXPECT_LT(g.find_tensor("blocks.16.depthwise"), 0);  // B0 has 16 blocks
  EXPECT_GE(g.find_tensor("blocks.15.depthwise"), 0);
  // The default optimizer is RMSProp, the reference's.
  int rmsprop = 0;
  for (const Op& op : g.ops()) rmsprop += op.kind == OpKind::RmsPropUpdate;
  int params = 0;
  for (const TensorInfo& t : g.tensors()) params += t.role == TensorRole::Parameter;
  EXPECT_EQ(rmsprop, params);
}

// seed-models.md section 6b.1's hand counts (trainable: convolutions, depthwise filters, SE dense layers with
// biases, batch-norm scales and offsets, the classifier and its bias), equal to mmcls's 5.29M and 7.79M for B0 and
// B1; the paper's Table 2 rounds them (5.3M ... 66M), except B2's 9.2M (the count is 9.11M).
TEST(EfficientNetTest, ParameterCountsOfB0ToB7) {
  const std::vector<double> counts = {5288548,  7794184,  9109994,  12233232,
                                      19341616, 30389784, 43040704, 66347960};
  for (size_t v = 0; v < counts.size(); ++v) {
    const std::string preset = "efficientnet-b" + std::to_string(v);
    EXPECT_EQ(parameters(build("workload: {preset: " + preset + ", batch: 1}\n")), counts[v]) << preset;
  }
}

// B0's forward multiply-adds of a 224-pixel image by hand, layer by layer with SAME padding: the stem 112^2 27 32;
// per block the expansion H^2 ci (6 ci), the depthwise H'^2 k^2 (6 ci), SE 2 (6 ci) se, the projection H'^2 (6 ci)
// co; the head 7^2 320 1280 and the classifier 1280 1000: 385,814,752 (seed-models.md: 0.386e9; the paper's
// "0.39B FLOPs" are these multiply-adds). Each op counts 2 per multiply-add, the depthwise convolutions on the
// vector unit, the rest on the MXU.
TEST(EfficientNetTest, B0MultiplyAddsPerImageByHand) {
  const ModelGraph g = build("workload: {preset: efficientnet-b0, batch: 2}\n");
  double macs = 112.0 * 112 * 27 * 32;
  double h = 112;
  struct S {
    int r, k, s, e, i, o;
  };
  for (const S st : {S{1, 3, 1, 1, 32, 16}, S{2, 3, 2, 6, 16, 24}, S{2, 5, 2, 6, 24, 40}, S{3, 3, 2, 6, 40, 80},
                     S{3, 5, 1, 6, 80, 112}, S{4, 5, 2, 6, 112, 192}, S{1, 3, 1, 6, 192, 320}})
    for (int blk = 0; blk < st.r; ++blk) {
      const double ci = blk == 0 ? st.i : st.o, ce = ci * st.e, se = std::max(1.0, std::floor(ci / 4));
      const double h2 = blk == 0 && st.s == 2 ? std::ceil(h / 2) : h;
      if (st.e != 1) macs += h * h * ci * ce;
      macs += h2 * h2 * st.k * st.k * ce + 2 * ce * se + h2 * h2 * ce * st.o;
      h = h2;
    }
  macs += 7.0 * 7 * 320 * 1280 + 1280.0 * 1000;
  EXPECT_EQ(macs, 385814752);
  double forward = 0, depthwise = 0;
  for (const Op& op : g.ops()) {
    if (op.phase != Phase::Forward) continue;
    if (op.kind != OpKind::Conv2d && op.kind != OpKind::DepthwiseConv2d && op.kind != OpKind::MatMul) continue;
    const double f = op_cost(g, op).flops;
    forward += f;
    if (op.kind == OpKind::DepthwiseConv2d) depthwise += f;
  }
  EXPECT_EQ(forward, 2 * 2 * macs);
  // The depthwise convolutions are 9 % of B0's multiply-adds (34,532,064 of them).
  EXPECT_EQ(depthwise, 2 * 2 * 34532064.0);
}

namespace {

void expect_error(const std::string& yaml, Err id, const std::string& key, const std::string& words, int line) {
  try {
    build(yaml);
    FAIL() << "accepted: " << key;
  } catch (const Error& e) {
    EXPECT_EQ(e.id(), error_info(id).id) << e.what();
    EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
    EXPECT_EQ(e.where().file, "efficientnet.yaml") << e.what();
    EXPECT_EQ(e.where().line, line) << e.what();
  }
}

}  // namespace

TEST(EfficientNetTest, BadInputIsALocatedError) {
  expect_error("workload: {preset: efficientnet-b0, batch: 2, image_size: 16}\n", Err::OutOfRange,
               "workload.image_size = 16 is smaller than EfficientNet's total stride 32", "choose at least 32", 2);
  expect_error("workload: {preset: efficientnet-b8, batch: 2}\n", Err::UnknownWorkload,
               "unknown model preset 'efficientnet-b8'", "efficientnet-b0, efficientnet-b1, ", 2);
  expect_error("workload: {preset: efficientnet-b0, batch: 6, bn_batch: 4}\n", Err::NotDivisible,
               "workload.bn_batch = 4 does not divide workload.batch = 6", "choose a divisor", 2);
}

namespace {

// A small EfficientNet: width 0.1 (8 to 32 features, the head 128), one block per stage (depth 0.1), 64 x 64 images
// (the last stages 2 x 2), 8 images, 10 classes, fp32; RMSProp with the reference's epsilon 1e-3 and its learning
// rate 0.016 x batch / 256.
std::string tiny(const std::string& extra) {
  return "workload: {model: efficientnet, width_coefficient: 0.1, depth_coefficient: 0.1, image_size: 64, "
         "classes: 10, batch: 8, dtype: fp32, eps: 0.001, learning_rate: 0.0005" +
         extra + "}\n";
}

// Values that are zero in exact arithmetic, rounding noise in any run: a projection's batch-norm offset reaches the
// loss only through the next block's expansion (a 1x1 convolution) and its batch norm, which subtracts any offset
// again, so its gradient (and RMSProp's update of it) is noise; the mean of that expansion is the filter times
// the offset, zero at the offset's initial 0, so its moving mean is noise too (and the head's, after the last
// projection).
bool zero_in_exact_arithmetic(const std::string& name) {
  return name.find(".project.bn.beta") != std::string::npos ||
         name.find(".expand.bn.moving_mean") != std::string::npos || name == "head.bn.moving_mean.new";
}

// Block 0's depthwise filter gradient sums 8192 products x dy per weight that cancel (their absolute values add to
// about 40 times the sum's, measured on this step): the one-ulp differences of fp32 in its operands (matmuls of 8
// rows against 2 sum in other orders) come out near 1e-5 of it, so it and its RMSProp update are held to 5e-5.
bool cancelling(const std::string& name) { return name.rfind("blocks.0.depthwise.w.", 0) == 0; }

void expect_reproduces(const Step& s) {
  expect_reproduces_the_step(s, [](const std::string& n) { return zero_in_exact_arithmetic(n) || cancelling(n); });
  TensorStore inputs;
  init_step_inputs(s.graph, inputs, 5);
  TensorStore ref = inputs;
  run_reference(s.graph, ref);
  std::vector<TensorStore> chips = interpret_plan(s.plan, s.graph, inputs, 5);
  TensorStore got;
  assemble_results(s.plan, s.graph, [&](int64_t c) { return &chips[c]; }, got);
  int compared = 0;
  for (size_t i = 0; i < s.graph.num_tensors(); ++i) {
    const TensorInfo& t = s.graph.tensor(static_cast<TensorId>(i));
    if (t.role != TensorRole::Updated || !cancelling(t.name)) continue;
    EXPECT_LE(compare_tensors(got.get(static_cast<TensorId>(i)), ref.get(static_cast<TensorId>(i))).rel_norm, 5e-5)
        << t.name;
    ++compared;
  }
  EXPECT_EQ(compared, 3);  // the weight, its mean square and its momentum
}

}  // namespace

// Data parallel over 4 replicas with the batch norm per replica (groups of 2, the replica's examples) and across
// pairs of replicas (groups of 4: the statistics all-reduced), with weight-update sharding, and fsdp: each
// reproduces the single-device step (RMSProp with momentum).
TEST(EfficientNetTest, StrategiesReproduceTheStep) {
  for (const std::string& s :
       {tiny(", bn_batch: 2") + "strategy: {name: data_parallel}\n",
        tiny(", bn_batch: 4") + "strategy: {name: data_parallel}\n",
        tiny(", bn_batch: 2") + "strategy: {name: data_parallel, weight_update_sharding: true}\n",
        tiny(", bn_batch: 2") + "strategy: {name: fsdp}\n"}) {
    SCOPED_TRACE(s);
    expect_reproduces(plan_step(hardware("[4, 1]") + s));
  }
}

// GPipe over 2 stages of the MBConv blocks, 2 micro-batches (the batch norm in groups of 2, within a micro-batch),
// alone (4 images a micro-batch) and x data (2 a replica's micro-batch): the step is the single-device one. spmd
// has no rules for the convolutions: a located error (tests/unit/botnet_test.cpp's SpmdWithoutRulesIsALocatedError
// for the message).
TEST(EfficientNetTest, PipelineReproducesTheStep) {
  for (const std::string& strategy :
       {std::string("strategy: {name: pipeline, micro_batches: 2}\nmesh: {axes: [pipe], shape: [2]}\n"),
        std::string("strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], "
                    "shape: [2, 2]}\n")}) {
    SCOPED_TRACE(strategy);
    const Step s = plan_step(hardware(strategy.find("data") != std::string::npos ? "[4, 1]" : "[2, 1]") +
                             tiny(", bn_batch: 2") + strategy);
    EXPECT_EQ(s.plan.pipeline.stages, 2);
    expect_reproduces(s);
  }
  try {
    plan_step(hardware("[4, 1]") + tiny(", bn_batch: 2") + "strategy: {name: spmd}\n");
    FAIL() << "spmd was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::StrategyMismatch) << e.what();
    EXPECT_NE(e.message().find("no tensor-sharding rules for the efficientnet workload"), std::string::npos)
        << e.message();
    EXPECT_EQ(e.where().line, 3) << e.what();
  }
}

