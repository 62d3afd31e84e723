// 2-D convolution, NHWC activations and HWIO filters: y[b, oh, ow, co] = sum over (i, j, ci) of
// x[b, oh * sh - pt + i, ow * sw - pl + j, ci] * w[i, j, ci, co] (positions outside the input read zero), with its two
// backward convolutions: the input gradient (dy with the filter, scattered back through the strides) and the filter
// gradient (x with dy, summed over the batch and the output positions).
//
// Cost (docs/model.md, "Convolutions on the MXU"): each is one GEMM on the systolic array, as XLA's TPU backend runs
// a convolution: the contraction is over the filter taps and input features (K = KH * KW * Ci, taps packed together
// when Ci is below the array's rows), the output features fill the array's columns (N = Co: 64 features use half
// of a 128-wide array), and the batch times the output positions stream through as rows (M = B * Ho * Wo). The input
// gradient contracts KH * KW * Co against Ci, the filter gradient B * Ho * Wo against Co with KH * KW * Ci rows;
// all three do the forward's multiply-adds. HBM traffic: each operand is read whole (the taps are formed on chip,
// not materialized) in the TPU's tiled layout, whose two minor dimensions are padded to (8, 128): a 3- or
// 64-channel tensor takes 128 lanes per position.
//
// Partitioning: the batch may be split (data parallel), and the height (spatial partitioning, plan/halo.h: each
// device computes its output rows from its window of input rows, the halo rows exchanged with its neighbours by
// collective-permutes); width and features are gathered whole. The filter gradient sums over the batch and the
// positions: partial over the batch's and the rows' axes.
#include <algorithm>
#include <vector>

#include "plan/halo.h"
#include "base/error.h"
#include "workloads/ops/kernel_util.h"

namespace podsim {

namespace {

using ops::in;
using W = OpAttrs::Window;
using ops::for_taps;

struct ConvShape {
  int64_t b, h, w, ci, kh, kw, co, ho, wo;
};

// Shapes from the op's tensors: x (or dx), filter (or dw), y (or dy).
ConvShape conv_shape(const ModelGraph& g, const Op& op) {
  TensorId x, f, y;
  switch (op.kind) {
    case OpKind::Conv2d: x = op.inputs[0], f = op.inputs[1], y = op.outputs[0]; break;
    case OpKind::Conv2dInputGrad: x = op.outputs[0], f = op.inputs[1], y = op.inputs[0]; break;
    default: x = op.inputs[0], f = op.outputs[0], y = op.inputs[1]; break;
  }
  const auto& xs = g.tensor(x).shape;
  const auto& fs = g.tensor(f).shape;
  const auto& ys = g.tensor(y).shape;
  return {xs[0], xs[1], xs[2], xs[3], fs[0], fs[1], fs[3], ys[1], ys[2]};
}

double d(int64_t v) { return static_cast<double>(v); }

// How many of `in` positions along one dimension some window reads: all of them unless the windows are narrower than
// their stride (a 1 x 1 convolution of stride 2 reads every other row).
int64_t positions_read(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t lo) {
  if (k >= stride) return in;
  std::vector<bool> read(static_cast<size_t>(in), false);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t i = 0; i < k; ++i) {
      const int64_t at = o * stride - lo + i;
      if (at >= 0 && at < in) read[static_cast<size_t>(at)] = true;
    }
  return std::count(read.begin(), read.end(), true);
}

// The bytes of the input x a forward or filter-gradient convolution reads. The TPU's image layouts store each
// position (h, w) as tiles of its own (docs/model.md, "Layouts"), so the positions no window touches are not read;
// other layouts tile a row's positions together, so only whole rows are skipped. The MLPerf SSD profile shows it:
// its stride-2 1 x 1 convolutions would read the whole input faster than the core's HBM peak (542 and 551 GiB/s
// against 419) by the bytes XLA counts, which are the whole input.
double input_bytes_read(const ModelGraph& g, const Op& op) {
  const TensorInfo& x = g.tensor(op.inputs[0]);
  if (op.kind == OpKind::Conv2dInputGrad) return x.stored_bytes();  // dy: every position
  const ConvShape s = conv_shape(g, op);
  const W& w = op.attrs.window;
  double share = d(positions_read(s.h, s.ho, s.kh, w.sh, w.pt)) / d(s.h);
  if (image_layout(x.layout))
    share *= d(positions_read(s.w, s.wo, s.kw, w.sw, w.pl)) / d(s.w);
  return x.stored_bytes() * share;
}

OpCost conv_cost(const ModelGraph& g, const Op& op) {
  const GemmDims a = conv_gemm_dims(g, op);
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = 2.0 * d(a.m) * d(a.k) * d(a.n);
  c.bytes_read = input_bytes_read(g, op);
  for (size_t i = 1; i < op.inputs.size(); ++i) c.bytes_read += g.tensor(op.inputs[i]).stored_bytes();
  c.bytes_written = g.tensor(op.outputs[0]).stored_bytes();
  return c;
}

void conv_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const ConvShape s = conv_shape(g, op);
  const Tensor& x = in(st, op, 0);
  const Tensor& f = in(st, op, 1);
  Tensor y = ops::out_like(g, op);
  for_taps(s, op.attrs.window, [&](int64_t b, int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t ih, int64_t iw) {
    const float* xr = &x.data[((b * s.h + ih) * s.w + iw) * s.ci];
    const float* fr = &f.data[(i * s.kw + j) * s.ci * s.co];
    float* yr = &y.data[((b * s.ho + oh) * s.wo + ow) * s.co];
    for (int64_t ci = 0; ci < s.ci; ++ci) {
      const float xv = xr[ci];
      const float* fc = fr + ci * s.co;
      for (int64_t co = 0; co < s.co; ++co) yr[co] += xv * fc[co];
    }
  });
  ops::put(g, op, st, std::move(y));
}

