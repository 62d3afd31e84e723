// The figures of the plans the strategies make, against hand counts written here from the model's dimensions: the
// collectives each program issues (kind, tensor, mesh axes, bytes per chip), what each role holds at its memory
// peak by category, and the order in which pipeline stages run their micro-batches. Numeric equivalence
// (partition_test, pipeline_test, cli/strategies_test) passes a plan that moves the same numbers with more bytes or
// holds them in more memory; these tests do not.
//
// Bytes are per chip: a collective's operand on one chip (an all-reduce's whole buffer, a reduce-scatter's input
// and output, an all-gather's shard and result). Memory is the lowered program's memory plan, with
// run.fusion: none so that every tensor of the program lives in HBM and the count is over the plan's tensors
// alone (fusion, which keeps some on chip, has its own tests).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "hw/compiler/lower.h"
#include "hw/compiler/memory_plan.h"
#include "partition/interpreter.h"
#include "plan/shard_data.h"
#include "base/error.h"
#include "sim/config/loader.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"
#include "workloads/tensor_compare.h"
#include "tests/unit/plan_steps.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// The memory plan of role `r` as the engine lowers it.
MemoryPlan memory(const Step& s, size_t r) {
  const Program& p = s.plan.programs.at(r);
  return lower(p.graph, p.order, s.exp.hardware.chip, {s.exp.run.fusion != "none"}).memory;
}

// The most bytes of the activations category (activations, the batch, losses) role `r` holds at once: the memory
// plan of the same lowered program with every other tensor taking no space.
double activation_peak(const Step& s, size_t r) {
  const Program& p = s.plan.programs.at(r);
  const ExecProgram ep = lower(p.graph, p.order, s.exp.hardware.chip, {s.exp.run.fusion != "none"});
  ModelGraph g = p.graph;
  for (size_t t = 0; t < g.num_tensors(); ++t) {
    TensorInfo& info = g.tensor(static_cast<TensorId>(t));
    const TensorRole role = info.role;
    if (role != TensorRole::Activation && role != TensorRole::Input && role != TensorRole::Label &&
        role != TensorRole::Loss)
      info.role = TensorRole::Updated;  // the memory plan gives an updated value no space of its own
  }
  return plan_memory(g, ep).peak_bytes;
}

// ---- the models, by hand -------------------------------------------------------------------------------------

// The MLP of these tests: batch B, input I, hidden H, 2 hidden layers, C classes, fp32 (4 bytes).
constexpr int64_t B = 16, I = 8, H = 32, C = 4;
constexpr double F32 = 4;

std::string mlp(const std::string& optimizer, int64_t batch = B, int layers = 2) {
  return "workload: {model: mlp, batch: " + std::to_string(batch) + ", input: " + std::to_string(I) +
         ", hidden: " + std::to_string(H) + ", layers: " + std::to_string(layers) + ", classes: " + std::to_string(C) +
         ", dtype: fp32, optimizer: " + optimizer + "}\nrun: {fusion: none}\n";
}

// The MLP's parameters and their elements.
const std::vector<std::pair<std::string, int64_t>> kMlpParams = {
    {"fc0.w", I * H}, {"fc0.b", H}, {"fc1.w", H * H}, {"fc1.b", H}, {"out.w", H * C}, {"out.b", C}};
constexpr int64_t kMlpElements = I * H + H + H * H + H + H * C + C;

// The Transformer of these tests: d_model D, d_ff F, heads NH of width E = D / NH, vocabulary V, sequence S, batch
// TB (unless a test says otherwise), fp32.
constexpr int64_t D = 16, F = 32, NH = 4, E = D / NH, V = 24, S = 8, TB = 4;

std::string transformer(int layers, int64_t batch, const std::string& optimizer) {
  return "workload: {model: transformer, layers: " + std::to_string(layers) + ", d_model: " + std::to_string(D) +
         ", d_ff: " + std::to_string(F) + ", heads: " + std::to_string(NH) + ", vocab: " + std::to_string(V) +
         ", seq_len: " + std::to_string(S) + ", batch: " + std::to_string(batch) + ", dtype: fp32, optimizer: " +
         optimizer + "}\nrun: {fusion: none}\n";
}

// A Transformer parameter: its name, its elements, and by how much Megatron's split over `model` divides it.
struct TParam {
  std::string name;
  int64_t elements;
  int64_t megatron_split;  // 1: replicated
  int wus_dim;             // the dimension weight-update sharding splits (the first one `model` does not)
};

