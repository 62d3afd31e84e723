// The figures of pipelines, against hand counts written here from the model's dimensions (tests/unit/plan_figures.h):
// the transfers between stages (bytes per micro-batch each way), the order in which each stage runs its
// micro-batches under GPipe and 1F1B, the activations, weights and gradients a stage holds at its peak, and a
// pipeline composed with data parallelism.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "tests/unit/plan_figures.h"

using namespace podsim;
using namespace podsim::plan_steps;
using namespace podsim::plan_models;

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

// The activations a stage holds at its peak, from one micro-batch's by hand (b rows). What a micro-batch leaves on a
// stage until its backward: on stage 0 its slice of the batch (b x I, read by fc0's weight gradient) and fc0's ReLU
// output (b x H, the mask of the ReLU's gradient; its biased value dies as the ReLU reads it); on stages 1 and 2 the
// received input (b x H, read by the weight gradient) and the ReLU output; on the last stage the received input, its
// labels (b), the logits (b x C) and each row's max and sum of exponentials (2 b), which the loss's gradient reads,
// and its loss (one value, added to the step's). At the peak a micro-batch's forward is one value further: fc<k>'s output (b x H) on
// the first three stages; on the last, the output layer's bias add, its matmul's output (b x C) and the logits
// (b x C) live, the rows' max, sum and loss not yet made. Besides, stage 0 holds the whole batch (B x I) and the last stage all labels (B). GPipe holds all M
// micro-batches at once; 1F1B holds K - k on stage k (its forwards ahead plus the one in flight), and the last stage
// the previous micro-batch's loss until it is added.
TEST(PlanFiguresTest, PipelineStagesHoldTheirMicroBatchesActivations) {
  const int64_t M = 8, b = 4, batch = M * b;
  const double x = b * I * F32, h = b * H * F32;
  const double last = (3 * b + b * H + b * C + 1) * F32;  // the last stage's per micro-batch
  auto held = [&](int64_t k, int64_t n, bool one_f_one_b) {
    if (k == 0) return batch * I * F32 + n * (x + h) + h;
    if (k < K - 1) return (2 * n + 1) * h;
    return batch * F32 + (n - 1) * last + (b + b * H + 2 * b * C) * F32 + (one_f_one_b ? F32 : 0);
  };
  const Step gpipe = plan_step(pipeline("gpipe", M, false, batch));
  const Step one = plan_step(pipeline("1f1b", M, false, batch));
  for (int64_t k = 0; k < K; ++k) {
    SCOPED_TRACE("stage " + std::to_string(k));
    EXPECT_EQ(activation_peak(gpipe, static_cast<size_t>(k)), held(k, M, false));
    EXPECT_EQ(activation_peak(one, static_cast<size_t>(k)), held(k, K - k, true));
  }
}

// Re-materialization (GPipe): a middle stage keeps only what it received for each micro-batch (b x H), and two
// values of one micro-batch's layer at a time: at the last forward's bias add its matmul output and biased value,
// and likewise in each recomputation (then the biased value and the recomputed ReLU output the ReLU's gradient
// reads): (M + 2) b x H instead of (2M + 1) b x H.
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
