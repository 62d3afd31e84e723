// The optimizers SGD with momentum, LARS and RMSProp (workloads/ops/optimizer.cpp): each update rule against a step
// computed by hand here; which parameters LARS takes out of its trust ratio (biases, normalization parameters); the
// optimizer state each keeps per parameter (pinned in bytes, through the memory plan); their vector-unit cost; and
// with the weights sharded (weight-update sharding, fsdp, a model axis) the one extra collective LARS needs, the
// all-reduce of each weight's two partial squared norms, counted by hand, with the step reproducing the
// single-device one (fp32, relative norm 1e-5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "hw/compiler/lower.h"
#include "hw/compiler/memory_plan.h"
#include "base/error.h"
#include "tests/unit/plan_steps.h"
#include "workloads/op_def.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// ---- update rules against hand-computed steps ------------------------------------------------------------------

// A graph of one optimizer op over fp32 tensors of `n` elements (inputs named in, outputs out), and its run.
struct OneOp {
  ModelGraph g{"one"};
  TensorStore s;
  Op op;
  OneOp(OpKind kind, const std::vector<std::vector<float>>& inputs, size_t outputs, OpAttrs attrs) {
    op.name = "u";
    op.kind = kind;
    op.phase = Phase::Optimizer;
    op.attrs = attrs;
    for (size_t i = 0; i < inputs.size(); ++i)
      op.inputs.push_back(g.add_tensor({"in" + std::to_string(i), {static_cast<int64_t>(inputs[i].size())}}));
    const int64_t n = static_cast<int64_t>(inputs.front().size());
    for (size_t o = 0; o < outputs; ++o)
      op.outputs.push_back(g.add_tensor({"out" + std::to_string(o), {kind == OpKind::LarsNorms ? 2 : n}}));
    g.add_op(op);
    s.resize(g.num_tensors());
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor t({static_cast<int64_t>(inputs[i].size())});
      t.data = inputs[i];
      s.put(op.inputs[i], std::move(t));
    }
    run_op(g, g.op(0), s);
  }
  const std::vector<float>& out(size_t i) const { return s.get(op.outputs.at(i)).data; }
};

void expect_values(const std::vector<float>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-6 * (1 + std::abs(want[i]))) << i;
}

// u' = mu u + g; w' = w - lr u'. lr 0.1, mu 0.9.
TEST(OptimizerTest, MomentumStepByHand) {
  OpAttrs a;
  a.alpha = 0.1;
  a.beta1 = 0.9;
  OneOp r(OpKind::MomentumUpdate, {{1, -2, 3, 0.5}, {0.5, 1, -1, 2}, {0.1, 0, 0.2, -0.4}}, 2, a);
  expect_values(r.out(1), {0.59, 1.0, -0.82, 1.64});
  expect_values(r.out(0), {0.941, -2.1, 3.082, 0.336});
}

// With weight decay wd (the gradient of an L2 term wd/2 ||w||^2 on every variable, MLPerf's TPU SSD): u' = mu u + g +
// wd w. wd 0.5 adds [0.5, -1, 1.5, 0.25] to the u' above: [1.09, 0, 0.68, 1.89]; w' = w - 0.1 u'.
TEST(OptimizerTest, MomentumWithWeightDecayByHand) {
  OpAttrs a;
  a.alpha = 0.1;
  a.beta1 = 0.9;
  a.weight_decay = 0.5;
  OneOp r(OpKind::MomentumUpdate, {{1, -2, 3, 0.5}, {0.5, 1, -1, 2}, {0.1, 0, 0.2, -0.4}}, 2, a);
  expect_values(r.out(1), {1.09, 0.0, 0.68, 1.89});
  expect_values(r.out(0), {0.891, -2.0, 2.932, 0.311});
}