std::vector<TParam> transformer_params(int layers, int64_t model) {
  std::vector<TParam> p = {{"embedding", V * D, model, 1}};  // [V, D], V split (vocabulary-parallel)
  for (int l = 0; l < layers; ++l) {
    const std::string n = "layer" + std::to_string(l);
    p.push_back({n + ".ln1.gamma", D, 1, 0});
    p.push_back({n + ".ln1.beta", D, 1, 0});
    for (const char* w : {".attn.q.w", ".attn.k.w", ".attn.v.w"}) p.push_back({n + w, D * NH * E, model, 0});  // [D, H, E]
    p.push_back({n + ".attn.o.w", NH * E * D, model, 1});  // [H, E, D], H split
    p.push_back({n + ".ln2.gamma", D, 1, 0});
    p.push_back({n + ".ln2.beta", D, 1, 0});
    p.push_back({n + ".ffn.w1", D * F, model, 0});  // [D, F], F split
    p.push_back({n + ".ffn.b1", F, model, 0});      // [F] split: data goes after model on the same dimension
    p.push_back({n + ".ffn.w2", F * D, model, 1});  // [F, D], F split
    p.push_back({n + ".ffn.b2", D, 1, 0});
  }
  p.push_back({"final_ln.gamma", D, 1, 0});
  p.push_back({"final_ln.beta", D, 1, 0});
  p.push_back({"unembed", D * V, model, 0});  // [D, V], V split
  return p;
}

}  // namespace

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

// The peak of a data-parallel step (b = B / 4 rows per replica) is the weight gradient of the widest layer, fc1:
// every weight; fc1's gradient (H x H) and those computed before it, whole (the output layer's and fc1's bias),
// fc1's two input-side gradients (b x H each: what fc1.dB reads and what the next layer's gradient reads); and the
// activations the rest of the backward pass needs: the batch shard (b x I, b labels), the loss, fc0's biased
// pre-activation and ReLU output (b x H each). The reductions at the end of the backward pass hold less when each
// sum overwrites the partial sums it reduces, as a ring all-reduce does in place (and as DDP and ZeRO reduce
// their gradient buckets).
TEST(PlanFiguresTest, DataParallelPeakHoldsEachGradientOnce) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("sgd") + "strategy: {name: data_parallel}\n");
  const double b = B / 4;
  const double gradients = (H * H + H * C + C + H) * F32 + 2 * b * H * F32;
  const double activations = b * I * F32 + b * F32 + F32 + 2 * b * H * F32;
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

