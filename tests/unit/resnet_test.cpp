// workload.model: resnet (docs/model.md, "resnet"): trainable parameters equal the reference counts of
// ../shared/reference/cnn-models.md for every depth, ResNet-50's forward multiply-adds at 224 equal a hand count of
// its layer table (4.089e9 per image), space-to-depth changes only the stem, and bad input is refused at its key.
#include <gtest/gtest.h>

#include "sim/config/loader.h"
#include "tests/unit/load_errors.h"
#include "workloads/i_workload.h"
#include "workloads/op_def.h"

using namespace podsim;

namespace {

std::string resnet(const std::string& extra) {
  return "hardware:\n  preset: tpu-v3\nworkload:\n  model: resnet\n  batch: 2\n" + extra;
}

ModelGraph build(const std::string& yaml) {
  Experiment e = load_experiment_text(yaml, "exp.yaml", {});
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

int64_t parameters(const ModelGraph& g) {
  int64_t n = 0;
  for (const TensorInfo& t : g.tensors())
    if (t.role == TensorRole::Parameter) n += t.elements();
  return n;
}

double forward_mxu_flops(const ModelGraph& g) {
  double f = 0;
  for (const Op& op : g.ops()) {
    if (op.phase != Phase::Forward) continue;
    const OpCost c = op_cost(g, op);
    if (c.unit == Unit::Mxu) f += c.flops;
  }
  return f;
}

}  // namespace

TEST(ResNetTest, ParameterCountsEqualTheReference) {
  const std::pair<int, int64_t> expected[] = {
      {18, 11689512}, {34, 21797672}, {50, 25557032}, {101, 44549160}, {152, 60192808}};
  for (const auto& [depth, count] : expected)
    EXPECT_EQ(parameters(build(resnet("  image_size: 64\n  depth: " + std::to_string(depth) + "\n"))), count)
        << "ResNet-" << depth;
}

// Multiply-adds per image, from the layer table: stem 112² · 7·7·3·64; each bottleneck at output size s with width
// w and input c: s_in² ... counted layer by layer below, independently of the workload's code.
TEST(ResNetTest, ResNet50ForwardFlopsEqualAHandCount) {
  double macs = 112.0 * 112 * 7 * 7 * 3 * 64;  // stem
  const int blocks[] = {3, 4, 6, 3};
  const double sizes[] = {56, 28, 14, 7};
  double in = 64, in_size = 56;
  for (int st = 0; st < 4; ++st) {
    const double w = 64 << st, s = sizes[st];
    for (int b = 0; b < blocks[st]; ++b) {
      macs += in_size * in_size * in * w;     // 1x1 reduce, at the input's size (stride on the 3x3)
      macs += s * s * 9 * w * w;              // 3x3 with the block's stride
      macs += s * s * w * 4 * w;              // 1x1 expand
      if (b == 0) macs += s * s * in * 4 * w; // projection shortcut
      in = 4 * w;
      in_size = s;
    }
  }
  macs += 2048.0 * 1000;  // the classifier
  EXPECT_NEAR(macs, 4.089e9, 0.001e9);  // ../shared/reference/cnn-models.md: 4.089e9 MACs per image
  const ModelGraph g = build(resnet("  depth: 50\n"));
  EXPECT_DOUBLE_EQ(forward_mxu_flops(g), 2 * 2 * macs);  // batch 2, a multiply-add is 2 FLOPs
  // A training step: the two backward convolutions (and the classifier's two products) do the forward's work again
  // each: 3x in all.
  EXPECT_DOUBLE_EQ(g.matmul_flops(), 3 * 2 * 2 * macs - 2.0 * 2 * 112 * 112 * 7 * 7 * 3 * 64);
}

TEST(ResNetTest, SpaceToDepthChangesOnlyTheStem) {
  const ModelGraph plain = build(resnet("  depth: 18\n  image_size: 64\n"));
  const ModelGraph s2d = build(resnet("  depth: 18\n  image_size: 64\n  space_to_depth: true\n"));
  EXPECT_EQ(s2d.tensor(s2d.find_tensor("images")).shape, (std::vector<int64_t>{2, 32, 32, 12}));
  EXPECT_EQ(s2d.tensor(s2d.find_tensor("stem.conv.w")).shape, (std::vector<int64_t>{4, 4, 12, 64}));
  EXPECT_EQ(parameters(s2d) - parameters(plain), 4 * 4 * 12 * 64 - 7 * 7 * 3 * 64);
  EXPECT_EQ(s2d.tensor(s2d.find_tensor("stem.conv")).shape, plain.tensor(plain.find_tensor("stem.conv")).shape);
}

TEST(ResNetTest, BadInputIsRefusedAtItsKey) {
  expect_load_error(resnet("  bn_batch: 3\n"), Err::NotDivisible, 6, "does not divide workload.batch");
  expect_load_error(resnet("  depth: 42\n"), Err::BadChoice, 6, "depth");
  expect_load_error(resnet("  space_to_depth: true\n  image_size: 65\n"), Err::NotDivisible, 6, "even image_size");
  // Groups of 8 examples against replicas of 12: neither within one replica nor whole replicas.
  expect_load_error("hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\nworkload:\n  model: resnet\n  batch: 48\n"
        "  bn_batch: 8\nstrategy:\n  name: data_parallel\nmesh:\n  axes: [data]\n  shape: [4]\n",
        Err::NotDivisible, 7, "data-parallel replicas");
  // workload.bn_group: replicas per group, a divisor of the data axis, not with bn_batch, only with a data axis.
  const std::string four = "hardware:\n  preset: tpu-v3\n  pod: {dims: [4, 1]}\nworkload:\n  model: resnet\n  batch: 48\n";
  expect_load_error(four + "  bn_group: 3\nstrategy:\n  name: data_parallel\n", Err::NotDivisible, 7,
                    "does not divide the data axis of 4");
  expect_load_error(four + "  bn_group: 2\n  bn_batch: 24\nstrategy:\n  name: data_parallel\n", Err::StrategyMismatch, 7,
                    "set one of them");
  expect_load_error(four + "  bn_group: 2\nstrategy:\n  name: spmd\n", Err::StrategyMismatch, 7, "no `data` axis");
}
