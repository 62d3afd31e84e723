// The figures of fully sharded data parallelism (strategy fsdp; ZeRO stage 3) against hand counts written here
// from the models' dimensions: the collectives one step issues per chip (each parameter all-gathered before its
// forward use and again before its backward use when the backward reads it, each gradient reduce-scattered into
// its shard), the memory per role (weights and optimizer state divided by the fsdp axis, at most two cells' gathered
// weights live at once), and where the gathers sit in the issue order (one cell ahead, each waiting for the
// previous cell's compute). Every plan here also reproduces the single-device step (in-memory interpreter;
// tests/cli/strategies_test.cpp runs the same through `podsim run` and `podsim compare`).
//
// Bytes are per chip, as in plan_figures_test.cpp; memory is the lowered program's plan with run.fusion: none.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
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

MemoryPlan memory(const Step& s) {
  const Program& p = s.plan.programs.at(0);
  return lower(p.graph, p.order, s.exp.hardware.chip, {s.exp.run.fusion != "none"}).memory;
}

// The MLP: batch B, input I, hidden H, 2 hidden layers, C classes, fp32.
constexpr int64_t B = 16, I = 8, H = 32, C = 4;
constexpr double F32 = 4;

std::string mlp(const std::string& optimizer) {
  return "workload: {model: mlp, batch: " + std::to_string(B) + ", input: " + std::to_string(I) +
         ", hidden: " + std::to_string(H) + ", layers: 2, classes: " + std::to_string(C) +
         ", dtype: fp32, optimizer: " + optimizer + "}\nrun: {fusion: none}\n";
}

const std::vector<std::pair<std::string, int64_t>> kMlpParams = {
    {"fc0.w", I * H}, {"fc0.b", H}, {"fc1.w", H * H}, {"fc1.b", H}, {"out.w", H * C}, {"out.b", C}};
constexpr int64_t kMlpElements = I * H + H + H * H + H + H * C + C;

// The Transformer: d_model D, d_ff F, heads NH of width E, vocabulary V, sequence S, batch TB, fp32.
constexpr int64_t D = 16, F = 32, NH = 4, E = D / NH, V = 24, S = 8, TB = 4;

std::string transformer(int layers, const std::string& optimizer) {
  return "workload: {model: transformer, layers: " + std::to_string(layers) + ", d_model: " + std::to_string(D) +
         ", d_ff: " + std::to_string(F) + ", heads: " + std::to_string(NH) + ", vocab: " + std::to_string(V) +
         ", seq_len: " + std::to_string(S) + ", batch: " + std::to_string(TB) + ", dtype: fp32, optimizer: " +
         optimizer + "}\nrun: {fusion: none}\n";
}

// A Transformer parameter: its name, elements, model cell (embedding 0, layer l is l + 1, the head L + 1), whether
// the backward pass reads it (a weight matrix for its input gradient, a layer norm's gamma; not a bias, a beta or
// the embedding table, whose gradient is a scatter of the output gradient), how Megatron's split over `model`
// divides it and the dimension fsdp takes (the first one `model` does not split).
struct TParam {
  std::string name;
  int64_t elements;
  int cell;
  bool read_backward;
  int64_t megatron_split;
  int fsdp_dim_with_model;
};

std::vector<TParam> transformer_params(int layers) {
  std::vector<TParam> p = {{"embedding", V * D, 0, false, 2, 1}};  // [V, D], vocabulary-parallel: fsdp takes D
  for (int l = 0; l < layers; ++l) {
    const std::string n = "layer" + std::to_string(l);
    const int c = l + 1;
    p.push_back({n + ".ln1.gamma", D, c, true, 1, 0});
    p.push_back({n + ".ln1.beta", D, c, false, 1, 0});
    for (const char* w : {".attn.q.w", ".attn.k.w", ".attn.v.w"}) p.push_back({n + w, D * NH * E, c, true, 2, 0});
    p.push_back({n + ".attn.o.w", NH * E * D, c, true, 2, 1});  // [H, E, D], H split: fsdp takes E
    p.push_back({n + ".ln2.gamma", D, c, true, 1, 0});
    p.push_back({n + ".ln2.beta", D, c, false, 1, 0});
    p.push_back({n + ".ffn.w1", D * F, c, true, 2, 0});  // [D, F], F split
    p.push_back({n + ".ffn.b1", F, c, false, 2, 0});     // [F] split: fsdp after model on the same dimension
    p.push_back({n + ".ffn.w2", F * D, c, true, 2, 1});  // [F, D], F split
    p.push_back({n + ".ffn.b2", D, c, false, 1, 0});
  }
  p.push_back({"final_ln.gamma", D, layers + 1, true, 1, 0});
  p.push_back({"final_ln.beta", D, layers + 1, false, 1, 0});
  p.push_back({"unembed", D * V, layers + 1, true, 2, 0});  // [D, V], vocabulary-parallel
  return p;
}

}  // namespace

