// The SPMD partitioner against the single-device reference, without SystemC: partitioned programs run on every
// device in memory (partition/interpreter.h), the shards are assembled, and every step result (loss, gradients,
// updated parameters and optimizer state) must match the reference executor's within a relative norm error of
// 1e-5 (fp32; partitioned sums add in another order).
#include <gtest/gtest.h>

#include "partition/interpreter.h"
#include "partition/partitioner.h"
#include "plan/shard_data.h"
#include "sim/config/loader.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"
#include "workloads/tensor_compare.h"

using namespace podsim;

namespace {

constexpr double kTol = 1e-5;

ModelGraph build(const std::string& workload_yaml) {
  Experiment e = load_experiment_text("hardware: {preset: tpu-v3}\nworkload:\n" + workload_yaml, "p.yaml");
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

const char* kMlp = "  model: mlp\n  batch: 12\n  input: 10\n  hidden: 14\n  layers: 2\n  classes: 6\n  dtype: fp32\n"
                   "  optimizer: adam\n";
const char* kTransformer = "  model: transformer\n  layers: 2\n  d_model: 16\n  d_ff: 24\n  heads: 4\n  vocab: 20\n"
                           "  seq_len: 6\n  batch: 4\n  dtype: fp32\n";

struct Outcome {
  int compared = 0;
  double worst = 0;
  std::string worst_name;
  std::vector<std::string> missing;
};

// Partitions `g` on `mesh` with `specs` (tensor name -> spec), runs it, and compares every result with the
// reference.
Outcome check(const ModelGraph& g, const Mesh& mesh, const std::map<std::string, std::string>& specs) {
  PartitionInput in{g, mesh};
  for (const auto& [name, text] : specs) {
    TensorId t = g.find_tensor(name);
    EXPECT_GE(t, 0) << name;
    if (t >= 0) in.annotations[t] = ShardSpec::parse(text);
  }
  Plan plan;
  plan.strategy = "test";
  plan.mesh = mesh;
  plan.programs.push_back(partition_step(in).program);
  plan.role_of_chip.assign(static_cast<size_t>(mesh.devices()), 0);
  validate_plan(plan, g, mesh.devices());
  TensorStore inputs;
  init_step_inputs(g, inputs, 7);
  TensorStore ref = inputs;
  run_reference(g, ref);
  std::vector<TensorStore> chips = interpret_plan(plan, g, inputs, 7);
  TensorStore got;
  assemble_results(plan, g, [&](int64_t c) { return &chips[c]; }, got);
  Outcome o;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorInfo& t = g.tensor(static_cast<TensorId>(i));
    bool result = t.role == TensorRole::Loss || t.role == TensorRole::Updated ||
                  (t.role == TensorRole::Gradient && t.name.size() > 5 && t.name.substr(t.name.size() - 5) == ".grad" &&
                   g.consumers(static_cast<TensorId>(i)).size() == 1 &&
                   g.op(g.consumers(static_cast<TensorId>(i))[0]).phase == Phase::Optimizer);
    if (!result) continue;
    if (!got.has(static_cast<TensorId>(i))) {
      o.missing.push_back(t.name);
      continue;
    }
    TensorDiff d = compare_tensors(got.get(static_cast<TensorId>(i)), ref.get(static_cast<TensorId>(i)));
    ++o.compared;
    if (d.rel_norm > o.worst) {
      o.worst = d.rel_norm;
      o.worst_name = t.name;
    }
  }
  return o;
}

Mesh mesh(std::vector<std::string> names, std::vector<int64_t> sizes, std::vector<int64_t> torus) {
  return Mesh::layout(names, sizes, Torus(torus, std::vector<bool>(torus.size(), true)), {});
}

void expect_equivalent(const Outcome& o, int at_least) {
  EXPECT_TRUE(o.missing.empty()) << "missing results, e.g. " << (o.missing.empty() ? "" : o.missing.front());
  EXPECT_GE(o.compared, at_least);
  EXPECT_LE(o.worst, kTol) << "worst: " << o.worst_name;
}

}  // namespace

