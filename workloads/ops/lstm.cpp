// A recurrent LSTM layer (Hochreiter and Schmidhuber 1997; the cell of GNMT, Wu et al. 2016, as MLPerf's GNMT and
// PyTorch's nn.LSTM write it) as one scanned kernel, the way XLA runs a scan (jax.lax.scan, TensorFlow's
// while_loop): one While loop whose body is the step, never unrolled into graph nodes. What stays outside the loop
// is the input projection, one GEMM over every time step (xw = x . Wx + b, GNMT's TPU implementation's
// `input_projection`), and, in the backward pass, the recurrent weight's gradient, one GEMM over every step.
//
// Forward, per step t (t = 0 .. T-1; backwards in time with attrs.shift = -1), h and c starting at 0:
//   z = xw[:, t] + h[t-1] . Wh                      [B, 4, H]: the four gates batched into one [B, H] x [H, 4H] GEMM
//   i = sigmoid(z0), f = sigmoid(z1), g = tanh(z2), o = sigmoid(z3)
//   c[t] = f c[t-1] + i g;   h[t] = o tanh(c[t])
// The outputs are h and c for every step and the activated gates (what the backward reads; stored in the step's
// type, as the loop carries h and c).
// Backward, per step from the last: dh' = dh[t] + (dz[t+1] . Wh^T), do = dh' tanh(c), dc = dh' o (1 - tanh^2 c) +
// dc[t+1] f[t+1] ..., dz = the gates' derivatives; then dWh = sum_t h[t-1]^T dz[t] (one GEMM) and dxw = dz.
//
// Cost (docs/model.md, "The LSTM on TPU"): on the MXU, T products of M = B rows: [B, H] x [H, 4H] forward,
// [B, 4H] x [4H, H] backward (dz . Wh^T), plus the backward's [H, B T] x [B T, 4H], each in blocks that fit VMEM
// (add_blocked). A product with few rows is
// bound by the weight loads: each fold's 128 x 128 weights are pushed for B rows. HBM: the recurrent weight is read
// once per step (a loop body's operands are not kept in VMEM across iterations), xw and the outputs once; the
// backward reads dh, h, c and the gates and writes dxw and dWh. On the vector unit, per hidden unit and step: the
// four adds of xw, three sigmoids (a negation, an exp, an add, a division), two tanh, the cell's products and sums;
// backward the derivatives of each gate and of the cell.
#include <algorithm>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

