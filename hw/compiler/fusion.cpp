#include "hw/compiler/fusion.h"

#include <set>

namespace podsim {
namespace {

enum class Role : uint8_t { Opaque, Elementwise, Reduction, Matmul };

Role role_of(const ModelGraph& g, const Op& op) {
  if (is_communication(op.kind)) return Role::Opaque;
  OpCost c = op_cost(g, op);
  // A kernel that tiles itself (a Pallas kernel, workloads/op_def.h kernel_gemms) is a custom call: nothing fuses.
  if (c.unit == Unit::Mxu) return kernel_gemms(g, op).empty() ? Role::Matmul : Role::Opaque;
  if (c.unit != Unit::Vpu) return Role::Opaque;
  if (c.fusible) return Role::Elementwise;
  if (c.reduction) return Role::Reduction;
  return Role::Opaque;
}

struct Open {
  FusionGroup group;
  std::set<TensorId> produced;  // outputs of the members
  bool matmul = false, reduction = false, closed = true;
  std::set<TensorId> reduced;  // what the fusion's reduction read from outside it
};

bool consumes(const Op& op, const std::set<TensorId>& produced) {
  for (TensorId t : op.inputs)
    if (produced.count(t)) return true;
  return false;
}

// An operand convert: one elementwise op that changes its input's type and whose outputs only `mm` reads (an fp32
// weight converted to bf16 for the MXU). XLA fuses such a convert into the dot's fusion as a prologue.
bool operand_convert(const ModelGraph& g, const std::vector<OpId>& members, OpId mm) {
  if (members.size() != 1) return false;
  const Op& op = g.op(members.front());
  if (op.inputs.size() != 1 || op.outputs.size() != 1) return false;
  if (g.tensor(op.inputs[0]).dtype == g.tensor(op.outputs[0]).dtype) return false;
  for (OpId c : g.consumers(op.outputs[0]))
    if (c != mm) return false;
  return true;
}

}  // namespace

const char* fusion_kind_name(FusionKind k) {
  switch (k) {
    case FusionKind::None: return "none";
    case FusionKind::Loop: return "loop";
    case FusionKind::Output: return "output";
    case FusionKind::Reduction: return "reduction";
  }
  return "?";
}

std::vector<FusionGroup> fuse(const ModelGraph& g, const std::vector<OpId>& order, bool enabled) {
  std::vector<FusionGroup> out;
  Open cur;
  auto flush = [&] {
    if (cur.group.members.empty()) return;
    FusionGroup& fg = cur.group;
    fg.kind = fg.members.size() < 2 ? FusionKind::None
              : cur.matmul          ? FusionKind::Output
              : cur.reduction       ? FusionKind::Reduction
                                    : FusionKind::Loop;
    out.push_back(std::move(fg));
    cur = Open{};
  };
  auto start = [&](OpId id, Role r) {
    flush();
    cur.group.members.push_back(id);
    for (TensorId t : g.op(id).outputs) cur.produced.insert(t);
    cur.matmul = r == Role::Matmul;
    cur.reduction = r == Role::Reduction;
    cur.closed = !enabled || r == Role::Opaque;
    if (cur.reduction && op_cost(g, g.op(id)).whole_tensor)
      cur.reduced.insert(g.op(id).inputs.begin(), g.op(id).inputs.end());
  };
  for (OpId id : order) {
    const Op& op = g.op(id);
    Role r = role_of(g, op);
    bool join = !cur.closed && cur.group.members.size() < kMaxFusionMembers && consumes(op, cur.produced);
    if (join && r == Role::Matmul) {
      join = !cur.matmul && !cur.reduction && operand_convert(g, cur.group.members, id);
      if (join) {
        cur.group.members.push_back(id);
        for (TensorId t : op.outputs) cur.produced.insert(t);
        cur.matmul = true;
        continue;
      }
    } else if (join && r == Role::Elementwise) {
      // loop fusion, a matmul's epilogue, or a reduction's producers/consumers; but a consumer of the reduction
      // that reads again what the reduction reduced (batch norm's normalization of x after x's statistics) needs
      // the finished reduction before its pass: a second pass, a fusion of its own
      for (TensorId t : op.inputs) join = join && !cur.reduced.count(t);
    } else if (join && r == Role::Reduction) {
      join = !cur.matmul && !cur.reduction;  // one reduction per fusion; none inside a matmul's epilogue
    } else {
      join = false;
    }
    if (!join) {
      start(id, r);
      continue;
    }
    cur.group.members.push_back(id);
    for (TensorId t : op.outputs) cur.produced.insert(t);
    if (r == Role::Reduction && op_cost(g, op).whole_tensor)
      for (TensorId t : op.inputs)
        if (!cur.produced.count(t)) cur.reduced.insert(t);
    cur.reduction = cur.reduction || r == Role::Reduction;
  }
  flush();
  return out;
}

}  // namespace podsim
