// How XLA fuses a convolutional network's batch norm, as podsim's fusion pass (hw/compiler/fusion.h) does: the
// statistics out of the convolution's kernel, normalization and ReLU recomputed in the next convolution, sibling
// batch-norm gradients' sums in one kernel, and a batch-norm gradient outside a convolution as its sums and then its
// elementwise pass (docs/model.md, "Fusion").
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "hw/compiler/fusion.h"
#include "hw/compiler/lower.h"
#include "sim/config/loader.h"
#include "workloads/builder.h"
#include "tests/unit/cnn_test_util.h"
#include "tests/unit/plan_steps.h"

using namespace podsim;
using podsim::test::win;

namespace {

// A 3 x 3 convolution (same padding, 64 features in and out), its batch norm and ReLU: "conv", "bn", "relu".
TensorId conv_bn_relu(GraphBuilder& b, TensorId x) {
  TensorId h = b.conv2d(x, b.param("w", {3, 3, 64, 64}), win(3, 3, 1, 1, 1, 1, 1, 1), "conv");
  return b.relu(b.batch_norm(h, b.param("g", {64}), b.param("b", {64}), 0, "bn"), "relu");
}

}  // namespace

// conv -> batch-norm statistics -> normalization -> ReLU -> conv, as XLA fuses it: the statistics come out of the
// first convolution's kernel (multi-output fusion); normalization and ReLU, which read one activation-sized tensor,
// are recomputed inside the second convolution's kernel (producer duplication) and never stored. With either
// mechanism off, the statistics and the normalization are kernels of their own again.
TEST(CnnFusionTest, BatchNormFusesAsXlaDoes) {
  ModelGraph g("fuse");
  GraphBuilder b(g, DType::BF16);
  TensorId h = conv_bn_relu(b, b.input("x", {8, 8, 8, 64}, DType::BF16));
  b.conv2d(h, b.param("w2", {3, 3, 64, 64}), win(3, 3, 1, 1, 1, 1, 1, 1), "conv2");
  std::vector<OpId> order = g.topological_order();
  auto names = [&](const FusionGroup& fg, bool recomputed) {
    std::vector<std::string> out;
    for (const FusionMember& m : fg.members)
      if (m.recomputed == recomputed) out.push_back(g.op(m.op).name);
    return out;
  };
  const auto groups = fuse(g, order, {});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].kind, FusionKind::Output);
  EXPECT_EQ(names(groups[0], false), (std::vector<std::string>{"conv", "bn.stats"}));
  EXPECT_EQ(names(groups[1], false), (std::vector<std::string>{"conv2"}));
  EXPECT_EQ(names(groups[1], true), (std::vector<std::string>{"bn", "relu"}));
  FusionOptions no_dup;
  no_dup.duplicate = false;
  const auto kept = fuse(g, order, no_dup);
  ASSERT_EQ(kept.size(), 3u);
  EXPECT_EQ(kept[1].kind, FusionKind::Loop);
  EXPECT_EQ(names(kept[1], false), (std::vector<std::string>{"bn", "relu"}));
  FusionOptions apart;
  apart.multi_output = false;
  apart.duplicate = false;
  const auto alone = fuse(g, order, apart);
  ASSERT_EQ(alone.size(), 4u);
  EXPECT_EQ(g.op(alone[1].members[0].op).kind, OpKind::BatchNormStats);
}

// A control edge whose source the fusion does not keep: the ReLU is recomputed inside conv2's kernel and has no
// kernel of its own, so an op ordered after it (a schedule's control dependency, as the fsdp prefetch adds: "z",
// issued between the ReLU and conv2) waits for what the ReLU reads instead, the kernel of "conv" and its statistics.
// It would otherwise wait for nothing and start with the step.
TEST(CnnFusionTest, AnOpOrderedAfterADuplicatedProducerWaitsForWhatThatProducerReads) {
  const Experiment e = load_experiment_text("hardware: {preset: tpu-v3}\nworkload: {model: matmul, m: 8, k: 8, n: 8}\n",
                                            "h.yaml");
  ModelGraph g("fuse");
  GraphBuilder b(g, DType::BF16);
  TensorId h = conv_bn_relu(b, b.input("x", {8, 8, 8, 64}, DType::BF16));
  TensorId z = b.relu(b.input("other", {8, 8, 8, 64}, DType::BF16), "z");
  b.conv2d(h, b.param("w2", {3, 3, 64, 64}), win(3, 3, 1, 1, 1, 1, 1, 1), "conv2");
  g.add_control(g.producer(h), g.producer(z));
  std::vector<OpId> order = g.topological_order();
  // Issue order: the ReLU, then z, then conv2 (a topological order may put z anywhere before conv2).
  order.erase(std::find(order.begin(), order.end(), g.producer(z)));
  order.insert(std::find(order.begin(), order.end(), g.producer(h)) + 1, g.producer(z));
  const ExecProgram ep = lower(g, order, e.hardware.chip);
  auto kernel_with = [&](const std::string& name) {
    for (size_t i = 0; i < ep.ops.size(); ++i)
      for (OpId m : ep.ops[i].members)
        if (g.op(m).name == name) return static_cast<int32_t>(i);
    return int32_t{-1};
  };
  const int32_t conv = kernel_with("conv"), zk = kernel_with("z"), conv2 = kernel_with("conv2");
  ASSERT_GE(conv, 0);
  ASSERT_GE(zk, 0);
  ASSERT_LT(zk, conv2);
  EXPECT_EQ(kernel_with("relu"), conv2);  // the ReLU lives only inside conv2's kernel
  EXPECT_EQ(ep.ops[static_cast<size_t>(zk)].deps, std::vector<int32_t>{conv});
}

