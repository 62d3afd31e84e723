// SSD with a ResNet-34 backbone (workloads/models/ssd.cpp) and the op kinds of its MultiBox loss: the per-anchor
// cross-entropy, the top-k mask of hard-negative mining and the loss with its gradient, by hand (values and costs)
// and against central differences; the structure (six maps of 38 ... 1 rows, 8732 anchors); the parameter count
// pinned to seed-models.md's hand count 19,972,534; the forward multiply-adds of a 300-pixel image by hand; located
// errors of bad input; and the step reproduced by data parallel (per-replica batch norm and groups of two replicas)
// and by spatial partitioning (H split 4 ways, the small maps gathered, its all-gathers pinned by hand), alone and
// with data parallel.
#include <gtest/gtest.h>

#include <cmath>

#include "tests/unit/finite_difference.h"
#include "tests/unit/plan_steps.h"
#include "workloads/builder.h"
#include "workloads/op_def.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

ModelGraph build(const std::string& yaml) { return one_chip_graph(yaml, "ssd.yaml"); }

std::vector<int64_t> shape_of(const ModelGraph& g, const std::string& name) { return g.tensor(g.find_tensor(name)).shape; }

// A loss-side graph on hand-made tensors: two maps of 2 and 3 anchors, 3 classes, 2 images.
struct LossGraph {
  ModelGraph g{"loss"};
  TensorStore s;
  TensorId l0, l1, b0, b1, labels, matched, targets, ce, neg, lse, mined, loss;
  Op add(const std::string& name, OpKind kind, std::vector<TensorId> in, std::vector<TensorId> out, OpAttrs a = {}) {
    Op op;
    op.name = name;
    op.kind = kind;
    op.phase = Phase::Loss;
    op.inputs = std::move(in);
    op.outputs = std::move(out);
    op.attrs = a;
    g.add_op(op);
    return op;
  }
  LossGraph() {
    l0 = g.add_tensor({"l0", {2, 2, 3}, DType::F32, TensorRole::Parameter});
    l1 = g.add_tensor({"l1", {2, 3, 3}, DType::F32, TensorRole::Parameter});
    b0 = g.add_tensor({"b0", {2, 2, 4}, DType::F32, TensorRole::Parameter});
    b1 = g.add_tensor({"b1", {2, 3, 4}, DType::F32, TensorRole::Parameter});
    labels = g.add_tensor({"labels", {2, 5}, DType::I32, TensorRole::Label});
    matched = g.add_tensor({"matched", {2}, DType::I32, TensorRole::Input});
    targets = g.add_tensor({"targets", {2, 5, 4}, DType::F32, TensorRole::Input});
    ce = g.add_tensor({"ce", {2, 5}, DType::F32, TensorRole::Activation});
    neg = g.add_tensor({"neg", {2, 5}, DType::F32, TensorRole::Activation});
    lse = g.add_tensor({"lse", {2, 5}, DType::F32, TensorRole::Activation});
    mined = g.add_tensor({"mined", {2, 5}, DType::F32, TensorRole::Activation});
    loss = g.add_tensor({"loss", {1}, DType::F32, TensorRole::Loss});
    add("ce", OpKind::AnchorCrossEntropy, {l0, l1, labels}, {ce, neg, lse});
    OpAttrs k;
    k.alpha = 1;  // one negative per positive, so that the mask leaves some out
    add("mining", OpKind::TopKMask, {neg, matched}, {mined}, k);
    OpAttrs mean;
    mean.count = 2;
    add("loss", OpKind::MultiboxLoss, {ce, mined, labels, matched, targets, b0, b1}, {loss}, mean);
    s.resize(g.num_tensors());
    auto put = [&](TensorId t, std::vector<float> v) {
      Tensor x(g.tensor(t).shape);
      x.data = std::move(v);
      s.put(t, std::move(x));
    };
    put(l0, {1, 0, 0, 0, 2, 0, /**/ 0.5f, 0.5f, 0, 0, 0, 3});
    put(l1, {0, 0, 1, 2, 0, 0, 0, 1, 0, /**/ 1, 1, 1, 0, 0, 0, 2, 0, 1});
    put(b0, {0.5f, 0, 0, 0, 2, 0, 0, 0, /**/ 0, 0, 0, 0, -3, 0.25f, 0, 0});
    put(b1, std::vector<float>(24, 0.1f));
    // Image 0: anchors 1 and 4 positive; image 1: anchor 0.
    put(labels, {0, 1, 0, 0, 2, /**/ 1, 0, 0, 0, 0});
    put(matched, {2, 1});
    put(targets, std::vector<float>(40, 0.0f));
  }
  double run() {
    for (const Op& op : g.ops()) run_op(g, op, s);
    return s.get(loss).data[0];
  }
};