// Memory under weight-update sharding: the whole weights, a quarter of Adam's m and v, and at the peak (the weight
// gradient of the widest layer, fc1) that layer's whole gradient (H x H: reduce-scattered when done), the quarters
// of the gradients already reduce-scattered (the output layer's and fc1's bias), fc1's two input-side gradients
// (b x H each: what fc1.dB reads and what the next layer's gradient reads), and the activations the rest of the
// backward pass needs: the batch shard, the loss, and fc0's biased pre-activation and ReLU output (b x H each).
TEST(PlanFiguresTest, WeightUpdateShardingDividesGradientsAndOptimizerState) {
  for (const char* opt : {"sgd", "adam"}) {
    SCOPED_TRACE(opt);
    const Step s =
        plan_step(hardware("[4, 1]") + mlp(opt) + "strategy: {name: data_parallel, weight_update_sharding: true}\n");
    const double b = B / 4;
    const double weights = kMlpElements * F32;
    const double optimizer = std::string(opt) == "adam" ? 2 * weights / 4 : 0;
    const double gradients = H * H * F32 + (H * C + C + H) * F32 / 4 + 2 * b * H * F32;
    const double activations = b * I * F32 + b * F32 + F32 + 2 * b * H * F32;
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
// fc1, the rest whole; Adam's state twice that. The peak is the output layer's weight gradient: every activation
// of the forward pass is still held (the batch, the loss, fc0's biased pre-activation and ReLU output on a quarter
// of the hidden units, fc1's on all of them), with the logits' gradient (B x C), the output layer's input gradient
// (B x H) and its two parameter gradients.
TEST(PlanFiguresTest, MegatronMlpFigures) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("adam") + "strategy: {name: spmd, scheme: megatron}\n");
  EXPECT_EQ(collectives(s.plan.programs[0]), std::vector<std::string>{ar("fc1", "model", B * H * F32)});
  const double weights = (I * H / 4 + H / 4 + H / 4 * H + H + H * C + C) * F32;
  const double gradients = (B * C + B * H + H * C + C) * F32;
  const double activations = (B * I + B + 1 + 2 * B * H / 4 + 2 * B * H) * F32;
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

// ---- Megatron-LM's vocabulary-parallel head and sequence parallelism ---------------------------------------

namespace {

std::string transformer_vocab(int64_t vocab, bool tied) {
  std::string w = transformer(1, 2, "sgd");
  w.replace(w.find("vocab: " + std::to_string(V)), 7 + std::to_string(V).size(), "vocab: " + std::to_string(vocab));
  if (tied) w.replace(w.find("optimizer:"), 10, "tie_embeddings: true, optimizer:");
  return w;
}

}  // namespace

// Megatron over 4 chips with a vocabulary split over `model` (the default), a vocabulary of 24 (4 divides it) and
// of 26 (padded to 28: 7 classes per chip, the last chip's last 1 padding), separate and tied embeddings. Each chip
// holds ceil(V / 4) rows of the table and columns of the unembedding; its logits are [b, S, ceil(V / 4)] and are
// never gathered (no all-gather in the step); the cross-entropy's collectives are three all-reduces over `model`
// of one float per row (b x S): the max (by maximum), the sum of exponentials and the label's logit (by sum).
TEST(PlanFiguresTest, VocabularyParallelHeadMovesOneFloatPerRow) {
  for (int64_t vocab : {24, 26})
    for (bool tied : {false, true}) {
      SCOPED_TRACE("vocab " + std::to_string(vocab) + (tied ? " tied" : ""));
      const Step s = plan_step(hardware("[4, 1]") + transformer_vocab(vocab, tied) + "strategy: {name: spmd}\n");
      const Program& p = s.plan.programs[0];
      const int64_t local_v = (vocab + 3) / 4, batch = 2;
      const double rows = batch * S * F32;
      std::vector<std::string> head;
      for (const std::string& l : collectives(p))
        if (l.rfind("all_reduce loss.", 0) == 0) head.push_back(l);
      EXPECT_EQ(head, sorted({ar("loss.max", "model", rows), ar("loss.sumexp", "model", rows),
                              ar("loss.target", "model", rows)}));
      for (OpId id : p.order) {
        const Op& op = p.graph.op(id);
        EXPECT_NE(op.kind, OpKind::AllGather) << op.name;
        if (op.kind == OpKind::AllReduce) EXPECT_EQ(op.attrs.reduce_max, op.name.rfind("loss.max/", 0) == 0) << op.name;
      }
      ASSERT_NE(local_tensor(p, "logits"), nullptr);
      EXPECT_EQ(local_tensor(p, "logits")->shape, (std::vector<int64_t>{batch, S, local_v}));
      EXPECT_EQ(local_tensor(p, "embedding")->bytes(), local_v * D * F32);
      if (!tied) EXPECT_EQ(local_tensor(p, "unembed")->bytes(), D * local_v * F32);
      EXPECT_EQ(local_tensor(p, "unembed") == nullptr, tied);
      expect_reproduces_the_step(s);
      // Every chip's reduced max is each row's max over all the (real) classes: a max, not a sum of the chips'
      // maxima (which would still give the right loss, the shift cancelling).
      TensorStore inputs;
      init_step_inputs(s.graph, inputs, 5);
      TensorStore ref = inputs;
      run_reference(s.graph, ref);
      const Tensor& logits = ref.get(s.graph.find_tensor("logits"));
      const std::vector<TensorStore> chips = interpret_plan(s.plan, s.graph, inputs, 5);
      TensorId global_max = -1;
      for (size_t t = 0; t < p.graph.num_tensors(); ++t)
        if (p.graph.tensor(static_cast<TensorId>(t)).name == "loss.max.global") global_max = static_cast<TensorId>(t);
      ASSERT_GE(global_max, 0);
      // (The chips' logits are the reference's within rounding: the residual stream was summed in another order.)
      for (const TensorStore& chip : chips) {
        const Tensor& m = chip.get(global_max);
        ASSERT_EQ(m.elements(), batch * S);
        for (int64_t r = 0; r < batch * S; ++r) {
          const float want = *std::max_element(logits.data.begin() + r * vocab, logits.data.begin() + (r + 1) * vocab);
          EXPECT_NEAR(m.data[r], want, 1e-5 * std::fabs(want)) << "row " << r;
        }
      }
    }
}

// The same step with strategy.vocab_parallel: false keeps the table and the unembedding whole and gathers nothing
// either (the logits are computed whole on every chip): no collective of the cross-entropy.
TEST(PlanFiguresTest, VocabularyParallelOffKeepsTheHeadWhole) {
  const Step s = plan_step(hardware("[4, 1]") + transformer(1, 2, "sgd") +
                           "strategy: {name: spmd, vocab_parallel: false}\n");
  const Program& p = s.plan.programs[0];
  EXPECT_EQ(local_tensor(p, "embedding")->bytes(), V * D * F32);
  EXPECT_EQ(local_tensor(p, "unembed")->bytes(), D * V * F32);
  EXPECT_EQ(local_tensor(p, "logits")->shape, (std::vector<int64_t>{2, S, V}));
  for (const std::string& l : collectives(p)) EXPECT_EQ(l.find("loss"), std::string::npos) << l;
}

// Sequence parallelism (Korthikanti et al. 2022) over 4 chips, 2 layers, batch 2: per layer, forward, the attention
// output and the FFN output are reduce-scattered into the sequence split (batch x S x D in, a quarter out) and the
// two layer norms' outputs all-gathered along S before q/k/v and the FFN's up projection (a quarter in, whole out):
// 2 reduce-scatters and 2 all-gathers instead of Megatron's 2 all-reduces. Backward, the row-parallel matmuls'
// output gradients (the residual gradients) are all-gathered and the layer norms' output gradients
// reduce-scattered: again 2 + 2 instead of 2 all-reduces. Around the layers: the lookup is reduce-scattered into S
// and its gradient gathered back; the final norm's output is gathered before the unembedding and the unembedding's
// input gradient reduce-scattered; the cross-entropy's three values per row as without. The layer norms' gamma and
// beta and the FFN's b2 now sum their gradients over the sequence shards: an all-reduce of D floats each.
TEST(PlanFiguresTest, SequenceParallelTurnsEachAllReduceIntoReduceScatterAndAllGather) {
  const int64_t batch = 2;
  const Step s = plan_step(hardware("[4, 1]") + transformer(2, batch, "sgd") +
                           "strategy: {name: spmd, sequence_parallel: true}\n");
  const double act = batch * S * D * F32, rows = batch * S * F32;
  std::vector<std::string> want = {
      rs("embed", "model", 1, act, act / 4),      ag("embed.grad.sum1", "model", 1, act / 4, act),
      ag("final_ln", "model", 1, act / 4, act),   rs("logits.dA", "model", 1, act, act / 4),
      ag("final_ln.dx", "model", 1, act / 4, act),  // layer 1's FFN output gradient
      ar("loss.max", "model", rows),              ar("loss.sumexp", "model", rows),
      ar("loss.target", "model", rows),           ar("final_ln.gamma.grad", "model", D * F32),
      ar("final_ln.beta.grad", "model", D * F32)};
  for (int l = 0; l < 2; ++l) {
    const std::string n = "layer" + std::to_string(l);
    for (const char* t : {".ln1", ".ln2"}) want.push_back(ag(n + t, "model", 1, act / 4, act));
    for (const char* t : {".attn.o", ".ffn.down", ".ffn.up.dA", ".ln1.grad.sum2"})
      want.push_back(rs(n + t, "model", 1, act, act / 4));
    want.push_back(ag(n + ".attn.residual.grad.sum1", "model", 1, act / 4, act));  // the attention output's gradient
    for (const char* t : {".ln1.gamma", ".ln1.beta", ".ln2.gamma", ".ln2.beta", ".ffn.b2"})
      want.push_back(ar(n + t + ".grad", "model", D * F32));
  }
  want.push_back(ag("layer0.ffn.residual.grad.sum1", "model", 1, act / 4, act));  // layer 0's FFN output gradient
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(s);
}

// Mixed precision (fp32 master weights read through bf16 copies) changes what the matmuls read, not how sequence
// parallelism splits them: the same collectives (bf16 activations: half the bytes), and q, k, v, the FFN's up
// projection and the attention scores split over the heads and hidden units as without it.
TEST(PlanFiguresTest, SequenceParallelWithMixedPrecisionSplitsAsWithout) {
  const int64_t batch = 2;
  std::string mixed = transformer(2, batch, "sgd");
  mixed.replace(mixed.find("dtype: fp32"), 11, "dtype: bf16, weight_dtype: fp32");
  const std::string sp = "strategy: {name: spmd, sequence_parallel: true}\n";
  const Step a = plan_step(hardware("[4, 1]") + transformer(2, batch, "sgd") + sp);
  const Step b = plan_step(hardware("[4, 1]") + mixed + sp);
  for (const char* n : {"layer0.attn.q", "layer0.attn.k", "layer0.attn.v", "layer0.attn.scores", "layer1.ffn.up"}) {
    SCOPED_TRACE(n);
    ASSERT_TRUE(local_tensor(a.plan.programs[0], n) && local_tensor(b.plan.programs[0], n));
    EXPECT_EQ(local_tensor(b.plan.programs[0], n)->shape, local_tensor(a.plan.programs[0], n)->shape);
  }
  EXPECT_EQ(local_tensor(b.plan.programs[0], "layer0.attn.scores")->shape,
            (std::vector<int64_t>{batch, NH / 4, S, S}));
  // The same collectives, named after the same values (the embedding's gradient is named for its cast, not its sum).
  auto collectives_of = [](const Program& p) {
    std::vector<std::string> k;
    for (OpId id : p.order) {
      const Op& op = p.graph.op(id);
      if (!is_communication(op.kind)) continue;
      std::string name = op.name.substr(0, op.name.rfind('/'));
      if (name == "embed.grad.sum1") name = "embed.grad";
      k.push_back(std::string(op_kind_name(op.kind)) + " " + name);
    }
    std::sort(k.begin(), k.end());
    return k;
  };
  EXPECT_EQ(collectives_of(b.plan.programs[0]), collectives_of(a.plan.programs[0]));
}

// Activation memory of the sequence-parallel regions: the lookup, every layer norm's input (the residual sums) and
// output, the FFN's output bias and the final norm, each batch x S x D whole on every chip under Megatron, and a
// quarter of it with sequence parallelism over 4 chips; the norms' statistics (batch x S) likewise. The gathered
// copies of the norms' outputs that q/k/v and the FFN read stay whole (kept for the weight gradients).
TEST(PlanFiguresTest, SequenceParallelDividesTheResidualStreamByTheAxis) {
  const int64_t batch = 2;
  const std::string w = transformer(2, batch, "sgd");
  const Step plain = plan_step(hardware("[4, 1]") + w + "strategy: {name: spmd}\n");
  const Step sp = plan_step(hardware("[4, 1]") + w + "strategy: {name: spmd, sequence_parallel: true}\n");
  std::vector<std::string> names = {"final_ln"};
  for (int l = 0; l < 2; ++l)
    for (const char* t : {".ln1", ".ln2", ".attn.residual", ".ffn.residual", ".ffn.down.bias"})
      names.push_back("layer" + std::to_string(l) + t);
  double whole = 0, split = 0;
  for (const std::string& n : names) {
    SCOPED_TRACE(n);
    const TensorInfo* a = local_tensor(plain.plan.programs[0], n);
    const TensorInfo* b = local_tensor(sp.plan.programs[0], n);
    ASSERT_TRUE(a && b);
    EXPECT_EQ(a->bytes(), batch * S * D * F32);
    EXPECT_EQ(b->bytes(), batch * S * D * F32 / 4);
    whole += a->bytes();
    split += b->bytes();
  }
  EXPECT_EQ(split, whole / 4);
  // embed: the lookup's reduce-scattered version.
  EXPECT_NE(local_tensor(sp.plan.programs[0], "embed@[-, model, -]"), nullptr);
  EXPECT_EQ(local_tensor(sp.plan.programs[0], "embed@[-, model, -]")->bytes(), batch * S * D * F32 / 4);
  for (const char* stat : {"layer0.ln1.mean", "layer0.ln1.rstd"}) {
    SCOPED_TRACE(stat);
    ASSERT_NE(local_tensor(sp.plan.programs[0], stat), nullptr);
    EXPECT_EQ(local_tensor(sp.plan.programs[0], stat)->bytes(), batch * S * F32 / 4);
    EXPECT_EQ(local_tensor(plain.plan.programs[0], stat)->bytes(), batch * S * F32);
  }
}

// Sequence parallelism under data x model (2 x 2): the values it splits along S keep the replica's rows (b = TB / 2),
// so nothing gathers the batch over `data`; per layer the same reduce-scatters and all-gathers over `model` as
// alone, of b x S x D; the layer norms' and b2's gradients, partial over both axes, are all-reduced over both at
// once.
TEST(PlanFiguresTest, SequenceParallelKeepsTheDataSplit) {
  const Step s = plan_step(hardware("[2, 2]") + transformer(1, TB, "sgd") +
                           "strategy: {name: [data_parallel, spmd], sequence_parallel: true}\n"
                           "mesh: {axes: [data, model], shape: [2, 2]}\n");
  const double act = TB / 2 * S * D * F32;
  std::vector<std::string> model, data;
  for (const std::string& l : collectives(s.plan.programs[0])) {
    if (l.find(" [model]") != std::string::npos) model.push_back(l);
    else if (l.find(" [data]") != std::string::npos) data.push_back(l);
  }
  std::vector<std::string> want = {
      rs("embed", "model", 1, act, act / 2),          ag("embed.grad.sum1", "model", 1, act / 2, act),
      ag("final_ln", "model", 1, act / 2, act),       rs("logits.dA", "model", 1, act, act / 2),
      ag("final_ln.dx", "model", 1, act / 2, act),    ag("layer0.attn.residual.grad.sum1", "model", 1, act / 2, act),
      ag("layer0.ln1", "model", 1, act / 2, act),     ag("layer0.ln2", "model", 1, act / 2, act),
      rs("layer0.attn.o", "model", 1, act, act / 2),  rs("layer0.ffn.down", "model", 1, act, act / 2),
      rs("layer0.ffn.up.dA", "model", 1, act, act / 2), rs("layer0.ln1.grad.sum2", "model", 1, act, act / 2),
      ar("loss.max", "model", TB / 2 * S * F32),      ar("loss.sumexp", "model", TB / 2 * S * F32),
      ar("loss.target", "model", TB / 2 * S * F32)};
  EXPECT_EQ(model, sorted(want));
  for (const std::string& l : data) EXPECT_EQ(l.rfind("all_reduce ", 0), 0u) << l;  // gradients and the loss only
  expect_reproduces_the_step(s);
}

// Sequence parallelism needs the megatron scheme and a Transformer; the error names the key and what would do.
TEST(PlanFiguresTest, SequenceParallelOnlyWithMegatronOnATransformer) {
  try {
    plan_step(hardware("[2, 2]") + transformer(1, TB, "sgd") +
              "strategy: {name: spmd, scheme: 2d, spmd_axes: [s0, s1], sequence_parallel: true}\n"
              "mesh: {axes: [s0, s1], shape: [2, 2]}\n");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::StrategyMismatch);
    EXPECT_NE(e.message().find("strategy.scheme is 2d; use scheme: megatron"), std::string::npos) << e.message();
    EXPECT_EQ(e.where().str().rfind("plan.yaml:", 0), 0u) << e.where().str();
  }
  try {
    plan_step(hardware("[4, 1]") + mlp("sgd") + "strategy: {name: spmd, sequence_parallel: true}\n");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::StrategyMismatch);
    EXPECT_NE(e.message().find("the mlp workload has none"), std::string::npos) << e.message();
  }
  try {
    plan_step(hardware("[4, 1]") + transformer(1, TB, "sgd") +
              "strategy: {name: [data_parallel, spmd], sequence_parallel: true}\nmesh: {axes: [data, model], shape: [4, 1]}\n");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::StrategyMismatch);
    EXPECT_NE(e.message().find("which has 1 chip"), std::string::npos) << e.message();
  }
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

