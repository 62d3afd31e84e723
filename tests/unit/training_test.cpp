// Whole training steps on the reference executor: the loss decreases over a few steps, for the MLP and the
// Transformer, with SGD and Adam, in fp32 and bf16; the same seed gives bit-identical losses.
#include <gtest/gtest.h>

#include <cmath>

#include "sim/config/loader.h"
#include "workloads/i_workload.h"
#include "workloads/reference.h"

using namespace podsim;

namespace {

std::vector<double> losses(const std::string& workload_yaml, int steps, uint64_t seed = 3) {
  Experiment e = load_experiment_text("hardware: {preset: tpu-v3}\nworkload:\n" + workload_yaml, "t.yaml");
  ModelGraph g = WorkloadRegistry::instance().make(e.workload)->build(e.params);
  TensorStore s;
  init_step_inputs(g, s, seed);
  std::vector<double> out;
  for (int i = 0; i < steps; ++i) {
    run_reference(g, s);
    out.push_back(step_loss(g, s));
    apply_updates(g, s);
  }
  return out;
}

const char* kMlp = "  model: mlp\n  batch: 16\n  input: 12\n  hidden: 24\n  layers: 2\n  classes: 5\n";
const char* kTransformer = "  model: transformer\n  layers: 2\n  d_model: 16\n  d_ff: 32\n  heads: 2\n  vocab: 11\n"
                           "  seq_len: 6\n  batch: 2\n";

void expect_decreasing(const std::vector<double>& l) {
  ASSERT_EQ(l.size(), 5u);
  for (double v : l) EXPECT_TRUE(std::isfinite(v));
  EXPECT_LT(l.back(), l.front());
  for (size_t i = 1; i < l.size(); ++i) EXPECT_LE(l[i], l[i - 1] + 1e-6) << "step " << i;
}

}  // namespace

TEST(TrainingTest, MlpSgdFp32) { expect_decreasing(losses(std::string(kMlp) + "  dtype: fp32\n  learning_rate: 0.1\n", 5)); }
TEST(TrainingTest, MlpAdamBf16) {
  expect_decreasing(losses(std::string(kMlp) + "  optimizer: adam\n  learning_rate: 0.01\n", 5));
}
TEST(TrainingTest, MlpGelu) {
  expect_decreasing(losses(std::string(kMlp) + "  activation: gelu\n  dtype: fp32\n  learning_rate: 0.1\n", 5));
}
TEST(TrainingTest, TransformerAdamFp32) {
  expect_decreasing(losses(std::string(kTransformer) + "  dtype: fp32\n  learning_rate: 0.01\n", 5));
}
TEST(TrainingTest, TransformerSgdBf16) {
  expect_decreasing(losses(std::string(kTransformer) + "  optimizer: sgd\n  learning_rate: 0.5\n", 5));
}
TEST(TrainingTest, TransformerInitialLossIsNearLogVocab) {
  std::string fp32 = kTransformer;
  fp32 += "  dtype: fp32\n";
  double l = losses(fp32, 1)[0];
  EXPECT_NEAR(l, std::log(11.0), 1.0);
}
TEST(TrainingTest, SameSeedSameLossesBitForBit) {
  auto a = losses(kTransformer, 3, 9), b = losses(kTransformer, 3, 9), c = losses(kTransformer, 3, 10);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
}
