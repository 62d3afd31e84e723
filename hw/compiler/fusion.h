// XLA-style fusion: which ops of a role's program run as one kernel (one exec op), decided from each op kind's
// declared properties (OpCost::fusible for elementwise ops, OpCost::reduction for reductions), never from a list
// of kinds. Ops are taken in issue order; a fusion is a run of adjacent ops, each after the first consuming an
// output of an earlier member:
//   - loop fusion: elementwise ops (bias add, activations and their gradients, residual adds, optimizer updates);
//   - output fusion: a matmul followed by elementwise ops on its result (bias, activation, residual): the epilogue
//     runs on the VPU as the MXU's tiles come out, and the matmul's result never goes to HBM unless someone
//     outside reads it;
//   - reduction fusion: at most one reduction (softmax, layer norm, cross-entropy, bias gradient) with the
//     elementwise ops that feed it (input fusion) and those that consume it.
// An expander (a broadcast or an iota: it reads an eighth of what it writes, or less) joins the open fusion when the
// ops right after it carry its output into a member's consumer: XLA recomputes it inside that kernel.
// A fused op reads its external inputs from HBM once and writes only the outputs read outside the fusion (or by
// nobody: step results); everything else stays in VMEM. Ops that declare neither property (gathers, layout changes,
// communication) always run alone. Numerics do not change: numeric mode runs each member's kernel in order.
// A new op kind opts in by setting OpCost::fusible or OpCost::reduction in its cost function.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/op_def.h"

namespace podsim {

enum class FusionKind : uint8_t { None, Loop, Output, Reduction };
const char* fusion_kind_name(FusionKind k);  // "none", "loop", "output", "reduction"

struct FusionGroup {
  std::vector<OpId> members;  // in issue order
  FusionKind kind = FusionKind::None;
};

// Groups `order` into fusions (`enabled` false: every op alone, run.fusion: none).
std::vector<FusionGroup> fuse(const ModelGraph& g, const std::vector<OpId>& order, bool enabled);

// Most members one fusion takes (a longer chain starts a new fusion).
constexpr size_t kMaxFusionMembers = 16;

}  // namespace podsim