struct Dims {
  int64_t B = 0, T = 0, H = 0;
};
Dims dims_of(const ModelGraph& g, TensorId h) {
  const auto& s = g.tensor(h).shape;
  return {s[0], s[1], s[2]};
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// Time step k of the scan: t = k forward, T - 1 - k backwards.
int64_t step_time(const Op& op, int64_t k, int64_t T) { return op.attrs.shift < 0 ? T - 1 - k : k; }

// The VMEM the kernel's blocks may take, double-buffered as hw/compiler/kernel_lowering.cpp counts them: half of a
// TPU v3 core's 16 MiB, the rest for the cell's vectors.
constexpr double kBlockBytes = 8.0 * 1024 * 1024;

// `count` products M x K @ K x N as the blocks the kernel streams through VMEM: N, then K, halved (in multiples of
// 128) until a block's operands and result fit kBlockBytes. Splitting N changes no fold of the MXU and no result it
// pops; splitting K (only the weight gradient's long contraction over every step) pops each block's partial sums.
void add_blocked(std::vector<GemmPass>& out, int64_t count, int64_t m, int64_t k, int64_t n, double elem) {
  auto bytes = [&](int64_t kb, int64_t nb) {
    return 2.0 * static_cast<double>(m * kb + kb * nb) * elem + 2.0 * static_cast<double>(m * nb) * 4.0;
  };
  int64_t kb = k, nb = n;
  while (bytes(kb, nb) > kBlockBytes && nb > 128) nb = std::max<int64_t>(128, (nb / 2 + 127) / 128 * 128);
  while (bytes(kb, nb) > kBlockBytes && kb > 128) kb = std::max<int64_t>(128, (kb / 2 + 127) / 128 * 128);
  for (const auto& [kn, ks] : {std::pair{k / kb, kb}, std::pair{int64_t{k % kb > 0}, k % kb}})
    for (const auto& [nn, ns] : {std::pair{n / nb, nb}, std::pair{int64_t{n % nb > 0}, n % nb}})
      if (kn > 0 && nn > 0) out.push_back({count * kn * nn, m, ks, ns});
}

std::vector<GemmPass> forward_gemms(const ModelGraph& g, const Op& op) {
  const Dims d = dims_of(g, op.outputs[0]);
  std::vector<GemmPass> out;
  add_blocked(out, d.T, d.B, d.H, 4 * d.H, dtype_bytes(g.tensor(op.inputs[0]).dtype));
  return out;
}

std::vector<GemmPass> backward_gemms(const ModelGraph& g, const Op& op) {
  const Dims d = dims_of(g, op.inputs[1]);
  const double elem = dtype_bytes(g.tensor(op.inputs[0]).dtype);
  std::vector<GemmPass> out;
  add_blocked(out, d.T, d.B, 4 * d.H, d.H, elem);
  add_blocked(out, 1, d.H, d.B * d.T, 4 * d.H, elem);
  return out;
}

double flops_of(const std::vector<GemmPass>& passes) {
  double f = 0;
  for (const GemmPass& p : passes) f += 2.0 * static_cast<double>(p.count * p.m) * static_cast<double>(p.k * p.n);
  return f;
}

OpCost lstm_cost(const ModelGraph& g, const Op& op) {
  const Dims d = dims_of(g, op.outputs[0]);
  const TensorInfo& wh = g.tensor(op.inputs[1]);
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = flops_of(forward_gemms(g, op));
  c.bytes_read = g.tensor(op.inputs[0]).stored_bytes() + static_cast<double>(d.T) * wh.stored_bytes();
  c.bytes_written = output_bytes(g, op);
  c.vector.elements = static_cast<double>(d.B * d.T * d.H);
  c.vector.simple = 14;
  c.vector.transcendental = 5;
  c.vector.divide = 3;
  return c;
}

OpCost lstm_grad_cost(const ModelGraph& g, const Op& op) {
  const Dims d = dims_of(g, op.inputs[1]);
  const TensorInfo& wh = g.tensor(op.inputs[4]);
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = flops_of(backward_gemms(g, op));
  c.bytes_read = input_bytes(g, op) + static_cast<double>(d.T - 1) * wh.stored_bytes();
  c.bytes_written = output_bytes(g, op);
  c.vector.elements = static_cast<double>(d.B * d.T * d.H);
  c.vector.simple = 22;
  c.vector.transcendental = 1;
  return c;
}

void lstm_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& xw = in(s, op, 0);
  const Tensor& wh = in(s, op, 1);
  const Dims d = dims_of(g, op.outputs[0]);
  const bool bf16 = g.tensor(op.outputs[0]).dtype == DType::BF16;
  auto keep = [&](double v) { return bf16 ? round_bf16(static_cast<float>(v)) : static_cast<float>(v); };
  Tensor h = ops::out_like(g, op, 0), c = ops::out_like(g, op, 1), gates = ops::out_like(g, op, 2);
  const int64_t H = d.H, G = 4 * H;
  std::vector<float> hp(static_cast<size_t>(d.B * H), 0.0f), cp(hp.size(), 0.0f);
  std::vector<double> z(static_cast<size_t>(G));
  for (int64_t k = 0; k < d.T; ++k) {
    const int64_t t = step_time(op, k, d.T);
    for (int64_t b = 0; b < d.B; ++b) {
      for (int64_t j = 0; j < G; ++j) z[j] = xw.data[(b * d.T + t) * G + j];
      for (int64_t i = 0; i < H; ++i) {
        const double hv = hp[b * H + i];
        if (hv == 0) continue;
        const float* row = &wh.data[i * G];
        for (int64_t j = 0; j < G; ++j) z[j] += hv * row[j];
      }
      float* gt = &gates.data[(b * d.T + t) * G];
      for (int64_t u = 0; u < H; ++u) {
        const float ig = keep(sigmoid(z[u])), fg = keep(sigmoid(z[H + u])), gg = keep(std::tanh(z[2 * H + u])),
                    og = keep(sigmoid(z[3 * H + u]));
        gt[u] = ig, gt[H + u] = fg, gt[2 * H + u] = gg, gt[3 * H + u] = og;
        const float cv = keep(static_cast<double>(fg) * cp[b * H + u] + static_cast<double>(ig) * gg);
        const float hv = keep(og * std::tanh(static_cast<double>(cv)));
        c.data[(b * d.T + t) * H + u] = cp[b * H + u] = cv;
        h.data[(b * d.T + t) * H + u] = hp[b * H + u] = hv;
      }
    }
  }
  s.put(op.outputs[0], std::move(h));
  s.put(op.outputs[1], std::move(c));
  s.put(op.outputs[2], std::move(gates));
}

