// Busy time: unions of intervals, per op of the result chip and for the recomputed ops (summary.json).
#include "sim/engine/busy_time.h"

#include <algorithm>
#include <unordered_map>

#include "hw/pod/pod.h"
#include "hw/pod/pod_context.h"
#include "sim/engine/engine.h"

namespace podsim {

// Length of the union of intervals.
double union_length(std::vector<std::pair<double, double>>& v) {
  std::sort(v.begin(), v.end());
  double total = 0, cur_b = 0, cur_e = -1;
  for (auto [b, e] : v) {
    if (b > cur_e) {
      if (cur_e > cur_b) total += cur_e - cur_b;
      cur_b = b;
      cur_e = e;
    } else {
      cur_e = std::max(cur_e, e);
    }
  }
  if (cur_e > cur_b) total += cur_e - cur_b;
  return total;
}

// Per op of the chip, the time some unit worked for it within its span: the union of its MXU and VPU intervals (a
// collective's reductions included), its HBM accesses and the link time of the messages it sent. The rest of the
// span it waited: for a peer's data, for links or HBM busy with others' work, for an acknowledgement.
// The union is folded while the chip runs (ChipLog::op_spans: a few spans per op, not the tens of millions of
// intervals a large imported module logs); here each op's spans are clipped to its span.
std::vector<double> op_busy(const Chip& chip, size_t n_ops) {
  const ChipLog& l = chip.log();
  std::vector<double> busy(n_ops, 0);
  for (size_t i = 0; i < n_ops; ++i) {
    const OpRecord& r = l.ops[i];
    busy[i] = l.op_spans.within(static_cast<int32_t>(i), r.start, r.end);
  }
  return busy;
}

const std::vector<double>& result_op_busy(const Simulation& s, const Chip& chip, size_t n_ops) {
  if (s.result_op_busy_chip != &chip || s.result_op_busy.size() != n_ops) {
    s.result_op_busy = op_busy(chip, n_ops);
    s.result_op_busy_chip = &chip;
  }
  return s.result_op_busy;
}

std::pair<double, double> recompute_figures(const Prepared& p, const Simulation& s) {
  // Which ops are recomputed depends on the program only (worked out once per role); a chip that stands for
  // several torus positions (hw/pod/symmetry.h) has one busy time, taken once.
  double recompute_flops = 0, recompute_s = 0;
  const auto& chips = s.pod->chips();
  std::vector<std::vector<int32_t>> recomputed_ops(p.plan.programs.size());
  std::vector<char> role_known(p.plan.programs.size(), 0);
  std::unordered_map<const Chip*, double> chip_busy;
  std::vector<std::pair<double, double>> busy;
  for (const auto& chip : chips) {
    if (chip->role() < 0) continue;
    const ExecProgram& ep = p.ctx->programs[chip->role()];
    std::vector<int32_t>& rec = recomputed_ops[chip->role()];
    if (!role_known[chip->role()]) {
      role_known[chip->role()] = 1;
      const ModelGraph& pg = p.plan.programs[chip->role()].graph;
      for (size_t i = 0; i < ep.ops.size(); ++i) {
        const ExecOp& e = ep.ops[i];
        if (is_transfer_unit(e.unit)) continue;
        bool recomputed = false;
        for (size_t k = 0; k < e.members.size(); ++k)
          recomputed = recomputed || (!e.recomputed[k] && pg.op(e.members[k]).recompute);
        if (recomputed) rec.push_back(static_cast<int32_t>(i));
      }
    }
    for (int32_t i : rec) recompute_flops += ep.ops[i].mxu_flops;
    auto [it, fresh] = chip_busy.try_emplace(chip, 0.0);
    if (fresh) {
      const auto& log = chip->log().ops;
      busy.clear();
      for (int32_t i : rec)
        if (static_cast<size_t>(i) < log.size() && log[i].start >= 0) busy.push_back({log[i].start, log[i].end});
      it->second = union_length(busy);
    }
    recompute_s = std::max(recompute_s, it->second);
  }
  return {recompute_flops, recompute_s};
}

}  // namespace podsim
