#include "workloads/compare_rules.h"

#include <algorithm>
#include <cmath>

namespace podsim {
namespace {

// Integers are exact: they never narrow a precision. bf16 is narrower than fp32.
int width(DType t) { return t == DType::BF16 ? 0 : 1; }

DType narrower(DType a, DType b) { return width(a) <= width(b) ? a : b; }

double sum_squares(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return s;
}

}  // namespace

double precision_tolerance(DType precision) { return precision == DType::BF16 ? 0.0625 : 1e-5; }

const char* measure_name(Measure m) {
  switch (m) {
    case Measure::Norm: return "norm";
    case Measure::AdamStep: return "adam step";
    case Measure::SgdStep: return "sgd step";
  }
  return "?";
}

std::vector<TensorRule> compare_rules(const ModelGraph& g) {
  const size_t n = g.num_tensors();
  std::vector<DType> precision(n, DType::F32);
  for (size_t t = 0; t < n; ++t)
    if (g.tensor(static_cast<TensorId>(t)).dtype == DType::BF16) precision[t] = DType::BF16;
  // In topological order every input's precision is final when its consumer is reached.
  for (OpId id : g.topological_order()) {
    const Op& op = g.op(id);
    DType in = DType::F32;
    for (TensorId t : op.inputs) in = narrower(in, precision[t]);
    for (TensorId t : op.outputs) precision[t] = narrower(precision[t], in);
  }
  std::vector<TensorRule> rules(n);
  for (size_t i = 0; i < n; ++i) {
    const TensorId t = static_cast<TensorId>(i);
    TensorRule& r = rules[i];
    r.file = tensor_file_stem(g.tensor(t).name);
    r.dtype = g.tensor(t).dtype;
    r.precision = precision[i];
    const OpId p = g.producer(t);
    if (p < 0) continue;
    const Op& op = g.op(p);
    // The new parameter is an update's first output; Adam's m and v (its others) start from 0 on the step
    // simulated, so their change is their value and the relative norm error measures it.
    if (op.outputs.empty() || op.outputs[0] != t) continue;
    if (op.kind == OpKind::AdamUpdate) {
      r.measure = Measure::AdamStep;
      r.learning_rate = op.attrs.alpha;
    } else if (op.kind == OpKind::SgdUpdate && op.inputs.size() > 1) {
      r.measure = Measure::SgdStep;
      r.learning_rate = op.attrs.alpha;
      r.gradient = tensor_file_stem(g.tensor(op.inputs[1]).name);
    }
  }
  return rules;
}

int64_t allowed_reversals(DType precision, int64_t n) {
  const double lambda = precision_tolerance(precision) * static_cast<double>(n);
  int64_t k = 0;
  if (!(lambda > 0)) return 1;
  if (lambda > 1000) {
    // The normal approximation (z = 3.09 at 99.9 %), with a margin for the Poisson's skew (+1.4 at this quantile).
    k = static_cast<int64_t>(std::ceil(lambda + 3.1 * std::sqrt(lambda) + 2));
  } else {
    // Sum the probabilities, each from its logarithm (e^-lambda alone underflows for large lambda).
    double cdf = 0;
    for (;; ++k) {
      cdf += std::exp(-lambda + static_cast<double>(k) * std::log(lambda) - std::lgamma(static_cast<double>(k) + 1));
      if (1 - cdf <= kReversalTail) break;
    }
  }
  return std::max<int64_t>(k, 1);
}

double adam_step_bound(DType precision, int64_t n) {
  const int64_t elements = std::max<int64_t>(n, 1);
  return 2 * std::sqrt(static_cast<double>(allowed_reversals(precision, elements)) / static_cast<double>(elements));
}

double unit_roundoff(DType stored) { return stored == DType::BF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -24); }

double sgd_step_bound(DType precision, DType stored, double new_norm, double step_norm) {
  return precision_tolerance(precision) + 2 * unit_roundoff(stored) * new_norm / step_norm;
}

Judgement judge(const TensorRule& rule, const Tensor& got, const Tensor& reference, const Tensor* reference_grad) {
  Judgement j;
  Measure m = rule.measure;
  if (m == Measure::SgdStep && (!reference_grad || reference_grad->data.size() != reference.data.size()))
    m = Measure::Norm;
  j.measure = m;
  j.bound = m == Measure::AdamStep ? adam_step_bound(rule.precision, static_cast<int64_t>(reference.data.size()))
                                   : precision_tolerance(rule.precision);
  if (got.shape != reference.shape || got.data.size() != reference.data.size()) {
    j.error = INFINITY;
    j.pass = false;
    return j;
  }
  double diff2 = 0;
  bool finite = true;
  for (size_t i = 0; i < got.data.size(); ++i) {
    const double a = got.data[i], b = reference.data[i];
    if (!std::isfinite(a) || !std::isfinite(b)) finite = false;
    diff2 += (a - b) * (a - b);
  }
  double scale = 0;
  switch (m) {
    case Measure::Norm: scale = std::sqrt(sum_squares(reference.data)); break;
    case Measure::AdamStep:
      scale = rule.learning_rate * std::sqrt(static_cast<double>(reference.data.size()));
      break;
    case Measure::SgdStep: scale = rule.learning_rate * std::sqrt(sum_squares(reference_grad->data)); break;
  }
  if (m == Measure::SgdStep && scale > 0)  // plus the rounding of the stored result: sgd_step_bound()
    j.bound = sgd_step_bound(rule.precision, rule.dtype, std::sqrt(sum_squares(reference.data)), scale);
  j.error = scale > 0 ? std::sqrt(diff2) / scale : std::sqrt(diff2);
  if (!finite) j.error = INFINITY;
  j.pass = j.error <= j.bound;
  return j;
}

}  // namespace podsim