double lse3(double a, double b, double c) { return std::log(std::exp(a) + std::exp(b) + std::exp(c)); }

}  // namespace

// By hand: the per-anchor cross-entropy, the negatives' scores, the mask of each image's top matched negatives (ties
// to the lower index) and the loss: image 0's positives (anchors 1 and 4) and its 2 best negatives, image 1's
// positive 0 and its best negative; box terms on the positives only (Huber: 0.5 d^2 within 1, |d| - 0.5 beyond).
TEST(SsdTest, MultiboxLossByHand) {
  LossGraph t;
  const double loss = t.run();
  const std::vector<float>& ce = t.s.get(t.ce).data;
  const double ce0[5] = {lse3(1, 0, 0) - 1, lse3(0, 2, 0) - 2, lse3(0, 0, 1) - 0, lse3(2, 0, 0) - 2, lse3(0, 1, 0) - 0};
  for (int a = 0; a < 5; ++a) EXPECT_NEAR(ce[a], ce0[a], 1e-6) << a;
  const double ce1[5] = {lse3(0.5, 0.5, 0) - 0.5, lse3(0, 0, 3) - 0, lse3(1, 1, 1) - 1, lse3(0, 0, 0), lse3(2, 0, 1) - 2};
  for (int a = 0; a < 5; ++a) EXPECT_NEAR(ce[5 + a], ce1[a], 1e-6) << a;
  // Negatives: the background anchors' ce, 0 at positives.
  const std::vector<float>& neg = t.s.get(t.neg).data;
  EXPECT_EQ(neg[1], 0.0f);
  EXPECT_EQ(neg[5], 0.0f);
  EXPECT_NEAR(neg[2], ce0[2], 1e-6);
  // Image 0 mines 2 of anchors 0, 2, 3 (ce 0.551, 1.551, 0.241): 0 and 2; image 1 one of 1..4: anchor 1 (3.097).
  const std::vector<float> want_mask = {1, 0, 1, 0, 0, /**/ 0, 1, 0, 0, 0};
  EXPECT_EQ(t.s.get(t.mined).data, want_mask);
  // Boxes (targets 0): image 0's anchor 1 is b0[0][1] = (2, 0, 0, 0): Huber 1.5; anchor 4 is b1[0][2]: 4 x 0.005.
  // Image 1's anchor 0 is b0[1][0] = 0: nothing.
  const double img0 = ce0[1] + ce0[4] + ce0[0] + ce0[2] + 1.5 + 4 * 0.005;
  const double img1 = ce1[0] + ce1[1];
  EXPECT_NEAR(loss, (img0 / 2 + img1 / 1) / 2, 1e-6);
}

