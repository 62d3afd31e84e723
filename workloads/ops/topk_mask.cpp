// Top-k mask: scores [B, N] (fp32, non-negative) and counts [B] -> mask [B, N], 1 at the k_b largest scores of row b
// and 0 elsewhere, k_b = min(alpha counts[b], N) (attrs.alpha; SSD's hard-negative mining: the 3 x matched negatives
// of highest cross-entropy). Ties go to the lower index, so a mask holds exactly k_b ones.
//
// Cost, as MLPerf's TPU SSD computes it (ssd_model.py's _topk_mask, written for TPUs because a sort or tf.nn.top_k
// of [B, 8732] is slow there): a binary search for each row's k-th value over the bits of its fp32 pattern, one
// pass over the scores per bit; each pass compares every score with the candidate and counts the row's hits (a
// compare, a select and a row reduction), then one select writes the mask. A non-negative score's sign bit is known,
// which leaves 31 passes (the measured TPU v3 profile of this model shows the loss's loop running 31 times,
// ../shared/reference/tpu-v3-ssd-ops.md). Each pass is a loop iteration reading the scores from HBM again.
// The mask is a step function of the scores: no gradient flows through it.
// Partitioning: rows may be split; each row's N scores whole.
#include <algorithm>
#include <numeric>

#include "workloads/ops/kernel_util.h"

namespace podsim {
namespace {

using ops::in;

constexpr int kPasses = 31;

OpCost topk_cost(const ModelGraph& g, const Op& op) {
  const TensorInfo& scores = g.tensor(op.inputs[0]);
  OpCost c;
  c.unit = Unit::Vpu;
  c.vector.elements = static_cast<double>(scores.elements());
  c.vector.simple = 2.0 * kPasses + 1;  // per pass a compare and a select; the mask's select
  c.vector.reduce = kPasses;            // per pass the row's count
  c.vector.reduce_row = static_cast<double>(scores.shape.back());
  c.flops = c.vector.elements * (c.vector.simple + c.vector.reduce);
  c.bytes_read = kPasses * scores.stored_bytes() + g.tensor(op.inputs[1]).stored_bytes() + scores.stored_bytes();
  c.bytes_written = output_bytes(g, op);
  return c;
}

void topk_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& scores = in(s, op, 0);
  const Tensor& counts = in(s, op, 1);
  const int64_t rows = scores.shape[0], n = scores.shape[1];
  Tensor mask = ops::out_like(g, op);
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = &scores.data[r * n];
    const double want = std::max(0.0, std::round(op.attrs.alpha * counts.data[r]));
    const int64_t k = std::min<int64_t>(static_cast<int64_t>(want), n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
    for (int64_t i = 0; i < k; ++i) mask.data[r * n + order[i]] = 1.0f;
  }
  ops::put(g, op, s, std::move(mask));
}

OpSharding topk_rule(const OpShardingQuery& q) {
  OpSharding r;
  r.attrs = q.op.attrs;
  ShardSpec rows = ShardSpec::replicated(2);
  rows.dims[0] = sharding::settled(q.in[0]).dims[0];
  ShardSpec counts = ShardSpec::replicated(1);
  counts.dims[0] = rows.dims[0];
  r.in = {rows, counts};
  r.out = {rows};
  return r;
}

const bool registered =
    register_op_kind({OpKind::TopKMask, "topk_mask", Unit::Vpu, topk_cost, topk_kernel, nullptr, topk_rule});

}  // namespace
}  // namespace podsim
