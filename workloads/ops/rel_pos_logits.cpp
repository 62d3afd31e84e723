// 2-D relative position logits (Shaw et al. 2018; Bello et al. 2019; BoTNet, Srinivas et al. 2021): the relative
// logits of one query position against the height and the width offsets, converted from relative to absolute key
// indexing and summed, as attention scores over an H x W map:
//   out[b, n, (x, y), (p, q)] = rh[b, n, (x, y), p - x + H - 1] + rw[b, n, (x, y), q - y + W - 1]
// rh [B, N, S, 2H - 1] and rw [B, N, S, 2W - 1] are the queries' products with the height and width embeddings
// (einsums on the MXU, before this op), S = H W query positions in row-major order; out [B, N, S, S] is added to the
// content logits q k^T. The reference implementation (the authors' gist, relative_logits and rel_to_abs) makes this
// from the two products by pad, reshape and slice (rel_to_abs), an expand-and-tile of each to the 2-D grid, a
// transpose and an add: data formatting that XLA fuses into one loop over the logits, an index computation per
// element and one add (docs/model.md, "Relative position logits"). H and W come from the inputs' last dimensions.
//
// Its gradient (RelPosLogitsGrad: dout -> (drh, drw)) reverses the gather: drh[b, n, (x, y), m] = the sum over q of
// dout[b, n, (x, y), (m + x - H + 1, q)] (the width positions of key row p, a sum along the row's minor dimension),
// drw[b, n, (x, y), m] = the sum over p of dout[b, n, (x, y), (p, m + y - W + 1)] (across the key rows); offsets
// outside the map receive nothing (the slice's padding).
//
// Cost on the vector unit: forward one add per output element (the index arithmetic of the fused gather is the
// loop's addressing); it reads the two small products and writes the logits, fusible like a bias add (a broadcast of
// smaller inputs): it joins the output fusion of the width product, with the add of the content logits. The
// gradient: two adds per element of dout and a cross-lane sum over each W-wide key row (the height sum); a row
// reduction, a kernel of its own after the softmax gradient (itself a reduction).
//
// Partitioning: each query position's row is independent, so batch, heads and query positions may be split alike
// in every operand; the last dimension (keys, relative offsets) stays whole.
#include <algorithm>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

// The map's height and width from the relative inputs' last dimensions (2H - 1, 2W - 1).
struct Grid {
  int64_t rows, heads, h, w;  // rows: B N S query rows
};

Grid grid_of(const ModelGraph& g, TensorId rh, TensorId rw) {
  const auto& a = g.tensor(rh).shape;
  const auto& c = g.tensor(rw).shape;
  return {a[0] * a[1] * a[2], a[1], (a[3] + 1) / 2, (c[3] + 1) / 2};
}

OpCost rel_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 1)); }

void rel_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Tensor& rh = in(st, op, 0);
  const Tensor& rw = in(st, op, 1);
  const Grid s = grid_of(g, op.inputs[0], op.inputs[1]);
  const int64_t S = s.h * s.w, mh = 2 * s.h - 1, mw = 2 * s.w - 1;
  Tensor out = ops::out_like(g, op);
  for (int64_t r = 0; r < s.rows; ++r) {
    const int64_t x = (r % S) / s.w, y = r % s.w;
    const float* a = &rh.data[r * mh];
    const float* c = &rw.data[r * mw];
    float* o = &out.data[r * S];
    for (int64_t p = 0; p < s.h; ++p)
      for (int64_t q = 0; q < s.w; ++q) o[p * s.w + q] = a[p - x + s.h - 1] + c[q - y + s.w - 1];
  }
  ops::put(g, op, st, std::move(out));
}

