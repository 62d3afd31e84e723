// Re-materialization as a transformation of the training step (workload.remat, workloads/remat.h): which forward
// ops each policy recomputes and where the recomputation sits in the schedule (hand counts on a 2-layer MLP), the
// memory it saves (the activations live at the peak, counted by hand), the partitioned step recomputing its
// forward all-reduce (tensor parallelism), and the numbers: bit for bit those of the step without recomputation.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "hw/compiler/lower.h"
#include "hw/compiler/memory_plan.h"
#include "partition/interpreter.h"
#include "plan/shard_data.h"
#include "sim/config/loader.h"
#include "strategies/planner.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"
#include "workloads/remat.h"
#include "tests/unit/plan_steps.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

// The MLP of these tests: batch B, input I, hidden H, 2 hidden layers, C classes, fp32.
constexpr int64_t B = 16, I = 8, H = 32, C = 4;
constexpr double F32 = 4;

std::string mlp(const std::string& remat, const std::string& extra = "") {
  return "hardware: {preset: tpu-v3, pod: {dims: [1, 1]}}\nworkload: {model: mlp, batch: " + std::to_string(B) +
         ", input: " + std::to_string(I) + ", hidden: " + std::to_string(H) + ", layers: 2, classes: " +
         std::to_string(C) + ", dtype: fp32, optimizer: sgd, remat: " + remat + extra +
         "}\nstrategy: {name: single_device}\nrun: {fusion: none}\n";
}

// The names of the program's compute ops in issue order.
std::vector<std::string> order(const Program& p) {
  std::vector<std::string> out;
  for (OpId id : p.order)
    if (!is_communication(p.graph.op(id).kind)) out.push_back(p.graph.op(id).name);
  return out;
}

std::vector<std::string> recomputed(const ModelGraph& g) {
  std::vector<std::string> out;
  for (const Op& op : g.ops())
    if (op.recompute) out.push_back(op.name);
  return out;
}

size_t at(const std::vector<std::string>& v, const std::string& name) {
  auto it = std::find(v.begin(), v.end(), name);
  EXPECT_NE(it, v.end()) << name;
  return static_cast<size_t>(it - v.begin());
}

// The most bytes of the activations category (activations, the batch, losses) role `r` holds at once.
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

// Every tensor of the plan's results equals the reference step's bit for bit, for the plan and the reference of
// the step without recomputation alike.
void expect_bit_identical(const Step& plain, const Step& remat) {
  TensorStore inputs;
  init_step_inputs(plain.graph, inputs, 7);
  auto results = [&](const Step& s) {
    std::vector<TensorStore> chips = interpret_plan(s.plan, s.graph, inputs, 7);
    TensorStore got;
    assemble_results(s.plan, s.graph, [&](int64_t c) { return &chips[c]; }, got);
    return got;
  };
  const TensorStore a = results(plain), b = results(remat);
  int compared = 0;
  for (size_t i = 0; i < plain.graph.num_tensors(); ++i) {
    const TensorInfo& t = plain.graph.tensor(static_cast<TensorId>(i));
    if (t.role != TensorRole::Loss && t.role != TensorRole::Updated && t.role != TensorRole::Gradient) continue;
    const TensorId j = remat.graph.find_tensor(t.name);  // the original tensors keep their ids and names
    ASSERT_EQ(j, static_cast<TensorId>(i)) << t.name;
    if (!a.has(j)) continue;
    ASSERT_TRUE(b.has(j)) << t.name;
    EXPECT_EQ(a.get(j).data, b.get(j).data) << t.name;
    ++compared;
  }
  EXPECT_GT(compared, 5);
}

}  // namespace

// full (nothing_saveable): a hidden layer's backward reads its ReLU output (the ReLU's gradient takes its mask from
// it) and its input (the weight gradient): the matmul, the bias and the ReLU are recomputed from the layer's input,
// which is kept (the previous layer's ReLU output, or the batch). The original ReLU output is the next layer's input
// and is read there (fc1.relu by the output layer's weight gradient), but the layer's own backward reads its
// recomputed copy, as a checkpointed layer whose only residual is its input does. The output layer holds the loss
// and is not recomputed.
TEST(RematTest, FullRecomputesEachHiddenLayerFromItsInput) {
  const Step s = plan_step(mlp("full"));
  EXPECT_EQ(recomputed(s.graph), (std::vector<std::string>{"fc1/remat", "fc1.bias/remat", "fc1.relu/remat", "fc0/remat",
                                                           "fc0.bias/remat", "fc0.relu/remat"}));
  const Op& relu_grad = s.graph.op(s.graph.producer(s.graph.find_tensor("fc1.relu.dx")));
  EXPECT_EQ(s.graph.tensor(relu_grad.inputs[1]).name, "fc1.relu/remat");
  const Op& mm = s.graph.op(s.graph.producer(s.graph.find_tensor("fc1/remat")));
  EXPECT_EQ(s.graph.tensor(mm.inputs[0]).name, "fc0.relu");  // the layer's input, kept
  // Model FLOPs are the step's; the recomputed matmuls are hardware FLOPs on top: 2 B I H + 2 B H H, and one FLOP
  // per element of each recomputed bias add and ReLU.
  const Step none = plan_step(mlp("none"));
  EXPECT_EQ(s.graph.matmul_flops(), none.graph.matmul_flops());
  EXPECT_EQ(s.graph.total_flops() - none.graph.total_flops(),
            2.0 * B * I * H + 2.0 * B * H * H + 2 * B * H /* the two bias adds */ + 2 * B * H /* the two ReLUs */);
}

