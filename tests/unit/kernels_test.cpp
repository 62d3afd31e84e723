// Hand-checked values of a few kernels.
#include <gtest/gtest.h>

#include <cmath>

#include "workloads/builder.h"
#include "workloads/op_def.h"
#include "workloads/reference.h"

using namespace podsim;

namespace {

void set(TensorStore& s, TensorId id, std::vector<float> v) { s.get_mut(id).data = std::move(v); }

}  // namespace

TEST(KernelsTest, SoftmaxRowsSumToOneAndCausalMaskZeroesTheFuture) {
  ModelGraph g;
  GraphBuilder b(g, DType::F32);
  TensorId x = b.input("x", {1, 3, 3}, DType::F32);
  TensorId y = b.softmax(x, 1.0, true, "sm");
  TensorStore s;
  init_step_inputs(g, s, 1);
  set(s, x, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  run_reference(g, s);
  const auto& v = s.get(y).data;
  EXPECT_FLOAT_EQ(v[0], 1.0f);
  EXPECT_FLOAT_EQ(v[1], 0.0f);
  EXPECT_FLOAT_EQ(v[2], 0.0f);
  EXPECT_NEAR(v[3], 1 / (1 + std::exp(1.0)), 1e-6);
  EXPECT_FLOAT_EQ(v[5], 0.0f);
  EXPECT_NEAR(v[6] + v[7] + v[8], 1.0, 1e-6);
}

TEST(KernelsTest, LayerNormGivesZeroMeanUnitVariance) {
  ModelGraph g;
  GraphBuilder b(g, DType::F32);
  TensorId x = b.input("x", {2, 4}, DType::F32);
  TensorId y = b.layer_norm(x, b.param("g", {4}), b.param("b", {4}), "ln", 0);
  TensorStore s;
  init_step_inputs(g, s, 1);
  set(s, x, {1, 2, 3, 4, -3, 0, 3, 12});
  run_reference(g, s);
  for (int r = 0; r < 2; ++r) {
    double m = 0, v = 0;
    for (int j = 0; j < 4; ++j) m += s.get(y).data[r * 4 + j];
    for (int j = 0; j < 4; ++j) v += std::pow(s.get(y).data[r * 4 + j] - m / 4, 2);
    EXPECT_NEAR(m / 4, 0, 1e-6);
    EXPECT_NEAR(v / 4, 1, 1e-5);
  }
}

TEST(KernelsTest, AdamFirstStepMovesEachWeightByAboutTheLearningRate) {
  ModelGraph g;
  GraphBuilder b(g, DType::F32);
  TensorId w = b.param("w", {2, 3});
  TensorId x = b.input("x", {4, 2}, DType::F32);
  TensorId loss = b.softmax_cross_entropy(b.matmul(x, w, "mm"), b.label("labels", {4}), "loss");
  b.backward(loss);
  b.optimizer({Optimizer::Adam, 0.01});
  TensorStore s;
  init_step_inputs(g, s, 5);
  run_reference(g, s);
  const auto& before = s.get(w).data;
  const auto& after = s.get(g.find_tensor("w.new")).data;
  const auto& grad = s.get(b.grad_of(w)).data;
  for (size_t i = 0; i < before.size(); ++i)
    if (std::fabs(grad[i]) > 1e-4) {
      EXPECT_NEAR(before[i] - after[i], 0.01 * (grad[i] > 0 ? 1 : -1), 1e-4) << i;
    }
}

TEST(KernelsTest, Bf16MatmulRoundsItsInputs) {
  ModelGraph g;
  GraphBuilder b(g, DType::BF16);
  TensorId a = b.input("a", {1, 1}, DType::BF16);
  TensorId w = b.param("w", {1, 1});
  g.tensor(a).dtype = DType::BF16;
  TensorId c = b.matmul(a, w, "mm");
  TensorStore s;
  init_step_inputs(g, s, 1);
  set(s, a, {1.00390625f});  // 1 + 2^-8: not a bf16 value; rounds to 1 (ties to even)
  set(s, w, {3.0f});
  run_reference(g, s);
  EXPECT_FLOAT_EQ(s.get(c).data[0], 3.0f);
  EXPECT_FLOAT_EQ(round_bf16(1.01171875f), 1.015625f);  // 1 + 3 * 2^-8 rounds up to 1 + 2^-6
}

TEST(KernelsTest, CrossEntropyOfUniformLogitsIsLogClasses) {
  ModelGraph g;
  GraphBuilder b(g, DType::F32);
  TensorId logits = b.input("logits", {3, 7}, DType::F32);
  TensorId loss = b.softmax_cross_entropy(logits, b.label("labels", {3}), "loss");
  TensorStore s;
  init_step_inputs(g, s, 1);
  set(s, logits, std::vector<float>(21, 0.5f));
  run_reference(g, s);
  EXPECT_NEAR(s.get(loss).data[0], std::log(7.0), 1e-6);
}
