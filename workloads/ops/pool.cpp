// Pooling over NHWC windows (attrs.window: size, strides, padding): max pooling (padding never wins) and average
// pooling over the window's positions inside the input (so a padded border averages fewer values; global average
// pooling is a window of the whole map). Gradients: max pooling's sends each window's dy to the window's first
// maximum (XLA's select-and-scatter); average pooling's spreads dy evenly over the window's positions.
//
// Cost: vector-unit work per output element times the window (a compare or add per tap), and HBM traffic of the
// tensors in the TPU's tiled layout (docs/model.md). Pools run as their own kernels (XLA's reduce-window and
// select-and-scatter). Partitioning: the batch may be split. Max pooling may split its rows too (spatial
// partitioning, plan/halo.h: the halo rows exchanged with the neighbours by collective-permutes); average pooling
// (in ResNet the global pool of the classifier) gathers the rows, and width and features are whole.
#include <limits>

#include "plan/halo.h"
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

struct PoolShape {
  int64_t b, h, w, c, ho, wo;
};

PoolShape pool_shape(const TensorInfo& x, const TensorInfo& y) {
  return {x.shape[0], x.shape[1], x.shape[2], x.shape[3], y.shape[1], y.shape[2]};
}

// The input positions of output (oh, ow)'s window: f(ih, iw) for each inside the input.
template <class F>
void window(const PoolShape& s, const OpAttrs::Window& w, int64_t oh, int64_t ow, F f) {
  ops::for_window(w, w.kh, w.kw, s.h, s.w, oh, ow, [&](int64_t, int64_t, int64_t ih, int64_t iw) { f(ih, iw); });
}

OpCost pool_cost(const ModelGraph& g, const Op& op, TensorId small, double per_tap) {
  OpCost c;
  c.unit = Unit::Vpu;
  const double taps = static_cast<double>(op.attrs.window.kh * op.attrs.window.kw);
  c.vector.elements = static_cast<double>(g.tensor(small).elements());
  c.vector.simple = taps * per_tap;
  c.flops = c.vector.elements * taps;
  for (TensorId t : op.inputs) c.bytes_read += g.tensor(t).stored_bytes();
  c.bytes_written = g.tensor(op.outputs[0]).stored_bytes();
  return c;
}

// Reduce-window: XLA fuses elementwise producers of its input into it (the batch norm and ReLU before ResNet's max
// pool).
OpCost window_cost(OpCost c) {
  c.input_fusion = true;
  return c;
}
OpCost max_pool_cost(const ModelGraph& g, const Op& op) { return window_cost(pool_cost(g, op, op.outputs[0], 1)); }
OpCost avg_pool_cost(const ModelGraph& g, const Op& op) { return window_cost(pool_cost(g, op, op.outputs[0], 1)); }
// Select-and-scatter: compare to find the window's maximum, then add dy at it.
OpCost max_pool_grad_cost(const ModelGraph& g, const Op& op) { return pool_cost(g, op, op.inputs[0], 3); }
// A global pool's gradient (one window over the whole map, no padding) is dy / (H W) broadcast over the positions:
// elementwise, one multiply per element of dx, and an expander (it writes H W times what it reads) that fuses into
// the kernel of its consumer, as XLA fuses the broadcast that the gradient of a mean over the positions is (the
// squeeze-and-excitation's pool and the classifier's; docs/model.md, "Fusion"). Other windows spread dy as
// select-and-scatter does, in a kernel of their own.
OpCost avg_pool_grad_cost(const ModelGraph& g, const Op& op) {
  const TensorInfo& dy = g.tensor(op.inputs[0]);
  const TensorInfo& dx = g.tensor(op.outputs[0]);
  const OpAttrs::Window& w = op.attrs.window;
  const bool global = dy.shape[1] == 1 && dy.shape[2] == 1 && w.kh == dx.shape[1] && w.kw == dx.shape[2] &&
                      w.pt == 0 && w.pb == 0 && w.pl == 0 && w.pr == 0;
  if (!global) return pool_cost(g, op, op.inputs[0], 1);
  return ops::elementwise(ops::vpu_cost(g, op, 1));
}