// dots (dots_saveable): the matmul outputs are kept; the bias adds and the ReLUs (the ReLU's gradient reads its
// output, which is no dot) are recomputed from them.
TEST(RematTest, DotsKeepsTheMatmulOutputs) {
  const Step s = plan_step(mlp("dots"));
  EXPECT_EQ(recomputed(s.graph),
            (std::vector<std::string>{"fc1.bias/remat", "fc1.relu/remat", "fc0.bias/remat", "fc0.relu/remat"}));
  EXPECT_EQ(s.graph.tensor(s.graph.op(s.graph.producer(s.graph.find_tensor("fc1.bias/remat"))).inputs[0]).name, "fc1");
}

// names (save_only_these_names): fc1's biased value is kept by name, so layer 1 recomputes only its ReLU from it;
// layer 0 is recomputed as with full.
TEST(RematTest, NamesKeepsWhatTheGlobsName) {
  const Step s = plan_step(mlp("names", ", remat_keep: ['fc1.b*']"));
  EXPECT_EQ(recomputed(s.graph),
            (std::vector<std::string>{"fc1.relu/remat", "fc0/remat", "fc0.bias/remat", "fc0.relu/remat"}));
  EXPECT_EQ(s.graph.tensor(s.graph.op(s.graph.producer(s.graph.find_tensor("fc1.relu/remat"))).inputs[0]).name,
            "fc1.bias");  // the kept original
  EXPECT_TRUE(remat_name_kept("layer3.attn.o", {"*.attn.o"}));
  EXPECT_FALSE(remat_name_kept("layer3.attn.o.w", {"*.attn.o"}));
}

// The recomputation runs late: a layer's recomputed ops are issued after every backward op of the layers above it
// and right before the layer's own backward, and the first of them waits (a control edge) for the backward op
// before it, so a chip that runs ready ops at once cannot run them during the forward pass.
TEST(RematTest, RecomputationRunsJustBeforeTheLayersBackward) {
  const Step s = plan_step(mlp("full"));
  const Program& p = s.plan.programs.at(0);
  const std::vector<std::string> o = order(p);
  const std::vector<std::string> want = {
      // forward, loss
      "fc0", "fc0.bias", "fc0.relu", "fc1", "fc1.bias", "fc1.relu", "out", "out.bias", "loss",
      // the output layer's backward
      "loss.dlogits", "out.bias.dbias", "out.dA", "out.dB",
      // layer 1: recomputed, then its backward
      "fc1/remat", "fc1.bias/remat", "fc1.relu/remat", "fc1.relu.dx", "fc1.bias.dbias", "fc1.dA", "fc1.dB",
      // layer 0 likewise (no gradient for the batch)
      "fc0/remat", "fc0.bias/remat", "fc0.relu/remat", "fc0.relu.dx", "fc0.bias.dbias", "fc0.dB",
      // the update
      "fc0.w.update", "fc0.b.update", "fc1.w.update", "fc1.b.update", "out.w.update", "out.b.update"};
  EXPECT_EQ(o, want);
  // Control edges: fc1/remat after out.dB (the backward op before it), fc0/remat after fc1.dB.
  auto preds = [&](const std::string& name) {
    std::vector<std::string> out;
    for (size_t i = 0; i < p.graph.num_ops(); ++i)
      if (p.graph.op(static_cast<OpId>(i)).name == name)
        for (OpId q : p.graph.predecessors(static_cast<OpId>(i))) out.push_back(p.graph.op(q).name);
    return out;
  };
  // (and the producer of its input, a data edge)
  EXPECT_EQ(preds("fc1/remat"), (std::vector<std::string>{"fc0.relu", "out.dB"}));
  EXPECT_EQ(preds("fc0/remat"), (std::vector<std::string>{"fc1.dB"}));
  EXPECT_LT(at(o, "out.dB"), at(o, "fc1/remat"));
}

// With fp32 master weights the recomputed matmuls read the recomputed bf16 copies of their weights. Those casts
// wait for no backward op (a fully sharded step gathers them one layer ahead), but the matmuls reading them still
// wait for the backward op before the layer's recomputation, as without mixed precision: else the recomputation of
// layer l would run during the backward of layer l + 1 (as a scanned layer's iteration cannot) and take its MXU.
TEST(RematTest, MixedPrecisionRecomputationStillWaitsForTheBackward) {
  const std::string yaml =
      "hardware: {preset: tpu-v3, pod: {dims: [1, 1]}}\nworkload: {model: mlp, batch: 16, input: 8, hidden: 32, "
      "layers: 2, classes: 4, dtype: bf16, weight_dtype: fp32, optimizer: sgd, remat: full}\n"
      "strategy: {name: single_device}\nrun: {fusion: none}\n";
  const Step s = plan_step(yaml);
  const Program& p = s.plan.programs.at(0);
  auto is_cast = [&](const Op& op) {
    return op.kind == OpKind::Convert && p.graph.tensor(op.inputs[0]).role == TensorRole::Parameter;
  };
  int entries = 0;
  for (size_t i = 0; i < p.graph.num_ops(); ++i) {
    const Op& op = p.graph.op(static_cast<OpId>(i));
    if (!op.recompute || is_cast(op)) continue;
    bool reads_recomputed = false, after_backward = false;
    std::vector<std::string> preds;
    for (OpId q : p.graph.predecessors(static_cast<OpId>(i))) {
      const Op& pred = p.graph.op(q);
      preds.push_back(pred.name);
      reads_recomputed = reads_recomputed || (pred.recompute && !is_cast(pred));
      after_backward = after_backward || pred.phase == Phase::Backward;
    }
    if (reads_recomputed) continue;
    ++entries;
    EXPECT_TRUE(after_backward) << op.name << " waits only for: " << testing::PrintToString(preds);
  }
  EXPECT_EQ(entries, 2);  // fc1/remat and fc0/remat, the first recomputed product of each layer
}

