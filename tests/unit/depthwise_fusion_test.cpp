// How XLA fuses an MBConv block's depthwise convolution (docs/model.md, "Depthwise convolutions"): as a convolution
// (run.fusion_vector_conv), its input's batch norm and swish recomputed in its kernel and its result's batch-norm
// statistics written beside it; backward, its input gradient takes the swish gradient and batch-norm sums of the
// layer below, and both its gradients recompute the batch-norm gradient's elementwise pass they read. And the
// squeeze-and-excitation pool's gradient, a broadcast, fused into the kernel that adds it to the scale's gradient.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "hw/compiler/fusion.h"
#include "hw/compiler/lower.h"
#include "sim/config/loader.h"
#include "tests/unit/cnn_test_util.h"
#include "workloads/builder.h"

using namespace podsim;
using podsim::test::win;

namespace {

constexpr int64_t kB = 8, kS = 16, kC = 128;

TensorId bn(GraphBuilder& b, TensorId x, const std::string& n) {
  return b.batch_norm(x, b.param(n + ".g", {kC}), b.param(n + ".b", {kC}), 0, n);
}

// An MBConv block of 128 features on 16 x 16 maps: 1x1 expansion "expand", "bn1", "swish1"; 3x3 depthwise "dw",
// "bn2", "swish2"; squeeze-and-excitation "pool" (global), a dense layer, "gate", "scale"; 1x1 projection "project"
// to 16 features and a loss; `backward` adds the gradients.
ModelGraph mbconv(bool backward) {
  ModelGraph g("mbconv");
  GraphBuilder b(g, DType::BF16);
  TensorId x = b.input("x", {kB, kS, kS, kC}, DType::BF16);
  TensorId h = b.conv2d(x, b.param("expand.w", {1, 1, kC, kC}), win(1, 1, 1, 1, 0, 0, 0, 0), "expand");
  h = b.silu(bn(b, h, "bn1"), "swish1");
  h = b.depthwise_conv2d(h, b.param("dw.w", {3, 3, kC}), win(3, 3, 1, 1, 1, 1, 1, 1), "dw");
  h = b.silu(bn(b, h, "bn2"), "swish2");
  OpAttrs::Window all = win(kS, kS, 1, 1, 0, 0, 0, 0);
  TensorId s = b.reshape(b.avg_pool(h, all, "pool"), {kB, kC}, "pool.flat");
  s = b.sigmoid(b.matmul(s, b.param("se.w", {kC, kC}), "se"), "gate");
  h = b.channel_scale(h, s, "scale");
  TensorId z = b.conv2d(h, b.param("project.w", {1, 1, kC, 16}), win(1, 1, 1, 1, 0, 0, 0, 0), "project");
  TensorId loss = b.softmax_cross_entropy(b.reshape(z, {kB * kS * kS, 16}, "flat"), b.label("labels", {kB * kS * kS}),
                                          "loss");
  if (backward) b.backward(loss);
  return g;
}

const ExecOp& kernel_of(const ModelGraph& g, const ExecProgram& ep, const std::string& name) {
  for (const ExecOp& e : ep.ops)
    for (size_t k = 0; k < e.members.size(); ++k)
      if (!e.recomputed[k] && g.op(e.members[k]).name == name) return e;
  throw std::runtime_error("no kernel runs " + name);
}

std::set<std::string> names(const ModelGraph& g, const std::vector<TensorId>& ts) {
  std::set<std::string> out;
  for (TensorId t : ts) out.insert(g.tensor(t).name);
  return out;
}

// Members of the kernel, "name" for its own work, "name*" for a recomputed one, "name/reduce" and "name/apply" for
// a two-pass op's passes.
std::set<std::string> members(const ModelGraph& g, const std::vector<FusionGroup>& groups, const std::string& name) {
  for (const FusionGroup& fg : groups)
    for (const FusionMember& m : fg.members)
      if (!m.recomputed && m.pass == MemberPass::All && g.op(m.op).name == name) {
        std::set<std::string> out;
        for (const FusionMember& k : fg.members)
          out.insert(g.op(k.op).name + (k.pass == MemberPass::Reduce  ? "/reduce"
                                        : k.pass == MemberPass::Apply ? "/apply"
                                                                      : "") +
                     (k.recomputed ? "*" : ""));
        return out;
      }
  return {};
}

ChipConfig v3() {
  return load_experiment_text("hardware: {preset: tpu-v3}\nworkload: {model: matmul, m: 8, k: 8, n: 8}\n", "h.yaml")
      .hardware.chip;
}

}  // namespace

