// workload.model: amoebanet (docs/model.md, "amoebanet"): trainable parameters equal the counts of
// ../shared/reference/cnn-models.md section 2 and are within 1 % of GPipe's Table 1, a cell's structure against the
// table by hand, a tiny AmoebaNet-D under data parallelism reproduces one chip, and bad input is refused at its key.
#include <gtest/gtest.h>

#include <cmath>

#include "plan_steps.h"
#include "tests/unit/load_errors.h"
#include "workloads/builder.h"
#include "workloads/op_def.h"
#include "tests/unit/finite_difference.h"

using namespace podsim;
using namespace podsim::plan_steps;

namespace {

std::string amoeba(const std::string& extra) {
  return "hardware:\n  preset: tpu-v3\nworkload:\n  model: amoebanet\n  batch: 2\n" + extra;
}

ModelGraph build(const std::string& yaml) {
  Experiment e = load_experiment_text(yaml, "exp.yaml", {});
  return WorkloadRegistry::instance().make(e.workload)->build(e.params);
}

int64_t parameters(const ModelGraph& g) {
  int64_t n = 0;
  for (const TensorInfo& t : g.tensors())
    if (t.role == TensorRole::Parameter) n += t.elements();
  return n;
}

// A tiny AmoebaNet-D: 64x64 images (the last cells' maps are 2x2: a batch norm of a 1x1 map over 2 examples would
// output +-1 whatever its input, and pass back no gradient to compare), 3 normal cells, 16 filters, fp32.
std::string tiny(int64_t batch, const std::string& extra) {
  return "workload: {model: amoebanet, cells: 3, filters: 16, image_size: 64, classes: 10, batch: " +
         std::to_string(batch) + ", dtype: fp32, optimizer: sgd" + extra + "}\n";
}

}  // namespace

TEST(AmoebaNetTest, ParameterCountsEqualTheReference) {
  // (L, D, counted in cnn-models.md (millions, two decimals), GPipe Table 1 (millions; 0: not in the table)).
  const struct {
    int L, D;
    double counted, gpipe;
  } expected[] = {{18, 208, 81.51, 82}, {18, 256, 122.47, 0}, {18, 416, 319.02, 318},
                  {18, 544, 542.73, 542}, {36, 544, 1055.83, 1050}, {72, 512, 1844.86, 1800}};
  for (const auto& e : expected) {
    const double n = static_cast<double>(parameters(build(amoeba(
        "  image_size: 32\n  cells: " + std::to_string(e.L) + "\n  filters: " + std::to_string(e.D) + "\n"))));
    EXPECT_NEAR(n / 1e6, e.counted, 0.005) << "(" << e.L << ", " << e.D << ")";
    // Within 1 %, or equal at the table's precision (1.8B: two significant digits, 1844.86M rounds to it).
    const double unit = e.gpipe >= 1000 ? 100 : 1;
    if (e.gpipe > 0) {
      EXPECT_TRUE(std::fabs(n / 1e6 - e.gpipe) / e.gpipe < 0.01 || std::round(n / 1e6 / unit) * unit == e.gpipe)
          << "(" << e.L << ", " << e.D << ")";
    }
  }
}

