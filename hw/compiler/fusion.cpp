#include "hw/compiler/fusion.h"

#include <set>

namespace podsim {
namespace {

enum class Role : uint8_t { Opaque, Elementwise, Reduction, Matmul };

Role role_of(const ModelGraph& g, const Op& op) {
  if (is_communication(op.kind)) return Role::Opaque;
  OpCost c = op_cost(g, op);
  if (c.unit == Unit::Mxu) return Role::Matmul;
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

// An expander (a broadcast, an iota: it writes far more than it reads) that feeds the open fusion: a chain of the
// ops right after it, each reading the one before, reaches an op that reads the fusion within a few steps. XLA
// fuses such a producer into its consumer's kernel (it is recomputed there, never written); in issue order it
// stands between the fusion and that consumer, reading nothing of the fusion, so it joins the fusion it feeds.
bool feeds_open_fusion(const ModelGraph& g, const std::vector<OpId>& order, size_t pos,
                       const std::set<TensorId>& produced) {
  const OpCost c = op_cost(g, g.op(order[pos]));
  if (!c.fusible || c.bytes_written <= 0 || c.bytes_read * 8 > c.bytes_written) return false;
  std::set<TensorId> chain(g.op(order[pos]).outputs.begin(), g.op(order[pos]).outputs.end());
  for (size_t k = pos + 1; k < order.size() && k <= pos + 4; ++k) {
    const Op& next = g.op(order[k]);
    if (!consumes(next, chain)) return false;
    if (consumes(next, produced)) return true;
    chain.insert(next.outputs.begin(), next.outputs.end());
  }
  return false;
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
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const OpId id = order[pos];
    const Op& op = g.op(id);
    Role r = role_of(g, op);
    bool join = !cur.closed && cur.group.members.size() < kMaxFusionMembers &&
                (consumes(op, cur.produced) ||
                 (r == Role::Elementwise && feeds_open_fusion(g, order, pos, cur.produced)));
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
