// Depthwise 2-D convolution, NHWC activations and a [KH, KW, C] filter: y[b, oh, ow, c] = sum over (i, j) of
// x[b, oh * sh - pt + i, ow * sw - pl + j, c] * w[i, j, c] (positions outside the input read zero): each feature
// convolved with its own filter, no sum over features (MobileNet's and EfficientNet's MBConv blocks; XLA's
// convolution with feature_group_count = C and one output feature per group). Its two backward convolutions: the
// input gradient (dy with the filter, scattered back through the strides) and the filter gradient (x with dy, summed
// over the batch and the output positions).
//
// Cost (docs/model.md, "Depthwise convolutions"): a depthwise convolution has nothing to contract on the MXU (each
// output is the sum of KH * KW products of one feature; fed as a grouped convolution, a 128 x 128 array would hold a
// diagonal block of weights and do one useful multiply in 128), so it runs on the vector unit: for each tap, one
// multiply and one add per element of the output positions' vectors, the features on the 128 lanes as the tensors
// are stored (a 144-feature map takes 256 lanes). The three kinds do the same multiply-adds; the filter gradient's
// sums over positions accumulate lane by lane (same feature, same lane), so no cross-lane reduction. HBM traffic:
// each operand read once as stored (the taps are formed on chip), the result written once.
// Fusion: XLA's depthwise convolution is a convolution (one HLO opcode, its groups an attribute), and it fuses as one
// (OpCost::vector_conv; run.fusion_vector_conv): the batch norm and swish that make its input are recomputed in its
// kernel, its result's batch-norm statistics come out beside it, and its input gradient takes the swish gradient
// and batch-norm sums of the layer below as a convolution's input gradient does.
//
// Partitioning: the batch may be split; rows, width and features are gathered whole. The filter gradient sums over
// the batch: partial over the batch's axes.
#include <algorithm>
#include <vector>

#include "base/error.h"
#include "workloads/ops/kernel_util.h"

namespace podsim {

namespace {

using ops::in;
using ops::for_taps;

struct DwShape {
  int64_t b, h, w, c, kh, kw, ho, wo;
};

// Shapes from the op's tensors: x (or dx), filter (or dw), y (or dy).
DwShape dw_shape(const ModelGraph& g, const Op& op) {
  TensorId x, f, y;
  switch (op.kind) {
    case OpKind::DepthwiseConv2d: x = op.inputs[0], f = op.inputs[1], y = op.outputs[0]; break;
    case OpKind::DepthwiseConv2dInputGrad: x = op.outputs[0], f = op.inputs[1], y = op.inputs[0]; break;
    default: x = op.inputs[0], f = op.outputs[0], y = op.inputs[1]; break;
  }
  const auto& xs = g.tensor(x).shape;
  const auto& fs = g.tensor(f).shape;
  const auto& ys = g.tensor(y).shape;
  return {xs[0], xs[1], xs[2], xs[3], fs[0], fs[1], ys[1], ys[2]};
}

// The tensor of output positions each kind walks: y forward, dy for both gradients.
TensorId positions_tensor(const Op& op) {
  switch (op.kind) {
    case OpKind::DepthwiseConv2d: return op.outputs[0];
    case OpKind::DepthwiseConv2dInputGrad: return op.inputs[0];
    default: return op.inputs[1];
  }
}

double d(int64_t v) { return static_cast<double>(v); }

OpCost dw_cost(const ModelGraph& g, const Op& op) {
  const DwShape s = dw_shape(g, op);
  const TensorInfo& pos = g.tensor(positions_tensor(op));
  const double taps = d(s.kh * s.kw);
  OpCost c;
  c.unit = Unit::Vpu;
  // The vectors as stored: the layout's padded lanes and sublanes are processed with the rest.
  c.vector.elements = pos.stored_bytes() / dtype_bytes(pos.dtype);
  c.vector.simple = 2 * taps;
  c.flops = 2.0 * d(s.b * s.ho * s.wo * s.c) * taps;
  for (TensorId t : op.inputs) c.bytes_read += g.tensor(t).stored_bytes();
  c.bytes_written = g.tensor(op.outputs[0]).stored_bytes();
  c.vector_conv = true;
  return c;
}

void dw_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const DwShape s = dw_shape(g, op);
  const Tensor& x = in(st, op, 0);
  const Tensor& f = in(st, op, 1);
  Tensor y = ops::out_like(g, op);
  for_taps(s, op.attrs.window, [&](int64_t b, int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t ih, int64_t iw) {
    const float* xr = &x.data[((b * s.h + ih) * s.w + iw) * s.c];
    const float* fr = &f.data[(i * s.kw + j) * s.c];
    float* yr = &y.data[((b * s.ho + oh) * s.wo + ow) * s.c];
    for (int64_t c = 0; c < s.c; ++c) yr[c] += xr[c] * fr[c];
  });
  ops::put(g, op, st, std::move(y));
}

void dw_input_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const DwShape s = dw_shape(g, op);
  const Tensor& dy = in(st, op, 0);
  const Tensor& f = in(st, op, 1);
  Tensor dx = ops::out_like(g, op);
  for_taps(s, op.attrs.window, [&](int64_t b, int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t ih, int64_t iw) {
    const float* dyr = &dy.data[((b * s.ho + oh) * s.wo + ow) * s.c];
    const float* fr = &f.data[(i * s.kw + j) * s.c];
    float* dxr = &dx.data[((b * s.h + ih) * s.w + iw) * s.c];
    for (int64_t c = 0; c < s.c; ++c) dxr[c] += dyr[c] * fr[c];
  });
  ops::put(g, op, st, std::move(dx));
}