// The mask takes exactly k = min(alpha counts, N) entries, the ties to the lower index, and no more than N.
TEST(SsdTest, TopKMaskTakesExactlyKWithTiesToTheLowerIndex) {
  ModelGraph g("k");
  const TensorId x = g.add_tensor({"x", {2, 4}, DType::F32, TensorRole::Input});
  const TensorId c = g.add_tensor({"c", {2}, DType::I32, TensorRole::Input});
  const TensorId m = g.add_tensor({"m", {2, 4}, DType::F32, TensorRole::Activation});
  Op op;
  op.name = "k";
  op.kind = OpKind::TopKMask;
  op.inputs = {x, c};
  op.outputs = {m};
  op.attrs.alpha = 3;
  g.add_op(op);
  TensorStore s;
  s.resize(g.num_tensors());
  Tensor xv({2, 4}), cv({2});
  xv.data = {1, 2, 2, 0, /**/ 5, 5, 5, 5};
  cv.data = {0.0f, 2.0f};  // k = 0; k = min(6, 4) = 4
  s.put(x, xv);
  s.put(c, cv);
  run_op(g, g.op(0), s);
  EXPECT_EQ(s.get(m).data, (std::vector<float>{0, 0, 0, 0, 1, 1, 1, 1}));
  cv.data = {1.0f, 0.0f};  // k = 3: the 2, 2 and 1; none
  s.put(c, cv);
  run_op(g, g.op(0), s);
  EXPECT_EQ(s.get(m).data, (std::vector<float>{1, 1, 1, 0, 0, 0, 0, 0}));
}

// The gradient rules against central differences of the loss in every logit and box offset (the mask held: it is
// piecewise constant, and no step here crosses its order).
TEST(SsdTest, MultiboxGradientsMatchCentralDifferences) {
  LossGraph t;
  t.run();
  GraphBuilder b(t.g, DType::F32);
  b.backward(t.loss);
  t.s.resize(t.g.num_tensors());
  for (const Op& op : t.g.ops())
    if (op.phase == Phase::Backward) run_op(t.g, op, t.s);
  auto forward = [&] { return t.run(); };
  for (TensorId p : {t.l0, t.l1, t.b0, t.b1}) {
    const std::string& n = t.g.tensor(p).name;
    const TensorId gid = t.g.find_tensor(n + (n[0] == 'l' ? ".dlogits" : ".dboxes"));
    ASSERT_GE(gid, 0) << t.g.tensor(p).name;
    const std::vector<float> analytic = t.s.get(gid).data;
    // Central differences around the box offsets' Huber kink (|d| = 1) are skipped: none here is within h of it.
    EXPECT_EQ(expect_gradient(analytic, t.s.get_mut(p).data, forward, {.h = 1e-3, .abs = 1e-4, .rel = 1e-3},
                              t.g.tensor(p).name),
              static_cast<int>(analytic.size()));
  }
  EXPECT_EQ(producer(t.g, "l0.dlogits").kind, OpKind::AnchorCrossEntropyGrad);
  EXPECT_EQ(producer(t.g, "ce.grad").kind, OpKind::MultiboxLossGrad);
}

// Costs by hand, on the graph above.
// The cross-entropy: per logit (2 x 5 x 3 = 30) a subtraction, an exponential, a compare and a select and two
// reductions (the max and the sum). The top-k mask: 31 bisection passes over the fp32 bits of a non-negative score,
// each a compare, a select and a row count, reading the scores each time, then a select writing the mask.
TEST(SsdTest, LossCostsByHand) {
  LossGraph t;
  const OpCost ce = op_cost(t.g, t.g.op(0));
  EXPECT_EQ(ce.vector.elements, 30);
  EXPECT_EQ(ce.vector.simple, 3);
  EXPECT_EQ(ce.vector.transcendental, 1);
  EXPECT_EQ(ce.vector.reduce, 2);
  EXPECT_EQ(ce.vector.reduce_row, 3);
  EXPECT_EQ(ce.flops, 30.0 * 6);
  EXPECT_TRUE(ce.reduction);
  const double scores = t.g.tensor(t.neg).stored_bytes(), counts = t.g.tensor(t.matched).stored_bytes();
  const OpCost k = op_cost(t.g, t.g.op(1));
  EXPECT_EQ(k.vector.elements, 10);
  EXPECT_EQ(k.vector.simple, 2 * 31 + 1);
  EXPECT_EQ(k.vector.reduce, 31);
  EXPECT_EQ(k.vector.reduce_row, 5);
  EXPECT_EQ(k.flops, 10.0 * (63 + 31));
  EXPECT_EQ(k.bytes_read, 32 * scores + counts);
  EXPECT_EQ(k.bytes_written, t.g.tensor(t.mined).stored_bytes());
  // The loss: per anchor (10) the weight and ce (4 operations) and 4 box coordinates of 7 each, two row sums.
  const OpCost l = op_cost(t.g, t.g.op(2));
  EXPECT_EQ(l.vector.elements, 10);
  EXPECT_EQ(l.vector.simple, 32);
  EXPECT_EQ(l.flops, 10.0 * 34);
  EXPECT_EQ(l.bytes_written, t.g.tensor(t.loss).stored_bytes());
}