// w = [3, 4] (norm 5), g = [0.6, 0.8] (norm 1), eta 0.01, weight decay 0.1: trust = 0.01 * 5 / (1 + 0.1 * 5) = 1/30;
// at lr 2 the rate is 1/15; g + wd w = [0.9, 1.2], scaled [0.06, 0.08]; u = [0.1, -0.1] at mu 0.9 gives
// u' = [0.15, -0.01] and w' = w - u' = [2.85, 4.01].
TEST(OptimizerTest, LarsStepByHand) {
  OneOp norms(OpKind::LarsNorms, {{3, 4}, {0.6f, 0.8f}}, 1, {});
  expect_values(norms.out(0), {25, 1});
  OpAttrs a;
  a.alpha = 2;
  a.beta1 = 0.9;
  a.eta = 0.01;
  a.weight_decay = 0.1;
  OneOp r(OpKind::LarsUpdate, {{3, 4}, {0.6f, 0.8f}, {0.1f, -0.1f}, {25, 1}}, 2, a);
  expect_values(r.out(1), {0.15, -0.01});
  expect_values(r.out(0), {2.85, 4.01});
  // A zero gradient (or weight) makes the trust ratio 1, as TensorFlow's LARSOptimizer: u' = mu u + lr (0 + wd w).
  OneOp z(OpKind::LarsUpdate, {{3, 4}, {0, 0}, {0.1f, -0.1f}, {25, 0}}, 2, a);
  expect_values(z.out(1), {0.09 + 2 * 0.3, -0.09 + 2 * 0.4});
}

// ms' = rho ms + (1 - rho) g^2; u' = mu u + lr g / sqrt(ms' + eps); w' = w - u'. rho 0.9, mu 0.9, lr 0.01, eps 1
// (GPipe's AmoebaNet setting): ms' = [0.09 + 0.025, 0.4], u' = [0.005 / sqrt(1.115), 0.09 - 0.02 / sqrt(1.4)].
TEST(OptimizerTest, RmsPropStepByHand) {
  OpAttrs a;
  a.alpha = 0.01;
  a.beta1 = 0.9;
  a.beta2 = 0.9;
  a.eps = 1;
  OneOp r(OpKind::RmsPropUpdate, {{1, 2}, {0.5, -2}, {0.1f, 0}, {0, 0.1f}}, 3, a);
  expect_values(r.out(1), {0.115, 0.4});
  const double u0 = 0.005 / std::sqrt(1.115), u1 = 0.09 - 0.02 / std::sqrt(1.4);
  expect_values(r.out(2), {u0, u1});
  expect_values(r.out(0), {1 - u0, 2 - u1});
}

// ---- the workloads' optimizer ops -------------------------------------------------------------------------------

// The MLP: batch B, input I (4 does not divide it: the sharded fc0.w is padded), hidden H, 2 hidden layers, C
// classes, fp32.
constexpr int64_t B = 16, I = 6, H = 32, C = 4;
constexpr double F32 = 4;
const std::vector<std::pair<std::string, int64_t>> kWeights = {{"fc0.w", I * H}, {"fc1.w", H * H}, {"out.w", H * C}};
const std::vector<std::pair<std::string, int64_t>> kBiases = {{"fc0.b", H}, {"fc1.b", H}, {"out.b", C}};
constexpr int64_t kElements = I * H + H + H * H + H + H * C + C;

std::string mlp(const std::string& optimizer, const std::string& extra = "") {
  return "workload: {model: mlp, batch: " + std::to_string(B) + ", input: " + std::to_string(I) +
         ", hidden: " + std::to_string(H) + ", layers: 2, classes: " + std::to_string(C) +
         ", dtype: fp32, learning_rate: 0.5, optimizer: " + optimizer + extra + "}\nrun: {fusion: none}\n";
}

std::map<std::string, OpKind> update_kinds(const ModelGraph& g) {
  std::map<std::string, OpKind> k;
  for (const Op& op : g.ops())
    if (op.phase == Phase::Optimizer) k[op.name] = op.kind;
  return k;
}

// LARS: a norms op and a LARS update per weight matrix; the biases take plain momentum (the MLPerf skip list).
TEST(OptimizerTest, LarsExcludesBiases) {
  const Step s = plan_step(hardware("[1, 1]") + mlp("lars") + "strategy: {name: single_device}\n");
  std::map<std::string, OpKind> want;
  for (const auto& [p, n] : kWeights) {
    want[p + ".norms"] = OpKind::LarsNorms;
    want[p + ".update"] = OpKind::LarsUpdate;
  }
  for (const auto& [p, n] : kBiases) want[p + ".update"] = OpKind::MomentumUpdate;
  EXPECT_EQ(update_kinds(s.graph), want);
}

