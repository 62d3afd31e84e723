// The fusion rules (hw/compiler/fusion.h) on small hand-built graphs: which ops group, in which kind of fusion,
// decided by each kind's declared properties.
#include <gtest/gtest.h>

#include "hw/compiler/fusion.h"
#include "workloads/builder.h"

using namespace podsim;

namespace {

std::vector<OpId> in_order(const ModelGraph& g) {
  std::vector<OpId> o;
  for (size_t i = 0; i < g.num_ops(); ++i) o.push_back(static_cast<OpId>(i));
  return o;
}

std::vector<std::vector<std::string>> names(const ModelGraph& g, const std::vector<FusionGroup>& groups) {
  std::vector<std::vector<std::string>> out;
  for (const auto& fg : groups) {
    out.emplace_back();
    for (const FusionMember& m : fg.members) out.back().push_back(g.op(m.op).name);
  }
  return out;
}

}  // namespace

TEST(FusionRulesTest, ElementwiseChainIsOneLoopFusion) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  TensorId x = b.input("x", {64, 32}, DType::F32);
  TensorId y = b.add(b.gelu(b.relu(x, "relu"), "gelu"), x, "residual");
  b.scale(y, 2.0, "scale");
  auto groups = fuse(g, in_order(g), {});
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].kind, FusionKind::Loop);
  EXPECT_EQ(names(g, groups)[0], (std::vector<std::string>{"relu", "gelu", "residual", "scale"}));
  // run.fusion: none: every op alone.
  FusionOptions off;
  off.enabled = false;
  auto alone = fuse(g, in_order(g), off);
  EXPECT_EQ(alone.size(), 4u);
  for (const auto& fg : alone) EXPECT_EQ(fg.kind, FusionKind::None);
}

TEST(FusionRulesTest, MatmulTakesItsEpilogueButNotAReduction) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  TensorId x = b.input("x", {64, 32}, DType::F32);
  TensorId w = b.param("w", {32, 32});
  TensorId bias = b.param("b", {32});
  TensorId h = b.gelu(b.bias_add(b.matmul(x, w, "mm"), bias, "bias"), "gelu");
  TensorId r = b.add(h, x, "residual");
  b.layer_norm(r, b.param("gamma", {32}), b.param("beta", {32}), "ln");
  auto groups = fuse(g, in_order(g), {});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].kind, FusionKind::Output);
  EXPECT_EQ(names(g, groups)[0], (std::vector<std::string>{"mm", "bias", "gelu", "residual"}));
  EXPECT_EQ(groups[1].kind, FusionKind::None);  // the layer norm runs alone after the output fusion
}

TEST(FusionRulesTest, ReductionTakesItsElementwiseProducersAndConsumersOnce) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  TensorId x = b.input("x", {4, 16, 16}, DType::F32);
  TensorId s = b.softmax(b.scale(x, 0.5, "scale"), 1.0, false, "softmax");
  TensorId t = b.relu(s, "relu");
  b.softmax(t, 1.0, false, "softmax2");  // a second reduction starts a new fusion
  auto groups = fuse(g, in_order(g), {});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(groups[0].kind, FusionKind::Reduction);
  EXPECT_EQ(names(g, groups)[0], (std::vector<std::string>{"scale", "softmax", "relu"}));
  EXPECT_EQ(names(g, groups)[1], (std::vector<std::string>{"softmax2"}));
}

TEST(FusionRulesTest, OpsThatDeclareNeitherPropertyNeverFuse) {
  ModelGraph g("t");
  GraphBuilder b(g, DType::F32);
  TensorId table = b.param("table", {100, 32});
  TensorId ids = b.input("ids", {64}, DType::I32);
  TensorId e = b.embedding(table, ids, "embed");  // a gather: opaque
  b.relu(b.relu(e, "relu1"), "relu2");
  auto groups = fuse(g, in_order(g), {});
  ASSERT_EQ(groups.size(), 2u);
  EXPECT_EQ(names(g, groups)[0], (std::vector<std::string>{"embed"}));
  EXPECT_EQ(names(g, groups)[1], (std::vector<std::string>{"relu1", "relu2"}));
}
