// The ops of quantized matmuls (AQT, the quantization library of MaxText and JetStream; docs/model.md, "Quantized
// serving"). A weight is stored as int8 (or fp8) with one fp32 scale per output channel, its scale tensor shaped
// like the weight with 1 on every contracted dimension. The product of quantized operands factors the scales out
// of the contraction:
//   weight-only:             y = (x . q_w) * s_w                    x in bf16, q_w read as bf16 (exact for int8)
//   weights and activations: y = (q_x . q_w) * s_w * absmax_x / qmax,  q_x = quantize(x, absmax_x / qmax) per row
// with the integer (or fp8) products accumulated in fp32 on the MXU at the chip's int8 (fp8) rate.
//   RowAbsMax  x -> max |x| over its last attrs.count dimensions (the contracted ones), fp32, one per row
//   Quantize   (x, absmax) -> x / (absmax / qmax) on the output type's grid (workloads/quantization.h)
//   Rescale    (y, s1 [, s2]) -> y * s1 [* s2 * attrs.alpha]; attrs.equation "Y,S1[,S2]" names each operand's
//              dimensions by letters, a scale's letter absent from Y indexing its dimension of size 1
// Partitioning: RowAbsMax over contracted dimensions split across devices runs as a local maximum and an all-reduce
// by maximum (every device then quantizes with the global row scale, as the single device does); Quantize is
// elementwise with its row scale broadcast; Rescale is linear in y, so a pending sum stays pending.
#include <algorithm>
#include <cmath>

#include "workloads/ops/kernel_util.h"
#include "workloads/quantization.h"

namespace podsim {
namespace {

using ops::in;

// Elements of one row: the product of the last `trailing` dimensions.
int64_t row_elements(const std::vector<int64_t>& shape, int64_t trailing) {
  int64_t n = 1;
  for (size_t d = shape.size() - static_cast<size_t>(trailing); d < shape.size(); ++d) n *= shape[d];
  return n;
}

// ---- RowAbsMax ----------------------------------------------------------------------------------------------------

OpCost absmax_cost(const ModelGraph& g, const Op& op) { return ops::reduction(ops::vpu_cost(g, op, 1, 0, 0, 1)); }

void absmax_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const int64_t row = row_elements(x.shape, op.attrs.count);
  Tensor m = ops::out_like(g, op);
  for (int64_t r = 0; r < m.elements(); ++r) {
    float v = 0;
    for (int64_t i = 0; i < row; ++i) v = std::max(v, std::fabs(x.data[r * row + i]));
    m.data[r] = v;
  }
  ops::put(g, op, s, std::move(m));
}

OpSharding absmax_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec x = sharding::settled(q.in[0]);
  const size_t lead = x.rank() - static_cast<size_t>(q.op.attrs.count);
  ShardSpec rows = ShardSpec::replicated(lead);
  std::vector<std::string> split;  // the axes splitting the contracted dimensions
  for (size_t d = 0; d < x.rank(); ++d) {
    if (d < lead) rows.dims[d] = x.dims[d];
    else split.insert(split.end(), x.dims[d].begin(), x.dims[d].end());
  }
  r.in = {x};
  r.out = {rows};
  if (split.empty()) return r;
  // Slots: 0 x, 1 the row maxima, 2 the local maxima.
  const TensorInfo& out = q.g.tensor(q.op.outputs[0]);
  r.scratch = {{q.op.name + ".local", local_shape(out.shape, rows, q.mesh)}};
  OpAttrs max_reduce;
  max_reduce.axes = split;
  max_reduce.reduce_max = true;
  r.steps = {{"local", OpKind::RowAbsMax, {0}, {2}, r.attrs}, {"", OpKind::AllReduce, {2}, {1}, max_reduce}};
  return r;
}

// ---- Quantize -----------------------------------------------------------------------------------------------------

// Per element: the multiply by qmax / absmax, the rounding and the clip.
OpCost quantize_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 3)); }

