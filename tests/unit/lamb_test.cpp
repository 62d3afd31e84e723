// LAMB and global-norm gradient clipping (workloads/ops/lamb.cpp, grad_clip.cpp): the update rule and the clipping
// factor against steps computed by hand; which parameters LAMB excludes from its decay and trust ratio (biases,
// normalization parameters, as MLPerf's BERT); the state it keeps; its vector-unit cost; and with the weights
// sharded (weight-update sharding, fsdp, a model axis, a pipeline) the extra collectives, counted by hand: one
// all-reduce of 8 bytes per weight for LAMB's two norms, one of 4 bytes per gradient for clipping, each set combined
// into one collective by gradient bucketing. Each sharded step reproduces the single-device one, its parameter
// steps (w' - w) included, which a wrong trust ratio or clipping factor would change.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>

#include "hw/compiler/lower.h"
#include "hw/compiler/memory_plan.h"
#include "tests/unit/plan_steps.h"
#include "workloads/op_def.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// One op over fp32 vectors, run once.
struct OneOp {
  ModelGraph g{"one"};
  TensorStore s;
  Op op;
  OneOp(OpKind kind, const std::vector<std::vector<float>>& inputs, const std::vector<int64_t>& outputs,
        OpAttrs attrs) {
    op.name = "u";
    op.kind = kind;
    op.phase = Phase::Optimizer;
    op.attrs = attrs;
    for (size_t i = 0; i < inputs.size(); ++i)
      op.inputs.push_back(g.add_tensor({"in" + std::to_string(i), {static_cast<int64_t>(inputs[i].size())}}));
    for (size_t o = 0; o < outputs.size(); ++o) op.outputs.push_back(g.add_tensor({"out" + std::to_string(o), {outputs[o]}}));
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

void expect_values(const std::vector<float>& got, const std::vector<double>& want, double tol = 1e-6) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << i;
}

// w = [3, 4], g = [0.5, -1], m = v = 0, step 1 (bias corrections 0.1 and 0.001 undo the (1 - beta) factors):
// m' = 0.1 g, v' = 0.001 g^2, m'/c1 = g, sqrt(v'/c2) = |g|, so u = g / (|g| + eps) + wd w = [1, -1] + 0.1 [3, 4]
// = [1.3, -0.6] with eps 0. ||w|| = 5, ||u|| = sqrt(1.69 + 0.36) = sqrt(2.05); at lr 0.1 the step is
// 0.1 * 5 / sqrt(2.05) * u.
TEST(LambTest, StepByHand) {
  OpAttrs a;
  a.alpha = 0.1;
  a.beta1 = 0.9;
  a.beta2 = 0.999;
  a.eps = 0;
  a.step = 1;
  a.weight_decay = 0.1;
  OneOp m(OpKind::LambMoments, {{3, 4}, {0.5f, -1}, {0, 0}, {0, 0}}, {2, 2, 2}, a);
  expect_values(m.out(0), {0.05, -0.1});
  expect_values(m.out(1), {0.00025, 0.001});
  expect_values(m.out(2), {25, 2.05}, 1e-5);
  OneOp u(OpKind::LambUpdate, {{3, 4}, m.out(0), m.out(1), m.out(2)}, {2}, a);
  const double r = 0.1 * 5 / std::sqrt(2.05);
  expect_values(u.out(0), {3 - r * 1.3, 4 + r * 0.6}, 1e-5);
  // A zero weight makes the ratio 1 (MLPerf's lamb_optimizer_v1.py: where(w_norm > 0, where(g_norm > 0, ...), 1)):
  // w' = w - lr u.
  OneOp z(OpKind::LambUpdate, {{0, 0}, m.out(0), m.out(1), {0, 1.0f}}, {2}, a);
  expect_values(z.out(0), {-0.1, 0.1}, 1e-5);
  // At step 2 the corrections are 0.19 and 0.001999: m' = 0.9 m + 0.1 g from m = [0.05, -0.1].
  a.step = 2;
  OneOp m2(OpKind::LambMoments, {{3, 4}, {0.5f, -1}, m.out(0), m.out(1)}, {2, 2, 2}, a);
  expect_values(m2.out(0), {0.095, -0.19});
  const double u0 = (0.095 / 0.19) / std::sqrt(0.00049975 / 0.001999) + 0.3;
  EXPECT_NEAR(m2.out(2)[1], u0 * u0 + std::pow((-0.19 / 0.19) / std::sqrt(0.001999 / 0.001999) + 0.4, 2), 1e-5);
}

// The clipping factor: squared norms 9 and 16 make ||G|| = 5; clip 1 scales by 1/5, clip 10 leaves it (1).
TEST(LambTest, ClipFactorByHand) {
  OneOp sq(OpKind::GradSquaredNorm, {{3, 0, 0}}, {1}, {});
  expect_values(sq.out(0), {9});
  OpAttrs a;
  a.alpha = 1;
  OneOp f(OpKind::ClipFactor, {{9}, {16}}, {1}, a);
  expect_values(f.out(0), {0.2});
  a.alpha = 10;
  OneOp one(OpKind::ClipFactor, {{9}, {16}}, {1}, a);
  expect_values(one.out(0), {1});
  // An update with the factor uses 0.2 g: SGD at lr 1 from w = [1, 1] with g = [3, 4].
  OpAttrs s;
  s.alpha = 1;
  OneOp sgd(OpKind::SgdUpdate, {{1, 1}, {3, 4}, {0.2f}}, {2}, s);
  expect_values(sgd.out(0), {0.4, 0.2});
  // LAMB's moments take the clipped gradient too.
  OpAttrs l;
  l.step = 1;
  OneOp m(OpKind::LambMoments, {{3, 4}, {5, -10}, {0, 0}, {0, 0}, {0.1f}}, {2, 2, 2}, l);
  expect_values(m.out(0), {0.05, -0.1});
}

// ---- the workloads' optimizer ops -------------------------------------------------------------------------------

constexpr double F32 = 4;

std::string transformer(const std::string& extra = "") {
  return "workload: {model: transformer, layers: 2, d_model: 16, d_ff: 32, heads: 4, vocab: 24, seq_len: 8, batch: 8, "
         "dtype: fp32, learning_rate: 0.01, optimizer: lamb, weight_decay: 0.01, eps: 1e-6" + extra +
         "}\nrun: {fusion: none}\n";
}

// LAMB: a moments op and a LAMB update per weight (the embedding, projections, FFN matrices, unembedding); the
// biases and layer norms' scales and offsets take Adam's update (no decay, no ratio), as MLPerf's exclusion list.
TEST(LambTest, ExcludesBiasesAndNormalizationParameters) {
  const Step s = plan_step(hardware("[1, 1]") + transformer() + "strategy: {name: single_device}\n");
  int weights = 0, excluded = 0;
  for (const Op& op : s.graph.ops()) {
    if (op.phase != Phase::Optimizer) continue;
    const TensorInfo& p = s.graph.tensor(op.inputs.front());
    if (op.kind == OpKind::LambMoments) {
      EXPECT_EQ(p.param_kind, ParamKind::Weight) << op.name;
      EXPECT_EQ(op.name, p.name + ".moments");
      ++weights;
    } else if (op.kind == OpKind::LambUpdate) {
      EXPECT_EQ(p.param_kind, ParamKind::Weight) << op.name;
    } else {
      EXPECT_EQ(op.kind, OpKind::AdamUpdate) << op.name;
      EXPECT_NE(p.param_kind, ParamKind::Weight) << op.name;
      EXPECT_EQ(op.attrs.weight_decay, 0) << op.name;
      ++excluded;
    }
  }
  // Per layer q, k, v, o, w1, w2 (6) and the embedding and unembedding; per layer 2 layer norms (4) and 2 biases,
  // and the final norm (2).
  EXPECT_EQ(weights, 2 * 6 + 2);
  EXPECT_EQ(excluded, 2 * (4 + 2) + 2);
}

// Two fp32 states (m, v) per parameter, as Adam; a quarter on each of 4 replicas under weight-update sharding.
TEST(LambTest, StateBytesPerParameter) {
  auto memory = [](const Step& s) {
    const Program& p = s.plan.programs.at(0);
    return lower(p.graph, p.order, s.exp.hardware.chip, {false}).memory;
  };
  const Step one = plan_step(hardware("[1, 1]") + transformer() + "strategy: {name: single_device}\n");
  double params = 0;
  for (const TensorInfo& t : one.graph.tensors()) params += t.role == TensorRole::Parameter ? t.elements() : 0;
  EXPECT_EQ(memory(one).at_peak.optimizer_state, 2 * F32 * params);
  const Step wus = plan_step(hardware("[4, 1]") + transformer() +
                             "strategy: {name: data_parallel, weight_update_sharding: true}\n");
  // Sharded along the first dimension 4 divides; a layer norm's 16 features, the FFN's 32 and the vocabulary's 24
  // all divide by 4: nothing padded.
  EXPECT_EQ(memory(wus).at_peak.optimizer_state, 2 * F32 * params / 4);
}

// Vector-unit work per element: the moments 16 simple operations, a square root, a division and 2 reduction steps
// (17 with clipping); the update 7 simple, a square root and a division (u again, then w - lr r u).
TEST(LambTest, VectorUnitCost) {
  const Step s = plan_step(hardware("[1, 1]") + transformer(", clip_norm: 1.0") + "strategy: {name: single_device}\n");
  int seen = 0;
  for (const Op& op : s.graph.ops()) {
    if (op.name.rfind("layer0.ffn.w1.", 0) != 0 || op.phase != Phase::Optimizer) continue;
    const OpCost c = op_cost(s.graph, op);
    EXPECT_EQ(c.unit, Unit::Vpu);
    const double n = 16 * 32;
    EXPECT_EQ(c.vector.elements, n);
    ++seen;
    if (op.kind == OpKind::LambMoments) {
      EXPECT_TRUE(c.reduction);
      EXPECT_TRUE(c.whole_tensor);
      EXPECT_EQ(c.vector.simple, 17);
      EXPECT_EQ(c.vector.transcendental, 1);
      EXPECT_EQ(c.vector.divide, 1);
      EXPECT_EQ(c.bytes_read, 4 * n * F32 + F32);       // w, g, m, v and the factor
      EXPECT_EQ(c.bytes_written, 2 * n * F32 + 2 * F32);  // m', v' and the two sums
    } else if (op.kind == OpKind::LambUpdate) {
      EXPECT_TRUE(c.fusible);
      EXPECT_EQ(c.vector.simple, 7);
      EXPECT_EQ(c.bytes_read, 3 * n * F32 + 2 * F32);  // w, m', v' and the sums
      EXPECT_EQ(c.bytes_written, n * F32);
    } else {
      EXPECT_EQ(op.kind, OpKind::GradSquaredNorm);
      EXPECT_TRUE(c.whole_tensor);
      EXPECT_EQ(c.flops, 3 * n);
      EXPECT_EQ(c.bytes_written, F32);
    }
  }
  EXPECT_EQ(seen, 3);
}

// ---- sharded -------------------------------------------------------------------------------------------------------

std::vector<std::string> extra(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  std::vector<std::string> out;
  std::set_difference(a.begin(), a.end(), b.begin(), b.end(), std::back_inserter(out));
  return out;
}

// Every parameter's step w' - w of the plan against the single-device step's (relative norm 1e-5): a trust ratio
// from a shard's norms, or a clipping factor from a shard's gradient, would scale the steps of a whole weight.
void expect_same_steps(const Step& s) {
  expect_reproduces_the_step(s);
  TensorStore inputs;
  init_step_inputs(s.graph, inputs, 5);
  TensorStore ref = inputs;
  run_reference(s.graph, ref);
  std::vector<TensorStore> chips = interpret_plan(s.plan, s.graph, inputs, 5);
  TensorStore got;
  assemble_results(s.plan, s.graph, [&](int64_t c) { return &chips[c]; }, got);
  int steps = 0;
  for (size_t i = 0; i < s.graph.num_tensors(); ++i) {
    const TensorInfo& t = s.graph.tensor(static_cast<TensorId>(i));
    if (t.role != TensorRole::Updated || s.graph.tensor(t.updates).role != TensorRole::Parameter) continue;
    Tensor a = got.get(static_cast<TensorId>(i)), b = ref.get(static_cast<TensorId>(i));
    const Tensor& w = inputs.get(t.updates);
    for (size_t e = 0; e < w.data.size(); ++e) a.data[e] -= w.data[e], b.data[e] -= w.data[e];
    EXPECT_LE(compare_tensors(a, b).rel_norm, 1e-4) << t.name;
    ++steps;
  }
  EXPECT_GT(steps, 10);
}

// The names of a step's weights (what LAMB takes norms of) and of all its trained parameters.
std::vector<std::string> weights(const Step& s, bool only_weights) {
  std::vector<std::string> out;
  for (const TensorInfo& t : s.graph.tensors())
    if (t.role == TensorRole::Parameter && (!only_weights || t.param_kind == ParamKind::Weight)) out.push_back(t.name);
  return out;
}

// Weight-update sharding over 4: each weight's two sums are partial over `data`, all-reduced: 8 bytes per weight,
// the biases and norms none; everything else is Adam's plan.
TEST(LambTest, WeightUpdateShardingAllReducesEachWeightsNorms) {
  const std::string dp = "strategy: {name: data_parallel, weight_update_sharding: true}\n";
  const Step lamb = plan_step(hardware("[4, 1]") + transformer() + dp);
  const Step adam = plan_step(hardware("[4, 1]") +
                              "workload: {model: transformer, layers: 2, d_model: 16, d_ff: 32, heads: 4, vocab: 24, "
                              "seq_len: 8, batch: 8, dtype: fp32, learning_rate: 0.01, optimizer: adam}\n" + dp);
  std::vector<std::string> want;
  for (const std::string& w : weights(lamb, true)) want.push_back(ar(w + ".norms", "data", 2 * F32));
  EXPECT_EQ(extra(collectives(lamb.plan.programs[0]), collectives(adam.plan.programs[0])), sorted(want));
  EXPECT_EQ(collectives(lamb.plan.programs[0]).size(), collectives(adam.plan.programs[0]).size() + want.size());
  expect_same_steps(lamb);
  // Replicated weights: every replica has the whole weight and update, so no collective for the norms.
  const Step plain = plan_step(hardware("[4, 1]") + transformer() + "strategy: {name: data_parallel}\n");
  for (const std::string& c : collectives(plain.plan.programs[0])) EXPECT_EQ(c.find(".norms"), std::string::npos) << c;
  expect_same_steps(plain);
}

// Clipping under weight-update sharding: each gradient's squared norm is partial over `data` (its shard), so one
// all-reduce of 4 bytes per gradient (every parameter); with gradient bucketing, one of them all and one of the
// LAMB norms.
TEST(LambTest, ClippingAllReducesEachGradientsSquaredNorm) {
  const std::string dp = "strategy: {name: data_parallel, weight_update_sharding: true}\n";
  const Step clipped = plan_step(hardware("[4, 1]") + transformer(", clip_norm: 0.5") + dp);
  const Step plain = plan_step(hardware("[4, 1]") + transformer() + dp);
  std::vector<std::string> want;
  for (const std::string& p : weights(clipped, false)) want.push_back(ar(p + ".grad.sq", "data", F32));
  EXPECT_EQ(extra(collectives(clipped.plan.programs[0]), collectives(plain.plan.programs[0])), sorted(want));
  expect_same_steps(clipped);

  const Step combined = plan_step(hardware("[4, 1]") + transformer(", clip_norm: 0.5") + dp, true);
  const Program& p = combined.plan.programs[0];
  int sq = 0, norms = 0;
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (op.kind != OpKind::AllReduce) continue;
    const std::string first = p.graph.tensor(op.inputs.front()).name;
    if (first.find(".grad.sq") != std::string::npos) {
      ++sq;
      EXPECT_EQ(op.inputs.size(), want.size());
    }
    if (first.find(".norms") != std::string::npos) ++norms;
  }
  EXPECT_EQ(sq, 1);
  EXPECT_EQ(norms, 1);
  expect_same_steps(combined);
}