// The structure by hand for (3, 16) at 32x32: stem 16x16x4; reduction cells 8x8x(3*8), 4x4x(3*16); normal 4x4x64;
// reduction 2x2x96; normal 2x2x128; reduction 1x1x192; normal 1x1x256; the classifier reads 256 features.
TEST(AmoebaNetTest, CellShapesAndUnits) {
  const ModelGraph g = build(amoeba("  cells: 3\n  filters: 16\n  image_size: 32\n  classes: 10\n"));
  auto shape = [&](const std::string& n) { return g.tensor(g.find_tensor(n)).shape; };
  EXPECT_EQ(shape("stem.bn"), (std::vector<int64_t>{2, 16, 16, 4}));
  EXPECT_EQ(shape("cell0.out"), (std::vector<int64_t>{2, 8, 8, 24}));
  EXPECT_EQ(shape("cell1.out"), (std::vector<int64_t>{2, 4, 4, 48}));
  EXPECT_EQ(shape("cell2.out"), (std::vector<int64_t>{2, 4, 4, 64}));
  EXPECT_EQ(shape("cell3.out"), (std::vector<int64_t>{2, 2, 2, 96}));
  EXPECT_EQ(shape("cell4.out"), (std::vector<int64_t>{2, 2, 2, 128}));
  EXPECT_EQ(shape("cell5.out"), (std::vector<int64_t>{2, 1, 1, 192}));
  EXPECT_EQ(shape("cell6.out"), (std::vector<int64_t>{2, 1, 1, 256}));
  EXPECT_EQ(shape("fc.w"), (std::vector<int64_t>{256, 10}));
  // prev_prev of cell1 (the stem, 16x16) is reduced by a factorized reduction into two 1x1/2 paths of c/2 = 8.
  EXPECT_EQ(shape("cell1.pre1.path1.w"), (std::vector<int64_t>{1, 1, 4, 8}));
  EXPECT_EQ(shape("cell1.pre1.path2"), (std::vector<int64_t>{2, 8, 8, 8}));
  // Units: stem 0, cells 1..7, classifier 8; every forward op has one.
  int32_t last = -1;
  for (const Op& op : g.ops()) {
    if (op.phase == Phase::Forward) {
      EXPECT_GE(op.cell, 0) << op.name;
    }
    last = std::max(last, op.cell);
  }
  EXPECT_EQ(last, 8);
  EXPECT_EQ(g.op(g.producer(g.find_tensor("cell6.out"))).cell, 7);
  EXPECT_EQ(g.op(g.producer(g.find_tensor("stem.conv"))).cell, 0);
}

TEST(AmoebaNetTest, DataParallelReproducesOneChip) {
  // Batch norm over each replica's 2 examples (bn_batch 2): the single-device reference normalizes the same groups.
  const Step s = plan_step(hardware("[2, 1]") + tiny(4, ", bn_batch: 2") +
                           "strategy: {name: data_parallel}\nmesh: {axes: [data], shape: [2]}\n");
  expect_reproduces_the_step(s);
}

TEST(AmoebaNetTest, BadInputIsRefusedAtItsKey) {
  expect_load_error(amoeba("  cells: 10\n"), Err::NotDivisible, 6, "not a multiple of 3");
  expect_load_error(amoeba("  filters: 100\n"), Err::NotDivisible, 6, "not a multiple of 8");
  expect_load_error(amoeba("  image_size: 48\n"), Err::NotDivisible, 6, "not a multiple of 32");
  expect_load_error(amoeba("  bn_batch: 3\n"), Err::NotDivisible, 6, "does not divide workload.batch");
  // Under a pipeline a group lies within one micro-batch (batch 8 in 4 micro-batches of 2).
  expect_load_error("hardware:\n  preset: tpu-v3\n  pod: {dims: [2, 1]}\nworkload:\n  model: amoebanet\n  batch: 8\n"
        "  bn_batch: 4\nstrategy:\n  name: pipeline\n  micro_batches: 4\n",
        Err::NotDivisible, 7, "micro-batch of 2 examples");
}

// The two ops the cells add to the convolutional ones: channel concatenation (forward by hand, gradient against
// central differences) and the factorized reduction's shifted path (a 1x1/2 convolution with padding -1 before and
// +1 after reads pixel (2i + 1, 2j + 1)).
TEST(AmoebaNetTest, ConcatAndShiftedConvolution) {
  ModelGraph g("ops");
  GraphBuilder b(g, DType::F32);
  TensorId x = b.param("x", {2, 4, 4, 3}), w = b.param("w", {1, 1, 3, 2}), y = b.param("y", {2, 2, 2, 2});
  OpAttrs::Window shifted;
  shifted.sh = shifted.sw = 2;
  shifted.pt = shifted.pl = -1;
  shifted.pb = shifted.pr = 1;
  TensorId c = b.conv2d(x, w, shifted, "shifted");
  ASSERT_EQ(g.tensor(c).shape, (std::vector<int64_t>{2, 2, 2, 2}));
  TensorId cat = b.concat({c, y}, "cat");
  ASSERT_EQ(g.tensor(cat).shape, (std::vector<int64_t>{2, 2, 2, 4}));
  TensorId loss = b.softmax_cross_entropy(b.reshape(cat, {8, 4}, "flat"), b.label("labels", {8}), "loss");
  b.backward(loss);
  TensorStore s;
  init_step_inputs(g, s, 3);
  for (TensorId p : {x, w, y})
    for (size_t e = 0; e < s.get(p).data.size(); ++e) s.get_mut(p).data[e] = static_cast<float>(std::sin(1.7 * static_cast<double>(e) + p));
  run_reference(g, s);
  const Tensor &X = s.get(x), &W = s.get(w), &Y = s.get(y), &C = s.get(cat);
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 2; ++j)
        for (int64_t k = 0; k < 4; ++k) {
          double want = 0;
          if (k < 2)
            for (int64_t ci = 0; ci < 3; ++ci)
              want += X.data[static_cast<size_t>(((n * 4 + 2 * i + 1) * 4 + 2 * j + 1) * 3 + ci)] *
                      W.data[static_cast<size_t>(ci * 2 + k)];
          else
            want = Y.data[static_cast<size_t>(((n * 2 + i) * 2 + j) * 2 + k - 2)];
          EXPECT_NEAR(C.data[static_cast<size_t>(((n * 2 + i) * 2 + j) * 4 + k)], want, 1e-5);
        }
  auto loss_of = [&] {
    for (OpId id : g.topological_order())
      if (g.op(id).phase == Phase::Forward || g.op(id).phase == Phase::Loss) run_op(g, g.op(id), s);
    return static_cast<double>(s.get(loss).data[0]);
  };
  for (TensorId p : {x, w, y})
    EXPECT_GT(expect_gradient(s.get(b.grad_of(p)).data, s.get_mut(p).data, loss_of, {.abs = 2e-4}, g.tensor(p).name),
              0);
}