// The structure at 300 pixels: layer3 at stride 1 (38 x 38 x 256) is map 1, no layer4; the extra layers' 1x1 and
// 3x3 convolutions with bias and ReLU, no batch norm; maps 19, 10, 5 (stride 2), 3 and 1 (VALID); heads of k x 81
// and k x 4 per position; 8732 anchors; momentum the default optimizer.
TEST(SsdTest, StructureAt300Pixels) {
  const ModelGraph g = build("workload: {preset: ssd-resnet34, batch: 2}\n");
  EXPECT_EQ(shape_of(g, "stem.pool"), (std::vector<int64_t>{2, 75, 75, 64}));
  EXPECT_EQ(shape_of(g, "layer2.0.out"), (std::vector<int64_t>{2, 38, 38, 128}));
  EXPECT_EQ(shape_of(g, "layer3.5.out"), (std::vector<int64_t>{2, 38, 38, 256}));
  EXPECT_EQ(producer(g, "layer3.0.a.conv").attrs.window.sh, 1);
  EXPECT_GE(g.find_tensor("layer3.0.down.conv"), 0);
  EXPECT_LT(g.find_tensor("layer3.6.out"), 0);
  EXPECT_LT(g.find_tensor("layer4.0.out"), 0);
  const std::vector<std::vector<int64_t>> maps = {{2, 19, 19, 512}, {2, 10, 10, 512}, {2, 5, 5, 256},
                                                  {2, 3, 3, 256},   {2, 1, 1, 256}};
  for (int e = 1; e <= 5; ++e) {
    const std::string n = "extra" + std::to_string(e);
    EXPECT_EQ(shape_of(g, n + ".b.relu"), maps[e - 1]) << n;
    EXPECT_EQ(producer(g, n + ".a.relu").kind, OpKind::Relu);
    EXPECT_EQ(input_name(g, producer(g, n + ".a.relu"), 0), n + ".a.bias");
    EXPECT_GE(g.find_tensor(n + ".b.b"), 0);
    EXPECT_LT(g.find_tensor(n + ".a.bn"), 0);
    EXPECT_EQ(producer(g, n + ".b.conv").attrs.window.pt, e <= 3 ? 1 : 0);
  }
  EXPECT_EQ(shape_of(g, "extra2.a.conv.w"), (std::vector<int64_t>{1, 1, 512, 256}));
  EXPECT_EQ(shape_of(g, "extra3.a.conv.w"), (std::vector<int64_t>{1, 1, 512, 128}));
  EXPECT_EQ(shape_of(g, "head1.class.conv.w"), (std::vector<int64_t>{3, 3, 256, 324}));
  EXPECT_EQ(shape_of(g, "head2.class.conv.w"), (std::vector<int64_t>{3, 3, 512, 486}));
  EXPECT_EQ(shape_of(g, "head6.box.conv.w"), (std::vector<int64_t>{3, 3, 256, 16}));
  EXPECT_EQ(shape_of(g, "head1.class.anchors"), (std::vector<int64_t>{2, 5776, 81}));
  EXPECT_EQ(shape_of(g, "head2.box.anchors"), (std::vector<int64_t>{2, 2166, 4}));
  EXPECT_EQ(shape_of(g, "class_targets"), (std::vector<int64_t>{2, 8732}));
  EXPECT_EQ(shape_of(g, "box_targets"), (std::vector<int64_t>{2, 8732, 4}));
  const Op& mining = producer(g, "loss.mined");
  EXPECT_EQ(mining.kind, OpKind::TopKMask);
  EXPECT_EQ(mining.attrs.alpha, 3);
  EXPECT_EQ(input_name(g, mining, 0), "loss.negatives");
  EXPECT_EQ(input_name(g, mining, 1), "matched");
  const Op& loss = producer(g, "loss");
  EXPECT_EQ(loss.kind, OpKind::MultiboxLoss);
  EXPECT_EQ(loss.attrs.count, 2);
  EXPECT_EQ(loss.inputs.size(), 5u + 6u);
  int momentum = 0, params = 0;
  for (const Op& op : g.ops()) momentum += op.kind == OpKind::MomentumUpdate;
  for (const TensorInfo& t : g.tensors()) params += t.role == TensorRole::Parameter;
  EXPECT_EQ(momentum, params);
}