// ---- pipelines -------------------------------------------------------------------------------------------------

namespace {

// The MLP with 3 hidden layers cut into K = 4 stages (one cell each: fc0, fc1, fc2, and the output layer with the
// loss), M micro-batches of b rows.
constexpr int64_t K = 4;

std::string pipeline(const std::string& schedule, int64_t micro_batches, bool remat, int64_t batch) {
  return hardware("[4, 1]") + mlp("sgd", batch, 3) + "strategy: {name: pipeline, micro_batches: " +
         std::to_string(micro_batches) + ", schedule: " + schedule + ", remat: " + (remat ? "true" : "false") + "}\n";
}

// The order in which a stage's program issues its units: "F3" (micro-batch 3's forward), "R3" (its
// recomputation), "B3" (its backward), read from the op names of the micro-batched step ("fc1.dB/mb3",
// "fc1/mb3/remat") and their phases, consecutive ops of one unit counted once. Transfers and the work of the whole
// step (accumulations, the update) belong to no unit.
std::string unit_order(const Program& p) {
  std::string out, last;
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    const size_t at = op.name.find("/mb");
    if (is_communication(op.kind) || at == std::string::npos) continue;
    size_t end = at + 3;
    while (end < op.name.size() && std::isdigit(static_cast<unsigned char>(op.name[end]))) ++end;
    const char pass = op.name.find("/remat") != std::string::npos ? 'R'
                      : op.phase == Phase::Backward                ? 'B'
                                                                   : 'F';
    std::string unit(1, pass);
    unit.append(op.name, at + 3, end - at - 3);
    if (unit == last) continue;
    if (!out.empty()) out += ' ';
    out += unit;
    last = unit;
  }
  return out;
}