// In the Transformer the normalization parameters (layer norm's gamma and beta, RMS norm's gamma) and the FFN
// biases are excluded.
TEST(OptimizerTest, LarsExcludesNormalizationParameters) {
  for (const char* norm : {"layernorm", "rmsnorm"}) {
    SCOPED_TRACE(norm);
    Experiment e = load_experiment_text(hardware("[1, 1]") +
                                            "workload: {model: transformer, layers: 1, d_model: 16, d_ff: 32, heads: 2, "
                                            "vocab: 11, seq_len: 4, batch: 2, optimizer: lars, norm: " + norm + "}\n",
                                        "t.yaml");
    const ModelGraph g = WorkloadRegistry::instance().make(e.workload)->build(e.params);
    int norms = 0, lars = 0, plain = 0;
    for (const Op& op : g.ops()) {
      if (op.phase != Phase::Optimizer) continue;
      const TensorInfo& p = g.tensor(op.inputs.front());
      const bool excluded = p.param_kind != ParamKind::Weight;
      EXPECT_EQ(excluded, op.kind == OpKind::MomentumUpdate) << op.name;
      if (p.name.find(".gamma") != std::string::npos || p.name.find(".beta") != std::string::npos)
        EXPECT_EQ(p.param_kind, ParamKind::Norm) << p.name;
      else if (p.name.find(".b1") != std::string::npos || p.name.find(".b2") != std::string::npos)
        EXPECT_EQ(p.param_kind, ParamKind::Bias) << p.name;
      else
        EXPECT_EQ(p.param_kind, ParamKind::Weight) << p.name;
      norms += op.kind == OpKind::LarsNorms;
      lars += op.kind == OpKind::LarsUpdate;
      plain += op.kind == OpKind::MomentumUpdate;
    }
    EXPECT_EQ(norms, lars);
    EXPECT_GT(lars, 0);
    EXPECT_GT(plain, 0);
  }
}

// Optimizer state in bytes per parameter (fp32 states): momentum and LARS one, RMSProp two, so that with fp32
// weights RMSProp holds GPipe's 12 bytes per parameter. Through the memory plan of one chip and, under
// weight-update sharding over 4, a quarter of it on each.
MemoryPlan memory(const Step& s) {
  const Program& p = s.plan.programs.at(0);
  return lower(p.graph, p.order, s.exp.hardware.chip, {s.exp.run.fusion != "none"}).memory;
}

TEST(OptimizerTest, StateBytesPerParameter) {
  for (const auto& [opt, bytes] : std::vector<std::pair<std::string, double>>{
           {"sgd", 0}, {"momentum", 4}, {"lars", 4}, {"rmsprop", 8}, {"adam", 8}}) {
    SCOPED_TRACE(opt);
    const MemoryPlan one = memory(plan_step(hardware("[1, 1]") + mlp(opt) + "strategy: {name: single_device}\n"));
    EXPECT_EQ(one.at_peak.optimizer_state, bytes * kElements);
    EXPECT_EQ(one.at_peak.weights, F32 * kElements);
    if (opt == "rmsprop") {
      EXPECT_EQ(one.at_peak.weights + one.at_peak.optimizer_state, 12.0 * kElements);
    }
    // Sharded over 4 along the first dimension 4 divides: fc0.w's 6 rows stay whole and its H columns are split, so
    // nothing is padded.
    const MemoryPlan wus = memory(plan_step(hardware("[4, 1]") + mlp(opt) +
                                            "strategy: {name: data_parallel, weight_update_sharding: true}\n"));
    EXPECT_EQ(wus.at_peak.optimizer_state, bytes * kElements / 4);
  }
}

// Vector-unit work per element (ops::vpu_cost): momentum 4 simple operations, LARS 6 (the trust ratio is per op),
// RMSProp 10 and a reciprocal square root; the norms are a reduction (w^2 and g^2 summed: 4 FLOPs per element).
TEST(OptimizerTest, VectorUnitCost) {
  const Step s = plan_step(hardware("[1, 1]") + mlp("lars") + "strategy: {name: single_device}\n");
  for (const Op& op : s.graph.ops()) {
    if (op.name != "fc1.w.norms" && op.name != "fc1.w.update") continue;
    const OpCost c = op_cost(s.graph, op);
    EXPECT_EQ(c.unit, Unit::Vpu);
    EXPECT_EQ(c.vector.elements, H * H);
    if (op.kind == OpKind::LarsNorms) {
      EXPECT_TRUE(c.reduction);
      EXPECT_FALSE(c.fusible);
      EXPECT_EQ(c.flops, 4.0 * H * H);
      EXPECT_EQ(c.bytes_written, 2 * F32);
    } else {
      EXPECT_TRUE(c.fusible);
      EXPECT_EQ(c.vector.simple, 6);
      EXPECT_EQ(c.bytes_read, 3 * H * H * F32 + 2 * F32);  // w, g, u and the norms
      EXPECT_EQ(c.bytes_written, 2 * H * H * F32);       // w', u'
    }
  }
  const Step m = plan_step(hardware("[1, 1]") + mlp("rmsprop") + "strategy: {name: single_device}\n");
  for (const Op& op : m.graph.ops())
    if (op.kind == OpKind::RmsPropUpdate) {
      const OpCost c = op_cost(m.graph, op);
      EXPECT_EQ(c.vector.simple, 10);
      EXPECT_EQ(c.vector.transcendental, 1);
    }
}

