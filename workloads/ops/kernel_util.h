// Internal helpers for op kernels and gradient rules in workloads/ops/.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "workloads/ops/op_kind.h"

namespace podsim::ops {

inline const Tensor& in(const TensorStore& s, const Op& op, size_t i) { return s.get(op.inputs.at(i)); }

// A zero tensor shaped like output `i` of `op`.
inline Tensor out_like(const ModelGraph& g, const Op& op, size_t i = 0) { return Tensor(g.tensor(op.outputs.at(i)).shape); }

// Stores output `i`, rounding to bf16 when the output tensor is bf16.
inline void put(const ModelGraph& g, const Op& op, TensorStore& s, Tensor t, size_t i = 0) {
  if (g.tensor(op.outputs.at(i)).dtype == DType::BF16)
    for (float& x : t.data) x = round_bf16(x);
  s.put(op.outputs.at(i), std::move(t));
}

// The loops of the windowed kernels (convolution, pooling; NHWC), in the order every kernel accumulates in: each
// output position of `batch` maps of ho x wo, f(n, oh, ow); and the taps of one position's window that fall inside
// the h x width input, f(i, j, ih, iw): tap (i, j) of a kh x kw window reads row ih = oh * sh - pt + i and column
// iw = ow * sw - pl + j; taps in the padding read nothing.
template <class F>
void for_positions(int64_t batch, int64_t ho, int64_t wo, F f) {
  for (int64_t n = 0; n < batch; ++n)
    for (int64_t oh = 0; oh < ho; ++oh)
      for (int64_t ow = 0; ow < wo; ++ow) f(n, oh, ow);
}
template <class F>
void for_window(const OpAttrs::Window& w, int64_t kh, int64_t kw, int64_t h, int64_t width, int64_t oh, int64_t ow,
                F f) {
  for (int64_t i = 0; i < kh; ++i) {
    const int64_t ih = oh * w.sh - w.pt + i;
    if (ih < 0 || ih >= h) continue;
    for (int64_t j = 0; j < kw; ++j) {
      const int64_t iw = ow * w.sw - w.pl + j;
      if (iw >= 0 && iw < width) f(i, j, ih, iw);
    }
  }
}
// Both together for a convolution's shape `s` (fields b, ho, wo, kh, kw, h, w): every (output position, tap) pair
// that reads the input, f(b, oh, ow, i, j, ih, iw).
template <class S, class F>
void for_taps(const S& s, const OpAttrs::Window& w, F f) {
  for_positions(s.b, s.ho, s.wo, [&](int64_t b, int64_t oh, int64_t ow) {
    for_window(w, s.kh, s.kw, s.h, s.w, oh, ow,
               [&](int64_t i, int64_t j, int64_t ih, int64_t iw) { f(b, oh, ow, i, j, ih, iw); });
  });
}

inline int64_t elements(const ModelGraph& g, TensorId t) { return g.tensor(t).elements(); }
inline int64_t last_dim(const ModelGraph& g, TensorId t) { return g.tensor(t).shape.back(); }

// Cost of an op on the vector unit: `per` operation counts per element of its largest output.
inline OpCost vpu_cost(const ModelGraph& g, const Op& op, double simple, double transcendental = 0,
                       double divide = 0, double reduce = 0, double flops_per_element = -1) {
  OpCost c;
  c.unit = Unit::Vpu;
  double n = 0;
  for (TensorId t : op.outputs) n = std::max(n, static_cast<double>(elements(g, t)));
  for (TensorId t : op.inputs) n = std::max(n, static_cast<double>(elements(g, t)));
  c.vector.elements = n;
  c.vector.simple = simple;
  c.vector.transcendental = transcendental;
  c.vector.divide = divide;
  c.vector.reduce = reduce;
  c.flops = n * (flops_per_element >= 0 ? flops_per_element : simple + transcendental + divide + reduce);
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return c;
}

// Fusion properties (OpCost::fusible, OpCost::reduction; hw/compiler/fusion.h).
inline OpCost elementwise(OpCost c) {
  c.fusible = true;
  return c;
}
inline OpCost reduction(OpCost c) {
  c.reduction = true;
  return c;
}

// Optimizer ops: the global-norm clipping factor (workload.clip_norm) an update takes as its input `base`, after
// the `base` inputs of its rule; 1 when it has none.
inline float clip_factor(const TensorStore& s, const Op& op, size_t base) {
  return op.inputs.size() > base ? s.get(op.inputs[base]).data.at(0) : 1.0f;
}
// Its partition rule: the factor is one number, whole on every device.
inline OpSharding with_clip_factor(OpSharding r, size_t base) {
  for (size_t i = base; i < r.in.size(); ++i) r.in[i] = ShardSpec::replicated(1);
  return r;
}

inline void check(bool ok, const Op& op, const std::string& what) {
  if (!ok) throw Error(Err::Internal, "op '" + op.name + "': " + what);
}

// A window's output size along one dimension (convolutions and pools); throws when the window does not fit the
// padded input.
inline int64_t window_out_size(const std::string& name, const char* dim, int64_t in, int64_t k, int64_t stride,
                               int64_t lo, int64_t hi) {
  if (k > in + lo + hi || k < 1 || stride < 1)
    throw Error(Err::OutOfRange, "op '" + name + "': a window of " + std::to_string(k) + " along " + dim +
                                     " is larger than the padded input (" + std::to_string(in) + " + " +
                                     std::to_string(lo + hi) + " padding)");
  return (in + lo + hi - k) / stride + 1;
}

}  // namespace podsim::ops
