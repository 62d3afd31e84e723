// The order an imported module's ops are issued in (docs/hlo.md): an unscheduled module's, arranged for podsim's
// fusion pass and for memory as XLA's scheduler would; a scheduled module's, as its kernels run.
#include "hlo/issue_order.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <vector>

#include "workloads/op_def.h"

namespace podsim::hlo {

// The order podsim issues an unscheduled module in: the module's, except that
//  - an op without operands (a constant, an iota) and an expander (a broadcast of a small value, a one-hot
//    comparison: it writes at least 8 times what it reads; the importer emits one for each reader) are issued
//    right before their reader, never on their own: a reader is ready when the ops its expanders read are done;
//  - an elementwise op or reduction is issued right after the op whose result it reads (directly or through an
//    expander) as soon as its other operands are ready, so that podsim's fusion pass, which fuses neighbours,
//    finds the producer-consumer pairs XLA's fusion would (a matmul and its epilogue, a weight gradient and its
//    update);
//  - otherwise, an op that reads a buffer for the last time is issued as soon as it is ready when it frees more
//    than it allocates, together with the elementwise chain that reads its result (each op the only reader of the
//    one before, up to a reduction: the kernel podsim's fusion will make of them), as XLA's memory-aware list
//    scheduler issues first the ready instruction that frees the most bytes net of those it defines
//    (xla/service/hlo_memory_scheduler.cc, ListScheduler). A module computes a loss metric or a weight's
//    gradient where its program text puts it, often long after its operands are ready; issued there, a
//    logits-sized operand would stay live across the step.
std::vector<OpId> unscheduled_order(const ModelGraph& g) {
  const size_t n = g.num_ops();
  std::vector<std::vector<OpId>> preds(n);
  for (size_t i = 0; i < n; ++i) preds[i] = g.predecessors(static_cast<OpId>(i));
  auto bytes = [&](const std::vector<TensorId>& ts) {
    double b = 0;
    for (TensorId t : ts) b += g.tensor(t).bytes();
    return b;
  };
  // Tag-along ops: elementwise ops whose inputs, not counting other tag-along ops' results, are at most an
  // eighth of what they write (constants, iotas, broadcasts, a one-hot mask compared from them). Ops are numbered
  // after the ops whose results they read.
  std::vector<bool> fusible(n, false), view(n, false), tagalong(n, false), comm(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.op(static_cast<OpId>(i));
    comm[i] = is_communication(op.kind);
    if (comm[i]) continue;
    const OpCost c = op_cost(g, op);
    fusible[i] = c.unit == Unit::Vpu && (c.fusible || c.reduction);
    view[i] = c.view;
    double in = 0;
    for (TensorId t : op.inputs)
      if (const OpId p = g.producer(t); p < 0 || !tagalong[p]) in += g.tensor(t).bytes();
    const double out = bytes(op.outputs);
    tagalong[i] = c.unit == Unit::Vpu && c.fusible && !c.view && out > 0 && in * 8 <= out;
  }
  // Each op's ready condition: the ops it waits for, looking through the tag-along ops it reads.
  std::vector<std::vector<OpId>> reals(n), rsuccs(n);
  std::vector<int32_t> waiting(n, 0);
  for (size_t i = 0; i < n; ++i) {
    std::vector<OpId>& r = reals[i];
    for (OpId p : preds[i]) {
      if (!tagalong[p]) r.push_back(p);
      else r.insert(r.end(), reals[p].begin(), reals[p].end());  // ops are numbered after their operands
    }
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
    if (tagalong[i]) continue;
    waiting[i] = static_cast<int32_t>(r.size());
    for (OpId p : r) rsuccs[p].push_back(static_cast<OpId>(i));
  }
  // Buffers: a view (bitcast) reads and writes its source's, and is no reader of its own. What each op reads for
  // the last time is known from the readers left per buffer.
  std::vector<TensorId> root(g.num_tensors());
  for (size_t t = 0; t < root.size(); ++t) root[t] = static_cast<TensorId>(t);
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.op(static_cast<OpId>(i));
    if (view[i] && op.inputs.size() == 1 && op.outputs.size() == 1) root[op.outputs[0]] = root[op.inputs[0]];
  }
  std::vector<std::vector<TensorId>> reads(n);
  std::vector<std::vector<OpId>> readers(g.num_tensors());
  std::vector<int32_t> left(g.num_tensors(), 0);
  for (size_t i = 0; i < n; ++i) {
    if (view[i]) continue;
    for (TensorId t : g.op(static_cast<OpId>(i)).inputs) reads[i].push_back(root[t]);
    std::sort(reads[i].begin(), reads[i].end());
    reads[i].erase(std::unique(reads[i].begin(), reads[i].end()), reads[i].end());
    for (TensorId r : reads[i]) {
      readers[r].push_back(static_cast<OpId>(i));
      ++left[r];
    }
  }
  std::vector<bool> done(n, false);
  // A buffer some op made that is not kept for the whole step.
  auto freeable = [&](TensorId r) {
    const TensorRole role = g.tensor(r).role;
    const OpId p = g.producer(r);
    return p >= 0 && done[p] && (role == TensorRole::Activation || role == TensorRole::Gradient ||
                                 role == TensorRole::Temporary || role == TensorRole::WeightCopy);
  };
  std::set<OpId> ready, cands;
  std::vector<OpId> order;
  order.reserve(n);
  // The chain an op would be issued with (see above), as far as it can run now; and whether it frees more than
  // it allocates.
  auto chain_of = [&](OpId x, std::vector<OpId>& chain) -> double {
    chain.assign(1, x);
    OpId cur = x;
    while (chain.size() < 8) {
      const Op& op = g.op(cur);
      if (op.outputs.size() != 1 || bytes(op.outputs) < bytes({op.inputs.empty() ? op.outputs[0] : op.inputs[0]}))
        break;  // a reduction ends it
      const std::vector<OpId> cs = g.consumers(op.outputs[0]);
      if (cs.size() != 1 || !fusible[cs[0]] || tagalong[cs[0]] || done[cs[0]] || waiting[cs[0]] != 1) break;
      if (!std::binary_search(reals[cs[0]].begin(), reals[cs[0]].end(), cur)) break;
      cur = cs[0];
      chain.push_back(cur);
    }
    double freed = 0;
    for (TensorId r : reads[x])
      if (left[r] == 1 && freeable(r)) freed += g.tensor(r).bytes();
    return freed - bytes(g.op(chain.back()).outputs);
  };
  std::vector<OpId> chain;
  // A ready op that reads some buffer for the last time is a candidate (its chain may grow as other ops finish).
  auto frees = [&](OpId x) {
    for (TensorId r : reads[x])
      if (left[r] == 1 && freeable(r)) return true;
    return false;
  };
  auto consider = [&](OpId x) {
    if (!done[x] && !comm[x] && !view[x] && !tagalong[x] && waiting[x] == 0 && frees(x)) cands.insert(x);
  };
  std::function<void(OpId)> issue = [&](OpId id) {
    for (OpId p : preds[id])
      if (tagalong[p] && !done[p]) issue(p);
    done[id] = true;
    order.push_back(id);
    ready.erase(id);
    cands.erase(id);
    for (TensorId r : reads[id])
      if (--left[r] == 1)
        for (OpId c : readers[r])
          if (!done[c]) consider(c);
    if (tagalong[id]) return;
    for (OpId c : rsuccs[id])
      if (--waiting[c] == 0) {
        ready.insert(c);
        consider(c);
      }
  };
  for (size_t i = 0; i < n; ++i)
    if (!tagalong[i] && waiting[i] == 0) {
      ready.insert(static_cast<OpId>(i));
      consider(static_cast<OpId>(i));
    }
  OpId last = -1;
  while (order.size() < n) {
    OpId next = -1;
    if (last >= 0)
      for (OpId c : rsuccs[last])
        if (ready.count(c) && fusible[c] && (next < 0 || c < next)) next = c;
    if (next < 0) {
      // The candidate that frees the most, net (the first in the module's order among equals).
      double best = 0;
      std::vector<OpId> run;
      for (auto it = cands.begin(); it != cands.end();) {
        if (done[*it]) {
          it = cands.erase(it);
          continue;
        }
        if (const double net = chain_of(*it, chain); net > best) {
          best = net;
          next = *it;
          run = chain;
        }
        ++it;
      }
      if (next >= 0) {
        for (OpId c : run)
          if (!done[c]) issue(c);
        last = run.back();
        continue;
      }
    }
    if (next < 0) {
      if (ready.empty()) {  // only tag-along ops nobody reads are left
        for (size_t i = 0; i < n; ++i)
          if (!done[i]) issue(static_cast<OpId>(i));
        break;
      }
      next = *ready.begin();
    }
    issue(next);
    last = next;
  }
  return order;
}