// Activations live at the peak, by hand (fp32; the batch x [B, I] and labels [B] are always held: 576 B; the loss
// 4 B, the logits and probabilities [B, C] 256 B each; B H = 2048 B). A hidden layer's backward reads its input and
// its ReLU output (the ReLU's gradient takes its mask from the output), never its matmul output or biased value.
//   none: each layer's product and biased value die as the next op reads them; at the cross-entropy only the two
//         ReLU outputs are held, 576 + 2 * 2048 + 516 = 5188 B. The peak is in the forward pass, at layer 1's bias
//         add (or its ReLU): fc0.relu, fc1 and fc1.bias (fc1.bias and fc1.relu), 576 + 3 * 2048 = 6720 B.
//   full: at the cross-entropy the same two ReLU outputs (each the next layer's input): 5188 B; the forward pass as
//         without recomputation (6720 B); the peak is in layer 1's recomputation, when its input and its recomputed
//         product and biased value (then biased value and ReLU output) are live with the batch and the loss:
//         576 + 4 + 3 * 2048 = 6724 B, the loss's 4 B more than without recomputation. The MLP keeps for its backward
//         only what the next layer reads anyway, so full recomputation saves it nothing.
//   dots: the matmul outputs are kept, and the biased value exists until the ReLU has read it: at layer 1's ReLU,
//         fc0, fc0.relu, fc1, fc1.bias and fc1.relu, 576 + 5 * 2048 = 10816 B, more than without recomputation. (An
//         MLP's matmul output is as large as what follows it; dots pays off where the elementwise values outnumber
//         the products, as in a Transformer: the next test.)
TEST(RematTest, PeakActivationsByHand) {
  const double bh = B * H * F32;
  EXPECT_EQ(activation_peak(plan_step(mlp("none")), 0), 576 + 3 * bh);
  EXPECT_EQ(activation_peak(plan_step(mlp("full")), 0), 576 + 4 + 3 * bh);
  EXPECT_EQ(activation_peak(plan_step(mlp("dots")), 0), 576 + 5 * bh);
}

// What a Transformer holds from its forward pass for the backward (the activations live right after the loss),
// by hand, per token (fp32 floats; D = 16, F = 32, H = 4 heads, S = 8, B = 4: 32 tokens, V = 24):
//   every policy: token ids and labels (int32, 2 per token), the embedding and each layer's output (the next
//     cell's input; 3 D), the final norm's output and statistics (D + 2), the logits (V, which the loss's gradient
//     reads), each row's max and sum of exponentials (2) and the loss (4 B);
//   none, per layer: LN1's output and statistics (D + 2), q, k, v (3 D), the attention probabilities (H S), the
//     context (D), the residual after attention (D), LN2's output and statistics (D + 2), the FFN's biased
//     pre-activation and GELU output (2 F): 7 D + 4 + H S + 2 F = 212;
//   dots, per layer: the outputs of the matmuls without a batch dimension that the backward (or the recomputation)
//     reads: q, k, v, the attention output (D), the FFN's up projection (F): 4 D + F = 96 (attention's batched
//     scores and context are recomputed; the FFN's down projection is read by nothing of the backward: it dies in
//     the forward pass);
//   full: nothing per layer but its input.
//   none with the fused attention kernel (attention: flash), per layer: the probabilities (H S per token) give way
//     to the kernel's row statistics (H per token): 7 D + 4 + H + 2 F = 180, O(S) where the einsum path is O(S^2).
TEST(RematTest, TransformerHoldsForTheBackwardByHand) {
  auto held = [](const std::string& remat, const std::string& attention = "einsum") {
    const Step s = plan_step("hardware: {preset: tpu-v3, pod: {dims: [1, 1]}}\nworkload: {model: transformer, "
                             "layers: 2, d_model: 16, d_ff: 32, heads: 4, vocab: 24, seq_len: 8, batch: 4, dtype: "
                             "fp32, attention: " + attention + ", remat: " + remat +
                             "}\nstrategy: {name: single_device}\nrun: {fusion: none}\n");
    const Program& p = s.plan.programs.at(0);
    const ExecProgram ep = lower(p.graph, p.order, s.exp.hardware.chip, {false});
    ModelGraph g = p.graph;
    for (size_t t = 0; t < g.num_tensors(); ++t) {
      TensorInfo& info = g.tensor(static_cast<TensorId>(t));
      if (info.role != TensorRole::Activation && info.role != TensorRole::Input && info.role != TensorRole::Label &&
          info.role != TensorRole::Loss)
        info.role = TensorRole::Updated;
    }
    const MemoryPlan m = plan_memory(g, ep);
    for (size_t i = 0; i < ep.ops.size(); ++i)
      for (OpId id : ep.ops[i].members)
        if (g.op(id).name == "loss") return m.live_after_op.at(i);
    ADD_FAILURE() << "no loss op";
    return 0.0;
  };
  const double tokens = 32, D = 16, F = 32, HS = 4 * 8, V = 24;
  const double common = tokens * (2 + 3 * D + D + 2 + V + 2) * F32 + 4;
  EXPECT_EQ(held("full"), common);
  EXPECT_EQ(held("none"), common + 2 * tokens * (7 * D + 4 + HS + 2 * F) * F32);
  EXPECT_EQ(held("dots"), common + 2 * tokens * (4 * D + F) * F32);
  EXPECT_EQ(held("none", "flash"), common + 2 * tokens * (7 * D + 4 + 4 + 2 * F) * F32);
  EXPECT_EQ(held("full", "flash"), common);
}

