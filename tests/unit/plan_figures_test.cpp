// The figures of the plans the data and tensor sharding strategies make, against hand counts written here from the
// model's dimensions (tests/unit/plan_figures.h): the collectives each program issues (kind, tensor, mesh axes, bytes
// per chip) and what each role holds at its memory peak by category, for data parallelism (with and without
// weight-update sharding), Megatron, GSPMD's 2-D sharding, data x model and a mixture of experts. Numeric equivalence
// (partition_test, pipeline_test, cli/strategies_test) passes a plan that moves the same numbers with more bytes or
// holds them in more memory; these tests do not. Megatron-LM's vocabulary-parallel head and sequence parallelism are
// in sequence_parallel_test.cpp, pipelines in pipeline_figures_test.cpp.
//
// Bytes are per chip: a collective's operand on one chip (an all-reduce's whole buffer, a reduce-scatter's input
// and output, an all-gather's shard and result). Memory is the lowered program's memory plan (plan_figures.h).
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "tests/unit/plan_figures.h"

using namespace podsim;
using namespace podsim::plan_steps;
using namespace podsim::plan_models;

// ---- data parallelism ------------------------------------------------------------------------------------------

// Four replicas: each gradient comes out of the backward pass as a partial sum over `data` and is all-reduced
// whole, once; so is the loss (a mean over the replicas' rows). Nothing else moves.
TEST(PlanFiguresTest, DataParallelAllReducesEachGradientOnce) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("sgd") + "strategy: {name: data_parallel}\n");
  ASSERT_EQ(s.plan.programs.size(), 1u);
  std::vector<std::string> want;
  for (const auto& [p, n] : kMlpParams) want.push_back(ar(p + ".grad", "data", n * F32));
  want.push_back(ar("loss", "data", F32));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
}

// Weights replicated (every parameter on every chip), no optimizer state with SGD.
TEST(PlanFiguresTest, DataParallelHoldsEveryWeight) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("sgd") + "strategy: {name: data_parallel}\n");
  const MemoryPlan m = memory(s, 0);
  EXPECT_EQ(m.at_peak.weights, kMlpElements * F32);
  EXPECT_EQ(m.at_peak.optimizer_state, 0);
  EXPECT_EQ(m.at_peak.temporaries, 0);
}

// The peak of a data-parallel step (b = B / 4 rows per replica) is the last weight gradient, fc0's: every weight;
// every gradient, whole (none is reduced before the backward pass ends), with the one being written (I x H) and
// what it reads, fc0's ReLU gradient (b x H); and the batch shard (b x I, b labels) and the loss. fc0's ReLU output
// died with that gradient (its mask). One op earlier, at fc1's weight gradient, fc0's ReLU output and fc1's two
// input-side gradients (b x H each) are held in place of fc0's weight, bias and ReLU gradients: 128 B less. The
// reductions at the end of the backward pass hold less when each sum overwrites the partial sums it reduces, as a
// ring all-reduce does in place (and as DDP and ZeRO reduce their gradient buckets).
TEST(PlanFiguresTest, DataParallelPeakHoldsEachGradientOnce) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("sgd") + "strategy: {name: data_parallel}\n");
  const double b = B / 4;
  const double gradients = kMlpElements * F32 + b * H * F32;
  const double activations = b * I * F32 + b * F32 + F32;
  const MemoryPlan m = memory(s, 0);
  EXPECT_EQ(m.at_peak.gradients, gradients);
  EXPECT_EQ(m.at_peak.activations, activations);
  EXPECT_EQ(m.peak_bytes, kMlpElements * F32 + gradients + activations);
}