void max_pool_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const PoolShape s = pool_shape(g.tensor(op.inputs[0]), g.tensor(op.outputs[0]));
  const Tensor& x = in(st, op, 0);
  Tensor y = ops::out_like(g, op);
  ops::for_positions(s.b, s.ho, s.wo, [&](int64_t b, int64_t oh, int64_t ow) {
    for (int64_t c = 0; c < s.c; ++c) {
      float m = -std::numeric_limits<float>::infinity();
      window(s, op.attrs.window, oh, ow,
             [&](int64_t ih, int64_t iw) { m = std::max(m, x.data[((b * s.h + ih) * s.w + iw) * s.c + c]); });
      y.data[((b * s.ho + oh) * s.wo + ow) * s.c + c] = m;
    }
  });
  ops::put(g, op, st, std::move(y));
}

void max_pool_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const PoolShape s = pool_shape(g.tensor(op.inputs[1]), g.tensor(op.inputs[0]));
  const Tensor& dy = in(st, op, 0);
  const Tensor& x = in(st, op, 1);
  Tensor dx = ops::out_like(g, op);
  ops::for_positions(s.b, s.ho, s.wo, [&](int64_t b, int64_t oh, int64_t ow) {
    for (int64_t c = 0; c < s.c; ++c) {
      float m = -std::numeric_limits<float>::infinity();
      int64_t at = -1;
      window(s, op.attrs.window, oh, ow, [&](int64_t ih, int64_t iw) {
        const int64_t k = ((b * s.h + ih) * s.w + iw) * s.c + c;
        if (x.data[k] > m) m = x.data[k], at = k;
      });
      if (at >= 0) dx.data[at] += dy.data[((b * s.ho + oh) * s.wo + ow) * s.c + c];
    }
  });
  ops::put(g, op, st, std::move(dx));
}

void avg_pool_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const PoolShape s = pool_shape(g.tensor(op.inputs[0]), g.tensor(op.outputs[0]));
  const Tensor& x = in(st, op, 0);
  Tensor y = ops::out_like(g, op);
  ops::for_positions(s.b, s.ho, s.wo, [&](int64_t b, int64_t oh, int64_t ow) {
    float* yr = &y.data[((b * s.ho + oh) * s.wo + ow) * s.c];
    int64_t n = 0;
    window(s, op.attrs.window, oh, ow, [&](int64_t ih, int64_t iw) {
      const float* xr = &x.data[((b * s.h + ih) * s.w + iw) * s.c];
      for (int64_t c = 0; c < s.c; ++c) yr[c] += xr[c];
      ++n;
    });
    for (int64_t c = 0; c < s.c && n > 0; ++c) yr[c] /= static_cast<float>(n);
  });
  ops::put(g, op, st, std::move(y));
}

void avg_pool_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const PoolShape s = pool_shape(g.tensor(op.outputs[0]), g.tensor(op.inputs[0]));
  const Tensor& dy = in(st, op, 0);
  Tensor dx = ops::out_like(g, op);
  ops::for_positions(s.b, s.ho, s.wo, [&](int64_t b, int64_t oh, int64_t ow) {
    int64_t n = 0;
    window(s, op.attrs.window, oh, ow, [&](int64_t, int64_t) { ++n; });
    if (n == 0) return;
    const float* dyr = &dy.data[((b * s.ho + oh) * s.wo + ow) * s.c];
    const float inv = 1.0f / static_cast<float>(n);
    window(s, op.attrs.window, oh, ow, [&](int64_t ih, int64_t iw) {
      float* dxr = &dx.data[((b * s.h + ih) * s.w + iw) * s.c];
      for (int64_t c = 0; c < s.c; ++c) dxr[c] += dyr[c] * inv;
    });
  });
  ops::put(g, op, st, std::move(dx));
}

std::vector<TensorId> max_pool_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1};
  const TensorInfo x = b.graph().tensor(op.inputs[0]);
  return {b.emit(op.name + ".dx", OpKind::MaxPoolGrad, Phase::Backward, {dy[0], op.inputs[0]}, x.shape, x.dtype,
                 TensorRole::Gradient, op.attrs)};
}

