// How `podsim compare` judges a tensor of a numeric run against the same tensor of a reference run, by default:
// each tensor by the precision it was computed in, and a parameter an optimizer updated against the size of its
// step rather than its own size. The rules and the derivation of the bounds are in docs/strategies.md
// ("Tolerances"); tests/unit/compare_rules_test.cpp checks them on hand-built steps.
//
//   for (const TensorRule& r : compare_rules(graph)) ...            // one rule per tensor of the step
//   Judgement j = judge(rule, candidate, reference, reference_grad);  // error, bound, pass
#pragma once

#include <string>
#include <vector>

#include "workloads/graph.h"
#include "workloads/tensor.h"

namespace podsim {

// The bound on the relative norm error of a value computed in `precision`: 1e-5 for fp32, 2^-4 = 16 units of
// bf16's roundoff (2^-8) for bf16.
double precision_tolerance(DType precision);

enum class Measure : uint8_t {
  Norm,      // ||a - b|| / ||b|| (||a - b|| when b is 0); bound: the precision's tolerance
  AdamStep,  // a parameter Adam updated: ||a - b|| / (lr sqrt(n)), the norm of a full first step
  SgdStep,   // a parameter SGD updated: ||a - b|| / (lr ||g||), g the reference's gradient; bound: sgd_step_bound
};
const char* measure_name(Measure m);  // "norm", "adam step", "sgd step"

struct TensorRule {
  std::string file;  // the tensor's file under tensors/, without ".npy"
  DType dtype = DType::F32;      // what it is stored in
  DType precision = DType::F32;  // the narrowest floating type among it and every tensor it is computed from
  Measure measure = Measure::Norm;
  double learning_rate = 0;  // AdamStep, SgdStep
  std::string gradient;      // SgdStep: the gradient's file, read from the reference run
};

// One rule per tensor of the step, in tensor order.
std::vector<TensorRule> compare_rules(const ModelGraph& g);

struct Judgement {
  Measure measure = Measure::Norm;  // the rule's, or Norm when an SgdStep has no reference gradient
  double error = 0;                 // by that measure
  double bound = 0;
  bool pass = true;  // error <= bound, both tensors finite and of one shape
};

// Judges `got` against `reference` by `rule`. `reference_grad` is the reference's gradient for SgdStep (nullptr:
// the rule falls back to Norm).
Judgement judge(const TensorRule& rule, const Tensor& got, const Tensor& reference, const Tensor* reference_grad);

// Adam's first step moves each element of a parameter by lr * g / (|g| + eps), lr in the gradient's direction. An
// element's step reverses where its gradient is within rounding of 0, which moves it by 2 lr: a rare event in a
// correct run, so the count of reversals in n elements is (at most) a Poisson count of mean tau * n, tau the
// precision's tolerance on the gradient. allowed_reversals() is the count it stays within with probability
// 1 - kReversalTail, and at least 1; adam_step_bound() the error relative to a full step (lr sqrt(n)) that many
// reversals make: 2 sqrt(allowed / n).
// SGD's new parameter w' = w - lr g is stored rounded to its type's grid. Two runs whose gradients agree within
// the precision's tolerance tau give steps within tau lr ||g|| of each other, and each element's rounded result
// may then land on neighbouring grid points, one unit in the last place apart at most (<= 2 u |w'|, u the stored
// type's unit roundoff: 2^-24 fp32, 2^-8 bf16). Relative to the step lr ||g||: tau + 2 u ||w'|| / (lr ||g||). A
// step far below the parameter's resolution gets a bound above 1 (a wrong step cannot be told from rounding).
double unit_roundoff(DType stored);
double sgd_step_bound(DType precision, DType stored, double new_norm, double step_norm);

constexpr double kReversalTail = 1e-3;
int64_t allowed_reversals(DType precision, int64_t n);
double adam_step_bound(DType precision, int64_t n);

}  // namespace podsim