std::vector<TensorId> rel_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  if (dy[0] < 0) return {-1, -1};
  ModelGraph& g = b.graph();
  const TensorInfo rh = g.tensor(op.inputs[0]), rw = g.tensor(op.inputs[1]);
  const TensorId drh = g.add_tensor({op.name + ".drh", rh.shape, rh.dtype, TensorRole::Gradient});
  const TensorId drw = g.add_tensor({op.name + ".drw", rw.shape, rw.dtype, TensorRole::Gradient});
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::RelPosLogitsGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {dy[0]};
  grad.outputs = {drh, drw};
  grad.attrs = op.attrs;
  g.add_op(grad);
  return {drh, drw};
}

// Two adds per element of dout; the height sums cross lanes once per key row of W elements.
OpCost rel_grad_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::reduction(ops::vpu_cost(g, op, 2, 0, 0, 1, 2));
  c.vector.reduce_row = static_cast<double>((g.tensor(op.outputs[1]).shape[3] + 1) / 2);
  return c;
}

void rel_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& st) {
  const Tensor& dout = in(st, op, 0);
  const Grid s = grid_of(g, op.outputs[0], op.outputs[1]);
  const int64_t S = s.h * s.w, mh = 2 * s.h - 1, mw = 2 * s.w - 1;
  Tensor drh = ops::out_like(g, op, 0), drw = ops::out_like(g, op, 1);
  std::vector<double> ah(static_cast<size_t>(mh)), aw(static_cast<size_t>(mw));
  for (int64_t r = 0; r < s.rows; ++r) {
    const int64_t x = (r % S) / s.w, y = r % s.w;
    std::fill(ah.begin(), ah.end(), 0.0);
    std::fill(aw.begin(), aw.end(), 0.0);
    const float* d = &dout.data[r * S];
    for (int64_t p = 0; p < s.h; ++p)
      for (int64_t q = 0; q < s.w; ++q) {
        ah[static_cast<size_t>(p - x + s.h - 1)] += d[p * s.w + q];
        aw[static_cast<size_t>(q - y + s.w - 1)] += d[p * s.w + q];
      }
    for (int64_t m = 0; m < mh; ++m) drh.data[r * mh + m] = static_cast<float>(ah[m]);
    for (int64_t m = 0; m < mw; ++m) drw.data[r * mw + m] = static_cast<float>(aw[m]);
  }
  ops::put(g, op, st, std::move(drh), 0);
  ops::put(g, op, st, std::move(drw), 1);
}

// Batch, heads and query positions split alike everywhere; the last dimension whole.
OpSharding rel_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec x = sharding::unsplit_last(sharding::settled(q.in[0]), 1);
  if (q.op.kind == OpKind::RelPosLogits) {
    r.in = {x, x};
    r.out = {x};
  } else {
    r.in = {x};
    r.out = {x, x};
  }
  return r;
}

const bool registered =
    register_op_kind({OpKind::RelPosLogits, "rel_pos_logits", Unit::Vpu, rel_cost, rel_kernel, rel_grad, rel_rule}) &&
    register_op_kind({OpKind::RelPosLogitsGrad, "rel_pos_logits_grad", Unit::Vpu, rel_grad_cost, rel_grad_kernel,
                      nullptr, rel_rule});

}  // namespace

TensorId GraphBuilder::rel_pos_logits(TensorId rh, TensorId rw, const std::string& name) {
  const auto a = m_g.tensor(rh).shape, c = m_g.tensor(rw).shape;
  const bool ok = a.size() == 4 && c.size() == 4 && a[0] == c[0] && a[1] == c[1] && a[2] == c[2] && a[3] % 2 == 1 &&
                  c[3] % 2 == 1 && ((a[3] + 1) / 2) * ((c[3] + 1) / 2) == a[2];
  if (!ok)
    throw Error(Err::Internal, "rel_pos_logits '" + name + "': " + m_g.tensor(rh).shape_text() + " and " +
                                   m_g.tensor(rw).shape_text() +
                                   " (needs [B, N, H W, 2H - 1] and [B, N, H W, 2W - 1])");
  return forward(name, OpKind::RelPosLogits, {rh, rw}, {a[0], a[1], a[2], a[2]}, m_g.tensor(rh).dtype);
}

}  // namespace podsim