// Weight-update sharding (Xu et al. 2020) over 4 replicas: each gradient is reduce-scattered (the same bytes in as
// the all-reduce, a quarter out), each replica updates a quarter of each parameter, and the updated parameter is
// all-gathered from the quarters. The shard is dimension 0 of each parameter.
TEST(PlanFiguresTest, WeightUpdateShardingReduceScattersAndGathers) {
  for (const char* opt : {"sgd", "adam"}) {
    SCOPED_TRACE(opt);
    const Step s =
        plan_step(hardware("[4, 1]") + mlp(opt) + "strategy: {name: data_parallel, weight_update_sharding: true}\n");
    std::vector<std::string> want;
    for (const auto& [p, n] : kMlpParams) {
      want.push_back(rs(p + ".grad", "data", 0, n * F32, n * F32 / 4));
      want.push_back(ag(p + ".new", "data", 0, n * F32 / 4, n * F32));
    }
    want.push_back(ar("loss", "data", F32));
    EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
    // Each update reads a quarter of its parameter and of its gradient (and of Adam's m and v).
    double updated = 0, read = 0;
    const Program& p = s.plan.programs[0];
    for (OpId id : p.order) {
      const Op& op = p.graph.op(id);
      if (op.phase != Phase::Optimizer) continue;
      updated += p.graph.tensor(op.inputs[0]).bytes();
      for (TensorId t : op.inputs) read += p.graph.tensor(t).bytes();
    }
    const double quarter = kMlpElements * F32 / 4;
    EXPECT_EQ(updated, quarter);
    EXPECT_EQ(read, (std::string(opt) == "adam" ? 4 : 2) * quarter);  // parameter, gradient (, m, v)
  }
}

// Memory under weight-update sharding: the whole weights, a quarter of Adam's m and v, and at the peak (the
// reduce-scatter of the widest layer's weight gradient, fc1's, as it starts) that layer's whole gradient (H x H) and
// the quarter it is writing, the quarters of the gradients already reduce-scattered (the output layer's and fc1's
// bias), fc1's input gradient (b x H: what fc0's ReLU gradient reads next), and the activations the rest of the
// backward pass needs: the batch shard, the loss, and fc0's ReLU output (b x H: the ReLU gradient's mask). (At fc1's
// weight gradient, one op earlier, the ReLU gradient it reads (b x H) is held in place of the quarter (H x H / 4):
// 512 B less.)
TEST(PlanFiguresTest, WeightUpdateShardingDividesGradientsAndOptimizerState) {
  for (const char* opt : {"sgd", "adam"}) {
    SCOPED_TRACE(opt);
    const Step s =
        plan_step(hardware("[4, 1]") + mlp(opt) + "strategy: {name: data_parallel, weight_update_sharding: true}\n");
    const double b = B / 4;
    const double weights = kMlpElements * F32;
    const double optimizer = std::string(opt) == "adam" ? 2 * weights / 4 : 0;
    const double gradients = (H * H + H * H / 4) * F32 + (H * C + C + H) * F32 / 4 + b * H * F32;
    const double activations = b * I * F32 + b * F32 + F32 + b * H * F32;
    const MemoryPlan m = memory(s, 0);
    EXPECT_EQ(m.at_peak.weights, weights);
    EXPECT_EQ(m.at_peak.optimizer_state, optimizer);
    EXPECT_EQ(m.at_peak.gradients, gradients);
    EXPECT_EQ(m.at_peak.activations, activations);
    EXPECT_EQ(m.at_peak.temporaries, 0);
    EXPECT_EQ(m.peak_bytes, weights + optimizer + gradients + activations);
  }
}

// ---- tensor sharding (spmd) ------------------------------------------------------------------------------------

// Megatron over 4 chips: per layer, the attention output and the FFN output are partial sums over `model` and are
// all-reduced forward, and the gradients of the two layer norms' outputs (the FFN's input, q/k/v's input) backward:
// 4 all-reduces of batch x S x D per layer. The vocabulary is split too: the embedding's lookup is a partial sum,
// all-reduced once before the first layer, the cross-entropy
// all-reduces three values per row (max, sum of exponentials, the label's logit: batch x S floats each, never the
// logits), and the unembedding's input gradient is all-reduced backward. The batch is whole on every chip, so no
// gradient is reduced. Weights: a quarter of the attention and FFN matrices, of b1, of the embedding and of the
// unembedding; the rest whole.
TEST(PlanFiguresTest, MegatronAllReducesTwiceForwardAndTwiceBackwardPerLayer) {
  const int64_t batch = 2;
  const Step s =
      plan_step(hardware("[4, 1]") + transformer(2, batch, "sgd") + "strategy: {name: spmd, scheme: megatron}\n");
  const double act = batch * S * D * F32, rows = batch * S * F32;
  std::vector<std::string> want = {ar("embed.partial", "model", act), ar("logits.dA", "model", act),
                                   ar("loss.max", "model", rows), ar("loss.sumexp", "model", rows),
                                   ar("loss.target", "model", rows)};
  for (int l = 0; l < 2; ++l) {
    const std::string n = "layer" + std::to_string(l);
    for (const char* t : {".attn.o", ".ffn.down", ".ffn.up.dA", ".ln1.grad.sum2"})
      want.push_back(ar(n + t, "model", act));
  }
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  double weights = 0;
  for (const TParam& p : transformer_params(2, 4)) weights += static_cast<double>(p.elements / p.megatron_split) * F32;
  EXPECT_EQ(memory(s, 0).at_peak.weights, weights);
}