// The clipping factor changes the step: a threshold far below the gradients' norm gives other updates than none, and
// one far above gives exactly the unclipped step.
TEST(LambTest, ClippingScalesTheGradient) {
  auto run = [](const std::string& extra_keys) {
    const Step s = plan_step(hardware("[1, 1]") +
                             "workload: {model: mlp, batch: 8, input: 6, hidden: 8, layers: 1, classes: 4, dtype: fp32, "
                             "learning_rate: 0.5, optimizer: sgd" + extra_keys + "}\n" +
                             "strategy: {name: single_device}\n");
    TensorStore st;
    init_step_inputs(s.graph, st, 3);
    run_reference(s.graph, st);
    return std::make_pair(s.graph, st);
  };
  const auto [g0, none] = run("");
  const auto [g1, high] = run(", clip_norm: 1e5");
  const auto [g2, low] = run(", clip_norm: 1e-3");
  const TensorId w = g0.find_tensor("fc0.w.new"), grad = g0.find_tensor("fc0.w.grad"), w0 = g0.find_tensor("fc0.w");
  EXPECT_EQ(none.get(w).data, high.get(g1.find_tensor("fc0.w.new")).data);
  // With every gradient scaled by c, SGD's step is c times the unclipped one: c = 1e-3 / ||G||.
  double sum = 0;
  for (const TensorInfo& t : g0.tensors())
    if (t.role == TensorRole::Parameter) {
      const TensorId gt = g0.find_tensor(t.name + ".grad");
      for (float x : none.get(gt).data) sum += static_cast<double>(x) * x;
    }
  const double c = 1e-3 / std::sqrt(sum);
  const Tensor& lw = low.get(g2.find_tensor("fc0.w.new"));
  for (size_t e = 0; e < lw.data.size(); ++e)
    EXPECT_NEAR(lw.data[e], none.get(w0).data[e] - 0.5 * c * none.get(grad).data[e], 1e-6);
}