void input_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const ConvShape s = conv_shape(g, op);
  const Tensor& dy = in(st, op, 0);
  const Tensor& f = in(st, op, 1);
  Tensor dx = ops::out_like(g, op);
  for_taps(s, op.attrs.window, [&](int64_t b, int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t ih, int64_t iw) {
    const float* dyr = &dy.data[((b * s.ho + oh) * s.wo + ow) * s.co];
    const float* fr = &f.data[(i * s.kw + j) * s.ci * s.co];
    float* dxr = &dx.data[((b * s.h + ih) * s.w + iw) * s.ci];
    for (int64_t ci = 0; ci < s.ci; ++ci) {
      const float* fc = fr + ci * s.co;
      float acc = 0;
      for (int64_t co = 0; co < s.co; ++co) acc += dyr[co] * fc[co];
      dxr[ci] += acc;
    }
  });
  ops::put(g, op, st, std::move(dx));
}

void filter_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const ConvShape s = conv_shape(g, op);
  const Tensor& x = in(st, op, 0);
  const Tensor& dy = in(st, op, 1);
  Tensor dw = ops::out_like(g, op);
  for_taps(s, op.attrs.window, [&](int64_t b, int64_t oh, int64_t ow, int64_t i, int64_t j, int64_t ih, int64_t iw) {
    const float* xr = &x.data[((b * s.h + ih) * s.w + iw) * s.ci];
    const float* dyr = &dy.data[((b * s.ho + oh) * s.wo + ow) * s.co];
    float* dwr = &dw.data[(i * s.kw + j) * s.ci * s.co];
    for (int64_t ci = 0; ci < s.ci; ++ci) {
      const float xv = xr[ci];
      float* dc = dwr + ci * s.co;
      for (int64_t co = 0; co < s.co; ++co) dc[co] += xv * dyr[co];
    }
  });
  ops::put(g, op, st, std::move(dw));
}