// Megatron-LM's tensor parallelism with full recomputation: each layer recomputes its attention output's
// all-reduce over `model` (the partial sums of the output projection, B S D values), the one forward all-reduce
// whose result (the residual after attention) the layer's backward reads; the FFN's output all-reduce is not
// needed (nothing of the backward reads the layer's output). Two layers: two more all-reduces of B S D fp32.
TEST(RematTest, TensorParallelLayerRecomputesItsForwardAllReduce) {
  auto yaml = [](const std::string& remat) {
    return "hardware: {preset: tpu-v3, pod: {dims: [2, 1]}}\nworkload: {model: transformer, layers: 2, d_model: 16, "
           "d_ff: 32, heads: 4, vocab: 24, seq_len: 8, batch: 4, dtype: fp32, remat: " + remat +
           "}\nstrategy: {name: spmd, scheme: megatron}\nrun: {fusion: none}\n";
  };
  const Step none = plan_step(yaml("none")), full = plan_step(yaml("full"));
  auto all_reduces = [](const Program& p, bool recompute) {
    std::vector<std::string> out;
    for (OpId id : p.order) {
      const Op& op = p.graph.op(id);
      if (op.kind == OpKind::AllReduce && op.recompute == recompute)
        out.push_back(p.graph.tensor(op.inputs[0]).name + " " + std::to_string(static_cast<int64_t>(p.graph.tensor(op.inputs[0]).bytes())));
    }
    return out;
  };
  EXPECT_EQ(all_reduces(full.plan.programs[0], false), all_reduces(none.plan.programs[0], false));
  EXPECT_EQ(all_reduces(full.plan.programs[0], true),
            (std::vector<std::string>{"layer1.attn.o/remat 2048", "layer0.attn.o/remat 2048"}));
  // The partitioned program keeps the recomputation late: each recomputed op that reads no recomputed value waits
  // for a backward op (the control edge of the logical step, carried through the partitioner).
  const Program& p = full.plan.programs[0];
  int entries = 0;
  for (size_t i = 0; i < p.graph.num_ops(); ++i) {
    const Op& op = p.graph.op(static_cast<OpId>(i));
    if (!op.recompute || is_communication(op.kind)) continue;
    bool reads_recomputed = false, after_backward = false;
    for (OpId q : p.graph.predecessors(static_cast<OpId>(i))) {
      reads_recomputed = reads_recomputed || p.graph.op(q).recompute;
      after_backward = after_backward || p.graph.op(q).phase == Phase::Backward;
    }
    if (reads_recomputed) continue;
    ++entries;
    EXPECT_TRUE(after_backward) << op.name;
  }
  EXPECT_GE(entries, 2);  // at least one per layer
  expect_bit_identical(none, full);
}

// The numbers do not change: every gradient, update and the loss are bit for bit those of the step without
// recomputation, for single_device, data_parallel and the pipeline (whose stages take the layers' recomputation).
TEST(RematTest, BitIdenticalForEveryPolicy) {
  for (const std::string remat : {"full", "dots"}) {
    SCOPED_TRACE(remat);
    expect_bit_identical(plan_step(mlp("none")), plan_step(mlp(remat)));
    expect_bit_identical(plan_step(mlp("none")), plan_step(mlp("names", ", remat_keep: ['*.relu']")));
    auto dp = [](const std::string& r) {
      return "hardware: {preset: tpu-v3, pod: {dims: [2, 1]}}\nworkload: {model: transformer, layers: 2, d_model: 16, "
             "d_ff: 32, heads: 4, vocab: 24, seq_len: 8, batch: 4, dtype: fp32, remat: " + r +
             "}\nstrategy: {name: data_parallel}\n";
    };
    expect_bit_identical(plan_step(dp("none")), plan_step(dp(remat)));
    auto pp = [](const std::string& r) {
      return "hardware: {preset: tpu-v3, pod: {dims: [2, 1]}}\nworkload: {model: transformer, layers: 2, d_model: 16, "
             "d_ff: 32, heads: 4, vocab: 24, seq_len: 8, batch: 4, dtype: fp32, remat: " + r +
             "}\nstrategy: {name: pipeline, micro_batches: 2}\n";
    };
    expect_bit_identical(plan_step(pp("none")), plan_step(pp(remat)));
  }
}

