// The order in which a chip's units take the ops that are ready (run.scheduler). `program`: the step's order, each
// unit first come first served. `latency_hiding`: each op ranked by its bottom level, its estimated time plus the
// longest estimated path through the ops that wait on it to the step's end, longest first (ties in program order),
// and each unit takes the queued op of the best rank. A layer's input gradient, on the path to its collective and to
// the layers before it, then goes before the layer's weight gradients, whose only consumers are their reductions
// and the optimizer, so the collective runs while they compute: what XLA's latency-hiding scheduler does when it
// starts a collective as early as its operands allow and fills the wait with independent work.
//
//   IssueOrder o = issue_order(program, dependents, chip, ici_link_bandwidth, latency_hiding);
//   o.rank[op]    // smaller goes first
#pragma once

#include <cstdint>
#include <vector>

#include "base/params/experiment.h"
#include "hw/compiler/exec_program.h"

namespace podsim {

struct IssueOrder {
  std::vector<int32_t> rank;         // per op: its place in the issue order
  std::vector<int32_t> op_at_rank;   // per rank: the op
  std::vector<double> bottom_level;  // per op: estimated seconds from its start to the step's end
};

// An op's estimated time: a compute op's MXU FLOPs at the chip's peak or its HBM traffic at the HBM bandwidth,
// whichever is longer; a collective's or transfer's logical bytes over one link's two directions; a host transfer's
// over the host link.
double estimated_seconds(const ExecOp& e, const ChipConfig& chip, double ici_link_bandwidth);

// `dependents[i]`: the ops that wait on op i (every one after i in the program).
IssueOrder issue_order(const ExecProgram& program, const std::vector<std::vector<int32_t>>& dependents,
                       const ChipConfig& chip, double ici_link_bandwidth, bool latency_hiding);

}  // namespace podsim