// fsdp and data x model with weight-update sharding: the norms partial over every axis that splits the weight.
TEST(LambTest, FsdpAndDataTimesModelReproduceTheStep) {
  const Step fsdp = plan_step(hardware("[4, 1]") + transformer(", clip_norm: 0.5") + "strategy: {name: fsdp}\n");
  for (const std::string& w : weights(fsdp, true))
    EXPECT_NE(std::find(collectives(fsdp.plan.programs[0]).begin(), collectives(fsdp.plan.programs[0]).end(),
                        ar(w + ".norms", "fsdp", 2 * F32)),
              collectives(fsdp.plan.programs[0]).end())
        << w;
  expect_same_steps(fsdp);
  const Step dm = plan_step(hardware("[2, 2]") + transformer(", clip_norm: 0.5") +
                            "strategy: {name: [data_parallel, spmd], weight_update_sharding: true}\n"
                            "mesh: {axes: [data, model], shape: [2, 2]}\n");
  int both = 0;
  for (const std::string& c : collectives(dm.plan.programs[0]))
    if (c.find("layer0.attn.q.w.norms") != std::string::npos) both += c == ar("layer0.attn.q.w.norms", "data,model", 8);
  EXPECT_EQ(both, 1);
  expect_same_steps(dm);
}

// A pipeline of 2 stages x data 2: the clipping factor needs every stage's gradients.
TEST(LambTest, PipelineTimesDataReproducesTheStep) {
  const Step s = plan_step(hardware("[2, 2]") + transformer(", clip_norm: 0.5") +
                           "strategy: {name: [pipeline, data_parallel], micro_batches: 2, weight_update_sharding: true}\n"
                           "mesh: {axes: [pipe, data], shape: [2, 2]}\n");
  expect_same_steps(s);
}

}  // namespace