// ---- collectives -----------------------------------------------------------------------------------------------

// fsdp over 4 chips, the MLP: every parameter gathered (a quarter in, whole out) before its forward use; the two
// weights whose input gradient the backward pass computes (fc1.w, out.w; fc0's input is the batch) gathered again
// before it; every gradient reduce-scattered into its quarter; the loss all-reduced. Nothing is all-reduced whole.
TEST(FsdpTest, MlpGathersEachWeightPerPassAndReduceScattersEachGradient) {
  for (const char* opt : {"sgd", "adam"}) {
    SCOPED_TRACE(opt);
    const Step s = plan_step(hardware("[4, 1]") + mlp(opt) + "strategy: {name: fsdp}\n");
    ASSERT_EQ(s.plan.programs.size(), 1u);
    std::vector<std::string> want;
    for (const auto& [p, n] : kMlpParams) {
      const double whole = static_cast<double>(n) * F32;
      want.push_back(ag(p, "fsdp", 0, whole / 4, whole));
      if (p == "fc1.w" || p == "out.w") want.push_back(ag(p, "fsdp", 0, whole / 4, whole));
      want.push_back(rs(p + ".grad", "fsdp", 0, whole, whole / 4));
    }
    want.push_back(ar("loss", "fsdp", F32));
    EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
    expect_reproduces_the_step(s);
  }
}

// The Transformer (2 layers) over fsdp 4: per layer, each parameter the backward pass reads is all-gathered twice
// (forward and backward), the others once; each gradient is reduce-scattered once. Each along dimension 0.
TEST(FsdpTest, TransformerGathersTwicePerLayerAndReduceScattersOnce) {
  const Step s = plan_step(hardware("[4, 1]") + transformer(2, "adam") + "strategy: {name: fsdp}\n");
  std::vector<std::string> want;
  for (const TParam& p : transformer_params(2)) {
    const double whole = static_cast<double>(p.elements) * F32;
    for (int pass = 0; pass < (p.read_backward ? 2 : 1); ++pass) want.push_back(ag(p.name, "fsdp", 0, whole / 4, whole));
    want.push_back(rs(p.name + ".grad", "fsdp", 0, whole, whole / 4));
  }
  want.push_back(ar("loss", "fsdp", F32));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(s);
}

// fsdp 2 x Megatron over model 2: each weight is stored as its Megatron shard split again over `fsdp` along the
// first dimension `model` does not split, gathered over `fsdp` only (back to its Megatron shard) per pass, and its
// gradient reduce-scattered over `fsdp` from the Megatron shard. Megatron's four all-reduces per layer over
// `model` stay, on each fsdp shard's half of the batch, and so do those of the vocabulary-parallel embedding and
// head.
TEST(FsdpTest, FsdpTimesMegatron) {
  const Step s = plan_step(hardware("[2, 2]") + transformer(2, "sgd") +
                           "strategy: {name: [fsdp, spmd]}\nmesh: {axes: [fsdp, model], shape: [2, 2]}\n");
  const double act = TB / 2 * S * D * F32;
  std::vector<std::string> want;
  for (int l = 0; l < 2; ++l) {
    const std::string n = "layer" + std::to_string(l);
    for (const char* t : {".attn.o", ".ffn.down", ".ffn.up.dA", ".ln1.grad.sum2"}) want.push_back(ar(n + t, "model", act));
  }
  // The vocabulary-parallel embedding and head: the lookup's partial sum, the final norm's input gradient, and the
  // parallel cross-entropy's max, sum of exponentials and target logit per row.
  want.push_back(ar("embed.partial", "model", act));
  want.push_back(ar("logits.dA", "model", act));
  for (const char* t : {"loss.max", "loss.sumexp", "loss.target"}) want.push_back(ar(t, "model", TB / 2 * S * F32));
  for (const TParam& p : transformer_params(2)) {
    const double local = static_cast<double>(p.elements / p.megatron_split) * F32;  // the Megatron shard
    for (int pass = 0; pass < (p.read_backward ? 2 : 1); ++pass)
      want.push_back(ag(p.name, "fsdp", p.fsdp_dim_with_model, local / 2, local));
    want.push_back(rs(p.name + ".grad", "fsdp", p.fsdp_dim_with_model, local, local / 2));
  }
  want.push_back(ar("loss", "fsdp", F32));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(s);
}