// ---- LARS with the weights sharded -------------------------------------------------------------------------------

// The collectives of `lars` that momentum's plan of the same step does not have (both sorted).
std::vector<std::string> extra(const std::vector<std::string>& lars, const std::vector<std::string>& momentum) {
  std::vector<std::string> out;
  std::set_difference(lars.begin(), lars.end(), momentum.begin(), momentum.end(), std::back_inserter(out));
  return out;
}

// Weight-update sharding over 4: each weight's norms are partial sums of the replicas' quarters, all-reduced over
// `data`: one all-reduce of 2 floats per weight matrix (3), the biases none. Everything else is momentum's plan.
TEST(OptimizerTest, WeightUpdateShardingAllReducesEachWeightsNorms) {
  const std::string dp = "strategy: {name: data_parallel, weight_update_sharding: true}\n";
  const Step lars = plan_step(hardware("[4, 1]") + mlp("lars", ", weight_decay: 0.01") + dp);
  const Step mom = plan_step(hardware("[4, 1]") + mlp("momentum") + dp);
  const auto l = collectives(lars.plan.programs[0]), m = collectives(mom.plan.programs[0]);
  std::vector<std::string> want;
  for (const auto& [p, n] : kWeights) want.push_back(ar(p + ".norms", "data", 2 * F32));
  EXPECT_EQ(extra(l, m), sorted(want));
  EXPECT_EQ(l.size(), m.size() + kWeights.size());
  expect_reproduces_the_step(lars);
  // Without weight-update sharding every replica holds whole gradients: no collective for the norms.
  const Step plain = plan_step(hardware("[4, 1]") + mlp("lars", ", weight_decay: 0.01") + "strategy: {name: data_parallel}\n");
  const Step plain_m = plan_step(hardware("[4, 1]") + mlp("momentum") + "strategy: {name: data_parallel}\n");
  EXPECT_EQ(collectives(plain.plan.programs[0]), collectives(plain_m.plan.programs[0]));
  expect_reproduces_the_step(plain);
}

// With gradient bucketing on (run.combine_threshold, XLA's all-reduce combiner), the norms' all-reduces are
// batched: one all-reduce of 3 x 8 bytes, issued after the last norms op and before the first update.
TEST(OptimizerTest, CombinedNormsAreOneAllReduce) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("lars", ", weight_decay: 0.01") +
                               "strategy: {name: data_parallel, weight_update_sharding: true}\n",
                           true);
  const Program& p = s.plan.programs[0];
  int with_norms = 0;
  size_t last_norms = 0, first_update = p.order.size(), at = 0;
  for (size_t i = 0; i < p.order.size(); ++i) {
    const Op& op = p.graph.op(p.order[i]);
    if (op.kind == OpKind::LarsNorms) last_norms = i;
    if (op.kind == OpKind::LarsUpdate) first_update = std::min(first_update, i);
    bool norms = false;
    double bytes = 0;
    for (TensorId t : op.inputs) {
      norms = norms || p.graph.tensor(t).name.find(".norms") != std::string::npos;
      bytes += p.graph.tensor(t).bytes();
    }
    if (op.kind != OpKind::AllReduce || !norms) continue;
    ++with_norms;
    at = i;
    EXPECT_EQ(op.inputs.size(), kWeights.size());
    EXPECT_EQ(bytes, kWeights.size() * 2 * F32);
    EXPECT_EQ(op.attrs.axes, std::vector<std::string>{"data"});
  }
  EXPECT_EQ(with_norms, 1);
  EXPECT_GT(at, last_norms);
  EXPECT_LT(at, first_update);
  expect_reproduces_the_step(s);
}

