#include "hw/compiler/fusion.h"

#include <algorithm>
#include <map>
#include <set>

namespace podsim {
namespace {

// VectorConv: a convolution on the vector unit (a depthwise convolution, OpCost::vector_conv), which fuses as an MXU
// convolution does (its producers, its epilogue, its result's whole-tensor reductions) but has no MXU operands.
enum class Role : uint8_t { Opaque, Elementwise, Reduction, Matmul, Window, VectorConv };

// A convolution's kernel: on the MXU, or a convolution the vector unit runs.
bool conv_like(Role r) { return r == Role::Matmul || r == Role::VectorConv; }

struct Traits {
  Role role = Role::Opaque;
  bool whole = false;     // a whole-tensor reduction
  bool two_pass = false;  // a whole-tensor reduction followed by an elementwise pass
};

Traits traits_of(const ModelGraph& g, const Op& op, const FusionOptions& opts) {
  Traits t;
  if (is_communication(op.kind)) return t;
  OpCost c = op_cost(g, op);
  t.whole = c.whole_tensor;
  t.two_pass = c.two_pass;
  // A kernel that tiles itself (a Pallas kernel, workloads/op_def.h kernel_gemms) is a custom call: nothing fuses.
  if (c.unit == Unit::Mxu) t.role = kernel_gemms(g, op).empty() ? Role::Matmul : Role::Opaque;
  else if (c.unit != Unit::Vpu) t.role = Role::Opaque;
  else if (c.vector_conv) t.role = opts.vector_conv ? Role::VectorConv : Role::Opaque;
  else if (c.fusible) t.role = Role::Elementwise;
  else if (c.reduction) t.role = Role::Reduction;
  else if (c.input_fusion) t.role = Role::Window;
  return t;
}

struct Open {
  FusionGroup group;
  std::set<TensorId> produced;  // outputs of the members
  bool matmul = false, reduction = false, closed = true;
  std::set<TensorId> reduced;  // what the fusion's whole-tensor reduction read (a second pass must read it again)
  OpId rows = -1;              // the fusion's row reduction: another over the same rows may join (same_rows)
  size_t work = 0;             // members that count towards kMaxFusionMembers (light_member)
  std::set<TensorId> light;    // outputs of the members that do not
};

bool consumes(const Op& op, const std::set<TensorId>& produced) {
  for (TensorId t : op.inputs)
    if (produced.count(t)) return true;
  return false;
}

// An operand convert: one elementwise op that changes its input's type and whose outputs only `mm` reads (an fp32
// weight converted to bf16 for the MXU). XLA fuses such a convert into the dot's fusion as a prologue.
bool operand_convert(const ModelGraph& g, const std::vector<FusionMember>& members, OpId mm) {
  if (members.size() != 1) return false;
  const Op& op = g.op(members.front().op);
  if (op.inputs.size() != 1 || op.outputs.size() != 1) return false;
  if (g.tensor(op.inputs[0]).dtype == g.tensor(op.outputs[0]).dtype) return false;
  for (OpId c : g.consumers(op.outputs[0]))
    if (c != mm) return false;
  return true;
}

// A member that does no work of its own on the kernel's data, and so does not count towards kMaxFusionMembers: a
// view, an expander (a broadcast, an iota, a constant: it writes at least 8 times what it reads), or an op that
// reads only such members' outputs (a one-hot mask compared from a broadcast and an iota).
bool light_member(const ModelGraph& g, const Op& op, const std::set<TensorId>& light) {
  const OpCost c = op_cost(g, op);
  if (c.unit != Unit::Vpu || !(c.fusible || c.view)) return false;
  if (c.view || (c.bytes_written > 0 && c.bytes_read * 8 <= c.bytes_written)) return true;
  if (op.inputs.empty()) return false;
  for (TensorId t : op.inputs)
    if (!light.count(t)) return false;
  return true;
}

// Whether reduction `b` reduces the same rows as reduction `a`: inputs of one shape, results of one shape (smaller
// than the input: a reduction, not a normalization that writes its input's shape), the same reduced dimensions. A
// softmax's sum of exponentials after its maximum, a loss's sum after them: each row is on chip once for all of
// them, as the normalization kernels of the built-in workloads (softmax, layer norm) compute both their row
// reductions in one kernel.
bool same_rows(const ModelGraph& g, OpId a, OpId b) {
  const Op& x = g.op(a);
  const Op& y = g.op(b);
  if (x.inputs.empty() || y.inputs.empty() || x.outputs.empty() || y.outputs.empty()) return false;
  const TensorInfo& xi = g.tensor(x.inputs[0]);
  const TensorInfo& xo = g.tensor(x.outputs[0]);
  return xi.shape == g.tensor(y.inputs[0]).shape && xo.shape == g.tensor(y.outputs[0]).shape &&
         xo.elements() < xi.elements() && x.attrs.dims == y.attrs.dims;
}

// An expander (a broadcast, an iota: it writes far more than it reads) that feeds the open fusion: a chain of the
// ops right after it, each reading the one before, reaches an op that reads the fusion within a few steps. XLA
// fuses such a producer into its consumer's kernel (it is recomputed there, never written); in issue order it
// stands between the fusion and that consumer, reading nothing of the fusion, so it joins the fusion it feeds
// (and the chain after it joins by reading it).
// An op that joins the fusion its result feeds rather than its producer's: an expander (it writes at least 8 times
// what it reads: a broadcast, an iota, a constant) or a view (a bitcast moves nothing).
bool expander(const ModelGraph& g, const Op& op) {
  if (is_communication(op.kind)) return false;
  const OpCost c = op_cost(g, op);
  return c.view || (c.fusible && c.bytes_written > 0 && c.bytes_read * 8 <= c.bytes_written);
}

bool feeds_open_fusion(const ModelGraph& g, const std::vector<OpId>& order, size_t pos,
                       const std::set<TensorId>& produced) {
  if (!expander(g, g.op(order[pos]))) return false;
  std::set<TensorId> chain(g.op(order[pos]).outputs.begin(), g.op(order[pos]).outputs.end());
  for (size_t k = pos + 1; k < order.size() && k <= pos + 4; ++k) {
    const Op& next = g.op(order[k]);
    // Another expander beside it (the iota a one-hot mask compares a broadcast with) joins the chain.
    if (!consumes(next, chain) && !expander(g, next)) return false;
    if (consumes(next, chain) && consumes(next, produced)) return true;
    chain.insert(next.outputs.begin(), next.outputs.end());
  }
  return false;
}

// The outputs an occurrence of an op makes: a two-pass op's reduction makes its outputs after the first, its
// elementwise pass the first.
std::vector<TensorId> made_by(const Op& op, MemberPass pass) {
  if (pass == MemberPass::All) return op.outputs;
  if (pass == MemberPass::Apply) return {op.outputs.front()};
  return std::vector<TensorId>(op.outputs.begin() + 1, op.outputs.end());
}

// Phase 1: runs of adjacent ops in issue order; and the epilogue of an output fusion takes a later consumer of its
// result whose inputs are all made by then (XLA fuses by producer and consumer, not by position: a convolution's
// input gradient takes the ReLU gradient and batch-norm sums of the layer below, which the schedule issues after
// the filter gradient).
std::vector<FusionGroup> adjacent_fusions(const ModelGraph& g, const std::vector<OpId>& order,
                                          const FusionOptions& opts, const std::vector<Traits>& tr) {
  std::vector<Open> groups;
  std::vector<int32_t> group_of(g.num_ops(), -1);
  auto add = [&](size_t gi, OpId id, MemberPass pass) {
    Open& o = groups[gi];
    o.group.members.push_back({id, pass, false});
    for (TensorId t : made_by(g.op(id), pass)) o.produced.insert(t);
    if (pass == MemberPass::All && light_member(g, g.op(id), o.light)) {
      o.light.insert(g.op(id).outputs.begin(), g.op(id).outputs.end());
    } else {
      ++o.work;
    }
    group_of[id] = static_cast<int32_t>(gi);
  };
  auto start = [&](OpId id, const Traits& t, MemberPass pass) {
    if (!groups.empty() && !groups.back().matmul) groups.back().closed = true;
    groups.emplace_back();
    add(groups.size() - 1, id, pass);
    Open& o = groups.back();
    o.matmul = conv_like(t.role);
    o.reduction = t.role == Role::Reduction && pass != MemberPass::Apply;
    o.closed = !opts.enabled || t.role == Role::Opaque || t.role == Role::Window || pass == MemberPass::Apply;
    if (o.reduction && t.whole) o.reduced.insert(g.op(id).inputs.begin(), g.op(id).inputs.end());
    if (o.reduction && !t.whole && !t.two_pass) o.rows = id;
  };
  // Whether `op` may join group `gi` as its next member, and in which pass.
  // `feeds`: the op is an expander that feeds the group through the ops right after it (feeds_open_fusion).
  auto joins = [&](size_t gi, OpId id, MemberPass& pass, bool feeds = false) {
    const Open& o = groups[gi];
    const Op& op = g.op(id);
    const Traits& t = tr[id];
    pass = MemberPass::All;
    if (o.closed || (o.work >= kMaxFusionMembers && !light_member(g, op, o.light))) return false;
    if (!consumes(op, o.produced) && !(feeds && t.role == Role::Elementwise)) return false;
    if (t.role == Role::Matmul) return !o.matmul && !o.reduction && operand_convert(g, o.group.members, id);
    if (t.role == Role::VectorConv) return false;  // its producers come in by duplication (below)
    if (t.role == Role::Elementwise) {
      // An epilogue works on the result's tiles as they leave the kernel; a broadcast of the result to a larger
      // tensor (a pool's gradient spread over the map) is its consumer's prologue instead, as XLA fuses a broadcast
      // into the kernel that reads it, not into the dot that made its operand.
      if (o.matmul && expander(g, op) && !op_cost(g, op).view && consumes(op, o.produced)) return false;
      // loop fusion, a matmul's epilogue, or a reduction's producers/consumers; but a consumer of a whole-tensor
      // reduction that reads again what the reduction reduced (batch norm's normalization of x after x's
      // statistics) needs the finished reduction before its pass: a second pass, a fusion of its own
      for (TensorId x : op.inputs)
        if (o.reduced.count(x)) return false;
      return true;
    }
    if (t.role == Role::Reduction) {
      // One reduction per fusion, or several over the same rows, each reading what the kernel computes (a row
      // reduction's results are ready row by row, so its consumers and the next reduction of the row run on chip).
      if (!o.matmul) {
        if (o.reduction && !(o.rows >= 0 && !t.whole && !t.two_pass && same_rows(g, o.rows, id))) return false;
        // A two-pass op's reduction joins; its elementwise pass needs the finished sums: a kernel of its own.
        if (t.two_pass) pass = MemberPass::Reduce;
        return true;
      }
      // Multi-output fusion: a whole-tensor reduction of the MXU op's result comes out beside it; a two-pass op's
      // reduction does, and its elementwise pass becomes a kernel of its own. Several do, as XLA's multi-output
      // fusion takes sibling reductions of one value (the SSD profile's input gradients that open the batch-norm
      // gradients of a block's two branches write three per-channel sums: Σdy, shared, and each branch's Σdy·x̂).
      if (!opts.multi_output || !t.whole) return false;
      if (t.two_pass) pass = MemberPass::Reduce;
      return true;
    }
    return false;
  };
  // The latest output fusion that made an input of `id`, if every predecessor of `id` runs no later than it.
  auto epilogue_of = [&](OpId id) -> int32_t {
    int32_t latest = -1;
    for (OpId p : g.predecessors(id)) latest = std::max(latest, group_of[p]);
    if (latest < 0 || !groups[static_cast<size_t>(latest)].matmul) return -1;
    // Within the phase the output fusion runs in (an optimizer update waits for the whole gradient).
    const FusionGroup& fg = groups[static_cast<size_t>(latest)].group;
    if (g.op(fg.members.front().op).phase != g.op(id).phase) return -1;
    return latest;
  };
  for (size_t pos = 0; pos < order.size(); ++pos) {
    const OpId id = order[pos];
    const Traits& t = tr[id];
    MemberPass pass = MemberPass::All;
    int32_t into = -1;
    const bool feeds = !groups.empty() && t.role == Role::Elementwise && !groups.back().closed &&
                       feeds_open_fusion(g, order, pos, groups.back().produced);
    if (!groups.empty() && joins(groups.size() - 1, id, pass, feeds)) {
      into = static_cast<int32_t>(groups.size() - 1);
    } else if (opts.enabled && (t.role == Role::Elementwise || t.role == Role::Reduction)) {
      const int32_t e = epilogue_of(id);
      if (e >= 0 && joins(static_cast<size_t>(e), id, pass)) into = e;
    }
    if (into < 0) {
      // A two-pass op alone is two kernels as well: its reduction, then its elementwise pass (which consumers may
      // then recompute, below), as XLA emits a batch-norm gradient outside a convolution's fusion.
      if (opts.enabled && t.two_pass) {
        start(id, t, MemberPass::Reduce);
        start(id, t, MemberPass::Apply);
      } else {
        start(id, t, MemberPass::All);
      }
      continue;
    }
    add(static_cast<size_t>(into), id, pass);
    Open& o = groups[static_cast<size_t>(into)];
    if (t.role == Role::Reduction && t.whole) o.reduced.insert(g.op(id).inputs.begin(), g.op(id).inputs.end());
    if (t.role == Role::Reduction && !o.matmul && !t.whole && !t.two_pass && o.rows < 0) o.rows = id;
    o.reduction = o.reduction || t.role == Role::Reduction;
    if (pass == MemberPass::Reduce) start(id, t, MemberPass::Apply);  // the elementwise pass, in issue order
  }
  std::vector<FusionGroup> out;
  for (Open& o : groups) out.push_back(std::move(o.group));
  return out;
}

// Phase 2: producer duplication (see fusion.h). A group of elementwise ops is recomputed in the groups that read
// it, prepended to their members, and disappears when none of its readers needs it materialized.
void duplicate_producers(const ModelGraph& g, std::vector<FusionGroup>& groups, const std::vector<Traits>& tr) {
  // Each op's kernel as phase 1 made it: a group that reads more than it writes goes only into consumers whose own
  // kernels are compute-bound, judged before any group was dissolved (a residual add whose readers include the
  // next residual add stays materialized, as XLA keeps it).
  std::vector<bool> compute_home(g.num_ops(), false);
  auto elementwise_only = [&](const FusionGroup& fg) {
    if (fg.members.empty()) return false;
    for (const FusionMember& m : fg.members)
      if (m.recomputed || !(tr[m.op].role == Role::Elementwise || m.pass == MemberPass::Apply)) return false;
    return true;
  };
  // What a group is anchored on: whether it takes a prologue at all, and whether it is compute-bound work (an MXU
  // op or a reduction) that absorbs any producer.
  auto absorbs = [&](const FusionGroup& fg) {
    for (const FusionMember& m : fg.members)
      if (!m.recomputed && tr[m.op].role != Role::Opaque) return true;
    return false;
  };
  auto compute_bound = [&](const FusionGroup& fg) {
    for (const FusionMember& m : fg.members)
      if (!m.recomputed && m.pass != MemberPass::Apply && (conv_like(tr[m.op].role) || tr[m.op].role == Role::Reduction))
        return true;
    return false;
  };
  for (const FusionGroup& fg : groups) {
    bool cb = false;
    for (const FusionMember& m : fg.members)
      cb = cb || (m.pass != MemberPass::Apply && (conv_like(tr[m.op].role) || tr[m.op].role == Role::Reduction));
    for (const FusionMember& m : fg.members) compute_home[m.op] = cb;
  }
  auto contains = [](const FusionGroup& fg, OpId id, MemberPass pass) {
    for (const FusionMember& m : fg.members)
      if (m.op == id && (m.pass == pass || m.pass == MemberPass::All)) return true;
    return false;
  };
  // What each group makes and what it reads from outside (the tensors' readers), kept current as groups change.
  std::vector<std::set<TensorId>> made(groups.size()), reads(groups.size());
  std::map<TensorId, std::vector<size_t>> readers_of;
  auto unindex = [&](size_t gi) {
    for (TensorId x : reads[gi]) {
      auto& r = readers_of[x];
      r.erase(std::remove(r.begin(), r.end(), gi), r.end());
      if (r.empty()) readers_of.erase(x);
    }
    made[gi].clear();
    reads[gi].clear();
  };
  auto index = [&](size_t gi) {
    for (const FusionMember& m : groups[gi].members)
      for (TensorId t : made_by(g.op(m.op), m.pass)) made[gi].insert(t);
    for (const FusionMember& m : groups[gi].members)
      for (TensorId x : g.op(m.op).inputs)
        if (!made[gi].count(x)) reads[gi].insert(x);
    for (TensorId x : reads[gi]) readers_of[x].push_back(gi);
  };
  for (size_t gi = 0; gi < groups.size(); ++gi) index(gi);
  // Dissolves group gi into its readers when it can go (returns whether it did). Groups are tried from the last in
  // issue order to the first: going into its readers never lets a later group go (its readers' own kernels and
  // the tensors they read from it stay as they were), so one pass decides as many as trying again would.
  auto dissolve = [&](size_t gi) {
    const FusionGroup& fg = groups[gi];
    if (!elementwise_only(fg)) return false;
    // The tensors other groups read; a step result keeps the group.
    std::set<TensorId> outs;
    bool result = false;
    for (TensorId t : made[gi]) {
      if (g.consumers(t).empty()) result = true;
      if (readers_of.count(t)) outs.insert(t);
    }
    if (result || outs.empty()) return false;
    double largest = 0;
    for (TensorId t : outs) largest = std::max(largest, static_cast<double>(g.tensor(t).elements()));
    // Effectively unary: at most one input from outside as large as its outputs.
    std::set<TensorId> large;
    for (const FusionMember& m : fg.members)
      for (TensorId x : g.op(m.op).inputs)
        if (!made[gi].count(x) && static_cast<double>(g.tensor(x).elements()) >= largest) large.insert(x);
    const bool unary = large.size() <= 1;
    if (!unary) {
      // Only into compute-bound kernels of its own phase: a reader in a later phase (the backward pass reading a
      // forward residual) would hold the group's several inputs live across the step instead of its one output.
      bool all = true;
      const Phase phase = g.op(fg.members.front().op).phase;
      for (TensorId t : outs)
        for (OpId c : g.consumers(t)) all = all && compute_home[c] && g.op(c).phase == phase;
      if (!all) return false;
    }
    std::set<size_t> readers;
    for (TensorId t : outs)
      for (size_t ci : readers_of.at(t))
        if (ci != gi) readers.insert(ci);
    std::vector<size_t> into, keep_for;
    for (size_t ci : readers) {
      const bool ok = unary ? absorbs(groups[ci]) : compute_bound(groups[ci]);
      (ok ? into : keep_for).push_back(ci);
    }
    if (into.empty() || (!unary && !keep_for.empty())) return false;  // all or nothing when it reads more
    // What each reader recomputes: the members that make what it reads, back along the chain (a reader of the
    // normalized activation does not recompute the moving-average update beside it, nor the reverse).
    const std::vector<FusionMember> chain = fg.members;
    auto prologue_of = [&](size_t ci) {
      std::set<TensorId> needed;
      for (TensorId t : reads[ci])
        if (made[gi].count(t)) needed.insert(t);
      std::vector<bool> take(chain.size(), false);
      for (size_t k = chain.size(); k-- > 0;) {
        bool makes = false;
        for (TensorId t : made_by(g.op(chain[k].op), chain[k].pass)) makes = makes || needed.count(t) > 0;
        if (!makes) continue;
        take[k] = true;
        for (TensorId x : g.op(chain[k].op).inputs)
          if (made[gi].count(x)) needed.insert(x);
      }
      std::vector<FusionMember> pro;
      for (size_t k = 0; k < chain.size(); ++k)
        if (take[k] && !contains(groups[ci], chain[k].op, chain[k].pass)) {
          FusionMember m = chain[k];
          m.recomputed = true;
          pro.push_back(m);
        }
      return pro;
    };
    std::vector<std::vector<FusionMember>> pros;
    for (size_t ci : into) {
      pros.push_back(prologue_of(ci));
      size_t recomputed = 0;
      for (const FusionMember& m : groups[ci].members) recomputed += m.recomputed;
      if (recomputed + pros.back().size() > 2 * kMaxFusionMembers) return false;
    }
    for (size_t k = 0; k < into.size(); ++k) {
      const size_t ci = into[k];
      const std::vector<FusionMember>& pro = pros[k];
      groups[ci].members.insert(groups[ci].members.begin(), pro.begin(), pro.end());
      unindex(ci);
      index(ci);
    }
    if (keep_for.empty()) {
      groups[gi].members.clear();
      unindex(gi);
    }
    return true;
  };
  for (size_t gi = groups.size(); gi-- > 0;) dissolve(gi);
  groups.erase(std::remove_if(groups.begin(), groups.end(), [](const FusionGroup& fg) { return fg.members.empty(); }),
               groups.end());
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

std::vector<FusionGroup> fuse(const ModelGraph& g, const std::vector<OpId>& order, const FusionOptions& opts) {
  std::vector<Traits> tr(g.num_ops());
  for (OpId id : order) tr[id] = traits_of(g, g.op(id), opts);
  std::vector<FusionGroup> groups = adjacent_fusions(g, order, opts, tr);
  if (opts.enabled && opts.duplicate) duplicate_producers(g, groups, tr);
  // A group's kind from what it holds (recomputed producers make a kernel a fusion too).
  for (FusionGroup& fg : groups) {
    bool mm = false, red = false;
    for (const FusionMember& m : fg.members) {
      mm = mm || conv_like(tr[m.op].role);
      red = red || (tr[m.op].role == Role::Reduction && m.pass != MemberPass::Apply);
    }
    fg.kind = fg.members.size() < 2 ? FusionKind::None
              : mm                  ? FusionKind::Output
              : red                 ? FusionKind::Reduction
                                    : FusionKind::Loop;
  }
  return groups;
}

}  // namespace podsim