void lstm_grad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& dh = in(s, op, 0);
  const Tensor& h = in(s, op, 1);
  const Tensor& c = in(s, op, 2);
  const Tensor& gates = in(s, op, 3);
  const Tensor& wh = in(s, op, 4);
  const Dims d = dims_of(g, op.inputs[1]);
  const int64_t H = d.H, G = 4 * H;
  Tensor dxw = ops::out_like(g, op, 0), dwh = ops::out_like(g, op, 1);
  std::vector<double> dh_next(static_cast<size_t>(d.B * H), 0.0), dc_next(dh_next.size(), 0.0);
  std::vector<double> acc(static_cast<size_t>(H * G), 0.0);
  for (int64_t k = d.T - 1; k >= 0; --k) {
    const int64_t t = step_time(op, k, d.T);
    const int64_t prev = k > 0 ? step_time(op, k - 1, d.T) : -1;  // the step before t in the scan's order
    for (int64_t b = 0; b < d.B; ++b) {
      const float* gt = &gates.data[(b * d.T + t) * G];
      float* dz = &dxw.data[(b * d.T + t) * G];
      for (int64_t u = 0; u < H; ++u) {
        const double ig = gt[u], fg = gt[H + u], gg = gt[2 * H + u], og = gt[3 * H + u];
        const double cv = c.data[(b * d.T + t) * H + u];
        const double cprev = prev >= 0 ? c.data[(b * d.T + prev) * H + u] : 0.0;
        const double tc = std::tanh(cv);
        const double dht = dh.data[(b * d.T + t) * H + u] + dh_next[b * H + u];
        const double dc = dht * og * (1 - tc * tc) + dc_next[b * H + u];
        dz[u] = static_cast<float>(dc * gg * ig * (1 - ig));
        dz[H + u] = static_cast<float>(dc * cprev * fg * (1 - fg));
        dz[2 * H + u] = static_cast<float>(dc * ig * (1 - gg * gg));
        dz[3 * H + u] = static_cast<float>(dht * tc * og * (1 - og));
        dc_next[b * H + u] = dc * fg;
      }
      // dh[t-1] = dz . Wh^T; dWh += h[t-1]^T dz.
      for (int64_t i = 0; i < H; ++i) {
        const float* row = &wh.data[i * G];
        double sum = 0;
        for (int64_t j = 0; j < G; ++j) sum += static_cast<double>(dz[j]) * row[j];
        dh_next[b * H + i] = sum;
        const double hv = prev >= 0 ? h.data[(b * d.T + prev) * H + i] : 0.0;
        if (hv == 0) continue;
        double* arow = &acc[i * G];
        for (int64_t j = 0; j < G; ++j) arow[j] += hv * dz[j];
      }
    }
  }
  for (size_t e = 0; e < acc.size(); ++e) dwh.data[e] = static_cast<float>(acc[e]);
  ops::put(g, op, s, std::move(dxw), 0);
  ops::put(g, op, s, std::move(dwh), 1);
}

std::vector<TensorId> lstm_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const ModelGraph& g = b.graph();
  const TensorInfo xw = g.tensor(op.inputs[0]), wh = g.tensor(op.inputs[1]);
  ops::check(dy[1] < 0 && dy[2] < 0, op, "only h has a gradient (c and the gates are the kernel's own)");
  Op grad;
  grad.name = op.name + ".grad";
  grad.kind = OpKind::LstmScanGrad;
  grad.phase = Phase::Backward;
  grad.inputs = {dy[0], op.outputs[0], op.outputs[1], op.outputs[2], op.inputs[1]};
  grad.attrs = op.attrs;
  ModelGraph& m = b.graph();
  const TensorId dxw = m.add_tensor({op.name + ".dxw", xw.shape, xw.dtype, TensorRole::Gradient});
  const TensorId dwh = m.add_tensor({op.name + ".dwh", wh.shape, wh.dtype, TensorRole::Gradient});
  grad.outputs = {dxw, dwh};
  m.add_op(grad);
  return {dxw, dwh};
}

// The batch splits as xw comes; time, gates and units stay whole (each step needs the whole previous h); the
// recurrent weight whole on every device.
OpSharding lstm_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec xw = ShardSpec::replicated(4);
  xw.dims[0] = sharding::settled(q.in[0]).dims[0];
  ShardSpec out = ShardSpec::replicated(3);
  out.dims[0] = xw.dims[0];
  r.in = {xw, ShardSpec::replicated(3)};
  r.out = {out, out, xw};
  return r;
}

// The batch as dh's; dWh a partial sum over the axes that split the batch.
OpSharding lstm_grad_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec rows = ShardSpec::replicated(3);
  rows.dims[0] = sharding::settled(q.in[1]).dims[0];
  ShardSpec gates = ShardSpec::replicated(4);
  gates.dims[0] = rows.dims[0];
  ShardSpec dwh = ShardSpec::replicated(3);
  dwh.partial = rows.dims[0];
  std::sort(dwh.partial.begin(), dwh.partial.end());
  r.in = {rows, rows, rows, gates, ShardSpec::replicated(3)};
  r.out = {gates, dwh};
  return r;
}

const bool registered = register_op_kind({OpKind::LstmScan, "lstm_scan", Unit::Mxu, lstm_cost, lstm_kernel, lstm_grad,
                                          lstm_rule, forward_gemms}) &&
                        register_op_kind({OpKind::LstmScanGrad, "lstm_scan_grad", Unit::Mxu, lstm_grad_cost,
                                          lstm_grad_kernel, nullptr, lstm_grad_rule, backward_gemms});

}  // namespace
}  // namespace podsim