// Megatron's MLP over 4 chips (fc0 split by columns, fc1 by rows): one all-reduce of fc1's output (B x H) forward,
// none backward (the first layer's input is the batch, which needs no gradient). Weights: a quarter of fc0 and of
// fc1, the rest whole; Adam's state twice that. The peak is fc1's ReLU gradient: held are the batch, the loss and
// the two ReLU outputs (fc0's on a quarter of the hidden units, fc1's on all of them: this gradient's mask), the
// biased values having died as their ReLUs read them; and the output layer's input gradient (B x H) that it reads,
// the ReLU gradient it writes (B x H) and the output layer's two parameter gradients (the logits' gradient died
// with its weight gradient). (At that weight gradient, one op earlier, the logits' gradient (B x C) is held in place
// of the ReLU gradient (B x H).)
TEST(PlanFiguresTest, MegatronMlpFigures) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("adam") + "strategy: {name: spmd, scheme: megatron}\n");
  EXPECT_EQ(collectives(s.plan.programs[0]), std::vector<std::string>{ar("fc1", "model", B * H * F32)});
  const double weights = (I * H / 4 + H / 4 + H / 4 * H + H + H * C + C) * F32;
  const double gradients = (2 * B * H + H * C + C) * F32;
  const double activations = (B * I + B + 1 + B * H / 4 + B * H) * F32;
  const MemoryPlan m = memory(s, 0);
  EXPECT_EQ(m.at_peak.weights, weights);
  EXPECT_EQ(m.at_peak.optimizer_state, 2 * weights);
  EXPECT_EQ(m.at_peak.gradients, gradients);
  EXPECT_EQ(m.at_peak.activations, activations);
  EXPECT_EQ(m.peak_bytes, 3 * weights + gradients + activations);
}

