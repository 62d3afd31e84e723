// Gradient bucketing (partition/combine.h): which reductions are combined, into how many collectives of how many
// bytes (hand counts from the tensors' shapes), where the combined collective is issued, and that the partitioned
// step still reproduces the single-device step (the plan interpreter: bit for bit against the uncombined plan).
#include <gtest/gtest.h>

#include <algorithm>

#include "partition/combine.h"
#include "partition/interpreter.h"
#include "partition/partitioner.h"
#include "plan/shard_data.h"
#include "sim/config/loader.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"
#include "workloads/tensor_compare.h"
#include "tests/unit/plan_figures.h"

using namespace podsim;

namespace {

// fp32 MLP 24 -> 40 -> 40 -> 40 -> 10. Gradient bytes (4 per element): fc0.w 24*40 = 3840, fc0.b 160,
// fc1.w 40*40 = 6400, fc1.b 160, fc2.w 6400, fc2.b 160, out.w 40*10 = 1600, out.b 40: 18760 in all.
const char* kMlp = "  model: mlp\n  batch: 16\n  input: 24\n  hidden: 40\n  layers: 3\n  classes: 10\n  dtype: fp32\n"
                   "  optimizer: adam\n";

ModelGraph build(const std::string& workload_yaml) {
  Experiment e = load_experiment_text("hardware: {preset: tpu-v3}\nworkload:\n" + workload_yaml, "c.yaml");
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

Mesh mesh(std::vector<std::string> names, std::vector<int64_t> sizes, std::vector<int64_t> torus) {
  return Mesh::layout(names, sizes, Torus(torus, std::vector<bool>(torus.size(), true)), {});
}

Plan data_parallel_plan(const ModelGraph& g, const Mesh& m) {
  PartitionInput in{g, m};
  in.annotations[g.find_tensor("x")] = ShardSpec::parse("[data, -]");
  in.annotations[g.find_tensor("labels")] = ShardSpec::parse("[data]");
  Plan plan;
  plan.strategy = "test";
  plan.mesh = m;
  plan.programs.push_back(partition_step(in).program);
  plan.role_of_chip.assign(static_cast<size_t>(m.devices()), 0);
  return plan;
}

struct Comm {
  std::string name;
  OpKind kind;
  std::vector<std::string> axes, tensors;
  double bytes = 0;
};

// The program's communication ops in issue order.
std::vector<Comm> comms(const Program& p) {
  std::vector<Comm> out;
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (!is_communication(op.kind)) continue;
    Comm c{op.name, op.kind, op.attrs.axes, {}, 0};
    for (TensorId t : op.inputs) {
      c.tensors.push_back(p.graph.tensor(t).name);
      c.bytes += p.graph.tensor(t).bytes();
    }
    out.push_back(c);
  }
  return out;
}

std::vector<std::string> names(const std::vector<std::string>& tensors) {
  std::vector<std::string> out;
  for (const auto& t : tensors) out.push_back(t.substr(0, t.find('@')));
  return out;
}

TensorStore run_plan(const Plan& plan, const ModelGraph& g) {
  TensorStore inputs;
  init_step_inputs(g, inputs, 7);
  std::vector<TensorStore> chips = interpret_plan(plan, g, inputs, 7);
  TensorStore got;
  assemble_results(plan, g, [&](int64_t c) { return &chips[c]; }, got);
  return got;
}

}  // namespace

