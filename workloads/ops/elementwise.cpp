// Elementwise ops on the vector unit: add, scale, bias add, ReLU and GELU (tanh approximation) with their
// gradients. All fusible: output element i depends only on element i of the inputs (the bias broadcasts).
#include <Eigen/Core>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;
using Arr = Eigen::Map<const Eigen::ArrayXf>;
using ArrM = Eigen::Map<Eigen::ArrayXf>;

Arr view(const Tensor& t) { return Arr(t.data.data(), static_cast<Eigen::Index>(t.data.size())); }
ArrM view(Tensor& t) { return ArrM(t.data.data(), static_cast<Eigen::Index>(t.data.size())); }

OpCost fusible(OpCost c) {
  c.fusible = true;
  return c;
}

// ---- add ----
OpCost add_cost(const ModelGraph& g, const Op& op) { return fusible(ops::vpu_cost(g, op, 1)); }
void add_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor o = ops::out_like(g, op);
  view(o) = view(in(s, op, 0)) + view(in(s, op, 1));
  ops::put(g, op, s, std::move(o));
}
std::vector<TensorId> add_grad(GraphBuilder&, const Op&, const std::vector<TensorId>& dy) { return {dy[0], dy[0]}; }

// ---- scale ----
OpCost scale_cost(const ModelGraph& g, const Op& op) { return fusible(ops::vpu_cost(g, op, 1)); }
void scale_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor o = ops::out_like(g, op);
  view(o) = view(in(s, op, 0)) * static_cast<float>(op.attrs.alpha);
  ops::put(g, op, s, std::move(o));
}
std::vector<TensorId> scale_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  return {b.scale(dy[0], op.attrs.alpha, op.name + ".grad")};
}

// ---- bias add: x[t, j] + bias[j], j over the bias's elements (the trailing dimensions of x) ----
OpCost bias_add_cost(const ModelGraph& g, const Op& op) { return fusible(ops::vpu_cost(g, op, 1)); }
void bias_add_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const Tensor& bias = in(s, op, 1);
  int64_t n = static_cast<int64_t>(bias.data.size()), rows = x.elements() / n;
  Tensor o = ops::out_like(g, op);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) o.data[r * n + j] = x.data[r * n + j] + bias.data[j];
  ops::put(g, op, s, std::move(o));
}
std::vector<TensorId> bias_add_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& bias = b.graph().tensor(op.inputs[1]);
  TensorId db = b.emit(op.name + ".dbias", OpKind::BiasGrad, Phase::Backward, {dy[0]}, bias.shape, bias.dtype,
                       TensorRole::Gradient);
  return {dy[0], db};
}

// ---- bias gradient: sum over rows (a reduction: fuses as one, never as an elementwise op) ----
OpCost bias_grad_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 1)); }
void bias_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  Tensor o = ops::out_like(g, op);
  int64_t n = o.elements(), rows = dy.elements() / n;
  std::vector<double> acc(static_cast<size_t>(n), 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) acc[j] += dy.data[r * n + j];
  for (int64_t j = 0; j < n; ++j) o.data[j] = static_cast<float>(acc[j]);
  ops::put(g, op, s, std::move(o));
}

// ---- ReLU ----
OpCost relu_cost(const ModelGraph& g, const Op& op) { return fusible(ops::vpu_cost(g, op, 1)); }
void relu_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor o = ops::out_like(g, op);
  view(o) = view(in(s, op, 0)).max(0.0f);
  ops::put(g, op, s, std::move(o));
}
// The mask comes from the ReLU's result (y > 0 exactly where x > 0), as TensorFlow's ReluGrad and PyTorch's
// threshold_backward take it: the result is what the next layer keeps anyway, so the input need not be.
std::vector<TensorId> relu_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  return {b.emit(op.name + ".dx", OpKind::ReluGrad, Phase::Backward, {dy[0], op.outputs[0]}, x.shape, x.dtype,
                 TensorRole::Gradient)};
}
OpCost relu_grad_cost(const ModelGraph& g, const Op& op) { return fusible(ops::vpu_cost(g, op, 2, 0, 0, 0, 1)); }
void relu_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor o = ops::out_like(g, op);
  view(o) = (view(in(s, op, 1)) > 0.0f).select(view(in(s, op, 0)), 0.0f);
  ops::put(g, op, s, std::move(o));
}

