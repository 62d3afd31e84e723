// Per-role memory by category as summary.json reports it (`podsim run --memory-only`), against hand counts from the
// model's dimensions: the figures a user reads for a weight-update-sharded step and for the stages of a pipeline.
// tests/unit/plan_figures_test.cpp and pipeline_figures_test.cpp derive the same counts from the plans; this checks
// that they reach the summary.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
using nlohmann::json;

namespace {

// The MLP: batch B, input I, hidden H, classes C, fp32, every tensor in HBM (run.fusion: none).
constexpr double B = 16, I = 8, H = 32, C = 4, F32 = 4;

json memory_only(const std::string& name, const std::string& yaml) {
  const std::string exp = write_file(name + ".yaml", yaml);
  auto r = run_podsim({"run", exp, "--out", name, "--memory-only", "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  return json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

std::string mlp(int layers) {
  return "workload: {model: mlp, batch: 16, input: 8, hidden: 32, layers: " + std::to_string(layers) +
         ", classes: 4, dtype: fp32, optimizer: adam}\nrun: {fusion: none}\n";
}

}  // namespace

// Two hidden layers on 4 replicas with weight-update sharding and Adam (b = B / 4 rows each): the whole weights, a
// quarter of m and v; at the peak (the reduce-scatter of fc1's weight gradient as it starts) fc1's whole gradient and
// the quarter it writes, the quarters of the gradients already reduce-scattered, fc1's input gradient (b x H), and
// the batch shard, the loss and fc0's ReLU output (b x H, the mask of its ReLU's gradient; the biased value died as
// the ReLU read it).
TEST(MemoryFiguresTest, WeightUpdateShardingByCategory) {
  // One reduce-scatter per gradient (run.combine_threshold: 0): each gradient's partial sum is freed when its own
  // reduction is done.
  std::string w = mlp(2);
  w.replace(w.find("fusion: none"), 12, "fusion: none, combine_threshold: 0");
  const json s = memory_only("wus", "hardware: {preset: tpu-v3, pod: {dims: [4, 1]}}\n" + w +
                                        "strategy: {name: data_parallel, weight_update_sharding: true}\n");
  const double b = B / 4, params = I * H + H + H * H + H + H * C + C;
  const json& m = s["roles"][0]["memory_at_peak"];
  EXPECT_EQ(m["weights"].get<double>(), params * F32);
  EXPECT_EQ(m["optimizer_state"].get<double>(), 2 * params * F32 / 4);
  EXPECT_EQ(m["gradients"].get<double>(), (H * H + H * H / 4) * F32 + (H * C + C + H) * F32 / 4 + b * H * F32);
  EXPECT_EQ(m["activations"].get<double>(), (b * I + b + 1 + b * H) * F32);
  EXPECT_EQ(m["temporaries"].get<double>(), 0);
}

// Three hidden layers on 4 stages (one layer each, the output layer last): each role holds its own layer's weights
// and twice them in Adam's state, and nothing of the other stages.
TEST(MemoryFiguresTest, PipelineStagesHoldTheirOwnWeights) {
  const json s = memory_only("pipe", "hardware: {preset: tpu-v3, pod: {dims: [4, 1]}}\n" + mlp(3) +
                                         "strategy: {name: pipeline, micro_batches: 4}\n");
  const std::vector<double> weights = {(I * H + H) * F32, (H * H + H) * F32, (H * H + H) * F32, (H * C + C) * F32};
  ASSERT_EQ(s["roles"].size(), weights.size());
  for (size_t k = 0; k < weights.size(); ++k) {
    const json& r = s["roles"][k];
    EXPECT_EQ(r["role"], "stage" + std::to_string(k));
    EXPECT_EQ(r["memory_at_peak"]["weights"].get<double>(), weights[k]) << k;
    EXPECT_EQ(r["memory_at_peak"]["optimizer_state"].get<double>(), 2 * weights[k]) << k;
  }
}

// Five hidden layers and the output layer on 2 stages (three layers each), 4 micro-batches of b = B / 4 rows: each
// micro-batch's weight gradient is added into the running sum over micro-batches as soon as it is made, so at a
// stage's peak its gradients are the sums (one copy of the stage's weights) plus at most one layer's micro-batch
// gradient and the b x H activation gradients flowing through the layer (two of them). Holding each micro-batch's
// gradients until the end of its backward pass would keep two copies of the stage's weights.
TEST(MemoryFiguresTest, PipelineAccumulatesEachGradientAsItIsMade) {
  const json s = memory_only("accumulate", "hardware: {preset: tpu-v3, pod: {dims: [2, 1]}}\n" + mlp(5) +
                                               "strategy: {name: pipeline, micro_batches: 4}\n");
  const double b = B / 4, hidden = (H * H + H) * F32;
  const std::vector<double> weights = {(I * H + H) * F32 + 2 * hidden, 2 * hidden + (H * C + C) * F32};
  ASSERT_EQ(s["roles"].size(), weights.size());
  for (size_t k = 0; k < weights.size(); ++k) {
    const json& m = s["roles"][k]["memory_at_peak"];
    EXPECT_EQ(m["weights"].get<double>(), weights[k]) << k;
    EXPECT_GE(m["gradients"].get<double>(), weights[k]) << k;
    EXPECT_LE(m["gradients"].get<double>(), weights[k] + hidden + 2 * b * H * F32) << k;
  }
}