// data 2 x fsdp 2 (hybrid sharding): the batch split over both, each gradient reduce-scattered over `fsdp` and the
// half then all-reduced over `data` (the replicas of the shard); the gathers stay within the fsdp group.
TEST(FsdpTest, DataTimesFsdpReduceScattersThenAllReducesAcrossReplicas) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("adam") +
                           "strategy: {name: [data_parallel, fsdp]}\nmesh: {axes: [data, fsdp], shape: [2, 2]}\n");
  std::vector<std::string> want;
  for (const auto& [p, n] : kMlpParams) {
    const double whole = static_cast<double>(n) * F32;
    want.push_back(ag(p, "fsdp", 0, whole / 2, whole));
    if (p == "fc1.w" || p == "out.w") want.push_back(ag(p, "fsdp", 0, whole / 2, whole));
    want.push_back(rs(p + ".grad", "fsdp", 0, whole, whole / 2));
    want.push_back(ar(p + ".grad", "data", whole / 2));
  }
  want.push_back(ar("loss", "data,fsdp", F32));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  expect_reproduces_the_step(s);
}

// fsdp over 3 chips: no dimension of fc0.w [I = 8, H = 32] divides by 3, so it is sharded along the one that pads
// least, H (1 padding column in 33, rather than 1 padding row in 9): each chip holds 11 of the 33 padded columns,
// the gather brings all 33 (the padding column cropped after it), the gradient is padded to 33 columns and
// reduce-scattered into 11. The batch of 16 is padded to 18 rows.
TEST(FsdpTest, PaddedShardsOverThreeChips) {
  const Step s = plan_step(hardware("[3, 1]") + mlp("sgd") + "strategy: {name: fsdp}\n");
  const std::vector<std::string> got = collectives(s.plan.programs[0]);
  const double column = I * F32;
  EXPECT_EQ(std::count(got.begin(), got.end(), ag("fc0.w", "fsdp", 1, 11 * column, 33 * column)), 1);
  EXPECT_EQ(std::count(got.begin(), got.end(), rs("fc0.w.grad", "fsdp", 1, 33 * column, 11 * column)), 1);
  expect_reproduces_the_step(s);
}

// A dimension the axis divides is preferred to an earlier one it does not: over 8 chips the attention output
// projection [heads = 4, head width = 4, d_model = 16] would pad its 4 heads to 8, so it is sharded along d_model
// (2 columns each); the [V = 24, D] embedding is sharded along its rows (3 each, and 8 each over 3 chips).
TEST(FsdpTest, ShardsAlongADimensionTheAxisDivides) {
  {
    const Step s = plan_step(hardware("[8, 1]") + transformer(1, "sgd") + "strategy: {name: fsdp}\n");
    const std::vector<std::string> got = collectives(s.plan.programs[0]);
    // Gathered twice, for the forward and the backward pass.
    EXPECT_EQ(std::count(got.begin(), got.end(), ag("layer0.attn.o.w", "fsdp", 2, NH * E * 2 * F32, NH * E * D * F32)),
              2);
    EXPECT_EQ(std::count(got.begin(), got.end(), ag("embedding", "fsdp", 0, 3 * D * F32, V * D * F32)), 1);
  }
  {
    const Step s = plan_step(hardware("[3, 1]") + transformer(1, "sgd") + "strategy: {name: fsdp}\n");
    const std::vector<std::string> got = collectives(s.plan.programs[0]);
    EXPECT_EQ(std::count(got.begin(), got.end(), ag("embedding", "fsdp", 0, 8 * D * F32, V * D * F32)), 1);
  }
}

// ---- memory ----------------------------------------------------------------------------------------------------

// The per-cell bytes of the gathered (whole) parameters of the Transformer.
std::map<int, double> cell_bytes(int layers) {
  std::map<int, double> c;
  for (const TParam& p : transformer_params(layers)) c[p.cell] += static_cast<double>(p.elements) * F32;
  return c;
}