std::string plan_units(const Plan& plan, size_t stage) {
  std::string out;
  for (const PipelineUnit& u : plan.pipeline.units.at(stage)) {
    const char pass = u.pass == PipelinePass::Forward ? 'F' : u.pass == PipelinePass::Recompute ? 'R' : 'B';
    if (!out.empty()) out += ' ';
    out += pass;
    out += std::to_string(u.micro_batch);
  }
  return out;
}

}  // namespace

// Each boundary value crosses once per micro-batch: stage k sends fc<k>'s output (b x H) forward and stage k + 1
// sends its gradient back; nothing else moves (no other mesh axis, the loss whole on the last stage).
TEST(PlanFiguresTest, PipelineSendsEachBoundaryOncePerMicroBatchEachWay) {
  const int64_t M = 8, b = 4;
  const Step s = plan_step(pipeline("gpipe", M, false, M * b));
  ASSERT_EQ(s.plan.programs.size(), static_cast<size_t>(K));
  const double x = b * H * F32;
  // The value leaving stage k and the gradient coming back for it.
  const std::vector<std::string> value = {"fc0.relu", "fc1.relu", "fc2.relu"}, grad = {"fc1.dA", "fc2.dA", "out.dA"};
  for (int64_t k = 0; k < K; ++k) {
    SCOPED_TRACE("stage " + std::to_string(k));
    std::vector<std::string> want;
    for (int64_t m = 0; m < M; ++m) {
      const std::string mb = "/mb" + std::to_string(m);
      if (k + 1 < K) {
        want.push_back(send(value[k] + mb, x));
        want.push_back(recv(grad[k] + mb, x));
      }
      if (k > 0) {
        want.push_back(recv(value[k - 1] + mb, x));
        want.push_back(send(grad[k - 1] + mb, x));
      }
    }
    EXPECT_EQ(collectives(s.plan.programs[k]), sorted(want));
  }
}