// GSPMD's 2-D sharding over s0 x s1 = 2 x 2 (one layer): activations [b, S, D] as [s0, -, s1] (b = B / 2), weights
// over both axes. Forward: each weight is gathered over s0 before use; the layer norms gather their input over s1;
// the attention and FFN outputs, partial over s1, are reduce-scattered into D. Backward: the layer norms' input
// gradients, partial over s1, are all-reduced (a layer norm needs D whole); the weight gradients, partial over s0
// (the batch), are reduce-scattered back into their s0 split; the replicated parameters' gradients and the
// embedding's and unembedding's halves of the vocabulary are all-reduced over s0; so is the loss. The vocabulary
// over s1: the lookup (partial over s1) is reduce-scattered into D, the cross-entropy all-reduces three values per
// row over s1 and the unembedding's input gradient is all-reduced over s1.
TEST(PlanFiguresTest, TwoDimensionalShardingMovesWhatGspmdMoves) {
  const Step s = plan_step(hardware("[2, 2]") + transformer(1, TB, "sgd") +
                           "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1]}\nmesh: {axes: [s0, s1], shape: [2, 2]}\n");
  const double act = TB / 2 * S * D * F32;        // [b, S, D] with D whole
  const double qkv = D * NH * E * F32 / 4;        // [D / 2, H / 2, E]
  const double ffn = D * F * F32 / 4;             // [D / 2, F / 2]
  std::vector<std::string> want = {
      rs("embed", "s1", 2, act, act / 2), ag("embed", "s1", 2, act / 2, act),
      ag("layer0.attn.q.w", "s0", 0, qkv, 2 * qkv), ag("layer0.attn.k.w", "s0", 0, qkv, 2 * qkv),
      ag("layer0.attn.v.w", "s0", 0, qkv, 2 * qkv), ag("layer0.attn.o.w", "s0", 2, qkv, 2 * qkv),
      rs("layer0.attn.o", "s1", 2, act, act / 2),
      ag("layer0.attn.residual", "s1", 2, act / 2, act),
      ag("layer0.ffn.w1", "s0", 0, ffn, 2 * ffn), ag("layer0.ffn.w2", "s0", 1, ffn, 2 * ffn),
      rs("layer0.ffn.down", "s1", 2, act, act / 2),
      ag("layer0.ffn.residual", "s1", 2, act / 2, act),
      ar("layer0.ffn.up.dA", "s1", act), ar("layer0.ln1.grad.sum2", "s1", act),
      rs("layer0.attn.q.w.grad", "s0", 0, 2 * qkv, qkv), rs("layer0.attn.k.w.grad", "s0", 0, 2 * qkv, qkv),
      rs("layer0.attn.v.w.grad", "s0", 0, 2 * qkv, qkv), rs("layer0.attn.o.w.grad", "s0", 2, 2 * qkv, qkv),
      rs("layer0.ffn.w1.grad", "s0", 0, 2 * ffn, ffn), rs("layer0.ffn.w2.grad", "s0", 1, 2 * ffn, ffn),
      ar("embedding.grad", "s0", V * D / 2 * F32),  // the table's rows on s1: [V / 2, D]
      ar("layer0.ffn.b1.grad", "s0", F / 2 * F32),  // b1 split over s1
      ar("unembed.grad", "s0", D * V / 2 * F32),    // [D, V / 2]
      ar("loss", "s0", F32),
      ar("logits.dA", "s1", act), ar("loss.max", "s1", TB / 2 * S * F32), ar("loss.sumexp", "s1", TB / 2 * S * F32),
      ar("loss.target", "s1", TB / 2 * S * F32)};
  for (const char* p : {"layer0.ln1.gamma", "layer0.ln1.beta", "layer0.ln2.gamma", "layer0.ln2.beta", "layer0.ffn.b2",
                        "final_ln.gamma", "final_ln.beta"})
    want.push_back(ar(std::string(p) + ".grad", "s0", D * F32));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(s);
}


// ---- compositions ----------------------------------------------------------------------------------------------

// [data_parallel, spmd] on data 2 x model 2 with weight-update sharding and Adam: Megatron's four all-reduces over
// `model` on each replica's half batch, the embedding's lookup and the unembedding's input gradient all-reduced
// over `model`, and
// the cross-entropy's three values per row (max, sum of exponentials, the label's logit); every gradient reduce-scattered over `data` from its Megatron shard and
// every updated parameter gathered back to it, each along the first dimension `model` does not split. FFN's b1 is
// split over `model` on its only dimension, so `data` splits the same dimension further: still one reduce-scatter
// and one all-gather, of its half. Optimizer state: a quarter of Adam's m and v for the split weights, a half for
// the replicated ones (the weights' bytes per chip, halved, twice).
TEST(PlanFiguresTest, DataTimesModelWithWeightUpdateSharding) {
  const Step s = plan_step(hardware("[2, 2]") + transformer(1, TB, "adam") +
                           "strategy: {name: [data_parallel, spmd], weight_update_sharding: true}\n"
                           "mesh: {axes: [data, model], shape: [2, 2]}\n");
  const double act = TB / 2 * S * D * F32, rows = TB / 2 * S * F32;
  std::vector<std::string> want = {ar("embed.partial", "model", act), ar("logits.dA", "model", act),
                                   ar("loss.max", "model", rows), ar("loss.sumexp", "model", rows),
                                   ar("loss.target", "model", rows)};
  for (const char* t : {"layer0.attn.o", "layer0.ffn.down", "layer0.ffn.up.dA", "layer0.ln1.grad.sum2"})
    want.push_back(ar(t, "model", act));
  double weights = 0;
  for (const TParam& p : transformer_params(1, 2)) {
    const double local = static_cast<double>(p.elements / p.megatron_split) * F32;
    weights += local;
    want.push_back(rs(p.name + ".grad", "data", p.wus_dim, local, local / 2));
    want.push_back(ag(p.name + ".new", "data", p.wus_dim, local / 2, local));
  }
  want.push_back(ar("loss", "data", F32));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  const MemoryPlan m = memory(s, 0);
  EXPECT_EQ(m.at_peak.weights, weights);
  EXPECT_EQ(m.at_peak.optimizer_state, 2 * weights / 2);
  expect_reproduces_the_step(s);
}