// ---- GELU, tanh approximation: 0.5 x (1 + tanh(c (x + 0.044715 x^3))), c = sqrt(2/pi) ----
constexpr double kC = 0.7978845608028654;
OpCost gelu_cost(const ModelGraph& g, const Op& op) { return fusible(ops::vpu_cost(g, op, 7, 1)); }
void gelu_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < x.data.size(); ++i) {
    double v = x.data[i];
    o.data[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(kC * (v + 0.044715 * v * v * v))));
  }
  ops::put(g, op, s, std::move(o));
}
std::vector<TensorId> gelu_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  return {b.emit(op.name + ".dx", OpKind::GeluGrad, Phase::Backward, {dy[0], op.inputs[0]}, x.shape, x.dtype,
                 TensorRole::Gradient)};
}
OpCost gelu_grad_cost(const ModelGraph& g, const Op& op) { return fusible(ops::vpu_cost(g, op, 12, 1)); }
void gelu_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dy = in(s, op, 0);
  const Tensor& x = in(s, op, 1);
  Tensor o = ops::out_like(g, op);
  for (size_t i = 0; i < x.data.size(); ++i) {
    double v = x.data[i];
    double u = kC * (v + 0.044715 * v * v * v);
    double t = std::tanh(u);
    double du = kC * (1.0 + 3 * 0.044715 * v * v);
    double d = 0.5 * (1.0 + t) + 0.5 * v * (1.0 - t * t) * du;
    o.data[i] = static_cast<float>(dy.data[i] * d);
  }
  ops::put(g, op, s, std::move(o));
}

// ---- partitioning ----
OpSharding linear_rule(const OpShardingQuery& q) { return sharding::elementwise(q, true); }
OpSharding pointwise_rule(const OpShardingQuery& q) { return sharding::elementwise(q, false); }

// x [..., N] + bias [N] (or a bias of x's trailing k dimensions): the bias takes the output's split of them.
OpSharding bias_add_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec x = sharding::settled(q.in[0]);
  if (!q.want.empty() && q.want[0] && !q.want[0]->is_partial() &&
      sharding::pieces(*q.want[0], q.mesh) > sharding::pieces(x, q.mesh))
    x = *q.want[0];
  const size_t k = q.g.tensor(q.op.inputs[1]).shape.size();
  ShardSpec b = ShardSpec::replicated(k);
  for (size_t d = 0; d < k; ++d) b.dims[d] = x.dims[x.rank() - k + d];
  r.in = {x, b};
  r.out = {x};
  return r;
}

// dbias[j] = sum over rows of dy: linear, so a partial dy stays partial, and rows split over axes leave the sum
// partial over them.
OpSharding bias_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec& dy = q.in[0];
  const size_t k = q.g.tensor(q.op.outputs[0]).shape.size();
  std::vector<size_t> rows;
  for (size_t d = 0; d + k < dy.rank(); ++d) rows.push_back(d);
  ShardSpec out = ShardSpec::replicated(k);
  for (size_t d = 0; d < k; ++d) out.dims[d] = dy.dims[dy.rank() - k + d];
  out.partial = sharding::reduced_axes(dy, rows);
  r.in = {dy};
  r.out = {out};
  return r;
}

const bool registered = register_op_kind({OpKind::Add, "add", Unit::Vpu, add_cost, add_kernel, add_grad, linear_rule}) &&
                        register_op_kind({OpKind::Scale, "scale", Unit::Vpu, scale_cost, scale_kernel, scale_grad, linear_rule}) &&
                        register_op_kind({OpKind::BiasAdd, "bias_add", Unit::Vpu, bias_add_cost, bias_add_kernel,
                                          bias_add_grad, bias_add_rule}) &&
                        register_op_kind({OpKind::BiasGrad, "bias_grad", Unit::Vpu, bias_grad_cost, bias_grad_kernel,
                                          nullptr, bias_grad_rule}) &&
                        register_op_kind({OpKind::Relu, "relu", Unit::Vpu, relu_cost, relu_kernel, relu_grad, pointwise_rule}) &&
                        register_op_kind({OpKind::ReluGrad, "relu_grad", Unit::Vpu, relu_grad_cost,
                                          relu_grad_kernel, nullptr, pointwise_rule}) &&
                        register_op_kind({OpKind::Gelu, "gelu", Unit::Vpu, gelu_cost, gelu_kernel, gelu_grad, pointwise_rule}) &&
                        register_op_kind({OpKind::GeluGrad, "gelu_grad", Unit::Vpu, gelu_grad_cost,
                                          gelu_grad_kernel, nullptr, pointwise_rule});

}  // namespace
}  // namespace podsim