void quantize_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const Tensor& m = in(s, op, 1);
  const DType t = g.tensor(op.outputs[0]).dtype;
  const int64_t row = m.elements() > 0 ? x.elements() / m.elements() : 0;
  Tensor q = ops::out_like(g, op);
  for (int64_t i = 0; i < x.elements(); ++i) q.data[i] = quantize(x.data[i], quant_scale(m.data[i / row], t), t);
  s.put(op.outputs[0], std::move(q));
}

OpSharding quantize_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const ShardSpec x = sharding::settled(q.in[0]);
  ShardSpec rows = x;
  rows.dims.resize(q.g.tensor(q.op.inputs[1]).shape.size());
  r.in = {x, rows};
  r.out = {x};
  return r;
}

// ---- Rescale ------------------------------------------------------------------------------------------------------

// The operands' letters: "bsf,df,bs" -> {"bsf", "df", "bs"}.
std::vector<std::string> letters(const Op& op) {
  std::vector<std::string> out(1);
  for (char c : op.attrs.equation) {
    if (c == ',') out.emplace_back();
    else out.back() += c;
  }
  return out;
}

// Per element: one multiply per scale.
OpCost rescale_cost(const ModelGraph& g, const Op& op) {
  return ops::elementwise(ops::vpu_cost(g, op, static_cast<double>(op.inputs.size() - 1)));
}

void rescale_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& y = in(s, op, 0);
  const std::vector<std::string> l = letters(op);
  ops::check(l.size() == op.inputs.size() && l[0].size() == y.shape.size(), op, "rescale's equation");
  // Per scale, its stride along each dimension of y (0 where the scale does not vary with it).
  std::vector<std::vector<int64_t>> stride(op.inputs.size() - 1, std::vector<int64_t>(y.shape.size(), 0));
  for (size_t k = 1; k < op.inputs.size(); ++k) {
    const Tensor& sc = in(s, op, k);
    int64_t st = 1;
    for (size_t d = l[k].size(); d-- > 0;) {
      const size_t at = l[0].find(l[k][d]);
      if (at != std::string::npos && sc.shape[d] > 1) stride[k - 1][at] = st;
      st *= sc.shape[d];
    }
  }
  Tensor out = ops::out_like(g, op);
  std::vector<int64_t> idx(y.shape.size(), 0);
  for (int64_t i = 0; i < y.elements(); ++i) {
    float v = y.data[i];
    for (size_t k = 1; k < op.inputs.size(); ++k) {
      int64_t at = 0;
      for (size_t d = 0; d < idx.size(); ++d) at += idx[d] * stride[k - 1][d];
      v *= in(s, op, k).data[at];
      if (k == 2) v *= static_cast<float>(op.attrs.alpha);
    }
    out.data[i] = v;
    for (size_t d = idx.size(); d-- > 0;) {  // odometer, last dimension fastest
      if (++idx[d] < y.shape[d]) break;
      idx[d] = 0;
    }
  }
  ops::put(g, op, s, std::move(out));
}

// Linear in y: a pending sum stays pending. Each scale takes y's split of the dimensions it shares with it.
OpSharding rescale_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  const std::vector<std::string> l = letters(q.op);
  const ShardSpec y = q.in[0];
  r.in = {y};
  for (size_t k = 1; k < q.op.inputs.size(); ++k) {
    ShardSpec sc = ShardSpec::replicated(l[k].size());
    for (size_t d = 0; d < l[k].size(); ++d) {
      const size_t at = l[0].find(l[k][d]);
      if (at != std::string::npos && q.g.tensor(q.op.inputs[k]).shape[d] > 1) sc.dims[d] = y.dims[at];
    }
    r.in.push_back(sc);
  }
  r.out = {y};
  return r;
}

const bool registered =
    register_op_kind({OpKind::RowAbsMax, "row_abs_max", Unit::Vpu, absmax_cost, absmax_kernel, nullptr, absmax_rule}) &&
    register_op_kind({OpKind::Quantize, "quantize", Unit::Vpu, quantize_cost, quantize_kernel, nullptr, quantize_rule}) &&
    register_op_kind({OpKind::Rescale, "rescale", Unit::Vpu, rescale_cost, rescale_kernel, nullptr, rescale_rule});

}  // namespace
}  // namespace podsim