// fsdp: the weights live sharded, so the norms are all-reduced over `fsdp`; the same one collective per weight.
TEST(OptimizerTest, FsdpAllReducesEachWeightsNorms) {
  const Step lars = plan_step(hardware("[4, 1]") + mlp("lars", ", weight_decay: 0.01") + "strategy: {name: fsdp}\n");
  const Step mom = plan_step(hardware("[4, 1]") + mlp("momentum") + "strategy: {name: fsdp}\n");
  std::vector<std::string> want;
  for (const auto& [p, n] : kWeights) want.push_back(ar(p + ".norms", "fsdp", 2 * F32));
  EXPECT_EQ(extra(collectives(lars.plan.programs[0]), collectives(mom.plan.programs[0])), sorted(want));
  expect_reproduces_the_step(lars);
}

// Data x Megatron model parallelism with weight-update sharding: a weight split over `model` and sharded over
// `data` has norms partial over both, all-reduced over both at once; layer norms and biases have none.
TEST(OptimizerTest, DataTimesModelAllReducesNormsOverBothAxes) {
  const std::string tx = "workload: {model: transformer, layers: 1, d_model: 16, d_ff: 32, heads: 4, vocab: 24, "
                         "seq_len: 8, batch: 4, dtype: fp32, learning_rate: 0.5, optimizer: lars, weight_decay: 0.01}\n"
                         "run: {fusion: none}\n";
  const Step s = plan_step(hardware("[2, 2]") + tx +
                           "strategy: {name: [data_parallel, spmd], weight_update_sharding: true}\n"
                           "mesh: {axes: [data, model], shape: [2, 2]}\n");
  int weights = 0;
  for (const Op& op : s.graph.ops()) weights += op.kind == OpKind::LarsNorms;
  std::vector<std::string> got;
  for (const std::string& c : collectives(s.plan.programs[0]))
    if (c.find(".norms") != std::string::npos) got.push_back(c);
  ASSERT_EQ(static_cast<int>(got.size()), weights);
  for (const std::string& c : got) EXPECT_NE(c.find("[data,model]: 8 B"), std::string::npos) << c;
  expect_reproduces_the_step(s);
}

// A pipeline of 2 stages x data 2 with weight-update sharding: each stage all-reduces the norms of its own weights
// over `data`; the step reproduces the single-device one.
TEST(OptimizerTest, PipelineTimesDataWithWeightUpdateSharding) {
  const Step s = plan_step(hardware("[2, 2]") + mlp("lars", ", weight_decay: 0.01") +
                           "strategy: {name: [pipeline, data_parallel], micro_batches: 2, weight_update_sharding: true}\n"
                           "mesh: {axes: [pipe, data], shape: [2, 2]}\n");
  std::vector<std::string> got;
  for (const Program& p : s.plan.programs)
    for (const std::string& c : collectives(p))
      if (c.find(".norms") != std::string::npos) got.push_back(c);
  std::vector<std::string> want;
  for (const auto& [p, n] : kWeights) want.push_back(ar(p + ".norms", "data", 2 * F32));
  EXPECT_EQ(sorted(got), sorted(want));
  expect_reproduces_the_step(s);
}

// RMSProp and momentum under weight-update sharding need no extra collective and reproduce the step.
TEST(OptimizerTest, MomentumAndRmsPropShardedReproduceTheStep) {
  for (const char* opt : {"momentum", "rmsprop"}) {
    SCOPED_TRACE(opt);
    const Step s = plan_step(hardware("[4, 1]") + mlp(opt) +
                             "strategy: {name: data_parallel, weight_update_sharding: true}\n");
    const Step sgd = plan_step(hardware("[4, 1]") + mlp("sgd") +
                               "strategy: {name: data_parallel, weight_update_sharding: true}\n");
    EXPECT_EQ(collectives(s.plan.programs[0]), collectives(sgd.plan.programs[0]));
    expect_reproduces_the_step(s);
  }
}

// Bad input: weight decay is momentum's, LARS's, LAMB's and AdamW's, not RMSProp's.
TEST(OptimizerTest, WeightDecayOnlyWithLars) {
  try {
    load_experiment_text(hardware("[1, 1]") + mlp("rmsprop", ", weight_decay: 0.0001"), "wd.yaml");
    FAIL() << "weight_decay with rmsprop was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workload.weight_decay"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("optimizer: momentum, lars"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("wd.yaml:"), std::string::npos) << e.what();
  }
}

}  // namespace