void dw_filter_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const DwShape s = dw_shape(g, op);
  const Tensor& x = in(st, op, 0);
  const Tensor& dy = in(st, op, 1);
  // Summed in double over the batch and the positions (thousands of terms per weight), as the bias gradient sums.
  std::vector<double> acc(static_cast<size_t>(s.kh * s.kw * s.c), 0.0);
  for_taps(s, op.attrs.window, [&](int64_t b, int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t ih, int64_t iw) {
    const float* xr = &x.data[((b * s.h + ih) * s.w + iw) * s.c];
    const float* dyr = &dy.data[((b * s.ho + oh) * s.wo + ow) * s.c];
    double* dwr = &acc[static_cast<size_t>((i * s.kw + j) * s.c)];
    for (int64_t c = 0; c < s.c; ++c) dwr[c] += double(xr[c]) * dyr[c];
  });
  Tensor dw = ops::out_like(g, op);
  for (size_t k = 0; k < acc.size(); ++k) dw.data[k] = static_cast<float>(acc[k]);
  ops::put(g, op, st, std::move(dw));
}

std::vector<TensorId> dw_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  const TensorInfo x = b.graph().tensor(op.inputs[0]), f = b.graph().tensor(op.inputs[1]);
  std::vector<TensorId> out(2, -1);
  if (b.wants_grad(op.inputs[0]))
    out[0] = b.emit(op.name + ".dx", OpKind::DepthwiseConv2dInputGrad, Phase::Backward, {dy[0], op.inputs[1]},
                    x.shape, x.dtype, TensorRole::Gradient, op.attrs);
  if (b.wants_grad(op.inputs[1]))
    out[1] = b.emit(op.name + ".dw", OpKind::DepthwiseConv2dFilterGrad, Phase::Backward, {op.inputs[0], dy[0]},
                    f.shape, f.dtype, TensorRole::Gradient, op.attrs);
  return out;
}

// ---- partitioning: the batch may stay split; rows, width and features whole ----
ShardSpec batch_only(const ShardSpec& s) {
  ShardSpec r = ShardSpec::replicated(s.rank());
  if (s.rank() > 0) r.dims[0] = s.dims[0];
  return r;
}

OpSharding dw_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec x = batch_only(sharding::settled(q.in[0]));
  r.in = {x, ShardSpec::replicated(3)};
  r.out = {x};
  return r;
}

// With x and dy split by the batch: each device's sum over its examples, partial over the batch's axes.
OpSharding dw_filter_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec x = batch_only(sharding::settled(q.in[0]));
  r.in = {x, x};
  ShardSpec w = ShardSpec::replicated(3);
  w.partial = sharding::reduced_axes(x, {0});
  r.out = {w};
  return r;
}

const bool registered =
    register_op_kind({OpKind::DepthwiseConv2d, "depthwise_conv2d", Unit::Vpu, dw_cost, dw_kernel, dw_grad, dw_rule}) &&
    register_op_kind({OpKind::DepthwiseConv2dInputGrad, "depthwise_conv2d_input_grad", Unit::Vpu, dw_cost,
                      dw_input_grad_kernel, nullptr, dw_rule}) &&
    register_op_kind({OpKind::DepthwiseConv2dFilterGrad, "depthwise_conv2d_filter_grad", Unit::Vpu, dw_cost,
                      dw_filter_grad_kernel, nullptr, dw_filter_grad_rule});

}  // namespace

TensorId GraphBuilder::depthwise_conv2d(TensorId x, TensorId w, const OpAttrs::Window& win, const std::string& name) {
  const auto xs = m_g.tensor(x).shape, ws = m_g.tensor(w).shape;
  if (xs.size() != 4 || ws.size() != 3 || ws[2] != xs[3])
    throw Error(Err::Internal, "depthwise_conv2d '" + name + "': input " + m_g.tensor(x).shape_text() + " and filter " +
                                   m_g.tensor(w).shape_text() + " (NHWC and [KH, KW, C], filter features = C)");
  OpAttrs at;
  at.window = win;
  at.window.kh = ws[0];
  at.window.kw = ws[1];
  const int64_t ho = ops::window_out_size(name, "height", xs[1], ws[0], win.sh, win.pt, win.pb);
  const int64_t wo = ops::window_out_size(name, "width", xs[2], ws[1], win.sw, win.pl, win.pr);
  return forward(name, OpKind::DepthwiseConv2d, {x, w}, {xs[0], ho, wo, xs[3]}, m_g.tensor(x).dtype, at);
}

}  // namespace podsim