// Every parameter's gradient all-reduce (8, 18760 bytes together) becomes one collective issued when the last
// gradient (fc0.w's, the first layer's: the end of the backward pass) is ready. The loss's all-reduce is no
// gradient and stays.
TEST(CombineTest, SmallGradientsBecomeOneAllReduce) {
  ModelGraph g = build(kMlp);
  Plan plan = data_parallel_plan(g, mesh({"data"}, {4}, {2, 2}));
  const std::vector<Comm> before = comms(plan.programs[0]);
  ASSERT_EQ(before.size(), 9u);
  CombineStats s = combine_gradient_reductions(plan.programs[0], kDefaultCombineThresholdBytes);
  EXPECT_EQ(s.collectives, 1);
  EXPECT_EQ(s.members, 8);
  validate_plan(plan, g, 4);
  const std::vector<Comm> after = comms(plan.programs[0]);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].name, "combined/all_reduce[data]#0");
  EXPECT_EQ(after[1].name, "loss/all_reduce[data]#8");
  EXPECT_EQ(after[0].kind, OpKind::AllReduce);
  EXPECT_EQ(after[0].axes, std::vector<std::string>{"data"});
  EXPECT_DOUBLE_EQ(after[0].bytes, 18760.0);
  // In the order the backward pass makes them: the output layer's first.
  EXPECT_EQ(names(after[0].tensors),
            (std::vector<std::string>{"out.b.grad", "out.w.grad", "fc2.b.grad", "fc2.w.grad", "fc1.b.grad",
                                      "fc1.w.grad", "fc0.b.grad", "fc0.w.grad"}));
  // Issued right after the op producing fc0.w's gradient (its last input), before every update.
  const Program& p = plan.programs[0];
  size_t at = 0, producer = 0, first_update = p.order.size();
  for (size_t i = 0; i < p.order.size(); ++i) {
    const Op& op = p.graph.op(p.order[i]);
    if (op.name == after[0].name) at = i;
    for (TensorId t : op.outputs)
      if (p.graph.tensor(t).name == "fc0.w.grad" && !is_communication(op.kind)) producer = i;
    if (op.phase == Phase::Optimizer) first_update = std::min(first_update, i);
  }
  EXPECT_EQ(at, producer + 1);
  EXPECT_LT(at, first_update);
}

// Buckets fill in the order the gradients are ready and close before they would pass the threshold: with 8000
// bytes, out.b + out.w + fc2.b = 1800 (fc2.w's 6400 would make 8200), fc2.w + fc1.b = 6560, fc1.w + fc0.b = 6560,
// and fc0.w (3840) alone stays an all-reduce of its own.
TEST(CombineTest, ThresholdClosesBuckets) {
  ModelGraph g = build(kMlp);
  Plan plan = data_parallel_plan(g, mesh({"data"}, {4}, {2, 2}));
  CombineStats s = combine_gradient_reductions(plan.programs[0], 8000);
  EXPECT_EQ(s.collectives, 3);
  EXPECT_EQ(s.members, 7);
  validate_plan(plan, g, 4);
  std::vector<std::pair<std::vector<std::string>, double>> got;
  for (const Comm& c : comms(plan.programs[0]))
    if (c.name != "loss/all_reduce[data]#8") got.push_back({names(c.tensors), c.bytes});
  const std::vector<std::pair<std::vector<std::string>, double>> want = {
      {{"out.b.grad", "out.w.grad", "fc2.b.grad"}, 1800},
      {{"fc2.w.grad", "fc1.b.grad"}, 6560},
      {{"fc1.w.grad", "fc0.b.grad"}, 6560},
      {{"fc0.w.grad"}, 3840},
  };
  EXPECT_EQ(got, want);
}

TEST(CombineTest, ZeroThresholdChangesNothing) {
  ModelGraph g = build(kMlp);
  Plan plan = data_parallel_plan(g, mesh({"data"}, {4}, {2, 2}));
  const size_t ops = plan.programs[0].graph.num_ops();
  const std::vector<OpId> order = plan.programs[0].order;
  CombineStats s = combine_gradient_reductions(plan.programs[0], 0);
  EXPECT_EQ(s.collectives, 0);
  EXPECT_EQ(plan.programs[0].graph.num_ops(), ops);
  EXPECT_EQ(plan.programs[0].order, order);
}

// Sums are elementwise: the combined step's results are those of the uncombined one, bit for bit (the interpreter
// adds every element in rank order either way), and reproduce the single-device step.
TEST(CombineTest, CombinedStepChangesNoValue) {
  ModelGraph g = build(kMlp);
  const Mesh m = mesh({"data"}, {4}, {2, 2});
  Plan plain = data_parallel_plan(g, m);
  Plan combined = data_parallel_plan(g, m);
  ASSERT_EQ(combine_gradient_reductions(combined.programs[0], kDefaultCombineThresholdBytes).members, 8);
  TensorStore a = run_plan(plain, g), b = run_plan(combined, g);
  TensorStore ref;
  init_step_inputs(g, ref, 7);
  run_reference(g, ref);
  int compared = 0;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorId t = static_cast<TensorId>(i);
    if (!a.has(t)) continue;
    ASSERT_TRUE(b.has(t)) << g.tensor(t).name;
    EXPECT_EQ(a.get(t).data, b.get(t).data) << g.tensor(t).name;
    if (g.tensor(t).role == TensorRole::Updated) {
      EXPECT_LE(compare_tensors(b.get(t), ref.get(t)).rel_norm, 1e-5) << g.tensor(t).name;
      ++compared;
    }
  }
  EXPECT_GE(compared, 24);  // 8 parameters, each with two Adam moments
}