std::vector<TensorId> conv_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  const TensorInfo x = b.graph().tensor(op.inputs[0]), f = b.graph().tensor(op.inputs[1]);
  std::vector<TensorId> out(2, -1);
  if (b.wants_grad(op.inputs[0]))
    out[0] = b.emit(op.name + ".dx", OpKind::Conv2dInputGrad, Phase::Backward, {dy[0], op.inputs[1]}, x.shape, x.dtype,
                    TensorRole::Gradient, op.attrs);
  if (b.wants_grad(op.inputs[1]))
    out[1] = b.emit(op.name + ".dw", OpKind::Conv2dFilterGrad, Phase::Backward, {op.inputs[0], dy[0]}, f.shape,
                    f.dtype, TensorRole::Gradient, op.attrs);
  return out;
}

// ---- partitioning: the batch may stay split, and the rows (spatial partitioning, plan/halo.h); width and
// features whole ----
ShardSpec batch_only(const ShardSpec& s) {
  ShardSpec r = ShardSpec::replicated(s.rank());
  if (s.rank() > 0) r.dims[0] = s.dims[0];
  return r;
}

// With its input rows split, each device runs the convolution on its window of rows (its own and the halos its
// neighbours send), unpadded along H.
// The spec every rule runs its first input on (the batch, and the rows when they are split) and, with the rows
// split, the window geometry and the local attributes (the op runs unpadded along H); `halo` is false when no
// device needs rows from its neighbours.
struct RowSplit {
  ShardSpec spec;
  HaloGeometry h;
  bool halo = false;
};

RowSplit row_split(const OpShardingQuery& q, OpSharding& r) {
  RowSplit rs;
  r.attrs = q.op.attrs;
  const ShardSpec in = sharding::settled(q.in[0]);
  rs.spec = in.splits(1) ? batch_and_rows(in) : batch_only(in);
  if (!rs.spec.splits(1)) return rs;
  const ConvShape s = conv_shape(q.g, q.op);
  rs.h = spatial_geometry(q, rs.spec.dims[1], s.h, s.ho);
  r.attrs = window_attrs(q.op.attrs);
  rs.halo = !rs.h.trivial;
  return rs;
}

OpSharding conv_rule(const OpShardingQuery& q) {
  OpSharding r;
  const RowSplit rs = row_split(q, r);
  const ShardSpec& x = rs.spec;
  const HaloGeometry& h = rs.h;
  r.in = {x, ShardSpec::replicated(4)};
  r.out = {x};
  if (!rs.halo) return r;
  const TensorInfo& xi = q.g.tensor(q.op.inputs[0]);
  const int win = add_halo_window(r, h, 0, local_shape(xi.shape, x, q.mesh), xi.dtype, x.dims[1], q.op.name, false, 3);
  const TensorInfo& yi = q.g.tensor(q.op.outputs[0]);
  const int y = output_slot(r, h, 2, local_shape(yi.shape, x, q.mesh), yi.dtype, q.op.name, 3);
  r.steps.push_back({"", OpKind::Conv2d, {win, 1}, {y}, r.attrs});
  mask_output(r, h, y, 2, x.dims[1]);
  return r;
}

// With dy's rows split: the gradient of each device's window, folded back into the rows it came from (the
// neighbours' parts sent to them and added there).
OpSharding input_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  const RowSplit rs = row_split(q, r);
  const ShardSpec& dy = rs.spec;
  const HaloGeometry& h = rs.h;
  r.in = {dy, ShardSpec::replicated(4)};
  r.out = {dy};
  if (!rs.halo) return r;
  const TensorInfo& xi = q.g.tensor(q.op.outputs[0]);
  std::vector<int64_t> shape = local_shape(xi.shape, dy, q.mesh);
  std::vector<int64_t> window = shape;
  window[1] = h.window;
  r.scratch.push_back({q.op.name + ".window", window, xi.dtype});
  r.steps.push_back({"", OpKind::Conv2dInputGrad, {0, 1}, {3}, r.attrs});
  add_halo_fold(r, h, 3, 2, shape, xi.dtype, dy.dims[1], q.op.name, 3);
  return r;
}

