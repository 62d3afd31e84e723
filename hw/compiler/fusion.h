// XLA-style fusion: which ops of a role's program run as one kernel (one exec op), decided from each op kind's
// declared properties (OpCost::fusible for elementwise ops, OpCost::reduction and whole_tensor for reductions,
// OpCost::two_pass for a whole-tensor reduction followed by an elementwise pass, OpCost::input_fusion for a window
// op that takes elementwise producers), never from a list of kinds. Ops are taken in issue order; a fusion is a run
// of adjacent ops, each after the first consuming an output of an earlier member:
//   - loop fusion: elementwise ops (bias add, activations and their gradients, residual adds, optimizer updates);
//   - output fusion: a matmul or convolution followed by elementwise ops on its result (bias, activation, residual):
//     the epilogue runs on the VPU as the MXU's tiles come out, and the result never goes to HBM unless someone
//     outside reads it; with multi-output fusion, a whole-tensor reduction of the result (batch-norm statistics,
//     the first pass of a batch-norm gradient) joins too and comes out beside the result; a convolution the vector
//     unit runs (a depthwise convolution: OpCost::vector_conv, with FusionOptions::vector_conv) fuses the same way;
//   - reduction fusion: one reduction (softmax, layer norm, cross-entropy, bias gradient) with the elementwise ops
//     that feed it (input fusion) and those that consume it, and any later reduction over the same rows that reads
//     what the kernel computes (a softmax's sum of exponentials after its maximum: a row's reductions finish with
//     the row, on chip).
// An expander (a broadcast or an iota: it reads an eighth of what it writes, or less) or a view joins the open
// fusion when the ops right after it carry its output into a member's consumer: XLA recomputes it inside that kernel.
// Then, with producer duplication, a materialized group of elementwise ops is recomputed inside the kernels that
// read it instead of being written to HBM, as XLA's instruction fusion duplicates cheap producers into their
// consumers (docs/model.md, "Fusion"): a group that reads at most one tensor as large as what it writes (batch-norm
// normalization, ReLU, a convert: XLA's EffectivelyAtMostUnary) goes into every consumer that can take a prologue
// (matmuls, convolutions, reductions, elementwise ops, window ops), and stays materialized only for those that
// cannot; any other group goes into its consumers when all of them are matmuls, convolutions or reductions of its
// own phase (compute-bound kernels, which TPU profiles show rebuilding a batch-norm gradient from its inputs in both
// convolutions that read it; a forward residual add read again in the backward pass stays materialized, since
// recomputing it there would hold both its inputs live across the step).
// A fused op reads its external inputs from HBM once and writes only the outputs read outside it (or by nobody:
// step results); everything else stays in VMEM. Ops that declare no property (gathers, layout changes,
// communication) always run alone. Numerics do not change: numeric mode runs each member's kernel in order.
// A new op kind opts in by setting the properties in its cost function.
#pragma once

#include <cstdint>
#include <vector>

#include "workloads/op_def.h"

namespace podsim {

enum class FusionKind : uint8_t { None, Loop, Output, Reduction };
const char* fusion_kind_name(FusionKind k);  // "none", "loop", "output", "reduction"

// Which part of an op a member of a fusion runs: all of it, or one pass of a two-pass op (OpCost::two_pass): its
// whole-tensor reduction (whose small outputs it writes), or its elementwise pass (which makes its first output).
enum class MemberPass : uint8_t { All, Reduce, Apply };

struct FusionMember {
  OpId op = -1;
  MemberPass pass = MemberPass::All;
  // A recomputation: the op's output is not written by this fusion (it is made on chip for the members after it,
  // as it is in every other fusion that reads it). The op's kernel still runs here in numeric mode (same values).
  bool recomputed = false;
};

struct FusionGroup {
  std::vector<FusionMember> members;  // in run order (recomputed producers first)
  FusionKind kind = FusionKind::None;
};

struct FusionOptions {
  bool enabled = true;       // run.fusion: xla; false: every op alone
  bool multi_output = true;  // run.fusion_multi_output: whole-tensor reductions join the MXU op whose result they read
  bool duplicate = true;     // run.fusion_duplicate: elementwise producers recomputed in their consumers
  bool vector_conv = true;   // run.fusion_vector_conv: a depthwise convolution fuses as a convolution does
};

// Groups `order` into fusions.
std::vector<FusionGroup> fuse(const ModelGraph& g, const std::vector<OpId>& order, const FusionOptions& opts);

// Most members one fusion takes in issue order (a longer chain starts a new fusion), not counting members that do
// no work on the kernel's data (expanders, views, a mask made of them); recomputed producers come on top.
constexpr size_t kMaxFusionMembers = 16;

}  // namespace podsim