namespace {

// Where each op of `g` runs after fusion: (group index, pass, recomputed) per appearance, by name.
struct Placement {
  size_t group;
  MemberPass pass;
  bool recomputed;
};
std::vector<Placement> placements(const ModelGraph& g, const std::vector<FusionGroup>& groups, const std::string& name) {
  std::vector<Placement> out;
  for (size_t i = 0; i < groups.size(); ++i)
    for (const FusionMember& m : groups[i].members)
      if (g.op(m.op).name == name) out.push_back({i, m.pass, m.recomputed});
  return out;
}
size_t group_of(const ModelGraph& g, const std::vector<FusionGroup>& groups, const std::string& name) {
  for (const Placement& p : placements(g, groups, name))
    if (!p.recomputed) return p.group;
  return groups.size();
}

}  // namespace

// A block's two branches (conv + batch norm each) added and ReLU'd, then a convolution: backward, the gradient of
// the sum opens both batch-norm gradients, and the kernel that makes it (the last convolution's input gradient,
// which takes the ReLU gradient) writes the sums of both beside its result, as the SSD profile's input-gradient
// fusions of a block with a projection shortcut write three per-channel sums. Without multi-output fusion each
// sums pass is a kernel of its own.
TEST(CnnFusionTest, SiblingBatchNormSumsComeOutOfOneConvolutionKernel) {
  ModelGraph g("siblings");
  GraphBuilder b(g, DType::BF16);
  TensorId x = b.input("x", {8, 8, 8, 64}, DType::BF16);
  TensorId h = b.conv2d(x, b.param("w0", {1, 1, 64, 64}), win(1, 1, 1, 1, 0, 0, 0, 0), "conv0");
  TensorId c = b.batch_norm(b.conv2d(h, b.param("wc", {1, 1, 64, 64}), win(1, 1, 1, 1, 0, 0, 0, 0), "convc"),
                            b.param("gc", {64}), b.param("bc", {64}), 0, "bnc");
  TensorId d = b.batch_norm(b.conv2d(h, b.param("wd", {1, 1, 64, 64}), win(1, 1, 1, 1, 0, 0, 0, 0), "convd"),
                            b.param("gd", {64}), b.param("bd", {64}), 0, "bnd");
  TensorId y = b.relu(b.add(c, d, "add"), "relu");
  TensorId z = b.conv2d(y, b.param("w3", {1, 1, 64, 16}), win(1, 1, 1, 1, 0, 0, 0, 0), "conv3");
  TensorId loss = b.softmax_cross_entropy(b.reshape(z, {8 * 8 * 8, 16}, "flat"), b.label("labels", {8 * 8 * 8}), "loss");
  b.backward(loss);
  const std::vector<OpId> order = g.topological_order();
  const auto groups = fuse(g, order, {});
  const size_t dx = group_of(g, groups, "conv3.dx");
  ASSERT_LT(dx, groups.size());
  for (const char* bn : {"bnc.grad", "bnd.grad"}) {
    SCOPED_TRACE(bn);
    const auto at = placements(g, groups, bn);
    bool sums_in_dx = false;
    for (const Placement& p : at) sums_in_dx = sums_in_dx || (p.group == dx && p.pass == MemberPass::Reduce);
    EXPECT_TRUE(sums_in_dx);
  }
  FusionOptions apart;
  apart.multi_output = false;
  const auto alone = fuse(g, order, apart);
  const size_t dx_alone = group_of(g, alone, "conv3.dx");
  for (const char* bn : {"bnc.grad", "bnd.grad"})
    for (const Placement& p : placements(g, alone, bn)) EXPECT_NE(p.group, dx_alone) << bn;
}

