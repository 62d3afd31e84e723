// The default tolerances of `podsim compare` (workloads/compare_rules.h): which precision and measure each tensor
// of a hand-built step gets, the bounds against their definitions (bf16's unit roundoff, a Poisson quantile summed
// here independently), and judgements of hand-made tensors whose errors are computed by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "workloads/builder.h"
#include "workloads/compare_rules.h"

using namespace podsim;

namespace {

// x[4, 3] @ w[3, 2] + b -> softmax cross-entropy, with `dtype` parameters and activations.
ModelGraph tiny_step(DType dtype, Optimizer opt) {
  ModelGraph g("tiny");
  GraphBuilder b(g, dtype);
  TensorId x = b.input("x", {4, 3}, dtype);
  TensorId labels = b.label("labels", {4});
  TensorId w = b.param("w", {3, 2});
  TensorId bias = b.param("b", {2});
  TensorId logits = b.bias_add(b.matmul(x, w, "fc"), bias, "fc.bias");
  TensorId loss = b.softmax_cross_entropy(logits, labels, "loss");
  b.backward(loss);
  b.optimizer({opt, 0.01});
  return g;
}

std::map<std::string, TensorRule> by_file(const ModelGraph& g) {
  std::map<std::string, TensorRule> m;
  for (const TensorRule& r : compare_rules(g)) m[r.file] = r;
  return m;
}

Tensor tensor(std::vector<float> v) {
  Tensor t({static_cast<int64_t>(v.size())});
  t.data = std::move(v);
  return t;
}

// P(K > k) for K ~ Poisson(lambda), by the recurrence p(k) = p(k - 1) lambda / k in long double (its range holds
// e^-4096).
long double poisson_tail(long double lambda, int64_t k) {
  long double p = std::exp(-lambda), cdf = p;
  for (int64_t i = 1; i <= k; ++i) {
    p *= lambda / static_cast<long double>(i);
    cdf += p;
  }
  return 1 - cdf;
}

}  // namespace

TEST(CompareRulesTest, Bf16StepIsJudgedAtBf16ThroughoutAndUpdatesAgainstTheirStep) {
  auto r = by_file(tiny_step(DType::BF16, Optimizer::Adam));
  // Stored in bf16 and computed in it.
  EXPECT_EQ(r.at("w.grad").precision, DType::BF16);
  EXPECT_EQ(r.at("w.grad").measure, Measure::Norm);
  // Stored in fp32 but computed from bf16 values: the loss, Adam's m and v.
  for (const char* f : {"loss", "w.m.new", "w.v.new"}) {
    EXPECT_EQ(r.at(f).dtype, DType::F32) << f;
    EXPECT_EQ(r.at(f).precision, DType::BF16) << f;
    EXPECT_EQ(r.at(f).measure, Measure::Norm) << f;
  }
  // Step inputs keep their own type: the labels are exact integers (no rounding), the state starts as fp32 zeros.
  EXPECT_EQ(r.at("labels").precision, DType::F32);
  EXPECT_EQ(r.at("w.m").precision, DType::F32);
  EXPECT_EQ(r.at("w").precision, DType::BF16);
  // The updated parameters, against Adam's step.
  for (const char* f : {"w.new", "b.new"}) {
    EXPECT_EQ(r.at(f).measure, Measure::AdamStep) << f;
    EXPECT_DOUBLE_EQ(r.at(f).learning_rate, 0.01) << f;
    EXPECT_EQ(r.at(f).precision, DType::BF16) << f;
  }
}

TEST(CompareRulesTest, Fp32StepIsJudgedAtFp32AndSgdAgainstItsGradient) {
  auto r = by_file(tiny_step(DType::F32, Optimizer::Sgd));
  for (const auto& [file, rule] : r) EXPECT_EQ(rule.precision, DType::F32) << file;
  EXPECT_EQ(r.at("w.new").measure, Measure::SgdStep);
  EXPECT_EQ(r.at("w.new").gradient, "w.grad");
  EXPECT_EQ(r.count("w.m.new"), 0u);
}

