// Data parallel over a ResNet with distributed batch norm (workload.bn_batch, Ying et al. 2018): the plan reproduces
// the single-device step, which computes the same groups, and its collectives are pinned by hand counts.
#include "tests/unit/plan_steps.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// ResNet-18 at 32 x 32, 16 images over 4 replicas (4 each).
Step resnet18(int64_t bn_batch) {
  return plan_step(hardware("[4, 1]") +
                   "workload: {model: resnet, depth: 18, image_size: 32, classes: 10, batch: 16, dtype: fp32, "
                   "bn_batch: " + std::to_string(bn_batch) + "}\nstrategy: {name: data_parallel}\n");
}

struct Reductions {
  int grouped = 0, whole = 0;  // all-reduces over runs of replicas, over the whole data axis
  double grouped_bytes = 0;
};

Reductions reductions(const Program& p) {
  Reductions r;
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (!is_communication(op.kind)) continue;
    EXPECT_EQ(op.kind, OpKind::AllReduce) << op.name;
    EXPECT_EQ(op.attrs.axes, std::vector<std::string>{"data"}) << op.name;
    if (op.attrs.group_block > 0) {
      EXPECT_EQ(op.attrs.group_block, 2) << op.name;
      ++r.grouped;
      r.grouped_bytes += p.graph.tensor(op.inputs.front()).bytes();
    } else {
      ++r.whole;
    }
  }
  return r;
}

// ResNet-18's 20 batch norms (the stem, two per block, three shortcuts) have 64 + 4 x 64 + 5 x 128 + 5 x 256 +
// 5 x 512 = 4800 channels; its 62 parameters (20 filters, 20 gammas, 20 betas, the classifier's weight and bias)
// each get one gradient all-reduce (bucketing off).
constexpr int kBatchNorms = 20, kParams = 62;
constexpr double kChannels = 4800;

}  // namespace

TEST(ResNetDataParallelTest, GroupsWithinAReplicaNeedNoStatisticsReduction) {
  const Step s = resnet18(4);
  const Reductions r = reductions(s.plan.programs[0]);
  EXPECT_EQ(r.grouped, 0);
  EXPECT_EQ(r.whole, kParams + 1);  // and the loss
  expect_reproduces_the_step(s);
}

// Groups of 8 images span 2 replicas: per batch norm, the forward all-reduces the sum of x and then the sum of
// squared deviations ([2, C] fp32 each: a hi and a lo part), the backward the sums of dy and dy * xhat ([4, C]),
// each over the 2 replicas of the group: 3 all-reduces and 32 C bytes per batch norm.
TEST(ResNetDataParallelTest, GroupsSpanningReplicasAllReduceTheirStatistics) {
  const Step s = resnet18(8);
  const Reductions r = reductions(s.plan.programs[0]);
  EXPECT_EQ(r.grouped, 3 * kBatchNorms);
  EXPECT_DOUBLE_EQ(r.grouped_bytes, 32 * kChannels);
  EXPECT_EQ(r.whole, kParams + 1);  // and the loss
  expect_reproduces_the_step(s);
}

// workload.bn_group, Ying et al.'s way of writing the groups (replicas, not examples), makes the same plan as the
// bn_batch it stands for: 2 replicas of 4 images are groups of 8, 1 replica a group of 4.
TEST(ResNetDataParallelTest, GroupsOfReplicasAreGroupsOfTheirExamples) {
  for (const auto& [replicas, examples] : {std::pair{2, 8}, std::pair{1, 4}, std::pair{4, 16}}) {
    const Step by_replicas = plan_step(hardware("[4, 1]") +
                                       "workload: {model: resnet, depth: 18, image_size: 32, classes: 10, batch: 16, "
                                       "dtype: fp32, bn_group: " + std::to_string(replicas) +
                                       "}\nstrategy: {name: data_parallel}\n");
    EXPECT_EQ(by_replicas.exp.params.i("workload.bn_batch"), examples);
    EXPECT_EQ(collectives(by_replicas.plan.programs[0]), collectives(resnet18(examples).plan.programs[0]));
  }
  // The single-device reference has no data axis to count replicas on: it takes the partitioned step's groups.
  LoadOptions reference;
  reference.single_device = true;
  EXPECT_EQ(load_experiment_text(hardware("[4, 1]") +
                                     "workload: {model: resnet, depth: 18, image_size: 32, classes: 10, batch: 16, "
                                     "bn_group: 2}\nstrategy: {name: data_parallel}\n",
                                 "groups", reference)
                .params.i("workload.bn_batch"),
            8);
}