// A batch-norm gradient whose upstream gradient comes from a kernel that cannot take it (max pooling's
// select-and-scatter) is two kernels, as XLA emits it: its sums with the ReLU gradient (a reduction fusion), and
// its elementwise pass, which the filter gradient, a convolution, recomputes from the upstream gradient and the
// saved raw result instead of reading a stored dx. With fusion off it is one op reading its inputs twice.
TEST(CnnFusionTest, BatchNormGradientAloneIsItsSumsThenItsPass) {
  ModelGraph g("two_pass");
  GraphBuilder b(g, DType::BF16);
  TensorId h = conv_bn_relu(b, b.input("x", {8, 16, 16, 64}, DType::BF16));
  TensorId p = b.max_pool(h, win(2, 2, 2, 2, 0, 0, 0, 0), "pool");
  TensorId loss = b.softmax_cross_entropy(b.reshape(p, {8 * 8 * 8, 64}, "flat"), b.label("labels", {8 * 8 * 8}), "loss");
  b.backward(loss);
  const std::vector<OpId> order = g.topological_order();
  const auto groups = fuse(g, order, {});
  const auto at = placements(g, groups, "bn.grad");
  const size_t dw = group_of(g, groups, "conv.dw");
  ASSERT_LT(dw, groups.size());
  bool sums = false, pass_in_dw = false;
  for (const Placement& q : at) {
    EXPECT_NE(q.pass, MemberPass::All);
    if (q.pass == MemberPass::Reduce && !q.recomputed) {
      sums = true;
      EXPECT_EQ(groups[q.group].kind, FusionKind::Reduction);
      EXPECT_EQ(q.group, group_of(g, groups, "relu.dx"));  // the ReLU gradient feeds the sums in one kernel
    }
    pass_in_dw = pass_in_dw || (q.group == dw && q.pass == MemberPass::Apply && q.recomputed);
  }
  EXPECT_TRUE(sums);
  EXPECT_TRUE(pass_in_dw);
  FusionOptions off;
  off.enabled = false;
  for (const Placement& q : placements(g, fuse(g, order, off), "bn.grad")) EXPECT_EQ(q.pass, MemberPass::All);
}

// Runs of consecutive ranks: on a ring of 8 on x, groups of 2 are lines of neighbours; on data = x(4) x y(2), a
// block of 4 is the x ring and a block of 8 the whole axis.

namespace {

// The recomputed members of each kernel that make nothing the kernel's own work reads (directly or through other
// recomputed members): work a reader of the producer copied without needing it.
std::vector<std::string> dead_recomputes(const ModelGraph& g, const std::vector<FusionGroup>& groups) {
  std::vector<std::string> dead;
  for (const FusionGroup& fg : groups) {
    std::vector<TensorId> wanted;
    for (size_t k = fg.members.size(); k-- > 0;) {
      const Op& op = g.op(fg.members[k].op);
      bool used = !fg.members[k].recomputed;
      for (TensorId t : op.outputs) used = used || std::count(wanted.begin(), wanted.end(), t) > 0;
      if (!used) {
        dead.push_back(op.name);
        continue;
      }
      wanted.insert(wanted.end(), op.inputs.begin(), op.inputs.end());
    }
  }
  return dead;
}

}  // namespace

// A reader of an elementwise group recomputes only what makes the tensors it reads. With batch-norm groups over
// two chips, each batch norm's statistics are all-reduced and finished (sums to mean and variance) by an elementwise
// op that the normalization and the ReLU join; the next convolution recomputes all three, and the optimizer's
// moving-average update, which reads only the finished statistics, recomputes the finish alone, not the
// normalization (which would read the whole activation again for two per-channel vectors).
TEST(CnnFusionTest, AReaderRecomputesOnlyWhatMakesWhatItReads) {
  const plan_steps::Step s = plan_steps::plan_step(
      plan_steps::hardware("[2, 1]") +
      "workload: {model: resnet, depth: 50, batch: 8, bn_batch: 8, image_size: 64, optimizer: lars}\n"
      "strategy: {name: data_parallel}\n");
  const ModelGraph& g = s.plan.programs[0].graph;
  const auto groups = fuse(g, s.plan.programs[0].order, {});
  EXPECT_EQ(dead_recomputes(g, groups), std::vector<std::string>{});
  std::vector<std::string> moving;
  const size_t mv = group_of(g, groups, "stem.bn.moving");
  ASSERT_LT(mv, groups.size());
  for (const FusionMember& m : groups[mv].members)
    if (m.recomputed) moving.push_back(g.op(m.op).name);
  EXPECT_EQ(moving, std::vector<std::string>{"stem.bn.stats/finish"});
  bool relu_recomputed = false;
  for (const Placement& p : placements(g, groups, "stem.relu")) relu_recomputed = relu_recomputed || p.recomputed;
  EXPECT_TRUE(relu_recomputed);  // the convolution's reader still takes the normalization and the ReLU
}