// Tensor parallelism's all-reduces of activation gradients are inside the backward pass (the next backward op
// waits for them): never combined. The parameter gradients' reductions over `data` are.
TEST(CombineTest, BackwardPassAllReducesAreNotCombined) {
  ModelGraph g = build("  model: transformer\n  layers: 2\n  d_model: 16\n  d_ff: 24\n  heads: 4\n  vocab: 20\n"
                       "  seq_len: 6\n  batch: 4\n  dtype: fp32\n");
  const Mesh m = mesh({"data", "model"}, {2, 4}, {4, 2});
  PartitionInput in{g, m};
  in.annotations[g.find_tensor("tokens")] = ShardSpec::parse("[data, -]");
  in.annotations[g.find_tensor("labels")] = ShardSpec::parse("[data, -]");
  for (int l = 0; l < 2; ++l) {
    const std::string n = "layer" + std::to_string(l);
    for (const char* w : {".attn.q.w", ".attn.k.w", ".attn.v.w"}) in.annotations[g.find_tensor(n + w)] = ShardSpec::parse("[-, model, -]");
    in.annotations[g.find_tensor(n + ".attn.o.w")] = ShardSpec::parse("[model, -, -]");
    in.annotations[g.find_tensor(n + ".ffn.w1")] = ShardSpec::parse("[-, model]");
    in.annotations[g.find_tensor(n + ".ffn.b1")] = ShardSpec::parse("[model]");
    in.annotations[g.find_tensor(n + ".ffn.w2")] = ShardSpec::parse("[model, -]");
  }
  Plan plan;
  plan.strategy = "test";
  plan.mesh = m;
  plan.programs.push_back(partition_step(in).program);
  plan.role_of_chip.assign(8, 0);
  auto count = [&](const std::string& axis, bool backward_only) {
    int n = 0;
    const Program& p = plan.programs[0];
    for (const Comm& c : comms(p))
      if (c.kind == OpKind::AllReduce && c.axes == std::vector<std::string>{axis}) n += backward_only ? 1 : static_cast<int>(c.tensors.size());
    return n;
  };
  const int model_before = count("model", true), data_tensors = count("data", false), data_before = count("data", true);
  ASSERT_GT(model_before, 0);
  ASSERT_GT(data_before, 2);
  TensorStore before = run_plan(plan, g);
  CombineStats s = combine_gradient_reductions(plan.programs[0], kDefaultCombineThresholdBytes);
  validate_plan(plan, g, 8);
  EXPECT_EQ(count("model", true), model_before);      // untouched
  EXPECT_EQ(count("data", false), data_tensors);      // every tensor still reduced once
  EXPECT_LT(count("data", true), data_before);        // in fewer collectives
  EXPECT_EQ(s.members - s.collectives, data_before - count("data", true));
  TensorStore after = run_plan(plan, g);
  for (size_t i = 0; i < g.num_tensors(); ++i)
    if (before.has(static_cast<TensorId>(i))) {
      EXPECT_EQ(before.get(static_cast<TensorId>(i)).data, after.get(static_cast<TensorId>(i)).data) << g.tensor(static_cast<TensorId>(i)).name;
    }
}