TEST(PartitionTest, MlpDataParallelMatchesOneDevice) {
  ModelGraph g = build(kMlp);
  Outcome o = check(g, mesh({"data"}, {4}, {4, 1}), {{"x", "[data, -]"}, {"labels", "[data]"}});
  expect_equivalent(o, 13);
}

TEST(PartitionTest, MlpUnevenBatchIsPaddedAndMasked) {
  ModelGraph g = build(kMlp);  // batch 12 over 8 devices: 2 rows each, the last two devices all padding
  Outcome o = check(g, mesh({"data"}, {8}, {4, 2}), {{"x", "[data, -]"}, {"labels", "[data]"}});
  expect_equivalent(o, 13);
}

TEST(PartitionTest, MlpTensorParallelHiddenSplitUnevenly) {
  ModelGraph g = build(kMlp);  // hidden 14 over 4: padded to 16
  Outcome o = check(g, mesh({"model"}, {4}, {2, 2}),
                    {{"fc0.w", "[-, model]"}, {"fc0.b", "[model]"}, {"fc1.w", "[model, -]"}});
  expect_equivalent(o, 13);
}

TEST(PartitionTest, TransformerMegatronTimesData) {
  ModelGraph g = build(kTransformer);
  std::map<std::string, std::string> s = {{"tokens", "[data, -]"}, {"labels", "[data, -]"}};
  for (int l = 0; l < 2; ++l) {
    std::string n = "layer" + std::to_string(l);
    for (const char* w : {".attn.q.w", ".attn.k.w", ".attn.v.w"}) s[n + w] = "[-, model, -]";
    s[n + ".attn.o.w"] = "[model, -, -]";
    s[n + ".ffn.w1"] = "[-, model]";
    s[n + ".ffn.b1"] = "[model]";
    s[n + ".ffn.w2"] = "[model, -]";
  }
  Outcome o = check(g, mesh({"data", "model"}, {2, 4}, {4, 2}), s);
  expect_equivalent(o, 30);
}

// Fused attention (workload.attention: flash) under Megatron x data, and with the queries' positions split over a
// third axis (context parallelism: keys and values all-gathered along the sequence, their gradients reduced), for
// one key/value head per query head and for grouped queries.
TEST(PartitionTest, TransformerFlashAttentionHeadsBatchAndSequence) {
  for (const char* kv : {"", "  kv_heads: 2\n"}) {
    SCOPED_TRACE(*kv ? "grouped" : "multi-head");
    ModelGraph g = build(std::string(kTransformer) + "  attention: flash\n  flash: {block_q: 2, block_kv: 4}\n" + kv);
    const bool grouped = *kv != 0;
    std::map<std::string, std::string> s = {{"tokens", "[data, -]"}, {"labels", "[data, -]"}};
    std::map<std::string, std::string> cp = s;
    for (int l = 0; l < 2; ++l) {
      std::string n = "layer" + std::to_string(l);
      s[n + ".attn.q.w"] = grouped ? "[-, model, -, -]" : "[-, model, -]";
      for (const char* w : {".attn.k.w", ".attn.v.w"}) s[n + w] = "[-, model, -]";
      s[n + ".attn.o.w"] = grouped ? "[model, -, -, -]" : "[model, -, -]";
      cp[n + ".attn.q"] = grouped ? "[data, seq, -, -, -]" : "[data, seq, -, -]";
    }
    expect_equivalent(check(g, mesh({"data", "model"}, {2, 2}, {2, 2}), s), 20);
    expect_equivalent(check(g, mesh({"data", "seq"}, {2, 3}, {3, 2}), cp), 20);
    // The kernels keep the queries split (their mask offset by the device's index along seq) and read keys and
    // values gathered along it.
    PartitionInput in{g, mesh({"data", "seq"}, {2, 3}, {3, 2})};
    for (const auto& [name, text] : cp) in.annotations[g.find_tensor(name)] = ShardSpec::parse(text);
    const Program p = partition_step(in).program;
    int kernels = 0, gathers = 0;
    for (OpId id : p.order) {
      const Op& op = p.graph.op(id);
      if (op.kind == OpKind::FlashAttention || op.kind == OpKind::FlashAttentionGrad) {
        ++kernels;
        EXPECT_EQ(op.attrs.axes, std::vector<std::string>{"seq"}) << op.name;
        EXPECT_EQ(p.graph.tensor(op.inputs[0]).shape[1], 2) << op.name;  // 6 positions over 3 devices
        EXPECT_EQ(p.graph.tensor(op.inputs[1]).shape[1], 6) << op.name;
      }
      gathers += op.kind == OpKind::AllGather && op.attrs.axes == std::vector<std::string>{"seq"};
    }
    EXPECT_EQ(kernels, 4);
    EXPECT_GE(gathers, 4);  // k and v of each layer (the backward may gather them again)
  }
}

