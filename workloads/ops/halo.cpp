// The local steps of spatial partitioning (plan/halo.h): taking the halo rows to send, assembling a device's input
// window from its rows, its neighbours' halos and the map's padding, folding a window's gradient back into the rows
// it came from, and adding the neighbours' parts. Rows are dimension 1 of NHWC tensors; device i's window starts at
// global row i * attrs.offset - attrs.window.pt, its own rows at i * rows. A HaloWindow without halos over a
// device's own rows (offset = its rows, no padding) zeroes the rows past the map: the mask of padded output rows.
//
// Cost: data movement through the vector unit (a copy, or an add per element for HaloAdd), no arithmetic to speak
// of; XLA fuses the equivalent pad and dynamic-slice into the convolution's input, which these do not model (they
// are small beside the convolutions: a window is a shard plus a few rows).
#include <cstring>
#include <limits>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost copy_cost(const ModelGraph& g, const Op& op) { return ops::vpu_cost(g, op, 1, 0, 0, 0, 0); }
OpCost add_cost(const ModelGraph& g, const Op& op) { return ops::vpu_cost(g, op, 1); }

// A tensor as [outer, rows, inner] (batch, rows, the rest).
struct Rows {
  int64_t outer, rows, inner;
};
Rows rows_of(const std::vector<int64_t>& s) {
  int64_t inner = 1;
  for (size_t d = 2; d < s.size(); ++d) inner *= s[d];
  return {s[0], s[1], inner};
}

void copy_row(const Tensor& from, const Rows& f, int64_t fr, Tensor& to, const Rows& t, int64_t tr, bool add) {
  for (int64_t b = 0; b < f.outer; ++b) {
    const float* src = &from.data[(b * f.rows + fr) * f.inner];
    float* dst = &to.data[(b * t.rows + tr) * t.inner];
    if (add)
      for (int64_t k = 0; k < f.inner; ++k) dst[k] += src[k];
    else
      std::memcpy(dst, src, static_cast<size_t>(f.inner) * sizeof(float));
  }
}

// Where global row g of the map is for device i: its own rows (part 0), the halo from above (1) or from below (2),
// and the row within that part; -1 when the device does not hold it.
struct Place {
  int part = -1;
  int64_t row = 0;
};
Place place(int64_t g, int64_t i, int64_t rows, int64_t lo, int64_t hi) {
  const int64_t local = g - i * rows;
  if (local >= 0 && local < rows) return {0, local};
  if (local < 0 && local >= -lo) return {1, lo + local};
  if (local >= rows && local < rows + hi) return {2, local - rows};
  return {};
}

void rows_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  const Rows xr = rows_of(x.shape), yr = rows_of(y.shape);
  ops::check(op.attrs.offset + yr.rows <= xr.rows, op, "halo rows past the shard");
  for (int64_t r = 0; r < yr.rows; ++r) copy_row(x, xr, op.attrs.offset + r, y, yr, r, false);
  ops::put(g, op, s, std::move(y));
}

void window_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const OpAttrs& a = op.attrs;
  const int64_t i = s.device_index(a.axes);
  std::vector<const Tensor*> parts = {&in(s, op, 0), nullptr, nullptr};
  size_t next = 1;
  if (a.dim > 0) parts[1] = &in(s, op, next++);
  if (a.dim2 > 0) parts[2] = &in(s, op, next++);
  Tensor w = ops::out_like(g, op);
  const Rows wr = rows_of(w.shape), xr = rows_of(parts[0]->shape);
  const float pad = a.reduce_max ? -std::numeric_limits<float>::infinity() : 0.0f;
  for (int64_t r = 0; r < wr.rows; ++r) {
    const int64_t row = i * a.offset - a.window.pt + r;
    // Outside the map, padding; a row no part holds is read only by outputs past the map's (a device whose output
    // rows are all padding, masked afterwards).
    const Place p = row < 0 || row >= a.count ? Place{} : place(row, i, xr.rows, a.dim, a.dim2);
    if (p.part >= 0 && parts[p.part]) {
      copy_row(*parts[p.part], rows_of(parts[p.part]->shape), p.row, w, wr, r, false);
      continue;
    }
    for (int64_t b = 0; b < wr.outer; ++b)
      std::fill_n(&w.data[(b * wr.rows + r) * wr.inner], wr.inner, pad);
  }
  ops::put(g, op, s, std::move(w));
}

void fold_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const OpAttrs& a = op.attrs;
  const int64_t i = s.device_index(a.axes);
  const Tensor& w = in(s, op, 0);
  std::vector<Tensor> out;
  for (size_t k = 0; k < op.outputs.size(); ++k) out.push_back(ops::out_like(g, op, k));
  Tensor* parts[3] = {&out[0], nullptr, nullptr};
  size_t next = 1;
  if (a.dim > 0) parts[1] = &out[next++];
  if (a.dim2 > 0) parts[2] = &out[next++];
  const Rows wr = rows_of(w.shape), own = rows_of(out[0].shape);
  for (int64_t r = 0; r < wr.rows; ++r) {
    const int64_t row = i * a.offset - a.window.pt + r;
    if (row < 0 || row >= a.count) continue;  // the map's padding
    const Place p = place(row, i, own.rows, a.dim, a.dim2);
    if (p.part < 0 || !parts[p.part]) continue;  // read only by padded outputs, whose gradient is zero
    copy_row(w, wr, r, *parts[p.part], rows_of(parts[p.part]->shape), p.row, true);
  }
  for (size_t k = 0; k < out.size(); ++k) ops::put(g, op, s, std::move(out[k]), k);
}

void add_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const OpAttrs& a = op.attrs;
  Tensor dx = in(s, op, 0);
  const Rows dr = rows_of(dx.shape);
  size_t next = 1;
  if (a.dim > 0) {  // the next device's window reached a.dim rows above its own: my last rows
    const Tensor& t = in(s, op, next++);
    for (int64_t r = 0; r < a.dim; ++r) copy_row(t, rows_of(t.shape), r, dx, dr, dr.rows - a.dim + r, true);
  }
  if (a.dim2 > 0) {  // the previous device's window reached a.dim2 rows below its own: my first rows
    const Tensor& t = in(s, op, next++);
    for (int64_t r = 0; r < a.dim2; ++r) copy_row(t, rows_of(t.shape), r, dx, dr, r, true);
  }
  ops::put(g, op, s, std::move(dx));
}

const bool registered =
    register_op_kind({OpKind::HaloRows, "halo_rows", Unit::Vpu, copy_cost, rows_kernel, nullptr, nullptr}) &&
    register_op_kind({OpKind::HaloWindow, "halo_window", Unit::Vpu, copy_cost, window_kernel, nullptr, nullptr}) &&
    register_op_kind({OpKind::HaloFold, "halo_fold", Unit::Vpu, copy_cost, fold_kernel, nullptr, nullptr}) &&
    register_op_kind({OpKind::HaloAdd, "halo_add", Unit::Vpu, add_cost, add_kernel, nullptr, nullptr});

}  // namespace
}  // namespace podsim