// GPipe: every stage runs every micro-batch's forward, then every backward, last micro-batch first; with
// re-materialization each backward follows its micro-batch's recomputation.
TEST(PlanFiguresTest, GpipeOrderOfEveryStage) {
  const std::string plain = "F0 F1 F2 F3 F4 F5 B5 B4 B3 B2 B1 B0";
  const std::string remat = "F0 F1 F2 F3 F4 F5 R5 B5 R4 B4 R3 B3 R2 B2 R1 B1 R0 B0";
  for (bool r : {false, true}) {
    const Step s = plan_step(pipeline("gpipe", 6, r, 24));
    for (size_t k = 0; k < static_cast<size_t>(K); ++k) {
      SCOPED_TRACE("stage " + std::to_string(k) + (r ? ", remat" : ""));
      EXPECT_EQ(unit_order(s.plan.programs[k]), r ? remat : plain);
      EXPECT_EQ(plan_units(s.plan, k), r ? remat : plain);
    }
  }
}

// 1F1B with K = 4 and M = 6: stage k runs K - 1 - k forwards ahead, then one forward and one backward in turn
// (first micro-batch first), then the backwards left.
TEST(PlanFiguresTest, OneForwardOneBackwardOrderOfEveryStage) {
  const std::vector<std::string> want = {"F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5",
                                         "F0 F1 F2 B0 F3 B1 F4 B2 F5 B3 B4 B5",
                                         "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5",
                                         "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5"};
  const Step s = plan_step(pipeline("1f1b", 6, false, 24));
  for (size_t k = 0; k < static_cast<size_t>(K); ++k) {
    SCOPED_TRACE("stage " + std::to_string(k));
    EXPECT_EQ(unit_order(s.plan.programs[k]), want[k]);
    EXPECT_EQ(plan_units(s.plan, k), want[k]);
  }
}