std::vector<TensorId> avg_pool_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1};
  const TensorInfo x = b.graph().tensor(op.inputs[0]);
  return {b.emit(op.name + ".dx", OpKind::AvgPoolGrad, Phase::Backward, {dy[0]}, x.shape, x.dtype,
                 TensorRole::Gradient, op.attrs)};
}

// Every operand and the output split along the batch as the first input is; nothing else split.
OpSharding batch_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec s = ShardSpec::replicated(4);
  s.dims[0] = sharding::settled(q.in[0]).dims[0];
  r.in.assign(q.op.inputs.size(), s);
  r.out = {s};
  return r;
}

// Max pooling with its input rows split (spatial partitioning, plan/halo.h): each device pools its window of rows
// (its own and its neighbours' halos; outside the map -infinity, which never wins), unpadded along H.
OpSharding max_pool_rule(const OpShardingQuery& q) {
  const ShardSpec in = sharding::settled(q.in[0]);
  if (!in.splits(1)) return batch_rule(q);
  OpSharding r;
  const ShardSpec x = batch_and_rows(in);
  r.in = {x};
  r.out = {x};
  const TensorInfo& xi = q.g.tensor(q.op.inputs[0]);
  const HaloGeometry h = spatial_geometry(q, x.dims[1], xi.shape[1], q.g.tensor(q.op.outputs[0]).shape[1]);
  r.attrs = window_attrs(q.op.attrs);
  if (h.trivial) return r;
  const int win = add_halo_window(r, h, 0, local_shape(xi.shape, x, q.mesh), xi.dtype, x.dims[1], q.op.name, true, 2);
  const TensorInfo& yi = q.g.tensor(q.op.outputs[0]);
  const int y = output_slot(r, h, 1, local_shape(yi.shape, x, q.mesh), yi.dtype, q.op.name, 2);
  r.steps.push_back({"", OpKind::MaxPool, {win}, {y}, r.attrs});
  mask_output(r, h, y, 1, x.dims[1]);
  return r;
}

// Its gradient: each device's window of x again (the halos exchanged anew), dy scattered to the window's maxima,
// and the window's gradient folded back into the rows it came from.
OpSharding max_pool_grad_rule(const OpShardingQuery& q) {
  const ShardSpec in = sharding::settled(q.in[1]);
  if (!in.splits(1)) return batch_rule(q);
  OpSharding r;
  const ShardSpec x = batch_and_rows(in);
  r.in = {x, x};
  r.out = {x};
  const TensorInfo& xi = q.g.tensor(q.op.inputs[1]);
  const HaloGeometry h = spatial_geometry(q, x.dims[1], xi.shape[1], q.g.tensor(q.op.inputs[0]).shape[1]);
  r.attrs = window_attrs(q.op.attrs);
  if (h.trivial) return r;
  const std::vector<int64_t> shape = local_shape(xi.shape, x, q.mesh);
  const int win = add_halo_window(r, h, 1, shape, xi.dtype, x.dims[1], q.op.name, true, 3);
  std::vector<int64_t> window = shape;
  window[1] = h.window;
  r.scratch.push_back({q.op.name + ".window.grad", window, xi.dtype});
  const int grad = 3 + static_cast<int>(r.scratch.size()) - 1;
  r.steps.push_back({"", OpKind::MaxPoolGrad, {0, win}, {grad}, r.attrs});
  add_halo_fold(r, h, grad, 2, shape, xi.dtype, x.dims[1], q.op.name, 3);
  return r;
}

const bool registered =
    register_op_kind({OpKind::MaxPool, "max_pool", Unit::Vpu, max_pool_cost, max_pool_kernel, max_pool_grad,
                      max_pool_rule}) &&
    register_op_kind({OpKind::MaxPoolGrad, "max_pool_grad", Unit::Vpu, max_pool_grad_cost, max_pool_grad_kernel,
                      nullptr, max_pool_grad_rule}) &&
    register_op_kind({OpKind::AvgPool, "avg_pool", Unit::Vpu, avg_pool_cost, avg_pool_kernel, avg_pool_grad,
                      batch_rule}) &&
    register_op_kind({OpKind::AvgPoolGrad, "avg_pool_grad", Unit::Vpu, avg_pool_grad_cost, avg_pool_grad_kernel,
                      nullptr, batch_rule});

}  // namespace
}  // namespace podsim