// A mixture-of-experts layer recomputed under strategy moe is partitioned like the original (the recomputed
// dispatch and expert outputs take the specs the strategy gave the originals, strategies/planner.cpp): the
// recomputation moves tokens to their experts and back with all-to-alls as the forward pass does. Of two layers the
// second is a MoE layer; full recomputation needs its expert inputs (the expert weights' gradient reads them) and
// outputs (the combine's gradient reads them): one all-to-all each way.
TEST(RematTest, MoeLayerRecomputesItsAllToAlls) {
  auto yaml = [](const std::string& remat) {
    return "hardware: {preset: tpu-v3, pod: {dims: [4, 1]}}\nworkload: {model: transformer, layers: 2, d_model: 16, "
           "d_ff: 32, heads: 4, vocab: 24, seq_len: 8, batch: 4, dtype: fp32, moe: {experts: 4, groups: 4}, remat: " +
           remat + "}\nstrategy: {name: moe}\nrun: {fusion: none}\n";
  };
  const Step none = plan_step(yaml("none")), full = plan_step(yaml("full"));
  auto count = [](const Program& p, bool recompute) {
    int n = 0;
    for (OpId id : p.order) n += p.graph.op(id).kind == OpKind::AllToAll && p.graph.op(id).recompute == recompute;
    return n;
  };
  EXPECT_EQ(count(full.plan.programs[0], false), count(none.plan.programs[0], false));
  EXPECT_EQ(count(full.plan.programs[0], true), 2);
  expect_bit_identical(none, full);
}

// names on a Transformer: keeping each LN1 output ('*.ln1') still recomputes the layer norm for its statistics
// (its gradient reads mean and rstd, not kept), but what reads the kept output (the query projection's weight
// gradient) reads the original.
TEST(RematTest, KeptOutputOfARecomputedOpIsReadFromTheOriginal) {
  const Step s = plan_step("hardware: {preset: tpu-v3, pod: {dims: [1, 1]}}\nworkload: {model: transformer, layers: 2, "
                           "d_model: 16, d_ff: 32, heads: 4, vocab: 24, seq_len: 8, batch: 4, dtype: fp32, remat: "
                           "names, remat_keep: ['*.ln1']}\nstrategy: {name: single_device}\n");
  const ModelGraph& g = s.graph;
  auto inputs_of = [&](const std::string& out) {
    std::vector<std::string> names;
    for (TensorId t : g.op(g.producer(g.find_tensor(out))).inputs) names.push_back(g.tensor(t).name);
    return names;
  };
  const std::vector<std::string> r = recomputed(g);
  EXPECT_NE(std::find(r.begin(), r.end(), "layer0.ln1/remat"), r.end());
  const std::vector<std::string> dw = inputs_of("layer0.attn.q.w.grad");
  EXPECT_NE(std::find(dw.begin(), dw.end(), "layer0.ln1"), dw.end());
  const std::vector<std::string> dln = inputs_of("layer0.ln1.dx");
  EXPECT_NE(std::find(dln.begin(), dln.end(), "layer0.ln1.mean/remat"), dln.end());
  EXPECT_NE(std::find(dln.begin(), dln.end(), "layer0.ln1.rstd/remat"), dln.end());
}

