// Array ops podsim times but does not compute (no kernel: numeric mode refuses them, hlo/ says so): gathers,
// scatters, sorts, windowed reductions, N-D convolutions, fused attention and kernels known only by their cost.
//
//  - gather: reads the rows it picks (runs of a slice's contiguous bytes at random places) and its indices, writes
//    its output; scatter: reads its updates and indices, reads and writes the rows it updates, in place.
//  - sort: a bitonic network along the sorted dimension, log2(n)(log2(n)+1)/2 compare-and-swap stages per element
//    of each input, as XLA sorts on TPU; reads and writes every input once.
//  - reduce-window: one operation per element of each window.
//  - convolution: the GEMM of its im2col form on the MXU (attrs.dims = batch (feature groups), M = examples x output
//    positions, K = input features per group x window, N = output features per group); the input is read once,
//    not once per filter tap.
//  - fused attention (flash attention, one kernel: Pallas on TPU, Transformer Engine or cuDNN on GPUs): the score
//    matrix never leaves VMEM. Forward: QK^T and PV, 4 B H S T D FLOPs; backward: QK^T again, dV, dP, dQ and dK,
//    10 B H S T D; half of it (the causal triangle) when causal. Timed as one batched GEMM of the same FLOPs whose
//    operands are Q (A) and K with V (B) and whose result is O (C), so the tiler counts Q once and K, V once per
//    query tile; the softmax (one exponential and 4 operations per score forward, 6 backward) is its vector work.
//    Its results are its floating-point outputs (integer ones are random-number state and scratch space).
//  - custom cost (workload.custom_calls): the user's FLOPs and bytes; on the vector unit, or as a GEMM of those
//    FLOPs (K = N = 1024) on the MXU.
#include <algorithm>
#include <cmath>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

double float_output_bytes(const ModelGraph& g, const Op& op) {
  double b = 0;
  for (TensorId t : op.outputs)
    if (!dtype_is_integer(g.tensor(t).dtype)) b += g.tensor(t).bytes();
  return b;
}

// ---- gather, scatter ----

// Contiguous bytes of one slice: its trailing dimensions while they are whole, then one more.
double slice_run(const TensorInfo& x, const std::vector<int64_t>& slice) {
  double run = dtype_bytes(x.dtype);
  if (slice.size() != x.shape.size()) return run;
  for (size_t d = slice.size(); d-- > 0;) {
    run *= static_cast<double>(slice[d]);
    if (slice[d] != x.shape[d]) break;
  }
  return run;
}

OpCost gather_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::vpu_cost(g, op, 1, 0, 0, 0, 0);
  c.vector.elements = static_cast<double>(g.tensor(op.outputs[0]).elements());
  c.bytes_read = output_bytes(g, op) + g.tensor(op.inputs[1]).bytes();
  c.pattern = HbmPattern::Gather;
  c.read_run = slice_run(g.tensor(op.inputs[0]), op.attrs.dims);
  return c;
}

OpCost scatter_cost(const ModelGraph& g, const Op& op) {
  const TensorInfo& upd = g.tensor(op.inputs.back());
  OpCost c = ops::vpu_cost(g, op, 1, 0, 0, 0, 1);
  c.vector.elements = static_cast<double>(upd.elements());
  c.flops = c.vector.elements;
  c.bytes_read = 2 * upd.bytes() + g.tensor(op.inputs[1]).bytes();  // the updates and the rows they combine into
  c.bytes_written = upd.bytes();
  c.pattern = HbmPattern::Gather;
  c.write_pattern = HbmPattern::Gather;
  c.read_run = slice_run(g.tensor(op.inputs[0]), op.attrs.dims);
  c.in_place = true;
  return c;
}

// ---- sort, reduce-window ----

OpCost sort_cost(const ModelGraph& g, const Op& op) {
  const TensorInfo& x = g.tensor(op.inputs[0]);
  const size_t d = op.attrs.dims.empty() ? x.shape.size() - 1 : static_cast<size_t>(op.attrs.dims[0]);
  const double n = x.shape.empty() ? 1.0 : static_cast<double>(std::max<int64_t>(1, x.shape.at(d)));
  const double l = std::ceil(std::log2(std::max(2.0, n)));
  OpCost c = ops::vpu_cost(g, op, 2.0 * static_cast<double>(op.inputs.size()) * l * (l + 1) / 2, 0, 0, 0, 0);
  c.vector.elements = static_cast<double>(x.elements());
  return c;
}

OpCost reduce_window_cost(const ModelGraph& g, const Op& op) {
  double window = 1;
  for (int64_t s : op.attrs.dims) window *= static_cast<double>(s);
  OpCost c = ops::vpu_cost(g, op, window);
  c.vector.elements = static_cast<double>(g.tensor(op.outputs[0]).elements());
  c.flops = c.vector.elements * window;
  c.bytes_read = g.tensor(op.inputs[0]).bytes();
  return c;
}

// ---- convolution ----

GemmDims convolution_gemm(const ModelGraph& g, const Op& op) {
  ops::check(op.attrs.dims.size() == 4, op, "convolution without its GEMM");
  GemmDims d;
  d.batch = op.attrs.dims[0];
  d.m = op.attrs.dims[1];
  d.k = op.attrs.dims[2];
  d.n = op.attrs.dims[3];
  d.a_bytes = g.tensor(op.inputs[0]).bytes();
  d.b_bytes = g.tensor(op.inputs[1]).bytes();
  d.b_shared = d.batch == 1;
  return d;
}