// The whole batch as one group: the statistics all-reduce spans every replica.
TEST(ResNetDataParallelTest, TheWholeBatchAsOneGroup) {
  const Step s = resnet18(16);
  const Reductions r = reductions(s.plan.programs[0]);
  EXPECT_EQ(r.grouped, 0);
  EXPECT_EQ(r.whole, kParams + 1 + 3 * kBatchNorms);
  expect_reproduces_the_step(s);
}

// Weight-update sharding shards each filter along its first dimension the data axis divides: a filter
// [KH, KW, Ci, Co] along its features, not its 1, 3 or 7 rows (which would pad 4x, 1.3x, 1.1x).
TEST(ResNetDataParallelTest, WeightUpdateShardingSplitsFiltersAlongTheirFeatures) {
  const Step s = plan_step(hardware("[4, 1]") +
                           "workload: {model: resnet, depth: 18, image_size: 32, classes: 12, batch: 16, dtype: fp32, "
                           "bn_batch: 8}\nstrategy: {name: data_parallel, weight_update_sharding: true}\n");
  const auto lines = collectives(s.plan.programs[0]);
  auto has = [&](const std::string& l) { return std::find(lines.begin(), lines.end(), l) != lines.end(); };
  EXPECT_TRUE(has(rs("stem.conv.w.grad", "data", 3, 7 * 7 * 3 * 64 * 4, 7 * 7 * 3 * 16 * 4)));
  EXPECT_TRUE(has(rs("layer1.0.a.conv.w.grad", "data", 2, 3 * 3 * 64 * 64 * 4, 3 * 3 * 16 * 64 * 4)));
  EXPECT_TRUE(has(rs("layer2.0.down.conv.w.grad", "data", 2, 64 * 128 * 4, 16 * 128 * 4)));
  EXPECT_TRUE(has(ag("layer2.0.down.conv.w.new", "data", 2, 16 * 128 * 4, 64 * 128 * 4)));
  EXPECT_TRUE(has(rs("fc.w.grad", "data", 0, 512 * 12 * 4, 128 * 12 * 4)));
  expect_reproduces_the_step(s);
}

// Left unset (or 0), bn_batch is the per-replica batch, as TensorFlow's and Flax's batch norm normalize under data
// parallelism: 16 images over 4 replicas are groups of 4, the plan of bn_batch 4 (no statistics all-reduce), and the
// single-device reference normalizes the same groups of 4.
TEST(ResNetDataParallelTest, TheDefaultIsPerReplicaBatchNorm) {
  const std::string yaml = hardware("[4, 1]") +
                           "workload: {model: resnet, depth: 18, image_size: 32, classes: 10, batch: 16, dtype: fp32}\n"
                           "strategy: {name: data_parallel}\n";
  const Step s = plan_step(yaml);
  EXPECT_EQ(s.exp.params.i("workload.bn_batch"), 4);
  EXPECT_NE(s.exp.params.where("workload.bn_batch").str().find("per replica"), std::string::npos);
  const Reductions r = reductions(s.plan.programs[0]);
  EXPECT_EQ(r.grouped, 0);
  EXPECT_EQ(r.whole, kParams + 1);
  EXPECT_EQ(collectives(s.plan.programs[0]), collectives(resnet18(4).plan.programs[0]));
  EXPECT_EQ(resnet18(0).exp.params.i("workload.bn_batch"), 4);  // written as 0
  LoadOptions reference;
  reference.single_device = true;
  EXPECT_EQ(load_experiment_text(yaml, "bn", reference).params.i("workload.bn_batch"), 4);
  // One replica: the whole batch is its examples.
  LoadOptions none;
  EXPECT_EQ(load_experiment_text(hardware("[1, 1]") +
                                     "workload: {model: resnet, depth: 18, image_size: 32, classes: 10, batch: 16}\n",
                                 "one", none)
                .params.i("workload.bn_batch"),
            0);
  expect_reproduces_the_step(s);
}
