// Gradient bucketing (partition/combine.h).
//
// Which reductions qualify: all-reduces and reduce-scatters (one tensor each) whose output is a gradient that only
// the update needs: every op after them is an optimizer op, or communication (and its local reshards) that
// itself only feeds the update; and all-reduces of what an optimizer op computed for the update (LARS's partial
// squared norms, one small all-reduce per sharded weight: XLA's all-reduce combiner batches them the same way). The reductions of activation gradients inside the backward pass (tensor
// parallelism) never qualify: the backward pass waits for them.
//
// Buckets: in the order the reductions can start (the issue position of the last op each waits for: the order the
// backward pass makes the gradients), each qualifying reduction joins the open bucket of its kind, mesh axes,
// algorithm, element type, scattered dimension (reduce-scatter; as XLA's ReduceScatterCombiner with
// combine_by_dim) and pipeline unit while the bucket's bytes stay within the threshold; one that would exceed it
// closes the bucket and opens the next. A bucket also closes rather than take a reduction that waits for one of its
// members, or that would make it start after an op that needs one of its results (members stay independent, and
// nothing that needs a result is delayed past where it is issued). The combined op is issued right after the last
// op its members wait for: where the last of its inputs is ready. A reduction larger than the threshold stays
// alone. As in XLA, combining is greedy.
#include "partition/combine.h"

#include <algorithm>
#include <limits>
#include <map>
#include <tuple>

#include "base/error.h"
#include "base/text.h"

