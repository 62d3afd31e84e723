#include "hw/compiler/memory_plan.h"

#include <algorithm>
#include <set>

namespace podsim {
namespace {

double& bucket(MemoryBreakdown& m, TensorRole r) {
  switch (r) {
    case TensorRole::Parameter: return m.weights;
    case TensorRole::Gradient: return m.gradients;
    case TensorRole::OptimizerState: return m.optimizer_state;
    case TensorRole::Temporary: return m.temporaries;
    case TensorRole::WeightCopy: return m.weight_copies;
    case TensorRole::KvCache: return m.kv_cache;
    default: return m.activations;  // inputs, labels, activations, losses
  }
}

bool persistent(TensorRole r) {
  return r == TensorRole::Parameter || r == TensorRole::OptimizerState || r == TensorRole::Input ||
         r == TensorRole::Label || r == TensorRole::KvCache;
}

// Ops that write their result over an operand that dies with them: an all-reduce reduces in place (a ring
// all-reduce and DDP/ZeRO's buckets do), and an addition, a gradient accumulation among them, writes its sum over
// the running sum (XLA's buffer assignment lets an elementwise op share an operand's buffer).
// Kinds may say so in their cost (OpCost::in_place: a dynamic update and a scatter write into their operand).
bool in_place(const ModelGraph& g, const Op& op) {
  return op.kind == OpKind::AllReduce || op.kind == OpKind::Add || op_cost(g, op).in_place;
}

// Host offloading (XLA's host offloader, an imported module's MoveToHost): a to_host's result, a view or slice of a
// value in host memory, and a buffer dynamically updated with one (a stack of offloaded layers' activations) are
// held in host memory; so is a buffer whose only readers write host values into it (the stack's first, empty
// value). `depth` bounds the walk.
bool in_host_memory(const ModelGraph& g, TensorId t, int depth = 0) {
  if (depth > 8) return false;
  const OpId p = g.producer(t);
  if (p >= 0) {
    const Op& op = g.op(p);
    if (op.kind == OpKind::ToHost) return true;
    if ((op.kind == OpKind::Bitcast || op.kind == OpKind::DynamicSlice || op.kind == OpKind::Slice) &&
        !op.inputs.empty() && in_host_memory(g, op.inputs[0], depth + 1))
      return true;
    if (op.kind == OpKind::DynamicUpdateSlice && op.inputs.size() > 1 && in_host_memory(g, op.inputs[1], depth + 1))
      return true;
    const std::vector<OpId>& readers = g.consumers(t);
    if (readers.empty()) return false;
    for (OpId r : readers) {
      const Op& u = g.op(r);
      if (u.kind != OpKind::DynamicUpdateSlice || u.inputs.size() < 2 || u.inputs[0] != t ||
          !in_host_memory(g, u.inputs[1], depth + 1))
        return false;
    }
    return true;
  }
  // A step input that only host transfers read (an imported module's infeed) arrives from the host's memory.
  const std::vector<OpId>& readers = g.consumers(t);
  if (readers.empty()) return false;
  for (OpId r : readers)
    if (g.op(r).kind != OpKind::FromHost) return false;
  return true;
}

}  // namespace

MemoryPlan plan_memory(const ModelGraph& g, const ExecProgram& ep) {
  MemoryPlan plan;
  const size_t nt = g.num_tensors();
  // The last exec op reading each tensor from HBM.
  std::vector<int32_t> last_use(nt, -1);
  for (size_t i = 0; i < ep.ops.size(); ++i)
    for (TensorId t : ep.ops[i].hbm_reads) last_use[t] = std::max(last_use[t], static_cast<int32_t>(i));
  // Views (bitcasts) hold no buffer of their own: their source's buffer lives until the last use of any view of it.
  // A view of a value its kernel keeps on chip (a fusion's last member is a bitcast of its result) is the buffer the
  // kernel writes.
  std::vector<int32_t> home(g.num_ops(), -1);
  for (size_t i = 0; i < ep.ops.size(); ++i)
    for (size_t k = 0; k < ep.ops[i].members.size(); ++k)
      if (!ep.ops[i].recomputed[k]) home[ep.ops[i].members[k]] = static_cast<int32_t>(i);
  std::vector<bool> in_hbm(nt, false), view(nt, false);
  for (size_t t = 0; t < nt; ++t) in_hbm[t] = g.producer(static_cast<TensorId>(t)) < 0;
  for (const ExecOp& e : ep.ops)
    for (TensorId t : e.hbm_writes) in_hbm[t] = true;
  for (size_t id = 0; id < g.num_ops(); ++id) {  // producers before consumers: a view of a view after it
    const Op& op = g.op(static_cast<OpId>(id));
    if (op.outputs.size() != 1 || op.inputs.empty() || !op_cost(g, op).view || !in_hbm[op.inputs[0]]) continue;
    view[op.outputs[0]] = in_hbm[op.outputs[0]] = true;
  }
  for (OpId id = static_cast<OpId>(g.num_ops()); id-- > 0;) {  // consumers after producers: a view of a view first
    const Op& op = g.op(id);
    if (op.outputs.size() != 1 || op.inputs.empty() || !view[op.outputs[0]]) continue;
    const TensorId out = op.outputs[0], src = op.inputs[0];
    int32_t until = last_use[out];
    if (g.consumers(out).empty() && home[id] >= 0) until = std::max(until, home[id]);
    last_use[src] = std::max(last_use[src], until);
  }
  std::vector<std::vector<TensorId>> dies_at(ep.ops.size());
  for (size_t t = 0; t < nt; ++t)
    if (last_use[t] >= 0) dies_at[last_use[t]].push_back(static_cast<TensorId>(t));

  std::vector<bool> live(nt, false);
  MemoryBreakdown now;
  auto add = [&](TensorId t) {
    const TensorInfo& info = g.tensor(t);
    // An updated value overwrites the tensor it updates: no new space. A value moved to the host (to_host) is
    // held in the host's memory.
    if (info.role == TensorRole::Updated || live[t] || view[t] || in_host_memory(g, t)) return;
    live[t] = true;
    bucket(now, info.role) += info.stored_bytes();
  };
  auto remove = [&](TensorId t) {
    if (!live[t]) return;
    live[t] = false;
    bucket(now, g.tensor(t).role) -= g.tensor(t).stored_bytes();
  };
  for (size_t t = 0; t < nt; ++t)
    if (g.producer(static_cast<TensorId>(t)) < 0) add(static_cast<TensorId>(t));

  // The live set at the peak is kept as bits (the peak moves up at most once per op); its largest tensors are
  // named once, at the end.
  std::vector<bool> live_at_peak;
  auto record_peak = [&](int32_t at) {
    if (now.total() > plan.peak_bytes) {
      plan.peak_bytes = now.total();
      plan.peak_op = at;
      plan.at_peak = now;
      live_at_peak = live;
    }
  };
  record_peak(0);
  for (size_t i = 0; i < ep.ops.size(); ++i) {
    const ExecOp& e = ep.ops[i];
    const std::set<TensorId> writes(e.hbm_writes.begin(), e.hbm_writes.end());
    // Outputs are allocated when the op starts, while its inputs are still live; an op that works in place takes
    // over the buffer of an operand of the same size that it reads last.
    for (size_t k = 0; k < e.members.size(); ++k) {
      const Op& op = g.op(e.members[k]);
      if (e.recomputed[k] || !in_place(g, op) || op.outputs.size() != 1) continue;
      const TensorId out = op.outputs[0];
      if (!writes.count(out) || g.tensor(out).role == TensorRole::Updated) continue;
      for (TensorId t : op.inputs)
        if (live[t] && last_use[t] == static_cast<int32_t>(i) && !persistent(g.tensor(t).role) &&
            g.tensor(t).stored_bytes() == g.tensor(out).stored_bytes()) {
          remove(t);
          break;
        }
    }
    for (TensorId t : e.hbm_writes) add(t);
    now.temporaries += e.scratch;
    record_peak(static_cast<int32_t>(i));
    now.temporaries -= e.scratch;
    // Free what this op read last (itself or through a view), and outputs nobody reads that are not step results.
    for (TensorId t : dies_at[i])
      if (!persistent(g.tensor(t).role)) remove(t);
    for (TensorId t : e.hbm_writes) {
      const TensorRole r = g.tensor(t).role;
      if (g.consumers(t).empty() && r != TensorRole::Loss && r != TensorRole::Updated) remove(t);
    }
    plan.live_after_op.push_back(now.total());
  }
  std::vector<TensorId> at_peak;
  for (size_t t = 0; t < live_at_peak.size(); ++t)
    if (live_at_peak[t]) at_peak.push_back(static_cast<TensorId>(t));
  const auto larger = [&](TensorId a, TensorId b) {
    const double x = g.tensor(a).stored_bytes(), y = g.tensor(b).stored_bytes();
    return x != y ? x > y : g.tensor(a).name < g.tensor(b).name;
  };
  const size_t named = std::min<size_t>(5, at_peak.size());
  std::partial_sort(at_peak.begin(), at_peak.begin() + static_cast<std::ptrdiff_t>(named), at_peak.end(), larger);
  for (size_t i = 0; i < named; ++i) {
    const TensorInfo& info = g.tensor(at_peak[i]);
    plan.largest_at_peak.push_back({info.name, role_name(info.role), info.stored_bytes()});
  }
  return plan;
}

}  // namespace podsim