// Weight-update sharding reduce-scatters the gradients (along the first dimension here, every parameter's): one
// combined reduce-scatter of the 8 gradients, 18760 bytes per chip, each chip keeping its quarter of each.
TEST(CombineTest, WeightUpdateShardingReduceScattersCombine) {
  Experiment e = load_experiment_text(std::string("hardware: {preset: tpu-v3, pod: {dims: [2, 2]}}\nworkload:\n") +
                                          kMlp + "strategy: {name: data_parallel, weight_update_sharding: true}\n",
                                      "c.yaml");
  ModelGraph g = WorkloadRegistry::instance().make(e.workload)->build(e.params);
  Plan plan = make_plan(g, e);
  validate_plan(plan, g, 4);
  int rs = 0;
  for (const Comm& c : comms(plan.programs[0])) {
    if (c.kind != OpKind::ReduceScatter) continue;
    ++rs;
    EXPECT_EQ(c.tensors.size(), 8u) << c.name;
    // Padded where 4 does not divide the first dimension: out.b (10 -> 12 elements).
    EXPECT_DOUBLE_EQ(c.bytes, 18760.0 + 2 * 4) << c.name;
  }
  EXPECT_EQ(rs, 1);
  e.run.combine_threshold = 0;
  Plan plain = make_plan(g, e);
  int plain_rs = 0;
  for (const Comm& c : comms(plain.programs[0])) plain_rs += c.kind == OpKind::ReduceScatter;
  EXPECT_EQ(plain_rs, 8);
  TensorStore a = run_plan(plain, g), b = run_plan(plan, g);
  for (size_t i = 0; i < g.num_tensors(); ++i)
    if (a.has(static_cast<TensorId>(i))) {
      EXPECT_EQ(a.get(static_cast<TensorId>(i)).data, b.get(static_cast<TensorId>(i)).data) << g.tensor(static_cast<TensorId>(i)).name;
    }
}

// A pipeline's stages reduce their accumulated gradients over `data` once per step: combined per stage, the
// stage's unit map follows the new op ids, and the step is unchanged.
TEST(CombineTest, PipelineStagesCombineTheirGradientReductions) {
  Experiment e = load_experiment_text(
      std::string("hardware: {preset: tpu-v3, pod: {dims: [2, 2]}}\nworkload:\n") + kMlp +
          "strategy: {name: [pipeline, data_parallel], micro_batches: 2}\nmesh: {axes: [pipe, data], shape: [2, 2]}\n",
      "c.yaml");
  ModelGraph g = WorkloadRegistry::instance().make(e.workload)->build(e.params);
  Plan plan = make_plan(g, e);
  validate_plan(plan, g, 4);
  ASSERT_EQ(plan.programs.size(), 2u);
  int members = 0;
  for (size_t k = 0; k < plan.programs.size(); ++k) {
    const Program& p = plan.programs[k];
    ASSERT_EQ(plan.pipeline.unit_of_op[k].size(), p.graph.num_ops());
    int combined = 0;
    for (const Comm& c : comms(p)) {
      if (c.kind != OpKind::AllReduce || c.axes != std::vector<std::string>{"data"}) continue;
      if (c.tensors.size() > 1) {
        ++combined;
        members += static_cast<int>(c.tensors.size());
        // Work of the whole step, after the micro-batches: no unit.
        for (size_t i = 0; i < p.graph.num_ops(); ++i)
          if (p.graph.op(static_cast<OpId>(i)).name == c.name) {
            EXPECT_EQ(plan.pipeline.unit_of_op[k][i], -1);
          }
      }
    }
    EXPECT_EQ(combined, 1) << p.role;
  }
  EXPECT_EQ(members, 8);  // every parameter's gradient, in the stage holding it
  e.run.combine_threshold = 0;
  Plan plain = make_plan(g, e);
  TensorStore a = run_plan(plain, g), b = run_plan(plan, g);
  for (size_t i = 0; i < g.num_tensors(); ++i)
    if (a.has(static_cast<TensorId>(i))) {
      EXPECT_EQ(a.get(static_cast<TensorId>(i)).data, b.get(static_cast<TensorId>(i)).data) << g.tensor(static_cast<TensorId>(i)).name;
    }
}