// With x's rows split: each device's window of x against its dy rows, a partial sum over the batch's and the
// rows' axes.
OpSharding filter_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  const RowSplit rs = row_split(q, r);
  const ShardSpec& x = rs.spec;
  const HaloGeometry& h = rs.h;
  r.in = {x, x};
  ShardSpec w = ShardSpec::replicated(4);
  w.partial = sharding::reduced_axes(x, {0, 1});
  r.out = {w};
  if (!rs.halo) return r;
  const TensorInfo& xi = q.g.tensor(q.op.inputs[0]);
  const int win = add_halo_window(r, h, 0, local_shape(xi.shape, x, q.mesh), xi.dtype, x.dims[1], q.op.name, false, 3);
  r.steps.push_back({"", OpKind::Conv2dFilterGrad, {win, 1}, {2}, r.attrs});
  return r;
}

const bool registered =
    register_op_kind({OpKind::Conv2d, "conv2d", Unit::Mxu, conv_cost, conv_kernel, conv_grad, conv_rule}) &&
    register_op_kind({OpKind::Conv2dInputGrad, "conv2d_input_grad", Unit::Mxu, conv_cost, input_grad_kernel, nullptr,
                      input_grad_rule}) &&
    register_op_kind({OpKind::Conv2dFilterGrad, "conv2d_filter_grad", Unit::Mxu, conv_cost, filter_grad_kernel,
                      nullptr, filter_grad_rule});

}  // namespace

// The GEMM each convolution is on the MXU (see the top of this file), the bytes of its operands as stored (the input
// read once, not once per tap), and the GEMM as the MXU is fed tap by tap: each tap's features take whole vectors of
// the 128 lanes they are laid out on. A batch-minor input (an image, or an activation whose batch fills the lanes
// better than its features) is fed the other way round: for each output position, the window's (tap, feature) rows
// are held as the array's weights, the batch on its columns, and the filter's output features stream through
// (forward); the filter gradient holds the same window, the batch on its rows, and streams the output gradient's
// features; the input gradient of a batch-minor output gradient holds its window and streams the input features.
GemmDims conv_gemm_dims(const ModelGraph& g, const Op& op) {
  const ConvShape s = conv_shape(g, op);
  GemmDims a;
  const int64_t rows = s.b * s.ho * s.wo, taps = s.kh * s.kw;
  const auto lanes = [](int64_t features) { return (features + 127) / 128 * 128; };
  const auto sublanes = [](int64_t features) {
    return features <= 4 ? (features <= 2 ? features : 4) : (features + 7) / 8 * 8;
  };
  const bool batch_minor = g.tensor(op.inputs[0]).batch_minor();  // x forward and for the filter, dy for the input
  if (op.kind == OpKind::Conv2d) {
    a.m = rows, a.k = taps * s.ci, a.n = s.co;
    if (batch_minor) {
      a.fed_batch = s.ho * s.wo, a.fed_m = s.co, a.fed_k = taps * sublanes(s.ci), a.fed_n = s.b;
      a.fed_swap = true;
    } else {
      a.fed_k = taps * lanes(s.ci);
    }
  } else if (op.kind == OpKind::Conv2dInputGrad) {
    a.m = rows, a.k = taps * s.co, a.n = s.ci;
    if (batch_minor) {
      a.fed_batch = s.ho * s.wo, a.fed_m = s.ci, a.fed_k = taps * sublanes(s.co), a.fed_n = s.b;
      a.fed_swap = true;
    } else {
      a.fed_k = taps * lanes(s.co);
    }
  } else {
    a.m = taps * s.ci, a.k = rows, a.n = s.co;
    if (batch_minor) {
      a.fed_batch = s.ho * s.wo, a.fed_m = s.co, a.fed_k = s.b, a.fed_n = taps * sublanes(s.ci);
      a.fed_sum = true;
      a.fed_swap = true;
    } else {
      a.fed_m = taps * lanes(s.ci);
    }
  }
  a.b_shared = !(batch_minor && op.kind == OpKind::Conv2dFilterGrad);
  a.a_bytes = input_bytes_read(g, op);
  a.b_bytes = g.tensor(op.inputs[1]).stored_bytes();
  a.c_bytes = g.tensor(op.outputs[0]).stored_bytes();
  return a;
}

}  // namespace podsim