TEST(CompareRulesTest, BoundsFollowTheirDefinitions) {
  EXPECT_DOUBLE_EQ(precision_tolerance(DType::F32), 1e-5);
  EXPECT_DOUBLE_EQ(precision_tolerance(DType::BF16), 16 * std::ldexp(1.0, -8));  // 16 units of bf16's roundoff
  // The allowed reversals: the smallest k with P(K > k) <= 1e-3 for a mean of tau * n, and at least 1.
  for (auto [dtype, n] : std::vector<std::pair<DType, int64_t>>{
           {DType::BF16, 1}, {DType::BF16, 32}, {DType::BF16, 256}, {DType::BF16, 1024}, {DType::BF16, 16000},
           {DType::F32, 10}, {DType::F32, 1600}, {DType::F32, 65536}, {DType::F32, 1 << 20}}) {
    const long double lambda = precision_tolerance(dtype) * static_cast<double>(n);
    const int64_t k = allowed_reversals(dtype, n);
    EXPECT_LE(poisson_tail(lambda, k), 1e-3L) << dtype_name(dtype) << " n = " << n;
    if (k > 1) {
      EXPECT_GT(poisson_tail(lambda, k - 1), 1e-3L) << dtype_name(dtype) << " n = " << n;
    }
    EXPECT_DOUBLE_EQ(adam_step_bound(dtype, n), 2 * std::sqrt(static_cast<double>(k) / static_cast<double>(n)));
  }
  // Hand-summed: a mean of 2 (bf16, 32 elements) stays within 7 with probability 0.99890 and within 8 with 0.99976.
  EXPECT_EQ(allowed_reversals(DType::BF16, 32), 8);
  EXPECT_EQ(allowed_reversals(DType::F32, 10), 1);  // a mean of 1e-4 allows none, the floor one
  // Above a mean of 1000 a normal approximation, never below the true quantile and at most 3 above it.
  const int64_t big = int64_t(1) << 16;  // bf16: a mean of 4096
  const int64_t k = allowed_reversals(DType::BF16, big);
  EXPECT_LE(poisson_tail(4096.0L, k), 1e-3L);
  EXPECT_GT(poisson_tail(4096.0L, k - 3), 1e-3L);
}

TEST(CompareRulesTest, AdamUpdatesPassRareReversalsAndFailSystematicOnes) {
  TensorRule rule;
  rule.measure = Measure::AdamStep;
  rule.learning_rate = 0.01;
  rule.precision = DType::BF16;
  // 1024 elements moved by lr each; a full step has norm lr * 32.
  std::vector<float> ref(1024), got(1024);
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = got[i] = (i % 2 ? 0.5f : -0.5f) - 0.01f;
  // Reversed in 10 elements: error sqrt(10) * 2 lr / (32 lr) = 0.198; bf16 allows 64 + quantile margin.
  for (int i = 0; i < 10; ++i) got[i] += 0.02f;
  Judgement j = judge(rule, tensor(got), tensor(ref), nullptr);
  EXPECT_NEAR(j.error, std::sqrt(10.0) * 2 / 32, 1e-5);
  EXPECT_TRUE(j.pass);
  EXPECT_DOUBLE_EQ(j.bound, adam_step_bound(DType::BF16, 1024));
  // Reversed everywhere (the step taken the wrong way): error 2.
  for (size_t i = 0; i < got.size(); ++i) got[i] = ref[i] + 0.02f;
  j = judge(rule, tensor(got), tensor(ref), nullptr);
  EXPECT_NEAR(j.error, 2, 1e-5);
  EXPECT_FALSE(j.pass);
  // In fp32 the same 10 reversals fail (a mean of 0.01 reversals in 1024 elements allows one); a single element
  // moved by 1.5 lr passes (a gradient of about eps, so partly reversed: error 0.015 / 0.32 = 0.047 of 0.0625).
  rule.precision = DType::F32;
  for (size_t i = 0; i < got.size(); ++i) got[i] = ref[i] + (i < 10 ? 0.02f : 0.0f);
  EXPECT_FALSE(judge(rule, tensor(got), tensor(ref), nullptr).pass);
  for (size_t i = 0; i < got.size(); ++i) got[i] = ref[i] + (i < 1 ? 0.015f : 0.0f);
  j = judge(rule, tensor(got), tensor(ref), nullptr);
  EXPECT_DOUBLE_EQ(j.bound, 0.0625);
  EXPECT_TRUE(j.pass) << j.error;
}