// The buffer a combined collective runs on, for an algorithm that cuts each of 2 blocks into 2 pieces: each
// tensor's part of block b, piece q as the algorithm cuts the tensor's own buffer (a: 6 elements, blocks of 3 in
// pieces of 1 and 2; b: 2 elements, blocks of 1 in one piece), padded to the tensor's largest piece (a: 2, b: 1),
// goes to block b, piece q of the combined buffer (pieces of 3, blocks of 6).
TEST(CombineTest, CombinedBufferLayout) {
  const CombinedLayout l = combined_layout(OpKind::ReduceScatter, {6, 2}, 2, 2);
  EXPECT_EQ(l.piece, 3);
  EXPECT_EQ(l.total(), 12);
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  const std::vector<float> packed = pack_combined(l, {a, b});
  EXPECT_EQ(packed, (std::vector<float>{1, 0, 7, 2, 3, 0, /* block 1 */ 4, 0, 8, 5, 6, 0}));
  // A rank's block of the reduce-scatter: its part of each tensor.
  std::vector<std::vector<float>> mine = unpack_combined(l, {10, 0, 17, 12, 13, 0}, true);
  EXPECT_EQ(mine, (std::vector<std::vector<float>>{{10, 12, 13}, {17}}));
  // The whole buffer (an all-reduce's result): every tensor back.
  EXPECT_EQ(unpack_combined(l, packed, false), (std::vector<std::vector<float>>{a, b}));
  // An all-reduce pads each tensor to equal blocks (5 elements: blocks of 3, the last element padding); an
  // algorithm whose order is not by block and piece (0) gets the tensors one after another.
  const CombinedLayout r = combined_layout(OpKind::AllReduce, {5, 2}, 2, 0);
  EXPECT_EQ(pack_combined(r, {{1, 2, 3, 4, 5}, {6, 7}}), (std::vector<float>{1, 2, 3, 4, 5, 6, 7}));
}

// Reductions combine only with their like: the same kind, mesh axes and, for reduce-scatters, scattered dimension
// (XLA's ReduceScatterCombiner with combine_by_dim). data 2 x model 2 with weight-update sharding and Adam on a
// 2-layer Transformer: each gradient is reduce-scattered over `data` along the first dimension Megatron leaves whole
// (plan_figures_test's DataTimesModelWithWeightUpdateSharding): dimension 1 for the embedding, the attention output
// projections and the FFN's down projections, dimension 0 for every other parameter. Bucketed: two reduce-scatters,
// one per dimension, with exactly those members. Megatron's all-reduces of activation gradients over `model` (the
// backward pass waits for them) and the loss's all-reduce over `data` (no gradient) stay as they were, and so do
// the all-gathers of the updated parameters.
TEST(CombineTest, ReduceScattersCombineOnlyAlongTheSameDimension) {
  namespace pm = podsim::plan_models;
  const std::string yaml = plan_steps::hardware("[2, 2]") + pm::transformer(2, pm::TB, "adam") +
                           "strategy: {name: [data_parallel, spmd], weight_update_sharding: true}\n"
                           "mesh: {axes: [data, model], shape: [2, 2]}\n";
  const plan_steps::Step plain = plan_steps::plan_step(yaml, false), combined = plan_steps::plan_step(yaml, true);
  std::vector<std::string> dim0, dim1;
  for (const pm::TParam& p : pm::transformer_params(2, 2)) (p.wus_dim == 0 ? dim0 : dim1).push_back(p.name + ".grad");
  std::sort(dim0.begin(), dim0.end());
  std::sort(dim1.begin(), dim1.end());
  ASSERT_EQ(dim0.size() + dim1.size(), 2u * 12 + 4);  // 12 parameters a layer; embedding, final norm, unembedding
  std::vector<std::vector<std::string>> got;
  int all_reduces = 0, all_gathers = 0;
  for (const Comm& c : comms(combined.plan.programs[0])) {
    if (c.kind == OpKind::ReduceScatter) {
      EXPECT_EQ(c.axes, std::vector<std::string>{"data"}) << c.name;
      std::vector<std::string> members = names(c.tensors);
      std::sort(members.begin(), members.end());
      got.push_back(members);
    }
    all_reduces += c.kind == OpKind::AllReduce;
    all_gathers += c.kind == OpKind::AllGather;
  }
  std::sort(got.begin(), got.end());
  std::vector<std::vector<std::string>> want = {dim0, dim1};
  std::sort(want.begin(), want.end());
  EXPECT_EQ(got, want);
  int plain_all_reduces = 0, plain_all_gathers = 0;
  for (const Comm& c : comms(plain.plan.programs[0])) {
    plain_all_reduces += c.kind == OpKind::AllReduce;
    plain_all_gathers += c.kind == OpKind::AllGather;
  }
  EXPECT_EQ(all_reduces, plain_all_reduces);
  EXPECT_EQ(all_gathers, plain_all_gathers);
  EXPECT_EQ(plain_all_gathers, static_cast<int>(dim0.size() + dim1.size()));
}