// GPipe over a tiny AmoebaNet-D: 4 stages, 2 micro-batches of 2 examples, with and without re-materialization.
// GPipe normalizes each micro-batch: the reference is the single-device step with batch-norm groups of one
// micro-batch (bn_batch = batch / micro_batches = 2), which is what each stage computes on a micro-batch.
TEST(AmoebaNetTest, PipelineReproducesOneChipWithAndWithoutRemat) {
  for (const char* remat : {"false", "true"}) {
    SCOPED_TRACE(remat);
    const Step s = plan_step(hardware("[4, 1]") + tiny(4, ", bn_batch: 2") +
                             "strategy: {name: pipeline, micro_batches: 2, remat: " + remat + "}\n");
    ASSERT_EQ(s.plan.pipeline.stages, 4);
    // The units (stem 0, cells 1..7, classifier 8) cut into contiguous stages covering them all.
    std::vector<int32_t> all;
    for (const auto& cells : s.plan.pipeline.cells) all.insert(all.end(), cells.begin(), cells.end());
    EXPECT_EQ(all, (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
    expect_reproduces_the_step(s);
  }
}

// Without bn_batch, a pipelined AmoebaNet normalizes each micro-batch (GPipe): the same step as bn_batch = 2.
TEST(AmoebaNetTest, PipelineNormalizesEachMicroBatch) {
  const Step s = plan_step(hardware("[2, 1]") + tiny(4, "") + "strategy: {name: pipeline, micro_batches: 2}\n");
  const Op& stats = s.graph.op(s.graph.producer(s.graph.find_tensor("stem.bn.mean")));
  EXPECT_EQ(stats.attrs.count, 2);
  expect_reproduces_the_step(s);
}

// The stages are balanced by estimated cost: over two stages the cut the pipeline picks has the smallest largest
// stage (and so, with the total fixed, the smallest variance, GPipe's criterion) of every cut, each planned here with
// strategy.stage_boundaries.
TEST(AmoebaNetTest, PipelineStagesAreCostBalanced) {
  const std::string base = hardware("[2, 1]") + tiny(4, ", bn_batch: 2") + "strategy: {name: pipeline, micro_batches: 2";
  const Step balanced = plan_step(base + "}\n");
  const auto& sec = balanced.plan.pipeline.stage_seconds;
  ASSERT_EQ(sec.size(), 2u);
  double best = 1e300;
  int64_t best_cut = -1;
  for (int64_t cut = 1; cut <= 8; ++cut) {
    const Step s = plan_step(base + ", stage_boundaries: [" + std::to_string(cut) + "]}\n");
    const double worst = std::max(s.plan.pipeline.stage_seconds[0], s.plan.pipeline.stage_seconds[1]);
    if (worst < best) best = worst, best_cut = cut;
  }
  EXPECT_DOUBLE_EQ(std::max(sec[0], sec[1]), best);
  EXPECT_EQ(balanced.plan.pipeline.cells[1].front(), best_cut);
}