// Exactly what each policy recomputes in a Transformer layer (and so keeps: everything else of the layer the
// backward reads), derived from what each gradient reads: a projection's weight gradient reads its input, the
// scores' gradient q and k, the context's the probabilities and v, the softmax's its output, a layer norm's its
// input and statistics, GELU's its input; an add's and a bias add's read nothing. The layer's input comes from
// outside and is kept; the FFN's down projection, its bias and the residual after it are read by no backward op
// and never recomputed.
//   full   the chain up to every value the backward reads: ln1, the projections, scores, softmax, context, the
//          output projection and the residual (ln2 reads it), ln2, the FFN's up projection, its bias, GELU;
//   dots   keeps the projections without a batch dimension (q, k, v, o, FFN up): recomputes ln1, attention's
//          batched scores and context with the softmax between them, the residual, ln2, the bias, GELU;
//   names  keeping the probabilities and the FFN's biased value: the scores and the FFN's up projection are no
//          longer needed, q and k still are (the scores' gradient), and so is v (the context's).
TEST(RematTest, TransformerLayerRecomputesExactlyWhatItsPolicyDoesNotKeep) {
  auto layer0 = [](const std::string& remat) {
    const Step s = plan_step("hardware: {preset: tpu-v3, pod: {dims: [1, 1]}}\nworkload: {model: transformer, "
                             "layers: 2, d_model: 16, d_ff: 32, heads: 4, vocab: 24, seq_len: 8, batch: 4, dtype: "
                             "fp32, remat: " + remat + "}\nstrategy: {name: single_device}\n");
    std::vector<std::string> out;
    for (const std::string& name : recomputed(s.graph)) {
      EXPECT_EQ(name.rfind("layer", 0), 0u) << name;  // no embedding or head op
      if (name.rfind("layer0.", 0) == 0) out.push_back(name.substr(7, name.size() - 7 - 6));  // "layer0.", "/remat"
    }
    // Layer 1 recomputes the same ops.
    size_t in_layer1 = 0;
    for (const std::string& name : recomputed(s.graph)) in_layer1 += name.rfind("layer1.", 0) == 0;
    EXPECT_EQ(in_layer1, out.size()) << remat;
    return out;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(layer0("full"), (Names{"ln1", "attn.q", "attn.k", "attn.v", "attn.scores", "attn.softmax", "attn.context",
                                  "attn.o", "attn.residual", "ln2", "ffn.up", "ffn.up.bias", "ffn.gelu"}));
  EXPECT_EQ(layer0("dots"), (Names{"ln1", "attn.scores", "attn.softmax", "attn.context", "attn.residual", "ln2",
                                  "ffn.up.bias", "ffn.gelu"}));
  EXPECT_EQ(layer0("names, remat_keep: ['*.attn.softmax', '*.ffn.up.bias']"),
            (Names{"ln1", "attn.q", "attn.k", "attn.v", "attn.context", "attn.o", "attn.residual", "ln2",
                   "ffn.gelu"}));
}

// MaxText's policies on a Llama-shaped layer (grouped-query attention, RoPE, SwiGLU, RMSNorm, the fused attention
// kernel), by hand: what each keeps of layer 0's forward for its backward, and what it recomputes. The layer's
// backward reads its norms' outputs and statistics (ln1, ln2: the projections' weight gradients and the norms'
// own), the rotated queries and keys, the values, the kernel's output and row statistics, the residual after
// attention (ln2's gradient), the gate, the up projection, the SiLU (the product's gradient) and the product (the
// down projection's weight gradient). A policy keeps what it names (MaxText's checkpoint_name tags: query_proj and
// key_proj after the rotation) and recomputes the rest from the layer's input and what it keeps:
//   minimal (checkpoint_dots_with_no_batch_dims): keeps the projections' outputs q, k, v, o, gate, up (not the
//     kernel's output: not a dot); recomputes ln1, the rotations, the kernel, the residual, ln2, SiLU, the product;
//   save_qkv_proj: keeps the rotated q, k and v; recomputes ln1, the kernel, o, the residual, ln2, gate, up, SiLU,
//     the product;
//   save_out_proj: keeps o; recomputes ln1, q, k, v, the rotations, the kernel, the residual, ln2, gate, up, SiLU,
//     the product;
//   save_dot_except_mlp: keeps the rotated q, k, v and o; recomputes ln1, the kernel, the residual, ln2, gate, up,
//     SiLU, the product.
TEST(RematTest, MaxTextPoliciesKeepWhatTheyNameByHand) {
  struct Want {
    const char* policy;
    std::vector<std::string> kept, recomputed;
  };
  const std::vector<Want> wants = {
      {"minimal",
       {"attn.k", "attn.o", "attn.q", "attn.v", "ffn.gate", "ffn.up"},
       {"attn.context", "attn.k.rope", "attn.q.rope", "attn.residual", "ffn.glu", "ffn.silu", "ln1", "ln2"}},
      {"save_qkv_proj",
       {"attn.k.rope", "attn.q.rope", "attn.v"},
       {"attn.context", "attn.o", "attn.residual", "ffn.gate", "ffn.glu", "ffn.silu", "ffn.up", "ln1", "ln2"}},
      {"save_out_proj",
       {"attn.o"},
       {"attn.context", "attn.k", "attn.k.rope", "attn.q", "attn.q.rope", "attn.residual", "attn.v", "ffn.gate",
        "ffn.glu", "ffn.silu", "ffn.up", "ln1", "ln2"}},
      {"save_dot_except_mlp",
       {"attn.k.rope", "attn.o", "attn.q.rope", "attn.v"},
       {"attn.context", "attn.residual", "ffn.gate", "ffn.glu", "ffn.silu", "ffn.up", "ln1", "ln2"}},
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.policy);
    const Step s = plan_step("hardware: {preset: tpu-v3, pod: {dims: [1, 1]}}\nworkload: {preset: llm-tiny, attention: flash, batch: 2, "
                             "dtype: fp32, remat: " + std::string(w.policy) + "}\nstrategy: {name: single_device}\n");
    const ModelGraph& g = s.graph;
    std::set<std::string> kept, again;
    const std::string layer = "layer0.";
    auto local = [&](const std::string& name) { return name.rfind(layer, 0) == 0 ? name.substr(layer.size()) : ""; };
    for (const Op& op : g.ops()) {
      if (op.cell != 1) continue;  // layer 0
      if (op.recompute) again.insert(local(op.name.substr(0, op.name.size() - std::string("/remat").size())));
      if (!op.recompute && op.phase != Phase::Backward) continue;
      for (TensorId t : op.inputs) {
        const OpId p = g.producer(t);
        if (p >= 0 && g.op(p).cell == 1 && g.op(p).phase == Phase::Forward && !g.op(p).recompute &&
            g.tensor(t).role == TensorRole::Activation && !local(g.tensor(t).name).empty())
          kept.insert(local(g.op(p).name));
      }
    }
    EXPECT_EQ(std::vector<std::string>(kept.begin(), kept.end()), w.kept);
    EXPECT_EQ(std::vector<std::string>(again.begin(), again.end()), w.recomputed);
  }
}