// Weights and Adam's m and v: a quarter of the model's on each of 4 chips. The gathered copies are communication
// buffers (temporaries): at the peak at most two consecutive cells' whole weights.
TEST(FsdpTest, WeightsAndOptimizerStateAreDividedByTheAxis) {
  {
    const Step s = plan_step(hardware("[4, 1]") + mlp("adam") + "strategy: {name: fsdp}\n");
    const MemoryPlan m = memory(s);
    EXPECT_EQ(m.at_peak.weights, kMlpElements * F32 / 4);
    EXPECT_EQ(m.at_peak.optimizer_state, 2 * kMlpElements * F32 / 4);
  }
  const int layers = 3;
  const Step s = plan_step(hardware("[4, 1]") + transformer(layers, "adam") + "strategy: {name: fsdp}\n");
  double total = 0;
  for (const TParam& p : transformer_params(layers)) total += static_cast<double>(p.elements) * F32;
  const MemoryPlan m = memory(s);
  EXPECT_EQ(m.at_peak.weights, total / 4);
  EXPECT_EQ(m.at_peak.optimizer_state, 2 * total / 4);
  const std::map<int, double> cells = cell_bytes(layers);
  double two = 0;
  for (int c = 0; c + 1 <= layers + 1; ++c) two = std::max(two, cells.at(c) + cells.at(c + 1));
  EXPECT_GT(m.at_peak.temporaries, 0);
  EXPECT_LE(m.at_peak.temporaries, two);
  // A replicated data-parallel step holds every weight whole.
  const Step dp = plan_step(hardware("[4, 1]") + transformer(layers, "adam") + "strategy: {name: data_parallel}\n");
  EXPECT_EQ(memory(dp).at_peak.weights, total);
}

namespace {

// Walking the issue order of a fully sharded Transformer of `layers` layers: the most cells whose gathered copies are
// live at once. A copy lives from its gather to its last reader.
size_t most_cells_with_gathered_copies_live(const Program& p, int layers) {
  std::map<std::string, int> cell_of;
  for (const TParam& tp : transformer_params(layers)) cell_of[tp.name] = tp.cell;
  std::vector<size_t> at(p.graph.num_ops());
  for (size_t i = 0; i < p.order.size(); ++i) at[p.order[i]] = i;
  std::vector<std::set<int>> live(p.order.size());
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (op.kind != OpKind::AllGather) continue;
    size_t last = at[id];
    for (OpId c : p.graph.consumers(op.outputs.front())) last = std::max(last, at[c]);
    for (size_t i = at[id]; i <= last; ++i) live[i].insert(cell_of.at(op.name.substr(0, op.name.rfind('/'))));
  }
  size_t most = 0;
  for (const auto& cells : live) most = std::max(most, cells.size());
  return most;
}

// fsdp over 4 chips of a Transformer of `layers` layers trained with SGD and re-materialization `remat`.
Step fsdp_with_remat(int layers, const std::string& remat) {
  std::string w = transformer(layers, "sgd");
  w.replace(w.find("optimizer: sgd"), 14, "optimizer: sgd, remat: " + remat);
  return plan_step(hardware("[4, 1]") + w + "strategy: {name: fsdp}\n");
}

}  // namespace

// The gathered copies live at any point belong to at most two cells (the current one and the one prefetched), and
// to two at some point (the prefetch does overlap); the forward's copy is dead before the backward's is made.
TEST(FsdpTest, AtMostTwoCellsOfGatheredWeightsLive) {
  const int layers = 3;
  const Step s = plan_step(hardware("[4, 1]") + transformer(layers, "sgd") + "strategy: {name: fsdp}\n");
  EXPECT_EQ(most_cells_with_gathered_copies_live(s.plan.programs[0], layers), 2u);
}

// The same with values offloaded to the host (workload.remat: qkv_proj_offloaded): each layer's queries, keys and
// values come back from host memory one layer ahead of the backward ops that read them, and those reloads are not
// where the layer starts: the gathers stay one cell ahead (two cells' copies live at most), not two.
TEST(FsdpTest, OffloadedValuesReloadedAheadDoNotMoveTheGathersFurtherAhead) {
  const int layers = 3;
  const Step s = fsdp_with_remat(layers, "qkv_proj_offloaded");
  const Program& p = s.plan.programs[0];
  int reloads = 0;
  for (OpId id : p.order) reloads += p.graph.op(id).kind == OpKind::FromHost ? 1 : 0;
  EXPECT_EQ(reloads, 3 * layers);  // queries, keys and values of each layer
  EXPECT_EQ(most_cells_with_gathered_copies_live(p, layers), 2u);
  expect_reproduces_the_step(s);
}

