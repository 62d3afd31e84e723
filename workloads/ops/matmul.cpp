// MatMul: C[b] = op(A[b]) @ op(B[b]) on the MXU, bf16 operands rounded as the MXU does, fp32 accumulation.
// Shapes as stored: A is [batch, M, K] (or [batch, K, M] when trans_a), B is [batch, K, N] (or [N, K] when
// trans_b); an operand of rank 2 is shared by every batch entry. The output is [batch, M, N], or [M, N] when
// batch == 1 and both operands are rank 2.
#include <Eigen/Core>

#include "sim/common/error.h"
#include "workloads/ops/op_kind.h"

namespace podsim {
namespace {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapC = Eigen::Map<const RowMat>;
using Map = Eigen::Map<RowMat>;

OpCost cost(const ModelGraph& g, const Op& op) {
  const GemmDims a = gemm_dims(g, op);
  OpCost c;
  c.unit = Unit::Mxu;
  c.flops = 2.0 * static_cast<double>(a.batch) * static_cast<double>(a.m) * static_cast<double>(a.k) *
            static_cast<double>(a.n);
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  return c;
}

// Copies one batch entry of an operand as a row-major [rows, cols] matrix, rounded to bf16 when stored as bf16.
RowMat operand(const Tensor& t, const TensorInfo& info, int64_t b, int64_t rows, int64_t cols) {
  int64_t per = rows * cols;
  int64_t base = info.shape.size() >= 3 ? b * per : 0;
  RowMat m = MapC(t.data.data() + base, rows, cols);
  if (info.dtype == DType::BF16) m = m.unaryExpr([](float x) { return round_bf16(x); });
  return m;
}

void kernel(const ModelGraph& g, const Op& op, TensorStore& store) {
  const OpAttrs& a = op.attrs;
  const TensorInfo& ia = g.tensor(op.inputs[0]);
  const TensorInfo& ib = g.tensor(op.inputs[1]);
  const TensorInfo& ic = g.tensor(op.outputs[0]);
  const Tensor& ta = store.get(op.inputs[0]);
  const Tensor& tb = store.get(op.inputs[1]);
  Tensor out(ic.shape);
  for (int64_t b = 0; b < a.batch; ++b) {
    RowMat A = a.trans_a ? RowMat(operand(ta, ia, b, a.k, a.m).transpose()) : operand(ta, ia, b, a.m, a.k);
    RowMat B = a.trans_b ? RowMat(operand(tb, ib, b, a.n, a.k).transpose()) : operand(tb, ib, b, a.k, a.n);
    Map(out.data.data() + b * a.m * a.n, a.m, a.n).noalias() = A * B;
  }
  if (ic.dtype == DType::BF16)
    for (float& x : out.data) x = round_bf16(x);
  store.put(op.outputs[0], std::move(out));
}

// dA = dC @ op(B)^T and dB = op(A)^T @ dC, written in the stored layout of A and B; a shared (rank-2) operand
// of a batched product gets its gradient summed over the batch, which the [K, batch*M] @ [batch*M, N] form does.
std::vector<TensorId> grad(GraphBuilder& bld, const Op& op, const std::vector<TensorId>& dout) {
  TensorId dc = dout[0];
  if (dc < 0) return {-1, -1};
  ModelGraph& g = bld.graph();
  const OpAttrs a = op.attrs;
  TensorId A = op.inputs[0], B = op.inputs[1];
  const TensorInfo ia = g.tensor(A), ib = g.tensor(B);
  bool a_shared = a.batch > 1 && ia.shape.size() == 2;
  bool b_shared = a.batch > 1 && ib.shape.size() == 2;
  std::vector<TensorId> out(2, -1);
  auto needs_grad = [](const TensorInfo& t) { return t.role != TensorRole::Input && t.role != TensorRole::Label; };
  if (needs_grad(ia)) {
    // dA (stored layout): trans_a ? op(B) @ dC^T : dC @ op(B)^T
    OpAttrs at;
    at.batch = a_shared ? 1 : a.batch;
    if (!a.trans_a) {
      at.m = a_shared ? a.batch * a.m : a.m; at.k = a.n; at.n = a.k;
      at.trans_a = false; at.trans_b = !a.trans_b;
      out[0] = bld.emit(op.name + ".dA", OpKind::MatMul, Phase::Backward, {dc, B}, ia.shape, ia.dtype,
                        TensorRole::Gradient, at);
    } else {
      at.m = a.k; at.k = a.n; at.n = a.m;
      at.trans_a = a.trans_b; at.trans_b = true;
      out[0] = bld.emit(op.name + ".dA", OpKind::MatMul, Phase::Backward, {B, dc}, ia.shape, ia.dtype,
                        TensorRole::Gradient, at);
    }
  }
  if (needs_grad(ib)) {
    OpAttrs bt;
    bt.batch = b_shared ? 1 : a.batch;
    int64_t rows = b_shared ? a.batch * a.m : a.m;
    if (!a.trans_b) {
      // dB[K, N] = op(A)^T @ dC
      bt.m = a.k; bt.k = rows; bt.n = a.n;
      bt.trans_a = !a.trans_a; bt.trans_b = false;
      out[1] = bld.emit(op.name + ".dB", OpKind::MatMul, Phase::Backward, {A, dc}, ib.shape, ib.dtype,
                        TensorRole::Gradient, bt);
    } else {
      // dB[N, K] = dC^T @ op(A)
      bt.m = a.n; bt.k = rows; bt.n = a.k;
      bt.trans_a = true; bt.trans_b = a.trans_a;
      out[1] = bld.emit(op.name + ".dB", OpKind::MatMul, Phase::Backward, {dc, A}, ib.shape, ib.dtype,
                        TensorRole::Gradient, bt);
    }
  }
  return out;
}

}  // namespace

GemmDims gemm_dims(const ModelGraph& g, const Op& op) {
  if (op.kind != OpKind::MatMul) throw Error(Err::Internal, "gemm_dims of non-matmul op '" + op.name + "'");
  const OpAttrs& a = op.attrs;
  GemmDims d;
  d.batch = a.batch;
  d.m = a.m;
  d.k = a.k;
  d.n = a.n;
  d.a_shared = a.batch > 1 && g.tensor(op.inputs[0]).shape.size() == 2;
  d.b_shared = a.batch > 1 && g.tensor(op.inputs[1]).shape.size() == 2;
  return d;
}

namespace {

const bool registered = register_op_kind({OpKind::MatMul, "matmul", Unit::Mxu, cost, kernel, grad});

}  // namespace
}  // namespace podsim