namespace podsim {
namespace {

bool reduction(OpKind k) { return k == OpKind::AllReduce || k == OpKind::ReduceScatter; }

using BucketKey = std::tuple<int, std::vector<std::string>, std::string, int, int64_t, int32_t, int64_t>;

struct Bucket {
  std::vector<OpId> members;  // in the order their inputs are ready
  double bytes = 0;
  size_t ready = 0;                                    // issue position after the last op a member waits for
  size_t needed = std::numeric_limits<size_t>::max();  // issue position of the first op waiting for a member
};

}  // namespace

CombineStats combine_gradient_reductions(Program& prog, double threshold_bytes, std::vector<int32_t>* unit_of_op) {
  CombineStats stats;
  if (threshold_bytes <= 0) return stats;
  const ModelGraph& g = prog.graph;
  const size_t n = g.num_ops();
  if (unit_of_op && unit_of_op->size() != n)
    throw Error(Err::Internal, "combine: the unit map has " + std::to_string(unit_of_op->size()) + " entries for " +
                                   std::to_string(n) + " ops");

  // Ops that only the update waits for, from the end of the issue order back.
  std::vector<char> late(n, 0);
  for (auto it = prog.order.rbegin(); it != prog.order.rend(); ++it) {
    bool ok = true;
    for (OpId s : g.successors(*it)) {
      const Op& c = g.op(s);
      ok = ok && (c.phase == Phase::Optimizer || (c.phase == Phase::Communication && late[s]));
    }
    late[*it] = ok;
  }
  auto qualifies = [&](OpId id) {
    const Op& op = g.op(id);
    if (!reduction(op.kind) || op.inputs.size() != 1 || op.outputs.size() != 1 || !late[id]) return false;
    if (g.tensor(op.outputs.front()).role == TensorRole::Gradient) return true;
    // A value an optimizer op made for the update (LARS's partial norms of sharded weights).
    const OpId p = g.producer(op.inputs.front());
    return p >= 0 && g.op(p).phase == Phase::Optimizer;
  };

  std::vector<size_t> pos(n, 0);
  for (size_t i = 0; i < prog.order.size(); ++i) pos[prog.order[i]] = i;
  // Where a reduction can start (after the last op it waits for) and the first op that waits for it.
  auto ready_at = [&](OpId id) {
    size_t p = 0;
    for (OpId q : g.predecessors(id)) p = std::max(p, pos[q] + 1);
    return p;
  };
  auto needed_at = [&](OpId id) {
    size_t p = prog.order.size();
    for (OpId q : g.successors(id)) p = std::min(p, pos[q]);
    return p;
  };
  std::vector<OpId> candidates;
  for (OpId id : prog.order)
    if (qualifies(id) && g.tensor(g.op(id).inputs.front()).bytes() <= threshold_bytes) candidates.push_back(id);
  std::stable_sort(candidates.begin(), candidates.end(),
                   [&](OpId a, OpId b) { return ready_at(a) < ready_at(b); });

  std::vector<Bucket> buckets;
  std::map<BucketKey, size_t> open;
  std::vector<int64_t> bucket_of(n, -1);
  // Whether `id` waits, through communication and updates, for a member of bucket `b`.
  auto depends_on = [&](OpId id, size_t b) {
    std::vector<OpId> stack = g.predecessors(id);
    std::vector<char> seen(n, 0);
    while (!stack.empty()) {
      OpId q = stack.back();
      stack.pop_back();
      if (seen[q]) continue;
      seen[q] = 1;
      if (bucket_of[q] == static_cast<int64_t>(b)) return true;
      const Phase ph = g.op(q).phase;
      if (ph != Phase::Communication && ph != Phase::Optimizer) continue;
      for (OpId r : g.predecessors(q)) stack.push_back(r);
    }
    return false;
  };
  for (OpId id : candidates) {
    const Op& op = g.op(id);
    const TensorInfo& in = g.tensor(op.inputs.front());
    const double bytes = in.bytes();
    BucketKey key{static_cast<int>(op.kind), op.attrs.axes, op.attrs.algorithm, static_cast<int>(in.dtype),
                  op.kind == OpKind::ReduceScatter ? op.attrs.dim : 0, unit_of_op ? (*unit_of_op)[id] : -1,
                  op.attrs.group_block};
    auto it = open.find(key);
    if (it != open.end()) {
      // The bucket closes when this reduction would overflow it, would make it start after an op that needs one
      // of its results, or waits for one of its members.
      Bucket& b = buckets[it->second];
      if (b.bytes + bytes > threshold_bytes || std::max(b.ready, ready_at(id)) > std::min(b.needed, needed_at(id)) ||
          depends_on(id, it->second)) {
        open.erase(it);
        it = open.end();
      }
    }
    if (it == open.end()) {
      buckets.emplace_back();
      it = open.emplace(key, buckets.size() - 1).first;
    }
    Bucket& b = buckets[it->second];
    b.members.push_back(id);
    b.bytes += bytes;
    b.ready = std::max(b.ready, ready_at(id));
    b.needed = std::min(b.needed, needed_at(id));
    bucket_of[id] = static_cast<int64_t>(it->second);
  }

  // Buckets of one reduction stay as they are.
  std::vector<int64_t> combined_of(n, -1);  // index into `made` for members of a real bucket
  std::vector<const Bucket*> made;
  for (const Bucket& b : buckets) {
    if (b.members.size() < 2) continue;
    for (OpId m : b.members) combined_of[m] = static_cast<int64_t>(made.size());
    made.push_back(&b);
  }
  if (made.empty()) return stats;

  // The new graph: the same tensors (ids kept), the ops in the new issue order.
  ModelGraph out(g.name());
  for (const TensorInfo& t : g.tensors()) out.add_tensor(t);
  std::vector<OpId> new_of(n, -1);
  std::vector<OpId> order;
  std::vector<int32_t> units;
  // Combined ops go where the last op their members wait for was issued, before the op that came next.
  std::vector<std::vector<size_t>> placed_before(prog.order.size() + 1);
  for (size_t c = 0; c < made.size(); ++c) placed_before[made[c]->ready].push_back(c);
  auto place = [&](size_t c) {
    const Bucket& b = *made[c];
    const Op& first = g.op(b.members.front());
    Op op;
    op.kind = first.kind;
    op.phase = Phase::Communication;
    op.cell = g.op(b.members.back()).cell;
    op.attrs = first.attrs;
    op.name = strprintf("combined/%s[%s]#%zu", op_kind_name(op.kind), join(first.attrs.axes, ",").c_str(), c);
    for (OpId m : b.members) {
      op.inputs.push_back(g.op(m).inputs.front());
      op.outputs.push_back(g.op(m).outputs.front());
    }
    const OpId nid = out.add_op(std::move(op));
    for (OpId m : b.members) new_of[m] = nid;
    order.push_back(nid);
    if (unit_of_op) units.push_back((*unit_of_op)[b.members.front()]);
    stats.collectives += 1;
    stats.members += static_cast<int64_t>(b.members.size());
  };
  for (size_t i = 0; i <= prog.order.size(); ++i) {
    for (size_t c : placed_before[i]) place(c);
    if (i == prog.order.size()) break;
    const OpId id = prog.order[i];
    if (combined_of[id] >= 0) continue;
    new_of[id] = out.add_op(g.op(id));
    order.push_back(new_of[id]);
    if (unit_of_op) units.push_back((*unit_of_op)[id]);
  }
  // Control edges (a schedule's): the predecessors that produce none of an op's inputs.
  for (size_t id = 0; id < n; ++id) {
    const Op& op = g.op(static_cast<OpId>(id));
    for (OpId p : g.predecessors(static_cast<OpId>(id))) {
      bool data = false;
      for (TensorId t : op.inputs) data = data || g.producer(t) == p;
      if (!data && new_of[p] != new_of[id]) out.add_control(new_of[p], new_of[id]);
    }
  }
  if (unit_of_op) {
    std::vector<int32_t> remapped(out.num_ops(), -1);
    for (size_t i = 0; i < order.size(); ++i) remapped[order[i]] = units[i];
    *unit_of_op = std::move(remapped);
  }
  prog.graph = std::move(out);
  prog.order = std::move(order);
  return stats;
}

}  // namespace podsim