TEST(PartitionTest, WeightUpdateShardingSplitsStateAndGradients) {
  ModelGraph g = build(kMlp);
  std::map<std::string, std::string> s = {{"x", "[data, -]"}, {"labels", "[data]"}};
  for (const char* p : {"fc0.w", "fc1.w", "out.w"}) {
    s[std::string(p) + ".m"] = "[data, -]";
    s[std::string(p) + ".v"] = "[data, -]";
  }
  Outcome o = check(g, mesh({"data"}, {4}, {2, 2}), s);
  expect_equivalent(o, 13);
}

// A dimension split over (data, model) handing its innermost axis to another dimension: an all-to-all over
// `model`, no gathers of the hidden activation. The MLP's hidden activation [12, 16] comes out of fc0 split by rows
// over (data, model) and is wanted as [data, model]: rows over data, columns over model (the ReLU pulls the split to
// its input, the biased fc0 output, which is where the all-to-all happens: dimension 1 split, dimension 0
// concatenated). Backward, the mirror: the ReLU's gradient takes its mask from fc0.relu, [data, model], so it runs in
// that layout (fc1's input gradient, rows over data, is sliced to it: no communication), and fc0's weight gradient,
// which reads the batch by rows over (data, model), takes it back with the opposite all-to-all (dimension 0 split,
// dimension 1 concatenated). fc0's bias gradient, summed over rows split over data with the columns over model, is
// reduced over data alone; the bias is then updated by columns and gathered over model (an all-gather of the
// updated bias, not of the activation).
TEST(PartitionTest, AllToAllMovesTheInnermostAxisOfASplit) {
  ModelGraph g = build("  model: mlp\n  batch: 12\n  input: 10\n  hidden: 16\n  layers: 2\n  classes: 6\n"
                       "  dtype: fp32\n  optimizer: sgd\n");
  const TensorId h = g.find_tensor("fc0.relu");
  ASSERT_GE(h, 0);
  PartitionInput in{g, mesh({"data", "model"}, {2, 2}, {2, 2})};
  in.annotations[g.find_tensor("x")] = ShardSpec::parse("[(data, model), -]");
  in.annotations[g.find_tensor("labels")] = ShardSpec::parse("[(data, model)]");
  in.annotations[h] = ShardSpec::parse("[data, model]");
  Program p = partition_step(in).program;
  std::vector<std::string> all_to_all, gathers;
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (op.name.rfind("fc0.", 0) != 0) continue;
    const TensorInfo& t = p.graph.tensor(op.inputs[0]);
    if (op.kind == OpKind::AllToAll) {
      EXPECT_EQ(op.attrs.axes, std::vector<std::string>{"model"});
      all_to_all.push_back(t.name + " " + std::to_string(op.attrs.dim) + " " + std::to_string(op.attrs.dim2));
    }
    if (op.kind == OpKind::AllGather) gathers.push_back(t.name);
  }
  EXPECT_EQ(all_to_all, (std::vector<std::string>{"fc0.bias 1 0", "fc0.relu.dx 0 1"}));
  EXPECT_EQ(gathers, std::vector<std::string>{"fc0.b.new"});
  Outcome o = check(g, mesh({"data", "model"}, {2, 2}, {2, 2}),
                    {{"x", "[(data, model), -]"}, {"labels", "[(data, model)]"}, {"fc0.relu", "[data, model]"}});
  expect_equivalent(o, 7);
}