// Host offload (MaxText's qkv_proj_offloaded and minimal_offloaded) on the Llama-shaped layer: the values the policy
// names go to host memory right after they are made (to_host) and come back (from_host) when the backward of the
// cell before theirs begins (layer 0's: as layer 1's backward starts), gated behind the op before; the layer's
// backward and recomputation read what came back; nothing of them stays in HBM in between; every number is the
// step's without offload, bit for bit. What is recomputed is the matching on-device policy's.
TEST(RematTest, OffloadedValuesGoToTheHostAndComeBackAheadOfTheirBackward) {
  struct Want {
    const char* policy;
    const char* like;  // the on-device policy that keeps the same values
    std::vector<std::string> moved;
  };
  const std::vector<Want> wants = {
      {"qkv_proj_offloaded", "save_qkv_proj", {"attn.q.rope", "attn.k.rope", "attn.v"}},
      {"minimal_offloaded", "minimal", {"attn.q", "attn.k", "attn.v", "attn.o", "ffn.gate", "ffn.up"}},
  };
  auto yaml = [](const std::string& remat) {
    return "hardware: {preset: tpu-v4, pod: {dims: [1, 1, 1]}}\nworkload: {preset: llm-tiny, attention: flash, batch: "
           "2, dtype: fp32, remat: " + remat + "}\nstrategy: {name: single_device}\n";
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.policy);
    const Step s = plan_step(yaml(w.policy)), like = plan_step(yaml(w.like));
    EXPECT_EQ(recomputed(s.graph), recomputed(like.graph));
    const Program& p = s.plan.programs.at(0);
    const std::vector<std::string> o = order(p);
    // Where layer 1's backward pass begins: its first recomputed or backward op (cell 2).
    size_t layer1 = o.size();
    for (size_t i = 0; i < p.order.size(); ++i) {
      const Op& op = p.graph.op(p.order[i]);
      if ((op.phase != Phase::Backward && !op.recompute) || op.kind == OpKind::FromHost || op.cell != 2) continue;
      layer1 = std::min(layer1, at(o, op.name));
    }
    int moved = 0;
    for (const std::string& v : w.moved)
      for (const std::string layer : {"layer0.", "layer1."}) {
        const std::string name = layer + v;
        const size_t made = at(o, name), to = at(o, name + ".host"), back = at(o, name + "/reload");
        EXPECT_EQ(to, made + 1) << name;  // to the host as soon as it is made
        if (layer == "layer0.") {
          EXPECT_LT(back, layer1) << name;  // right before layer 1's backward, ahead of its own
          EXPECT_GE(back + w.moved.size(), layer1) << name;
          // ... and waits for the backward pass to get there (a control edge from the backward op before it), so
          // that a chip running ready ops at once does not bring it back during the forward pass.
          bool gated = false;
          for (size_t i = 0; i < p.graph.num_ops(); ++i)
            if (p.graph.op(static_cast<OpId>(i)).name == name + "/reload")
              for (OpId q : p.graph.predecessors(static_cast<OpId>(i))) gated = gated || p.graph.op(q).phase == Phase::Backward;
          EXPECT_TRUE(gated) << name;
        }
        // The backward and recomputation read the value that came back, never the original.
        const TensorId orig = p.graph.find_tensor(name), reload = p.graph.find_tensor(name + "/reload");
        ASSERT_GE(reload, 0) << name;
        int readers = 0;
        for (OpId c : p.graph.consumers(orig)) {
          const Op& u = p.graph.op(c);
          EXPECT_FALSE(u.phase == Phase::Backward || u.recompute) << u.name << " reads " << name;
        }
        for (OpId c : p.graph.consumers(reload)) readers += p.graph.op(c).phase == Phase::Backward || p.graph.op(c).recompute;
        EXPECT_GT(readers, 0) << name;
        ++moved;
      }
    EXPECT_EQ(moved, 2 * static_cast<int>(w.moved.size()));
    // The copies in host memory take no HBM: what the step holds after the loss is full re-materialization's.
    auto held_after_loss = [](const Step& st) {
      const Program& q = st.plan.programs.at(0);
      const ExecProgram ep = lower(q.graph, q.order, st.exp.hardware.chip, {false});
      ModelGraph g = q.graph;
      for (size_t t = 0; t < g.num_tensors(); ++t) {
        TensorInfo& info = g.tensor(static_cast<TensorId>(t));
        if (info.role != TensorRole::Activation && info.role != TensorRole::Input && info.role != TensorRole::Label &&
            info.role != TensorRole::Loss)
          info.role = TensorRole::Updated;
      }
      const MemoryPlan m = plan_memory(g, ep);
      for (size_t i = 0; i < ep.ops.size(); ++i)
        for (OpId id : ep.ops[i].members)
          if (g.op(id).name == "loss") return m.live_after_op.at(i);
      return -1.0;
    };
    EXPECT_EQ(held_after_loss(s), held_after_loss(plan_step(yaml("full"))));
    expect_bit_identical(plan_step(yaml("none")), s);
  }
}