// The activations a stage holds at its peak, from one micro-batch's by hand (b rows). What a micro-batch leaves on
// a stage until its backward: on stage 0 its slice of the batch (b x I, read by fc0's weight gradient) and fc0's
// biased pre-activation (b x H, read by the ReLU's gradient); on stages 1 and 2 the received input (b x H, read by
// the weight gradient) and the biased pre-activation; on the last stage the received input, its labels (b), the
// softmax's probabilities (b x C) and its loss (one value, added to the step's). At the peak a micro-batch's forward
// is one value further: fc<k>'s output (b x H) on the first three stages, the logits (b x C) on the last. Besides,
// stage 0 holds the whole batch (B x I) and the last stage all labels (B). GPipe holds all M micro-batches at
// once; 1F1B holds K - k on stage k (its forwards ahead plus the one in flight), and the last stage the previous
// micro-batch's loss until it is added.
TEST(PlanFiguresTest, PipelineStagesHoldTheirMicroBatchesActivations) {
  const int64_t M = 8, b = 4, batch = M * b;
  const double x = b * I * F32, h = b * H * F32;
  const double last = (b + b * H + b * C + 1) * F32;  // the last stage's per micro-batch
  auto held = [&](int64_t k, int64_t n, bool one_f_one_b) {
    if (k == 0) return batch * I * F32 + n * (x + h) + h;
    if (k < K - 1) return (2 * n + 1) * h;
    return batch * F32 + (n - 1) * last + last + b * C * F32 + (one_f_one_b ? F32 : 0);
  };
  const Step gpipe = plan_step(pipeline("gpipe", M, false, batch));
  const Step one = plan_step(pipeline("1f1b", M, false, batch));
  for (int64_t k = 0; k < K; ++k) {
    SCOPED_TRACE("stage " + std::to_string(k));
    EXPECT_EQ(activation_peak(gpipe, static_cast<size_t>(k)), held(k, M, false));
    EXPECT_EQ(activation_peak(one, static_cast<size_t>(k)), held(k, K - k, true));
  }
}