// After optimizations the module is scheduled: its kernels run one after another in its order, and a collective
// that is not asynchronous (no -start/-done pair) holds the next kernel until it is done; an async one runs from
// its start to its done while the kernels between run.
void add_schedule_edges(Imported& out) {
  ModelGraph& g = out.graph;
  OpId last_compute = -1;
  std::vector<OpId> blocking;  // synchronous collectives since the last compute op
  for (OpId id : out.order) {
    const Op& op = g.op(id);
    const bool comm = is_communication(op.kind);
    const std::string& opcode = out.origins[out.origin_of_op[id]].opcode;
    const bool async = opcode.size() > 6 && opcode.compare(opcode.size() - 6, 6, "-start") == 0;
    if (last_compute >= 0) {
      bool depends = false;
      for (OpId p : g.predecessors(id)) depends = depends || p == last_compute;
      if (!depends) g.add_control(last_compute, id);
    }
    if (!comm) {
      for (OpId b : blocking) g.add_control(b, id);
      blocking.clear();
      last_compute = id;
    } else if (!async) {
      blocking.push_back(id);
    }
  }
}

// Without it every collective whose operands are ready would start at once: a weight's all-gather reads a slice of
// the parameters and nothing else, so the all-gathers of every iteration of an unrolled layer loop would share the
// links from the loop's start (the backward loop of XLA's Llama 3.1 70B module: 560 at once, each taking up to
// 950 ms where it takes 1.7 ms alone), where XLA runs a loop's iterations in turn and overlaps an all-gather with
// the compute before its use. Collectives of different kinds still overlap each other (a layer's gradient
// all-reduce and the next layer's weight gather); point-to-point sends and receives are left as they are.
void add_overlap_limits(Imported& out) {
  ModelGraph& g = out.graph;
  std::map<OpKind, OpId> last;
  for (OpId id : out.order) {
    const OpKind k = g.op(id).kind;
    if (!is_communication(k) || k == OpKind::Send || k == OpKind::Recv || k == OpKind::Traffic) continue;
    auto it = last.find(k);
    if (it != last.end()) g.add_control(it->second, id);
    last[k] = id;
  }
}

}  // namespace podsim::hlo