namespace podsim {

TensorId GraphBuilder::conv2d(TensorId x, TensorId w, const OpAttrs::Window& win, const std::string& name) {
  const auto xs = m_g.tensor(x).shape, ws = m_g.tensor(w).shape;
  if (xs.size() != 4 || ws.size() != 4 || ws[2] != xs[3])
    throw Error(Err::Internal, "conv2d '" + name + "': input " + m_g.tensor(x).shape_text() + " and filter " +
                                   m_g.tensor(w).shape_text() + " (NHWC and HWIO, filter input features = C)");
  OpAttrs at;
  at.window = win;
  at.window.kh = ws[0];
  at.window.kw = ws[1];
  const int64_t ho = ops::window_out_size(name, "height", xs[1], ws[0], win.sh, win.pt, win.pb);
  const int64_t wo = ops::window_out_size(name, "width", xs[2], ws[1], win.sw, win.pl, win.pr);
  return forward(name, OpKind::Conv2d, {x, w}, {xs[0], ho, wo, ws[3]}, m_g.tensor(x).dtype, at);
}

TensorId GraphBuilder::max_pool(TensorId x, const OpAttrs::Window& win, const std::string& name) {
  const auto xs = m_g.tensor(x).shape;
  OpAttrs at;
  at.window = win;
  const int64_t ho = ops::window_out_size(name, "height", xs[1], win.kh, win.sh, win.pt, win.pb);
  const int64_t wo = ops::window_out_size(name, "width", xs[2], win.kw, win.sw, win.pl, win.pr);
  return forward(name, OpKind::MaxPool, {x}, {xs[0], ho, wo, xs[3]}, m_g.tensor(x).dtype, at);
}

TensorId GraphBuilder::avg_pool(TensorId x, const OpAttrs::Window& win, const std::string& name) {
  const auto xs = m_g.tensor(x).shape;
  OpAttrs at;
  at.window = win;
  const int64_t ho = ops::window_out_size(name, "height", xs[1], win.kh, win.sh, win.pt, win.pb);
  const int64_t wo = ops::window_out_size(name, "width", xs[2], win.kw, win.sw, win.pl, win.pr);
  return forward(name, OpKind::AvgPool, {x}, {xs[0], ho, wo, xs[3]}, m_g.tensor(x).dtype, at);
}

TensorId GraphBuilder::batch_norm(TensorId x, TensorId gamma, TensorId beta, int64_t group, const std::string& name,
                                  double eps, double momentum) {
  // Scale and offset are normalization parameters: LARS leaves them out of its trust ratio and weight decay.
  set_param_kind(gamma, ParamKind::Norm);
  set_param_kind(beta, ParamKind::Norm);
  const TensorInfo xi = m_g.tensor(x);
  if (xi.shape.size() != 4 || (group > 0 && xi.shape[0] % group != 0))
    throw Error(Err::Internal, "batch_norm '" + name + "' of " + xi.shape_text() + " in groups of " +
                                   std::to_string(group));
  OpAttrs at;
  at.count = group;
  at.eps = eps;
  at.alpha = momentum;
  Op op;
  op.name = name + ".stats";
  op.kind = OpKind::BatchNormStats;
  op.phase = m_phase;
  op.cell = m_cell;
  op.attrs = at;
  op.inputs = {x};
  const std::vector<int64_t> rows = {xi.shape[0], xi.shape[3]};
  const TensorId mean = m_g.add_tensor({name + ".mean", rows, DType::F32, TensorRole::Activation});
  const TensorId rstd = m_g.add_tensor({name + ".rstd", rows, DType::F32, TensorRole::Activation});
  op.outputs = {mean, rstd};
  m_bn_stats.push_back(m_g.add_op(op));
  return forward(name, OpKind::BatchNormApply, {x, mean, rstd, gamma, beta}, xi.shape, xi.dtype, at);
}

}  // namespace podsim