// The same composition on the MLP, whose Megatron pair is fc0 (columns) and fc1 (rows): fc0's bias is split over
// `model` and then `data` on its one dimension (a reduce-scatter of the model shard, never an all-reduce and a
// slice), fc1's weight is split over `model` on rows, so `data` takes its columns.
TEST(PlanFiguresTest, PendingSumWantedSplitFurtherIsOneReduceScatter) {
  const Step s = plan_step(hardware("[2, 2]") + mlp("sgd") +
                           "strategy: {name: [data_parallel, spmd], weight_update_sharding: true}\n"
                           "mesh: {axes: [data, model], shape: [2, 2]}\n");
  std::vector<std::string> want = {ar("fc1", "model", B / 2 * H * F32), ar("loss", "data", F32)};
  const std::vector<std::tuple<std::string, double, int>> params = {
      {"fc0.w", I * H / 2 * F32, 0}, {"fc0.b", H / 2 * F32, 0}, {"fc1.w", H / 2 * H * F32, 1},
      {"fc1.b", H * F32, 0},         {"out.w", H * C * F32, 0}, {"out.b", C * F32, 0}};
  for (const auto& [p, local, dim] : params) {
    want.push_back(rs(p + ".grad", "data", dim, local, local / 2));
    want.push_back(ag(p + ".new", "data", dim, local / 2, local));
  }
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(s);
}

// ---- mixture of experts ----------------------------------------------------------------------------------------

// GShard over expert = 2 (layer 1 of 2 is a mixture of X = 4 experts; G = 2 groups of 8 tokens, capacity 8): the
// dispatch and the combine are one all-to-all each, forward and backward, of a device's [X, G / 2, 8, D] buffer;
// the experts' weights stay where they are (no collective), and every other parameter's gradient is all-reduced
// over `expert`, which splits the batch.
TEST(PlanFiguresTest, MixtureOfExpertsDispatchesAndCombinesByAllToAll) {
  const int64_t d = 8, f = 16, v = 16, x = 4;
  const Step s = plan_step(hardware("[2, 1]") +
                           "workload: {model: transformer, layers: 2, d_model: 8, d_ff: 16, heads: 2, vocab: 16, "
                           "seq_len: 4, batch: 4, dtype: fp32, optimizer: sgd, moe: {experts: 4, groups: 2, "
                           "capacity_factor: 2.0, aux_loss: 0.01}}\nrun: {fusion: none}\nstrategy: {name: moe}\n");
  const double buffer = x * (2 / 2) * 8 * d * F32;
  std::vector<std::string> want = {a2a("layer1.moe.dispatched", "expert", 0, buffer),
                                   a2a("layer1.moe.expert_out", "expert", 0, buffer),
                                   a2a("layer1.moe.combined.dB", "expert", 1, buffer),
                                   a2a("layer1.moe.hidden.dA", "expert", 1, buffer), ar("loss", "expert", F32)};
  std::vector<std::pair<std::string, int64_t>> dense = {{"embedding", v * d}, {"final_ln.gamma", d},
                                                        {"final_ln.beta", d}, {"unembed", d * v},
                                                        {"layer1.moe.gate.w", d * x}};
  for (int l = 0; l < 2; ++l) {
    const std::string n = "layer" + std::to_string(l);
    for (const char* p : {".ln1.gamma", ".ln1.beta", ".ln2.gamma", ".ln2.beta"}) dense.push_back({n + p, d});
    for (const char* p : {".attn.q.w", ".attn.k.w", ".attn.v.w", ".attn.o.w"}) dense.push_back({n + p, d * d});
  }
  for (auto [p, n] : std::vector<std::pair<std::string, int64_t>>{
           {".ffn.w1", d * f}, {".ffn.b1", f}, {".ffn.w2", f * d}, {".ffn.b2", d}})
    dense.push_back({"layer0" + p, n});
  for (const auto& [p, n] : dense) want.push_back(ar(p + ".grad", "expert", n * F32));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  // Each chip holds half of the experts' weights: wi [X, D, F] and wo [X, F, D].
  double weights = x * d * f * 2 * F32 / 2;
  for (const auto& [p, n] : dense) weights += n * F32;
  EXPECT_EQ(memory(s, 0).at_peak.weights, weights);
}
