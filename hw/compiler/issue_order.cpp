#include "hw/compiler/issue_order.h"

#include <algorithm>

namespace podsim {

double estimated_seconds(const ExecOp& e, const ChipConfig& chip, double ici_link_bandwidth) {
  if (e.unit == Unit::Ici) return e.logical_bytes / std::max(1.0, 2.0 * ici_link_bandwidth);
  if (e.unit == Unit::Host) return e.logical_bytes / std::max(1.0, chip.host_link.bandwidth);
  return std::max(e.mxu_flops / std::max(1.0, chip.peak_flops()),
                  (e.core_hbm_read + e.core_hbm_write) * e.cores / std::max(1.0, chip.hbm.bandwidth));
}

IssueOrder issue_order(const ExecProgram& program, const std::vector<std::vector<int32_t>>& dependents,
                       const ChipConfig& chip, double ici_link_bandwidth, bool latency_hiding) {
  const size_t n = program.ops.size();
  IssueOrder o;
  o.bottom_level.assign(n, 0.0);
  for (size_t i = n; i-- > 0;) {  // dependents come later in the program
    double after = 0;
    for (int32_t d : dependents[i]) after = std::max(after, o.bottom_level[d]);
    o.bottom_level[i] = estimated_seconds(program.ops[i], chip, ici_link_bandwidth) + after;
  }
  o.op_at_rank.resize(n);
  for (size_t i = 0; i < n; ++i) o.op_at_rank[i] = static_cast<int32_t>(i);
  if (latency_hiding)
    std::stable_sort(o.op_at_rank.begin(), o.op_at_rank.end(),
                     [&](int32_t a, int32_t b) { return o.bottom_level[a] > o.bottom_level[b]; });
  o.rank.resize(n);
  for (size_t r = 0; r < n; ++r) o.rank[o.op_at_rank[r]] = static_cast<int32_t>(r);
  return o;
}

}  // namespace podsim