OpCost convolution_cost(const ModelGraph& g, const Op& op) {
  const GemmDims d = convolution_gemm(g, op);
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = 2.0 * static_cast<double>(d.batch) * static_cast<double>(d.m) * static_cast<double>(d.k) *
            static_cast<double>(d.n);
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return c;
}

// ---- fused attention ----

struct Attention {
  double b = 1, h = 1, s = 1, t = 1, d = 1;
  double fraction = 1;  // of the score matrix computed (the causal triangle)
};

Attention attention(const ModelGraph& g, const Op& op) {
  ops::check(op.inputs.size() >= 3, op, "fused attention needs q, k and v");
  const auto& q = g.tensor(op.inputs[0]).shape;
  const auto& k = g.tensor(op.inputs[1]).shape;
  ops::check(q.size() == 4 && k.size() == 4, op, "fused attention's q and k are [B, S, H, D]");
  Attention a;
  a.b = static_cast<double>(q[0]);
  a.s = static_cast<double>(q[1]);
  a.h = static_cast<double>(q[2]);
  a.d = static_cast<double>(q[3]);
  a.t = static_cast<double>(k[1]);
  if (op.attrs.causal) a.fraction = a.s == a.t ? (a.t + 1) / (2 * a.t) : 0.5;
  return a;
}

double attention_passes(const Op& op) { return op.kind == OpKind::FusedAttentionGrad ? 5 : 2; }

GemmDims attention_gemm(const ModelGraph& g, const Op& op) {
  const Attention a = attention(g, op);
  GemmDims d;
  d.batch = static_cast<int64_t>(a.b * a.h);
  d.m = static_cast<int64_t>(a.s);
  d.k = static_cast<int64_t>(a.d);
  d.n = std::max<int64_t>(1, static_cast<int64_t>(std::llround(attention_passes(op) * a.t * a.fraction)));
  double a_bytes = g.tensor(op.inputs[0]).bytes(), b_bytes = g.tensor(op.inputs[1]).bytes() + g.tensor(op.inputs[2]).bytes();
  double c_bytes = float_output_bytes(g, op);
  if (op.kind == OpKind::FusedAttentionGrad) {  // the other inputs (o, do, statistics) are read with q
    for (size_t i = 3; i < op.inputs.size(); ++i) a_bytes += g.tensor(op.inputs[i]).bytes();
  }
  d.a_bytes = a_bytes;
  d.b_bytes = b_bytes;
  d.c_bytes = c_bytes;
  return d;
}

OpCost attention_cost(const ModelGraph& g, const Op& op) {
  const Attention a = attention(g, op);
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = 2.0 * attention_passes(op) * a.b * a.h * a.s * a.t * a.d * a.fraction;
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = float_output_bytes(g, op);
  c.vector.elements = a.b * a.h * a.s * a.t * a.fraction;
  c.vector.transcendental = 1;
  c.vector.simple = op.kind == OpKind::FusedAttentionGrad ? 6 : 4;
  return c;
}

// ---- a kernel known by its cost ----

bool on_mxu(const Op& op) { return op.attrs.pattern == "mxu"; }

GemmDims custom_gemm(const ModelGraph& g, const Op& op) {
  GemmDims d;
  d.k = d.n = 1024;
  d.m = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(op.attrs.flops / (2.0 * 1024 * 1024))));
  const double in = op.attrs.bytes * 0.75, out = op.attrs.bytes * 0.25;  // operands and result, as a square GEMM's
  d.a_bytes = in / 2;
  d.b_bytes = in / 2;
  d.c_bytes = out;
  return d;
}

OpCost custom_cost(const ModelGraph& g, const Op& op) {
  OpCost c;
  c.unit = on_mxu(op) ? Unit::Mxu : Unit::Vpu;
  c.flops = op.attrs.flops;
  const double out = std::min(op.attrs.bytes, output_bytes(g, op));
  c.bytes_written = out;
  c.bytes_read = std::max(0.0, op.attrs.bytes - out);
  if (c.unit == Unit::Vpu) {
    double n = 1;
    for (TensorId t : op.outputs) n = std::max(n, static_cast<double>(g.tensor(t).elements()));
    c.vector.elements = n;
    c.vector.simple = op.attrs.flops / n;
  }
  return c;
}

const bool registered = [] {
  register_op_kind({OpKind::Gather, "gather", Unit::Vpu, gather_cost, nullptr, nullptr});
  register_op_kind({OpKind::Scatter, "scatter", Unit::Vpu, scatter_cost, nullptr, nullptr});
  register_op_kind({OpKind::Sort, "sort", Unit::Vpu, sort_cost, nullptr, nullptr});
  register_op_kind({OpKind::ReduceWindow, "reduce_window", Unit::Vpu, reduce_window_cost, nullptr, nullptr});
  register_op_kind({OpKind::Convolution, "convolution", Unit::Mxu, convolution_cost, nullptr, nullptr, nullptr,
                    nullptr, convolution_gemm});
  register_op_kind({OpKind::FusedAttention, "fused_attention", Unit::Mxu, attention_cost, nullptr, nullptr, nullptr,
                    nullptr, attention_gemm});
  register_op_kind({OpKind::FusedAttentionGrad, "fused_attention_grad", Unit::Mxu, attention_cost, nullptr, nullptr,
                    nullptr, nullptr, attention_gemm});
  register_op_kind({OpKind::CustomCost, "custom_cost", Unit::Vpu, custom_cost, nullptr, nullptr, nullptr, nullptr,
                    custom_gemm});
  return true;
}();

}  // namespace
}  // namespace podsim