// seed-models.md 4.3's hand count: backbone convolutions 8,160,448 + batch-norm scales and offsets 9,856 + extra
// layers 3,574,400 + heads 8,227,830 = 19,972,534 (no published figure exists).
TEST(SsdTest, ParameterCountByHand) {
  const ModelGraph g = build("workload: {preset: ssd-resnet34, batch: 1}\n");
  double backbone = 0, bn = 0, extras = 0, heads = 0;
  for (const TensorInfo& t : g.tensors()) {
    if (t.role != TensorRole::Parameter) continue;
    const double n = static_cast<double>(t.elements());
    if (t.name.rfind("extra", 0) == 0) extras += n;
    else if (t.name.rfind("head", 0) == 0) heads += n;
    else if (t.name.find(".bn.") != std::string::npos) bn += n;
    else backbone += n;
  }
  const double stem = 7 * 7 * 3 * 64, layer1 = 6 * 9 * 64 * 64;
  const double layer2 = 9 * 64 * 128 + 7 * 9 * 128 * 128 + 64 * 128;
  const double layer3 = 9 * 128 * 256 + 11 * 9 * 256 * 256 + 128 * 256;
  EXPECT_EQ(backbone, stem + layer1 + layer2 + layer3);
  EXPECT_EQ(backbone, 8160448);
  EXPECT_EQ(bn, 2 * (64 + 6 * 64 + 9 * 128 + 13 * 256));
  EXPECT_EQ(bn, 9856);
  auto extra = [](double in, double mid, double out) { return in * mid + mid + 9 * mid * out + out; };
  EXPECT_EQ(extras, extra(256, 256, 512) + extra(512, 256, 512) + extra(512, 128, 256) + 2 * extra(256, 128, 256));
  EXPECT_EQ(extras, 3574400);
  auto head = [](double c, double k) { return 9 * c * k * 85 + k * 85; };
  EXPECT_EQ(heads, head(256, 4) + 2 * head(512, 6) + head(256, 6) + 2 * head(256, 4));
  EXPECT_EQ(heads, 8227830);
  EXPECT_EQ(backbone + bn + extras + heads, 19972534);
}

