// Softmax cross-entropy loss, averaged over rows: loss = mean_t (logsumexp(logits[t]) - logits[t][label[t]]).
// The forward op also outputs the softmax probabilities (fp32); the gradient is (probs - onehot(labels)) / T.
#include <limits>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost ce_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 4, 2, 1, 2)); }

void ce_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& logits = in(s, op, 0);
  const Tensor& labels = in(s, op, 1);
  const int64_t v = logits.shape.back(), rows = logits.elements() / v;
  Tensor loss = ops::out_like(g, op, 0), probs = ops::out_like(g, op, 1);
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = &logits.data[r * v];
    double mx = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j < v; ++j) mx = std::max<double>(mx, x[j]);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(x[j] - mx);
    for (int64_t j = 0; j < v; ++j) probs.data[r * v + j] = static_cast<float>(std::exp(x[j] - mx) / sum);
    int64_t label = static_cast<int64_t>(labels.data[r]);
    ops::check(label >= 0 && label < v, op, "label " + std::to_string(label) + " outside the classes");
    total += std::log(sum) + mx - x[label];
  }
  loss.data[0] = static_cast<float>(total / static_cast<double>(rows));
  ops::put(g, op, s, std::move(loss), 0);
  ops::put(g, op, s, std::move(probs), 1);
}

std::vector<TensorId> ce_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  const TensorInfo& logits = b.graph().tensor(op.inputs[0]);
  return {b.emit(op.name + ".dlogits", OpKind::SoftmaxCrossEntropyGrad, Phase::Backward,
                 {op.outputs[1], op.inputs[1]}, logits.shape, logits.dtype, TensorRole::Gradient),
          -1};
}

OpCost ce_grad_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 2)); }

void ce_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& probs = in(s, op, 0);
  const Tensor& labels = in(s, op, 1);
  const int64_t v = probs.shape.back(), rows = probs.elements() / v;
  Tensor d = ops::out_like(g, op);
  const float inv = 1.0f / static_cast<float>(rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t j = 0; j < v; ++j) d.data[r * v + j] = probs.data[r * v + j] * inv;
    d.data[r * v + static_cast<int64_t>(labels.data[r])] -= inv;
  }
  ops::put(g, op, s, std::move(d));
}

const bool registered = register_op_kind({OpKind::SoftmaxCrossEntropy, "softmax_cross_entropy", Unit::Vpu, ce_cost,
                                          ce_kernel, ce_grad}) &&
                        register_op_kind({OpKind::SoftmaxCrossEntropyGrad, "softmax_cross_entropy_grad", Unit::Vpu,
                                          ce_grad_cost, ce_grad_kernel, nullptr});

}  // namespace
}  // namespace podsim
