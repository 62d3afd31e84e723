// Convert: the same values in another element type (attrs: none; the output tensor's dtype says which). Mixed
// precision (workload.weight_dtype: fp32 with workload.dtype: bf16) stores fp32 master weights and casts each to a
// bf16 copy where the step uses it; the copy's gradient is cast back to fp32 for the master weight's update.
//   forward:  y = round_bf16(w)            (fp32 -> bf16: round to nearest even, as XLA's convert)
//   gradient: dw = dy, in w's element type (bf16 -> fp32 is exact)
// One element read, one written, one VPU operation each: fusible into its consumer's loop (XLA fuses a convert into
// the fusion that reads it when it can).
#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

OpCost convert_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(ops::vpu_cost(g, op, 1)); }

void convert_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor y = ops::out_like(g, op);
  y.data = in(s, op, 0).data;
  ops::put(g, op, s, std::move(y));  // rounds when the output is bf16
}

std::vector<TensorId> convert_grad(GraphBuilder& b, const Op& op, const std::vector<TensorId>& dy) {
  const TensorInfo& x = b.graph().tensor(op.inputs[0]);
  if (b.graph().tensor(dy[0]).dtype == x.dtype) return {dy[0]};
  return {b.emit(op.name + ".grad", OpKind::Convert, Phase::Backward, {dy[0]}, x.shape, x.dtype,
                 TensorRole::Gradient)};
}

// Elementwise and linear: the output takes the input's spec (a partial gradient stays partial).
OpSharding convert_rule(const OpShardingQuery& q) { return sharding::elementwise(q, true); }

const bool registered =
    register_op_kind({OpKind::Convert, "convert", Unit::Vpu, convert_cost, convert_kernel, convert_grad, convert_rule});

}  // namespace
}  // namespace podsim