// The forward multiply-adds of a 300-pixel image by hand, dense (padding taps counted, as the MXU runs them):
// backbone 12,906,552,064, extras 703,758,336, heads 2,251,768,320: 15,862,078,720 (seed-models.md: 1.59e10), of
// which layer3 is 62 %. Each op counts 2 per multiply-add.
TEST(SsdTest, ForwardMultiplyAddsByHand) {
  const ModelGraph g = build("workload: {preset: ssd-resnet34, batch: 2}\n");
  const double backbone = 150.0 * 150 * 49 * 3 * 64 + 6 * 75.0 * 75 * 9 * 64 * 64 + 38.0 * 38 * 9 * 64 * 128 +
                          7 * 38.0 * 38 * 9 * 128 * 128 + 38.0 * 38 * 64 * 128 + 38.0 * 38 * 9 * 128 * 256 +
                          11 * 38.0 * 38 * 9 * 256 * 256 + 38.0 * 38 * 128 * 256;
  const double extras = 38.0 * 38 * 256 * 256 + 19.0 * 19 * 9 * 256 * 512 + 19.0 * 19 * 512 * 256 +
                        10.0 * 10 * 9 * 256 * 512 + 10.0 * 10 * 512 * 128 + 5.0 * 5 * 9 * 128 * 256 +
                        5.0 * 5 * 256 * 128 + 3.0 * 3 * 9 * 128 * 256 + 3.0 * 3 * 256 * 128 + 9.0 * 128 * 256;
  double heads = 0;
  for (const auto& [h, c, k] : std::vector<std::tuple<double, double, double>>{
           {38, 256, 4}, {19, 512, 6}, {10, 512, 6}, {5, 256, 6}, {3, 256, 4}, {1, 256, 4}})
    heads += h * h * 9 * c * k * 85;
  EXPECT_EQ(backbone, 12906552064.0);
  EXPECT_EQ(extras, 703758336.0);
  EXPECT_EQ(heads, 2251768320.0);
  double forward = 0;
  for (const Op& op : g.ops())
    if (op.phase == Phase::Forward && op.kind == OpKind::Conv2d) forward += op_cost(g, op).flops;
  EXPECT_EQ(forward, 2 * 2 * (backbone + extras + heads));
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
    EXPECT_EQ(e.where().file, "ssd.yaml") << e.what();
    EXPECT_EQ(e.where().line, line) << e.what();
  }
}

}  // namespace

// 256 pixels leave the sixth map without a row (maps 32, 16, 8, 4, 2, 0): its head has nothing to run on.
TEST(SsdTest, BadInputIsALocatedError) {
  expect_error("workload:\n  preset: ssd-resnet34\n  batch: 2\n  image_size: 256\n", Err::OutOfRange,
               "workload.image_size = 256 gives SSD feature maps of 32, 16, 8, 4, 2, 0 rows", "choose at least 257", 5);
  expect_error("workload: {preset: ssd-resnet34, batch: 6, bn_batch: 4}\n", Err::NotDivisible,
               "workload.bn_batch = 4 does not divide workload.batch = 6", "choose a divisor", 2);
  expect_error("workload: {preset: ssd-resnet34, batch: 2, optimizer: rmsprop, weight_decay: 0.0005}\n",
               Err::BadChoice, "workload.weight_decay", "optimizer: momentum", 2);
}

namespace {

// A narrow SSD: width 8 (the features 8 ... 64), the smallest image (257 pixels: maps 33, 17, 9, 5, 3, 1), 3 classes,
// fp32, momentum with the L2 weight decay.
std::string tiny(int64_t batch, const std::string& extra) {
  return "workload: {model: ssd, width: 8, image_size: 257, classes: 3, batch: " + std::to_string(batch) +
         ", dtype: fp32, learning_rate: 0.01, weight_decay: 0.0005" + extra + "}\n";
}

}  // namespace

// Data parallel over 4 replicas, the batch norm per replica (2 images) and over pairs of replicas (4 images: the
// statistics all-reduced), reproduces the single-device step.
TEST(SsdTest, DataParallelReproducesTheStep) {
  for (const char* bn : {", bn_batch: 2", ", bn_batch: 4"}) {
    SCOPED_TRACE(bn);
    expect_reproduces_the_step(plan_step(hardware("[4, 1]") + tiny(8, bn) + "strategy: {name: data_parallel}\n"));
  }
}