// MaxText's custom policy (workload.remat: custom, workload.remat_custom.NAME) on the Llama-shaped layer (llm-tiny:
// batch 2, 16 tokens, d_model 64, 4 query heads of 16 in 2 groups, SwiGLU 128; fp32), counted by hand per layer:
// what each choice keeps on the device, moves to the host and recomputes. The layer's values by name and their
// bytes: decoder_layer_input x [2, 16, 64] 8192; query_proj (the rotated queries) [2, 16, 2, 2, 16] 8192; key_proj,
// value_proj [2, 16, 2, 16] 4096 each; context [2, 16, 2, 2, 16] 8192 with the kernel's row lse [2, 2, 2, 16] 512;
// out_proj [2, 16, 64] 8192; mlpwi_0 (ffn.gate), mlpwi_1 (ffn.up) [2, 16, 128] 16384 each.
//  - MaxText's Trillium recipe (decoder_layer_input, query/key/value and out projections offloaded, the rest
//    recomputed): nothing of the layer kept in HBM; 8192 + 8192 + 4096 + 4096 + 8192 = 32768 bytes to the host and
//    back per layer, the layer's input included (layer 0's is the embedding's output, layer 1's layer 0's last
//    residual); recomputed what save_dot_except_mlp recomputes.
//  - context and mlpwi_0 on the device, mlpwi_1 and mlpwo offloaded: kept 8192 + 512 + 16384 = 25088 bytes; moved
//    only ffn.up, 16384 bytes (mlpwo, the FFN's output, is read by no backward op: nothing to move); recomputed the
//    projections, rotations, the output projection and what follows it up to ln2, the SiLU and the GLU product.
//  - nothing given: MaxText's defaults, full recomputation from the layer's input (kept on the device).
TEST(RematTest, CustomPolicyKeepsMovesAndRecomputesEachNameByHand) {
  struct Want {
    std::string custom;
    std::vector<std::string> kept, moved, recomputed;
    double kept_bytes, moved_bytes;
  };
  const std::vector<Want> wants = {
      {"{decoder_layer_input: offload, query_proj: offload, key_proj: offload, value_proj: offload, out_proj: "
       "offload}",
       {},
       {"attn.k.rope", "attn.o", "attn.q.rope", "attn.v", "input"},
       {"attn.context", "attn.residual", "ffn.gate", "ffn.glu", "ffn.silu", "ffn.up", "ln1", "ln2"},
       0,
       32768},
      {"{context: device, mlpwi_0: device, mlpwi_1: offload, mlpwo: offload}",
       {"attn.context", "ffn.gate"},
       {"ffn.up"},
       {"attn.k", "attn.k.rope", "attn.o", "attn.q", "attn.q.rope", "attn.residual", "attn.v", "ffn.glu", "ffn.silu",
        "ln1", "ln2"},
       25088,
       16384},
      {"{}",
       {},
       {},
       {"attn.context", "attn.k", "attn.k.rope", "attn.o", "attn.q", "attn.q.rope", "attn.residual", "attn.v",
        "ffn.gate", "ffn.glu", "ffn.silu", "ffn.up", "ln1", "ln2"},
       0,
       0},
  };
  auto yaml = [](const std::string& remat, const std::string& extra) {
    return "hardware: {preset: tpu-v4, pod: {dims: [1, 1, 1]}}\nworkload: {preset: llm-tiny, attention: flash, batch: "
           "2, dtype: fp32, remat: " + remat + extra + "}\nstrategy: {name: single_device}\n";
  };
  for (const Want& w : wants) {
    SCOPED_TRACE(w.custom);
    const Step s = plan_step(yaml("custom", ", remat_custom: " + w.custom));
    const Program& p = s.plan.programs.at(0);
    const ModelGraph& g = p.graph;
    for (int32_t cell : {1, 2}) {  // each layer the same
      SCOPED_TRACE(cell);
      const std::string layer = "layer" + std::to_string(cell - 1) + ".";
      auto local = [&](const std::string& name) { return name.rfind(layer, 0) == 0 ? name.substr(layer.size()) : ""; };
      std::set<std::string> kept, moved, again;
      std::set<TensorId> kept_t;
      double moved_bytes = 0;
      for (const Op& op : g.ops()) {
        if (op.cell != cell) continue;
        if (op.kind == OpKind::FromHost) {
          const std::string n = g.tensor(op.outputs[0]).name;
          const std::string v = n.substr(0, n.size() - std::string("/reload").size());
          moved.insert(local(v).empty() ? "input" : local(v));
          moved_bytes += g.tensor(op.outputs[0]).bytes();
          continue;
        }
        if (op.recompute) again.insert(local(op.name.substr(0, op.name.size() - std::string("/remat").size())));
        if (!op.recompute && op.phase != Phase::Backward) continue;
        for (TensorId t : op.inputs) {
          const OpId q = g.producer(t);
          if (q >= 0 && g.op(q).cell == cell && g.op(q).phase == Phase::Forward && !g.op(q).recompute &&
              g.op(q).kind != OpKind::FromHost && g.tensor(t).role == TensorRole::Activation &&
              !local(g.tensor(t).name).empty())
            kept.insert(local(g.op(q).name)), kept_t.insert(t);
        }
      }
      double kept_bytes = 0;
      for (TensorId t : kept_t) kept_bytes += g.tensor(t).bytes();
      EXPECT_EQ(std::vector<std::string>(kept.begin(), kept.end()), w.kept);
      EXPECT_EQ(std::vector<std::string>(moved.begin(), moved.end()), w.moved);
      EXPECT_EQ(std::vector<std::string>(again.begin(), again.end()), w.recomputed);
      EXPECT_EQ(kept_bytes, w.kept_bytes);
      EXPECT_EQ(moved_bytes, w.moved_bytes);
      // What goes to the host comes back: as many bytes each way.
      double to_host = 0;
      for (const Op& op : g.ops())
        if (op.kind == OpKind::ToHost) to_host += g.tensor(op.inputs[0]).bytes();
      double from_host = 0;
      for (const Op& op : g.ops())
        if (op.kind == OpKind::FromHost) from_host += g.tensor(op.outputs[0]).bytes();
      EXPECT_EQ(to_host, from_host);
      EXPECT_EQ(from_host, 2 * w.moved_bytes);
    }
    expect_bit_identical(plan_step(yaml("none", "")), s);
  }
  // The recipe's on-device counterpart keeps the same values in HBM and recomputes the same ops.
  const Step recipe = plan_step(yaml("custom", ", remat_custom: {query_proj: offload, key_proj: offload, value_proj: "
                                               "offload, out_proj: offload}"));
  EXPECT_EQ(recomputed(recipe.graph), recomputed(plan_step(yaml("save_dot_except_mlp", "")).graph));
}