TEST(CompareRulesTest, NormAndSgdErrorsByHand) {
  TensorRule norm;
  norm.precision = DType::F32;
  // ||(3, 4) - (0, 0)|| / ||(3, 4)|| = 1; a zero reference compares absolutely.
  Judgement j = judge(norm, tensor({0, 0}), tensor({3, 4}), nullptr);
  EXPECT_DOUBLE_EQ(j.error, 1);
  EXPECT_FALSE(j.pass);
  EXPECT_DOUBLE_EQ(judge(norm, tensor({3, 4}), tensor({0, 0}), nullptr).error, 5);
  EXPECT_FALSE(judge(norm, tensor({NAN, 4}), tensor({3, 4}), nullptr).pass);
  EXPECT_FALSE(judge(norm, tensor({3, 4, 5}), tensor({3, 4}), nullptr).pass);
  // SGD: against lr ||g||: lr 0.1, g = (3, 4), so a step of norm 0.5; an error of 0.005 is 1 %.
  TensorRule sgd = norm;
  sgd.measure = Measure::SgdStep;
  sgd.learning_rate = 0.1;
  sgd.precision = DType::BF16;
  const Tensor g = tensor({3, 4});
  j = judge(sgd, tensor({1.005f, 2}), tensor({1, 2}), &g);
  EXPECT_EQ(j.measure, Measure::SgdStep);
  EXPECT_NEAR(j.error, 0.01, 1e-6);
  EXPECT_TRUE(j.pass);
  // Without the reference's gradient, the relative norm error.
  j = judge(sgd, tensor({1.005f, 2}), tensor({1, 2}), nullptr);
  EXPECT_EQ(j.measure, Measure::Norm);
  EXPECT_NEAR(j.error, 0.005 / std::sqrt(5.0), 1e-6);
}

// SGD's new parameter is rounded to its type's grid: a step far smaller than the parameter (lr 1e-4 on weights of 1)
// is resolved to one unit in the last place, so two correct runs may differ by that ulp (2^-23 at 1 in fp32). The
// bound adds the rounding, 2 u ||w'|| / (lr ||g||), by hand: 1e-5 + 2 * 2^-24 * sqrt(2) / (1e-4 * sqrt(2)). A step
// in the wrong direction (error 2) still fails.
TEST(CompareRulesTest, SgdStepBelowTheParameterGridIsJudgedWithItsRounding) {
  TensorRule sgd;
  sgd.measure = Measure::SgdStep;
  sgd.learning_rate = 1e-4;
  sgd.precision = DType::F32;
  sgd.dtype = DType::F32;
  const Tensor g = tensor({1, 1});
  const Tensor reference = tensor({1, 1});
  const double bound = 1e-5 + 2 * std::ldexp(1.0, -24) * std::sqrt(2.0) / (1e-4 * std::sqrt(2.0));
  Judgement j = judge(sgd, tensor({1.0f + std::ldexp(1.0f, -23), 1}), reference, &g);
  EXPECT_NEAR(j.bound, bound, 1e-12);
  EXPECT_NEAR(j.error, std::ldexp(1.0, -23) / (1e-4 * std::sqrt(2.0)), 1e-9);  // 8.4e-4: one ulp in one element
  EXPECT_TRUE(j.pass);
  EXPECT_NEAR(sgd_step_bound(DType::F32, DType::F32, std::sqrt(2.0), 1e-4 * std::sqrt(2.0)), bound, 1e-12);
  j = judge(sgd, tensor({1 + 2e-4f, 1 + 2e-4f}), reference, &g);  // the step taken the wrong way: 2 lr g apart
  EXPECT_NEAR(j.error, 2, 1e-3);
  EXPECT_FALSE(j.pass);
  // bf16 storage: its grid is 2^16 times coarser.
  sgd.dtype = DType::BF16;
  EXPECT_NEAR(judge(sgd, reference, reference, &g).bound, 1e-5 + 2 * std::ldexp(1.0, -8) * std::sqrt(2.0) /
                                                                     (1e-4 * std::sqrt(2.0)), 1e-9);
}