// With re-materialization (workload.remat: full), the forward ops a layer recomputes during the backward pass read
// the backward pass's gathered copy: the forward's copy dies after the forward pass as without remat (no more
// gathers: the same two per weight the backward reads), and at most two cells' copies are live at once.
TEST(FsdpTest, RecomputedOpsReadTheBackwardCopy) {
  const int layers = 3;
  const Step s = fsdp_with_remat(layers, "full");
  const Program& p = s.plan.programs[0];
  int recomputed_readers = 0;
  std::map<std::string, int> gathers;
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (op.kind != OpKind::AllGather) continue;
    ++gathers[op.name.substr(0, op.name.rfind('/'))];
    bool forward = false, backward = false;
    for (OpId c : p.graph.consumers(op.outputs.front())) {
      const Op& r = p.graph.op(c);
      const bool in_backward = r.phase == Phase::Backward || r.recompute;
      (in_backward ? backward : forward) = true;
      recomputed_readers += r.recompute ? 1 : 0;
    }
    EXPECT_FALSE(forward && backward) << op.name << ": one copy read by both passes";
  }
  EXPECT_GT(recomputed_readers, 0);
  // Recomputing a layer's forward also reads its layer norms' betas and FFN's b1 (their outputs feed ops the
  // backward differentiates); not b2, whose sum only goes on into the residual stream.
  auto ends = [](const std::string& n, const std::string& x) {
    return n.size() > x.size() && n.compare(n.size() - x.size(), x.size(), x) == 0;
  };
  for (const TParam& tp : transformer_params(layers)) {
    const bool recomputed = tp.cell >= 1 && tp.cell <= layers && (ends(tp.name, ".beta") || ends(tp.name, ".ffn.b1"));
    EXPECT_EQ(gathers[tp.name], tp.read_backward || recomputed ? 2 : 1) << tp.name;
  }
  expect_reproduces_the_step(s);
}

// ---- prefetch order --------------------------------------------------------------------------------------------