// Weight-update sharding and fsdp over 4 (2 images a replica, the batch norm per replica), and GPipe x data (2
// stages x 2 replicas, 2 micro-batches of 2 images a replica; the batch norm per micro-batch) reproduce the
// single-device step. spmd's schemes have no rules for SSD's convolutions (an error; spatial partitioning below is
// its tensor sharding).
TEST(SsdTest, ShardedAndPipelinedStepsReproduceTheStep) {
  for (const std::string& strategy :
       {std::string("strategy: {name: data_parallel, weight_update_sharding: true}\n"),
        std::string("strategy: {name: fsdp}\n"),
        std::string("strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], "
                    "shape: [2, 2]}\n")}) {
    SCOPED_TRACE(strategy);
    expect_reproduces_the_step(plan_step(hardware("[4, 1]") + tiny(8, ", bn_batch: 2") + strategy));
  }
  EXPECT_THROW(plan_step(hardware("[4, 1]") + tiny(8, ", bn_batch: 2") + "strategy: {name: spmd}\n"), Error);
}

// Spatial partitioning as MLPerf ran SSD (input_partition_dims [1, 4, 1, 1]: H split 4 ways), alone and under data
// parallel: maps of 33, 17, 9 and 5 rows split (padded shards), the 5-row map's VALID convolution to 3 rows and
// everything after it gathered (strategy.spatial_gather); the heads' outputs gathered for the loss.
TEST(SsdTest, SpatialPartitioningReproducesTheStep) {
  const std::string spatial = "strategy: {name: spmd, spmd_axes: [spatial], spatial: true, spatial_gather: true}\n"
                              "mesh: {axes: [spatial], shape: [4]}\n";
  const Step s = plan_step(hardware("[4, 1]") + tiny(2, "") + spatial);
  int permutes = 0;
  for (const std::string& l : collectives(s.plan.programs[0])) permutes += l.rfind("collective_permute", 0) == 0;
  EXPECT_GT(permutes, 0);
  // The all-gathers by hand (fp32, 2 images): extra4.a's output [2, 5, 5, 16] as 2 rows a device (8 gathered, the
  // padded shards'), and each head's output on maps 1 to 4 (33, 17, 9, 5 rows: 9, 5, 3, 2 a device) for the loss, k
  // x 4 box and k x 3 class features; maps 5 and 6 are whole already.
  std::vector<std::string> gathers;
  for (const std::string& l : collectives(s.plan.programs[0]))
    if (l.rfind("all_gather", 0) == 0) gathers.push_back(l);
  std::vector<std::string> want = {ag("extra4.a.relu", "spatial", 1, 2 * 2 * 5 * 16 * 4, 4 * 2 * 2 * 5 * 16 * 4)};
  const int64_t rows[4] = {9, 5, 3, 2}, width[4] = {33, 17, 9, 5}, k[4] = {4, 6, 6, 6};
  for (int m = 0; m < 4; ++m)
    for (const auto& [head, per] : {std::pair<const char*, int64_t>{"box", 4}, {"class", 3}}) {
      const double bytes = 2.0 * rows[m] * width[m] * k[m] * per * 4;
      want.push_back(ag("head" + std::to_string(m + 1) + "." + head + ".bias", "spatial", 1, bytes, 4 * bytes));
    }
  EXPECT_EQ(sorted(gathers), sorted(want));
  expect_reproduces_the_step(s);
  expect_reproduces_the_step(plan_step(
      hardware("[4, 2]") + tiny(4, ", bn_batch: 2") +
      "strategy: {name: [data_parallel, spmd], spmd_axes: [spatial], spatial: true, spatial_gather: true}\n"
      "mesh: {axes: [data, spatial], shape: [2, 4]}\n"));
}

// Without spatial_gather the split refuses the 5-row map's VALID convolution (3 output rows over 4 devices).
TEST(SsdTest, SpatialSplitOfTheSmallMapsNeedsTheGather) {
  try {
    plan_step(hardware("[4, 1]") + tiny(2, "") +
              "strategy: {name: spmd, spmd_axes: [spatial], spatial: true}\nmesh: {axes: [spatial], shape: [4]}\n");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::SpatialSplit);
    EXPECT_NE(e.message().find("'extra4.b.conv' (height 5)"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("strategy.spatial_gather: true"), std::string::npos) << e.message();
  }
}