TEST(CompareRulesTest, FileStemsAreThoseRunsWrite) {
  EXPECT_EQ(tensor_file_stem("layer0.attn.q.w.grad"), "layer0.attn.q.w.grad");
  EXPECT_EQ(tensor_file_stem("a/all_reduce[data]#3"), "a_all_reduce_data__3");
}

// Each bound of `podsim compare` at its edge: an error 3 % under it passes and 3 % over it fails. The relative norm
// error in fp32 (1e-5) and in bf16 (16 units of its roundoff, 16 x 2^-8); Adam's step in bf16 over 32 elements
// (8 reversals allowed, hand-summed in BoundsFollowTheirDefinitions: 2 sqrt(8 / 32) = 1 full step); SGD's step in
// fp32 (1e-5, plus the rounding of the stored parameter: 2 x 2^-24 ||w'|| / (lr ||g||)). Which bound each
// optimizer's new parameter gets: Adam's step, SGD's step, and for momentum, LARS and RMSProp the relative norm
// error of the new parameter.
TEST(CompareRulesTest, EachBoundAtItsEdge) {
  // The error on one element of a reference whose norm is `norm`: `e` in units of `scale`.
  auto off = [](std::vector<float> ref, double e, double scale) {
    ref[0] = static_cast<float>(ref[0] + e * scale);
    return tensor(ref);
  };
  const std::vector<float> ref = {0.75f, -1.0f};  // norm 1.25
  for (auto [dtype, bound] : {std::pair<DType, double>{DType::F32, 1e-5}, {DType::BF16, 16 * std::ldexp(1.0, -8)}}) {
    TensorRule norm;
    norm.precision = dtype;
    EXPECT_TRUE(judge(norm, off(ref, 0.97 * bound, 1.25), tensor(ref), nullptr).pass) << dtype_name(dtype);
    EXPECT_FALSE(judge(norm, off(ref, 1.03 * bound, 1.25), tensor(ref), nullptr).pass) << dtype_name(dtype);
  }

  TensorRule adam;
  adam.measure = Measure::AdamStep;
  adam.learning_rate = 0.01;
  adam.precision = DType::BF16;
  const std::vector<float> params(32, 0.5f);
  const double full_step = 0.01 * std::sqrt(32.0), adam_bound = 1;
  EXPECT_TRUE(judge(adam, off(params, 0.97 * adam_bound, full_step), tensor(params), nullptr).pass);
  EXPECT_FALSE(judge(adam, off(params, 1.03 * adam_bound, full_step), tensor(params), nullptr).pass);

  TensorRule sgd;
  sgd.measure = Measure::SgdStep;
  sgd.learning_rate = 0.1;
  sgd.precision = DType::F32;
  sgd.dtype = DType::F32;
  const Tensor grad = tensor({3, 4});                   // lr ||g|| = 0.5
  const std::vector<float> updated = {0.075f, -0.1f};  // ||w'|| = 0.125
  const double sgd_bound = 1e-5 + 2 * std::ldexp(1.0, -24) * 0.125 / 0.5;
  EXPECT_TRUE(judge(sgd, off(updated, 0.97 * sgd_bound, 0.5), tensor(updated), &grad).pass);
  EXPECT_FALSE(judge(sgd, off(updated, 1.03 * sgd_bound, 0.5), tensor(updated), &grad).pass);

  for (auto [opt, measure] : {std::pair{Optimizer::Adam, Measure::AdamStep}, {Optimizer::Sgd, Measure::SgdStep},
                              {Optimizer::Momentum, Measure::Norm}, {Optimizer::Lars, Measure::Norm},
                              {Optimizer::RmsProp, Measure::Norm}}) {
    for (DType dtype : {DType::F32, DType::BF16}) {
      const auto r = by_file(tiny_step(dtype, opt));
      EXPECT_EQ(r.at("w.new").measure, measure) << static_cast<int>(opt) << " " << dtype_name(dtype);
      EXPECT_EQ(r.at("w.new").precision, dtype) << static_cast<int>(opt) << " " << dtype_name(dtype);
    }
  }
}
