// Mixture of experts (GShard): the routing against hand counts, the layer's graph, and the moe strategy (alone and
// composed with data_parallel) against the single-device reference without SystemC: the plan runs in memory
// (partition/interpreter.h), results are assembled, and the loss, every gradient and every updated parameter must
// match within a relative norm error of 1e-5 (fp32). The routing must match exactly: the same tokens dispatched to
// the same expert slots, the same tokens dropped.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <iostream>

#include "partition/interpreter.h"
#include "plan/shard_data.h"
#include "sim/config/loader.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"
#include "workloads/models/moe_layer.h"
#include "workloads/moe_routing.h"
#include "workloads/op_def.h"
#include "workloads/reference.h"
#include "workloads/tensor_compare.h"

using namespace podsim;

namespace {

// ---- routing by hand ----------------------------------------------------------------------------------------------

TEST(MoeRoutingTest, SlotsCapacityAndDropsByHand) {
  // 6 tokens, 3 experts, capacity 2. Gates chosen so that (e1, e2) per token are:
  //   t0 (0, 1)  t1 (0, 2)  t2 (0, 1)  t3 (1, 0)  t4 (2, 0)  t5 (0, 2)
  // First choices in token order: expert 0 gets t0 slot 0, t1 slot 1, t2 over, t5 over; expert 1 gets t3 slot 0;
  // expert 2 gets t4 slot 0. Second choices queue behind the first choices kept (expert 0: 2, expert 1: 1,
  // expert 2: 1): t0 -> e1 slot 1, t1 -> e2 slot 1, t2 -> e1 over (slot 2), t3 -> e0 over, t4 -> e0 over,
  // t5 -> e2 over. t2 is routed nowhere: dropped.
  const std::vector<double> gates = {0.6, 0.3, 0.1,  0.5, 0.2, 0.3,  0.7, 0.2, 0.1,
                                     0.3, 0.6, 0.1,  0.25, 0.15, 0.6, 0.5, 0.1, 0.4};
  std::vector<Route> r = route_group(gates, 6, 3, 2, false, nullptr);
  const int64_t want[6][4] = {{0, 0, 1, 1}, {0, 1, 2, 1}, {0, -1, 1, -1}, {1, 0, 0, -1}, {2, 0, 0, -1}, {0, -1, 2, -1}};
  for (int t = 0; t < 6; ++t) {
    EXPECT_EQ(r[t].e1, want[t][0]) << t;
    EXPECT_EQ(r[t].slot1, want[t][1]) << t;
    EXPECT_EQ(r[t].e2, want[t][2]) << t;
    EXPECT_EQ(r[t].slot2, want[t][3]) << t;
  }
  EXPECT_DOUBLE_EQ(r[0].w1, 0.6 / 0.9);
  EXPECT_DOUBLE_EQ(r[4].w2, 0.25 / 0.85);
}

TEST(MoeRoutingTest, RandomRoutingSkipsTheSecondExpertBelowTheDraw) {
  // Two tokens, normalised second gates 0.4 and 0.1: 2 w2 = 0.8 and 0.2. Draws 0.5 and 0.5: the first keeps its
  // second expert, the second does not, and takes no slot.
  const std::vector<double> gates = {0.6, 0.4, 0.9, 0.1};
  std::vector<Route> r = route_group(gates, 2, 2, 2, true, [](int64_t) { return 0.5; });
  EXPECT_EQ(r[0].slot2, 0);  // expert 1 gets no first choice: slot 0
  EXPECT_EQ(r[1].slot2, kNotSampled);
  Tensor routes({1, 2, 4});
  for (int t = 0; t < 2; ++t) {
    const float v[4] = {static_cast<float>(r[t].e1), static_cast<float>(r[t].slot1), static_cast<float>(r[t].e2),
                        static_cast<float>(r[t].slot2)};
    std::copy(v, v + 4, &routes.data[t * 4]);
  }
  ExpertLoad l = expert_load(routes, 2);
  EXPECT_EQ(l.tokens, 2);
  EXPECT_EQ(l.requested, 3);
  EXPECT_EQ(l.routed, 3);  // e0: both tokens (slots 0, 1); e1: the first token's second choice
  EXPECT_EQ(l.second_not_sampled, 1);
  EXPECT_EQ(l.per_expert, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(l.first_choice, (std::vector<int64_t>{2, 0}));
}

TEST(MoeRoutingTest, UniformDrawsDependOnSeedOpAndTokenOnly) {
  const double a = routing_uniform(1, "layer1.moe.gating", 17);
  EXPECT_EQ(a, routing_uniform(1, "layer1.moe.gating", 17));
  EXPECT_NE(a, routing_uniform(2, "layer1.moe.gating", 17));
  EXPECT_NE(a, routing_uniform(1, "layer3.moe.gating", 17));
  EXPECT_NE(a, routing_uniform(1, "layer1.moe.gating", 18));
  // Roughly uniform: the mean of 4000 draws within 4 standard errors of 1/2 (sd of U(0,1) is 0.289).
  double sum = 0;
  for (int t = 0; t < 4000; ++t) {
    const double u = routing_uniform(7, "g", t);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 4000, 0.5, 4 * 0.289 / std::sqrt(4000.0));
}

TEST(MoeRoutingTest, CapacityRounding) {
  EXPECT_EQ(moe_capacity(8, 4, 1.0), 4);      // 2 * 8 / 4
  EXPECT_EQ(moe_capacity(10, 4, 1.25), 7);    // 6.25 up
  EXPECT_EQ(moe_capacity(1024, 2048, 1.0), 1);  // 1 at least
  EXPECT_EQ(moe_capacity(8, 2, 1.5), 8);      // at most S
}

// ---- the gating op's kernel ----------------------------------------------------------------------------------------

TEST(MoeGatingTest, KernelWritesMasksRoutesAndAuxLossByHand) {
  // One group of 2 tokens over 2 experts, capacity 1. Logits (ln 3, 0) and (0, ln 3): gates (3/4, 1/4) and
  // (1/4, 3/4). Token 0 -> expert 0 slot 0, token 1 -> expert 1 slot 0; second choices are over capacity.
  // l_aux = (1/E) sum_e (c_e / S) m_e = 1/2 (1/2 x 1/2 + 1/2 x 1/2) = 1/4; with alpha 0.1: 0.025.
  ModelGraph g("gating");
  GraphBuilder b(g, DType::F32);
  TensorId logits = b.param("logits", {1, 2, 2});
  GraphBuilder::Gating gate = b.top2_gating(logits, 1, 0.1, false, 0, "gating");
  TensorStore s(g.num_tensors());
  Tensor x({1, 2, 2});
  x.data = {std::log(3.0f), 0.0f, 0.0f, std::log(3.0f)};
  s.put(logits, x);
  run_reference(g, s);
  const std::vector<float> combine = s.get(gate.combine).data, dispatch = s.get(gate.dispatch).data;
  EXPECT_EQ(dispatch, (std::vector<float>{1, 0, 0, 1}));  // [s][e][c]
  EXPECT_NEAR(combine[0], 0.75, 1e-6);
  EXPECT_NEAR(combine[3], 0.75, 1e-6);
  EXPECT_EQ(combine[1], 0.0f);
  EXPECT_EQ(s.get(gate.routes).data, (std::vector<float>{0, 0, 1, -1, 1, 0, 0, -1}));
  EXPECT_NEAR(s.get(gate.aux_loss).data[0], 0.025, 1e-7);
}

// ---- the Transformer with MoE layers ------------------------------------------------------------------------------

Experiment experiment(const std::string& yaml) { return load_experiment_text(yaml, "moe.yaml"); }

ModelGraph build(const Experiment& e) { return WorkloadRegistry::instance().make(e.workload)->build(e.params); }

const char* kWorkload =
    "workload:\n  model: transformer\n  layers: 2\n  d_model: 16\n  d_ff: 24\n  heads: 4\n  vocab: 20\n"
    "  seq_len: 8\n  batch: 8\n  dtype: fp32\n";

TEST(MoeTransformerTest, DenseByDefaultGraphUnchanged) {
  // By hand: per layer ln1, q, k, v, scores, softmax, context, o, residual, ln2, up, up.bias, gelu, down,
  // down.bias, residual = 16 forward ops; plus embed, final_ln, logits, loss.
  ModelGraph g = build(experiment(std::string("hardware: {preset: tpu-v3}\n") + kWorkload));
  int forward = 0;
  for (const Op& op : g.ops()) {
    forward += op.phase == Phase::Forward || op.phase == Phase::Loss;
    EXPECT_TRUE(op.kind != OpKind::Top2Gating && op.kind != OpKind::Reshape) << op.name;
  }
  EXPECT_EQ(forward, 2 * 16 + 4);
  EXPECT_LT(g.find_tensor("layer1.ffn.w1"), g.num_tensors());
  EXPECT_GE(g.find_tensor("layer1.ffn.w1"), 0);
  EXPECT_EQ(g.find_tensor("loss.nll"), -1);
}

TEST(MoeTransformerTest, EveryOtherLayerIsAMixture) {
  std::string w = kWorkload;
  w.replace(w.find("layers: 2"), 9, "layers: 4");
  ModelGraph g = build(experiment("hardware: {preset: tpu-v3}\n" + w + "  moe: {experts: 4, groups: 4}\n"));
  for (int l = 0; l < 4; ++l) {
    const std::string n = "layer" + std::to_string(l);
    EXPECT_EQ(g.find_tensor(n + ".moe.wi") >= 0, l % 2 == 1) << n;
    EXPECT_EQ(g.find_tensor(n + ".ffn.w1") >= 0, l % 2 == 0) << n;
  }
  // Groups of S = 8 x 8 / 4 = 16 tokens, capacity 2 x 16 / 4 = 8: dispatch [G, S, E, C] = [4, 16, 4, 8].
  EXPECT_EQ(g.tensor(g.find_tensor("layer1.moe.gating.dispatch")).shape, (std::vector<int64_t>{4, 16, 4, 8}));
  EXPECT_EQ(g.tensor(g.find_tensor("layer1.moe.dispatched")).shape, (std::vector<int64_t>{4, 4, 8, 16}));
  EXPECT_EQ(g.tensor(g.find_tensor("loss")).role, TensorRole::Loss);
  EXPECT_EQ(g.tensor(g.find_tensor("loss.nll")).role, TensorRole::Activation);
  // No gradient is computed for the one-hot dispatch mask.
  for (const Op& op : g.ops())
    EXPECT_NE(op.name, "layer1.moe.dispatched.dA");
  EXPECT_GE(g.find_tensor("layer1.moe.dispatched.dB"), 0);
}

// ---- equivalence with the single-device step -----------------------------------------------------------------------

constexpr double kTol = 1e-5;

struct StepRun {
  ModelGraph graph{"step"};
  Plan plan;
  TensorStore results;
};

// Plans `yaml` with its strategies, runs the plan in memory and assembles every result.
StepRun run(const std::string& yaml) {
  Experiment e = experiment(yaml);
  StepRun r;
  r.graph = build(e);
  r.plan = make_plan(r.graph, e);
  validate_plan(r.plan, r.graph, e.hardware.pod.chips());
  if (std::getenv("PODSIM_DUMP_PLAN")) {
    const Program& p = r.plan.programs.front();
    for (OpId id : p.order) {
      const Op& op = p.graph.op(id);
      std::cerr << op.name << " (" << op_kind_name(op.kind) << ")";
      for (TensorId t : op.inputs) std::cerr << " " << p.graph.tensor(t).name << p.graph.tensor(t).shape_text();
      std::cerr << "\n";
    }
  }
  TensorStore inputs;
  init_step_inputs(r.graph, inputs, e.run.seed);
  std::vector<TensorStore> chips = interpret_plan(r.plan, r.graph, inputs, e.run.seed);
  assemble_results(r.plan, r.graph, [&](int64_t c) { return &chips[c]; }, r.results);
  return r;
}

std::string moe_yaml(const std::string& dims, const std::string& strategy, const std::string& mesh,
                     const std::string& moe) {
  return "hardware: {preset: tpu-v3, pod: {dims: " + dims + "}}\n" + kWorkload + "  moe: " + moe +
         "\nstrategy: {name: " + strategy + "}\n" + mesh + "run: {seed: 3}\n";
}

// Every step result of `got` against `ref` (relative norm error), and the routing of every gating op exactly.
void expect_same_step(const StepRun& got, const StepRun& ref, int64_t experts) {
  const ModelGraph& g = ref.graph;
  int compared = 0, gatings = 0;
  double worst = 0;
  std::string worst_name;
  for (size_t i = 0; i < g.num_tensors(); ++i) {
    const TensorId id = static_cast<TensorId>(i);
    const TensorInfo& t = g.tensor(id);
    bool result = t.role == TensorRole::Loss || t.role == TensorRole::Updated;
    for (OpId c : g.consumers(id)) result = result || (t.role == TensorRole::Gradient && g.op(c).phase == Phase::Optimizer);
    if (!result) continue;
    ASSERT_TRUE(got.results.has(id)) << t.name << " missing";
    TensorDiff d = compare_tensors(got.results.get(id), ref.results.get(id));
    ++compared;
    if (d.rel_norm > worst) {
      worst = d.rel_norm;
      worst_name = t.name;
    }
  }
  EXPECT_GE(compared, 40);
  EXPECT_LE(worst, kTol) << "worst: " << worst_name;
  int64_t dropped = 0;
  for (const Op& op : g.ops()) {
    if (op.kind != OpKind::Top2Gating) continue;
    ++gatings;
    for (int k : {1, 3}) {  // dispatch and routes: bit for bit
      ASSERT_TRUE(got.results.has(op.outputs[k])) << g.tensor(op.outputs[k]).name;
      EXPECT_EQ(got.results.get(op.outputs[k]).data, ref.results.get(op.outputs[k]).data) << g.tensor(op.outputs[k]).name;
    }
    ExpertLoad a = expert_load(got.results.get(op.outputs[3]), experts);
    ExpertLoad b = expert_load(ref.results.get(op.outputs[3]), experts);
    EXPECT_EQ(a.per_expert, b.per_expert);
    EXPECT_EQ(a.dropped_tokens, b.dropped_tokens);
    EXPECT_EQ(a.routed, b.routed);
    EXPECT_EQ(a.tokens, 64);
    dropped += b.requested - b.routed;
  }
  EXPECT_EQ(gatings, 1);
  EXPECT_GT(dropped, 0) << "the capacity should drop some assignments, or the check of drops proves nothing";
}

const std::string kSingle = "single_device";

// Capacity factor 0.75: 2 x 16 / 4 x 0.75 = 6 slots for 16 tokens per group, so some assignments are dropped.
TEST(MoeEquivalenceTest, OneTwoAndFourChipsMatchOneDevice) {
  const std::string moe = "{experts: 4, groups: 4, capacity_factor: 0.75}";
  StepRun ref = run(moe_yaml("[1, 1]", kSingle, "", moe));
  for (const std::string dims : {"[1, 1]", "[2, 1]", "[2, 2]"}) {
    SCOPED_TRACE(dims);
    expect_same_step(run(moe_yaml(dims, "moe", "", moe)), ref, 4);
  }
}

TEST(MoeEquivalenceTest, RandomRoutingDrawsByGlobalTokenPosition) {
  const std::string moe = "{experts: 4, groups: 4, capacity_factor: 0.75, second_expert: random}";
  StepRun ref = run(moe_yaml("[1, 1]", kSingle, "", moe));
  StepRun four = run(moe_yaml("[2, 2]", "moe", "", moe));
  expect_same_step(four, ref, 4);
  ExpertLoad l = expert_load(ref.results.get(ref.graph.find_tensor("layer1.moe.gating.routes")), 4);
  EXPECT_GT(l.second_not_sampled, 0);
  EXPECT_LT(l.second_not_sampled, l.tokens);
}

TEST(MoeEquivalenceTest, MoeTimesDataOnFourChips) {
  const std::string moe = "{experts: 4, groups: 4, capacity_factor: 0.75}";
  StepRun ref = run(moe_yaml("[1, 1]", kSingle, "", moe));
  StepRun got = run(moe_yaml("[2, 2]", "[moe, data_parallel]", "mesh: {axes: [data, expert], shape: [2, 2]}\n", moe));
  expect_same_step(got, ref, 4);
}

TEST(MoeEquivalenceTest, MoeTimesDataTimesModelOnEightChips) {
  // spmd splits the dense layers Megatron-style and, by annotation, each expert's hidden units over `model`.
  const std::string moe = "{experts: 4, groups: 4, capacity_factor: 0.75, second_expert: random}";
  StepRun ref = run(moe_yaml("[1, 1]", kSingle, "", moe));
  StepRun got = run(moe_yaml("[4, 2]",
                             "[moe, data_parallel, spmd], shard: [\"layer*.moe.wi = [-, -, model]\", "
                             "\"layer*.moe.wo = [-, model, -]\"]",
                             "mesh: {axes: [data, expert, model], shape: [2, 2, 2]}\n", moe));
  expect_same_step(got, ref, 4);
}

TEST(MoeEquivalenceTest, UnevenExpertsAndGroupsArePaddedAndMasked) {
  // 6 experts and 2 groups over 4 devices: experts padded to 8, groups to 4 (two devices hold only padding).
  const std::string moe = "{experts: 6, groups: 2, capacity_factor: 0.75}";
  StepRun ref = run(moe_yaml("[1, 1]", kSingle, "", moe));
  expect_same_step(run(moe_yaml("[2, 2]", "moe", "", moe)), ref, 6);
}

// ---- the communication GShard prescribes ---------------------------------------------------------------------------

struct Comms {
  int all_to_all = 0, gathers_of_experts = 0;
  std::vector<std::vector<std::string>> all_to_all_axes;
};

Comms comms(const StepRun& r) {
  Comms c;
  const Program& p = r.plan.programs.front();
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (op.kind == OpKind::AllToAll) {
      ++c.all_to_all;
      c.all_to_all_axes.push_back(op.attrs.axes);
    }
    if (op.kind == OpKind::AllGather && (op.name.find(".moe.wi") != std::string::npos ||
                                         op.name.find(".moe.wo") != std::string::npos))
      ++c.gathers_of_experts;
  }
  return c;
}

TEST(MoeStrategyTest, DispatchAndCombineAreAllToAllsOverTheExpertAxis) {
  // Per MoE layer: the dispatch and the combine forward, their gradients backward; the experts never move.
  const std::string moe = "{experts: 4, groups: 4, capacity_factor: 0.75}";
  for (const auto& [strategy, mesh] : std::vector<std::pair<std::string, std::string>>{
           {"moe", ""}, {"[moe, data_parallel]", "mesh: {axes: [data, expert], shape: [2, 2]}\n"}}) {
    SCOPED_TRACE(strategy);
    Comms c = comms(run(moe_yaml("[2, 2]", strategy, mesh, moe)));
    EXPECT_EQ(c.all_to_all, 4);
    for (const auto& axes : c.all_to_all_axes) EXPECT_EQ(axes, (std::vector<std::string>{"expert"}));
    EXPECT_EQ(c.gathers_of_experts, 0);
  }
}

TEST(MoeStrategyTest, ExpertWeightsAreSplitAndTheBatchTakesTheExpertAxisInnermost) {
  Experiment e = experiment(moe_yaml("[2, 2]", "[data_parallel, moe]", "mesh: {axes: [data, expert], shape: [2, 2]}\n",
                                     "{experts: 4, groups: 4}"));
  ModelGraph g = build(e);
  Plan plan = make_plan(g, e);
  const Program& p = plan.programs.front();
  auto spec_of = [&](const std::string& name) {
    for (const TensorBinding& b : p.inputs)
      if (g.tensor(b.logical).name == name) return b.spec.text();
    return std::string("?");
  };
  EXPECT_EQ(spec_of("layer1.moe.wi"), ShardSpec::parse("[expert, -, -]").text());
  EXPECT_EQ(spec_of("layer1.moe.wo"), ShardSpec::parse("[expert, -, -]").text());
  EXPECT_EQ(spec_of("tokens"), ShardSpec::parse("[(data, expert), -]").text());
  EXPECT_EQ(spec_of("layer0.ffn.w1"), ShardSpec::parse("[-, -]").text());
}

}  // namespace