// Forward: the depthwise kernel reads the expansion's raw result, its batch-norm statistics and scale and offset,
// and the filter; it normalizes and applies swish on chip (3 + 2 operations, an exponential and a division per
// element), convolves (2 per tap: 18), and sums its result's statistics (3 operations and 2 reduction steps) as it
// writes the result. Without the mechanism the batch norm and swish are a loop fusion that writes the swish's output,
// the depthwise convolution reads it, and the statistics are a kernel of their own reading the result again.
TEST(DepthwiseFusionTest, TheDepthwiseKernelTakesItsInputsBatchNormAndItsStatisticsByHand) {
  const ModelGraph g = mbconv(false);
  const std::vector<OpId> order = g.topological_order();
  const ExecProgram ep = lower(g, order, v3());
  const ExecOp& dw = kernel_of(g, ep, "dw");
  EXPECT_EQ(dw.fusion, FusionKind::Output);
  EXPECT_EQ(names(g, dw.hbm_reads),
            (std::set<std::string>{"expand", "bn1.mean", "bn1.rstd", "bn1.g", "bn1.b", "dw.w"}));
  EXPECT_EQ(names(g, dw.hbm_writes), (std::set<std::string>{"dw", "bn2.mean", "bn2.rstd"}));
  EXPECT_EQ(&kernel_of(g, ep, "bn2.stats"), &dw);
  double read = 0;
  for (TensorId t : dw.hbm_reads) read += g.tensor(t).stored_bytes();
  EXPECT_DOUBLE_EQ(dw.core_hbm_read * dw.cores, read);
  // 2 x 128 + 2 x 128 fp32 statistics, the 8 x 16 x 16 x 128 bf16 result.
  EXPECT_DOUBLE_EQ(dw.core_hbm_write * dw.cores, 2.0 * kB * kS * kS * kC + 2 * 4.0 * kB * kC);
  ASSERT_EQ(dw.cores, 2);
  EXPECT_DOUBLE_EQ(dw.core_vector.elements, kB * kS * kS * kC / 2.0);
  EXPECT_DOUBLE_EQ(dw.core_vector.simple, 3 + 2 + 18 + 3);
  EXPECT_DOUBLE_EQ(dw.core_vector.transcendental, 1);
  EXPECT_DOUBLE_EQ(dw.core_vector.divide, 1);
  EXPECT_DOUBLE_EQ(dw.core_vector.reduce, 2);

  LowerOptions apart;
  apart.fusion.vector_conv = false;
  const ExecProgram alone = lower(g, order, v3(), apart);
  const ExecOp& dw0 = kernel_of(g, alone, "dw");
  EXPECT_EQ(dw0.members.size(), 1u);
  EXPECT_EQ(names(g, dw0.hbm_reads), (std::set<std::string>{"swish1", "dw.w"}));
  EXPECT_EQ(names(g, kernel_of(g, alone, "swish1").hbm_writes), std::set<std::string>{"swish1"});
  EXPECT_NE(&kernel_of(g, alone, "bn2.stats"), &dw0);
}

// Backward: the depthwise input gradient is a convolution's input gradient, which takes the layer below's swish
// gradient and the sums that open its batch-norm gradient; both depthwise gradients recompute the elementwise pass
// of their own batch-norm gradient from its inputs instead of reading a stored dx. The pool's gradient (dy / 256
// broadcast over the map) joins the kernel that adds it to the scale's gradient and is never written.
TEST(DepthwiseFusionTest, TheDepthwiseGradientsFuseAsAConvolutionsDo) {
  const ModelGraph g = mbconv(true);
  const std::vector<OpId> order = g.topological_order();
  const auto groups = fuse(g, order, {});
  const std::set<std::string> dx = members(g, groups, "dw.dx");
  EXPECT_TRUE(dx.count("swish1.dx")) << ::testing::PrintToString(dx);
  EXPECT_TRUE(dx.count("bn1.grad/reduce"));
  EXPECT_TRUE(dx.count("bn2.grad/apply*"));
  EXPECT_TRUE(members(g, groups, "dw.dw").count("bn2.grad/apply*"));
  const ExecProgram ep = lower(g, order, v3());
  for (const ExecOp& e : ep.ops) {
    const std::set<std::string> w = names(g, e.hbm_writes);
    EXPECT_FALSE(w.count("pool.dx")) << e.name;
    EXPECT_FALSE(w.count("bn2.dx")) << e.name;
  }
  FusionOptions apart;
  apart.vector_conv = false;
  const auto alone = fuse(g, order, apart);
  EXPECT_EQ(members(g, alone, "dw.dx"), std::set<std::string>{"dw.dx"});
  EXPECT_EQ(members(g, alone, "dw.dw"), std::set<std::string>{"dw.dw"});
}