// The gathers of cell c_(k+1) are issued one cell ahead in each pass: after the last op of c_(k-1) in that pass and
// before the first op of c_k, and each waits (a control dependency) for an op of c_(k-1), so that it overlaps c_k's
// compute. Forward the cells run 0 (embedding), 1, 2 (layers), 3 (head); backward 3, 2, 1 (the embedding's backward
// reads no weight).
TEST(FsdpTest, NextLayersGathersAreIssuedBeforeThisLayersCompute) {
  const int layers = 2;
  const Step s = plan_step(hardware("[4, 1]") + transformer(layers, "sgd") + "strategy: {name: fsdp}\n");
  const Program& p = s.plan.programs[0];
  std::map<std::string, int> cell_of;
  for (const TParam& tp : transformer_params(layers)) cell_of[tp.name] = tp.cell;
  auto pass_of = [](Phase ph) { return ph == Phase::Backward ? 1 : 0; };
  // First and last compute op of each cell per pass; the gathers of each cell per pass (the pass of their readers).
  std::map<std::pair<int, int>, size_t> first, last;
  std::map<std::pair<int, int>, std::vector<OpId>> gathers;
  for (size_t i = 0; i < p.order.size(); ++i) {
    const Op& op = p.graph.op(p.order[i]);
    if (op.kind == OpKind::AllGather) {
      const OpId reader = p.graph.consumers(op.outputs.front()).front();
      gathers[{pass_of(p.graph.op(reader).phase), cell_of.at(op.name.substr(0, op.name.rfind('/')))}].push_back(p.order[i]);
      continue;
    }
    if (is_communication(op.kind) || op.cell < 0 || op.phase == Phase::Optimizer) continue;
    const std::pair<int, int> key{pass_of(op.phase), op.cell};
    if (!first.count(key)) first[key] = i;
    last[key] = i;
  }
  std::vector<size_t> at(p.graph.num_ops());
  for (size_t i = 0; i < p.order.size(); ++i) at[p.order[i]] = i;
  const std::vector<std::vector<int>> cells = {{0, 1, 2, 3}, {3, 2, 1}};
  int checked = 0;
  for (int pass = 0; pass < 2; ++pass) {
    const std::vector<int>& seq = cells[pass];
    ASSERT_EQ(gathers.count({pass, 0}), pass == 0 ? 1u : 0u);
    for (size_t k = 0; k + 1 < seq.size(); ++k) {
      SCOPED_TRACE("pass " + std::to_string(pass) + ", cell " + std::to_string(seq[k + 1]));
      const std::vector<OpId>& g = gathers.at({pass, seq[k + 1]});
      ASSERT_FALSE(g.empty());
      for (OpId o : g) {
        EXPECT_LT(at[o], first.at({pass, seq[k]}));
        if (k == 0) continue;
        EXPECT_GT(at[o], last.at({pass, seq[k - 1]}));
        bool waits = false;
        for (OpId q : p.graph.predecessors(o)) waits = waits || p.graph.op(q).cell == seq[k - 1];
        EXPECT_TRUE(waits) << p.graph.op(o).name;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20);
  expect_reproduces_the_step(s);
}

// ---- errors ----------------------------------------------------------------------------------------------------

TEST(FsdpTest, WeightUpdateShardingOnTopIsAnError) {
  try {
    plan_step(hardware("[4, 1]") + mlp("sgd") +
              "strategy: {name: [data_parallel, fsdp], weight_update_sharding: true}\n"
              "mesh: {axes: [data, fsdp], shape: [2, 2]}\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("weight-update sharding"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("plan.yaml:"), std::string::npos) << e.what();
  }
}

// strategy.fsdp_algorithm names the algorithm of every gather and reduce-scatter fsdp causes; a name that is not an
// algorithm for both is an error at its key, listing those that are.
TEST(FsdpTest, AlgorithmOfTheGathersAndReduceScatters) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("sgd") + "strategy: {name: fsdp, fsdp_algorithm: ring}\n");
  int named = 0;
  const Program& p = s.plan.programs[0];
  for (OpId id : p.order) {
    const Op& op = p.graph.op(id);
    if (op.kind != OpKind::AllGather && op.kind != OpKind::ReduceScatter) continue;
    EXPECT_EQ(op.attrs.algorithm, "ring") << op.name;
    ++named;
  }
  EXPECT_EQ(named, 6 + 2 + 6);  // 6 forward gathers, 2 backward, 6 reduce-scatters
  try {
    plan_step(hardware("[4, 1]") + mlp("sgd") + "strategy: {name: fsdp, fsdp_algorithm: direct}\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.err(), Err::UnknownAlgorithm);
    EXPECT_NE(e.message().find("valid: ring, torus"), std::string::npos) << e.message();
    EXPECT_EQ(e.key_path(), "strategy.fsdp_algorithm");
  }
}
// Inside pipeline stages ([pipeline, fsdp], GPipe with 2 micro-batches: units 0, 1 forward, 2, 3 backward), the
// gathers are issued one unit ahead: on the last stage (fc1 and the output layer) the backward pass's gathers of
// fc1.w and out.w come after unit 0's last op, wait for it (a control dependency), and precede unit 2's first op,
// so they overlap unit 1; one gathered copy per pass serves both micro-batches. The first stage's backward reads
// no weight (fc0's input is the batch).
TEST(FsdpTest, PipelineStagesGatherOneUnitAhead) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("sgd") +
                           "strategy: {name: [pipeline, fsdp], micro_batches: 2}\nmesh: {axes: [pipe, fsdp], shape: [2, 2]}\n");
  ASSERT_EQ(s.plan.programs.size(), 2u);
  const Program& p = s.plan.programs[1];
  const std::vector<int32_t>& unit = s.plan.pipeline.unit_of_op.at(1);
  size_t last0 = 0, first2 = p.order.size();
  for (size_t i = 0; i < p.order.size(); ++i) {
    if (unit[p.order[i]] == 0) last0 = i;
    if (unit[p.order[i]] == 2) first2 = std::min(first2, i);
  }
  std::vector<std::string> backward;
  for (size_t i = 0; i < p.order.size(); ++i) {
    const Op& op = p.graph.op(p.order[i]);
    if (op.kind != OpKind::AllGather) continue;
    bool read_backward = false;
    for (OpId c : p.graph.consumers(op.outputs.front())) read_backward = read_backward || p.graph.op(c).phase == Phase::Backward;
    if (!read_backward) continue;
    backward.push_back(op.name.substr(0, op.name.rfind('/')));
    EXPECT_GT(i, last0) << op.name;
    EXPECT_LT(i, first2) << op.name;
    bool waits = false;
    for (OpId q : p.graph.predecessors(p.order[i])) waits = waits || unit[q] == 0;
    EXPECT_TRUE(waits) << op.name;
  }
  EXPECT_EQ(sorted(backward), sorted({"fc1.w", "out.w"}));
  const Program& first = s.plan.programs[0];
  EXPECT_EQ(std::count_if(first.order.begin(), first.order.end(),
                          [&](OpId o) { return first.graph.op(o).kind == OpKind::AllGather; }),
            2);  // fc0.w and fc0.b, forward only
  expect_reproduces_the_step(s);
}
// Inside pipeline stages the gradients are accumulated over the micro-batches in their shards, as ZeRO-3 and FSDP
// accumulate: each micro-batch's gradient is reduce-scattered as soon as its backward op makes it, and the adds
// work on shards. Held whole until the last micro-batch, a stage's gradients would outweigh its sharded weights
// many times (GPT-3 175B over 8 stages x 128 fsdp chips: 164 GiB a chip). On the last stage (fc1, out), GPipe with
// 2 micro-batches over 2 fsdp chips: 2 reduce-scatters per parameter, each right after the op that makes its
// gradient, and no gradient ever whole after that.
TEST(FsdpTest, PipelineStagesAccumulateGradientsInTheirShards) {
  const Step s = plan_step(hardware("[4, 1]") + mlp("sgd") +
                           "strategy: {name: [pipeline, fsdp], micro_batches: 2}\nmesh: {axes: [pipe, fsdp], shape: [2, 2]}\n");
  const Program& p = s.plan.programs.at(1);
  std::vector<std::string> scatters;
  for (const std::string& c : collectives(p))
    if (c.rfind("reduce_scatter", 0) == 0) scatters.push_back(c);
  std::vector<std::string> want;
  for (const auto& [name, elements] : kMlpParams) {
    if (name.rfind("fc0", 0) == 0) continue;  // the first stage's
    for (int m : {0, 1})
      want.push_back(rs(name + ".grad/mb" + std::to_string(m), "fsdp", 0, elements * F32, elements * F32 / 2));
  }
  EXPECT_EQ(scatters, sorted(want));
  for (size_t i = 0; i < p.order.size(); ++i) {
    const Op& op = p.graph.op(p.order[i]);
    if (op.kind == OpKind::ReduceScatter) {  // issued right after the op that makes the gradient
      ASSERT_GT(i, 0u);
      EXPECT_EQ(p.order[i - 1], p.graph.producer(op.inputs.front())) << op.name;
    }
    if (op.name.find(".grad/accumulate") != std::string::npos) {  // adds of shards
      const std::string param = op.name.substr(0, op.name.find(".grad/"));
      const auto it = std::find_if(kMlpParams.begin(), kMlpParams.end(), [&](const auto& q) { return q.first == param; });
      ASSERT_NE(it, kMlpParams.end()) << op.name;
      EXPECT_EQ(p.graph.tensor(op.outputs.front()).elements(), it->second / 2) << op.name;
    }
  }
  expect_reproduces_the_step(s);
}
// strategy.fsdp_keep_gathered (FSDP's reshard_after_forward=False): one gather per parameter, its copy serving the
// backward pass too. The peak is then at the loss, with every gathered copy the backward pass still reads live:
// all the weight matrices and layer-norm gammas of every layer and the head, whole.
TEST(FsdpTest, KeepGatheredGathersOncePerStep) {
  const int layers = 3;
  const Step s = plan_step(hardware("[4, 1]") + transformer(layers, "adam") +
                           "strategy: {name: fsdp, fsdp_keep_gathered: true}\n");
  std::vector<std::string> want;
  double kept = 0;
  for (const TParam& p : transformer_params(layers)) {
    const double whole = static_cast<double>(p.elements) * F32;
    want.push_back(ag(p.name, "fsdp", 0, whole / 4, whole));
    want.push_back(rs(p.name + ".grad", "fsdp", 0, whole, whole / 4));
    if (p.read_backward) kept += whole;
  }
  want.push_back(ar("loss", "fsdp", F32));
  EXPECT_EQ(collectives(s.plan.programs[0]), sorted(want));
  EXPECT_EQ(memory(s).at_peak.temporaries, kept);
  expect_reproduces_the_step(s);
}