// Re-materialization (GPipe): a middle stage keeps only what it received for each micro-batch (b x H), and during
// a backward the recomputed pre-activation and matmul output of one micro-batch: (M + 2) b x H instead of
// (2M + 1) b x H.
TEST(PlanFiguresTest, RematerializedStageHoldsOnlyWhatItReceived) {
  const int64_t M = 8, b = 4;
  const Step s = plan_step(pipeline("gpipe", M, true, M * b));
  for (size_t k : {1u, 2u}) {
    SCOPED_TRACE("stage " + std::to_string(k));
    EXPECT_EQ(activation_peak(s, k), (M + 2) * b * H * F32);
  }
}

// Weights per stage: its own layers' parameters and nothing else.
TEST(PlanFiguresTest, PipelineStageHoldsOnlyItsWeights) {
  const Step s = plan_step(pipeline("gpipe", 4, false, 16));
  const std::vector<double> want = {(I * H + H) * F32, (H * H + H) * F32, (H * H + H) * F32, (H * C + C) * F32};
  for (size_t k = 0; k < static_cast<size_t>(K); ++k) EXPECT_EQ(memory(s, k).at_peak.weights, want[k]) << "stage " << k;
}

// Gradients accumulate over the micro-batches: a stage needs one running sum per parameter, and besides it at most
// the gradient of the micro-batch being computed (accumulated in place, as GPipe's loop and Megatron do) and that
// unit's two input-side gradients (b x H each). Stage 1 (fc1): at most 2 (H x H + H) + 2 b x H.
TEST(PlanFiguresTest, PipelineStageAccumulatesGradientsInPlace) {
  const int64_t M = 8, b = 4;
  const Step s = plan_step(pipeline("gpipe", M, false, M * b));
  const double bound = 2 * (H * H + H) * F32 + 2 * b * H * F32;
  const MemoryPlan m = memory(s, 1);
  EXPECT_LE(m.at_peak.gradients, bound);
}

// [pipeline, data_parallel] on pipe 2 x data 2, M = 2 micro-batches of b = B / 2 / 2 rows per replica: the
// boundaries cross as in a pipeline, on a replica's micro-batch; each stage all-reduces its parameters' gradients
// over `data` once, after accumulating its micro-batches, and the last stage the loss, once.
TEST(PlanFiguresTest, PipelineTimesDataReducesEachGradientOncePerStep) {
  const int64_t M = 2, b = B / 2 / M;
  const Step s = plan_step(hardware("[2, 2]") + mlp("sgd", B, 3) +
                           "strategy: {name: [pipeline, data_parallel], micro_batches: 2, stage_boundaries: [2]}\n"
                           "mesh: {axes: [pipe, data], shape: [2, 2]}\n");
  ASSERT_EQ(s.plan.programs.size(), 2u);
  const double x = b * H * F32;
  std::vector<std::string> first = {ar("fc0.w.grad", "data", I * H * F32), ar("fc0.b.grad", "data", H * F32),
                                    ar("fc1.w.grad", "data", H * H * F32), ar("fc1.b.grad", "data", H * F32)};
  std::vector<std::string> second = {ar("fc2.w.grad", "data", H * H * F32), ar("fc2.b.grad", "data", H * F32),
                                     ar("out.w.grad", "data", H * C * F32), ar("out.b.grad", "data", C * F32),
                                     ar("loss", "data", F32)};
  for (int64_t m = 0; m < M; ++m) {
    const std::string mb = "/mb" + std::to_string(m);
    first.push_back(send("fc1.relu" + mb, x));
    first.push_back(recv("fc2.dA" + mb, x));
    second.push_back(recv("fc1.relu" + mb, x));
    second.push_back(send("fc2.dA" + mb, x));
  }
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(first));
  EXPECT_EQ(collectives(s.plan.programs[1]), sorted(second));
  EXPECT_EQ(memory(s, 0).at_peak.weights, (I * H + H + H * H + H) * F32);
  EXPECT_EQ(memory(s, 1).at_peak.weights, (H * H + H + H * C + C) * F32);
  expect_reproduces_the_step(s);
}
