#include "partition/pipeline.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <queue>
#include <set>
#include <tuple>

#include "partition/microbatch.h"
#include "partition/partitioner.h"
#include "base/error.h"
#include "base/text.h"
#include "workloads/op_def.h"
#include "workloads/remat.h"

namespace podsim {
namespace {

// What an op of a stage's program does in the schedule.
enum class Group : uint8_t { Forward, Recompute, Backward, Step };

struct StageOp {
  int32_t instance = -1;  // micro-batch, -1 for once-per-step ops
  Group group = Group::Step;
  bool accumulation = false;  // adds a micro-batch's value into the running sum over micro-batches
};

// One stage's part of the micro-batched step, as a graph of its own (partitioned afterwards).
struct Stage {
  ModelGraph g{"stage"};
  std::vector<TensorId> u_of;         // per stage tensor: the micro-batched step's tensor
  std::map<TensorId, TensorId> of_u;  // micro-batched tensor -> stage tensor (the kept value, not a recomputed one)
  std::map<std::string, StageOp> ops;  // by op name
};

struct Boundary {
  TensorId u;  // in the micro-batched step
  int from, to;
  int64_t tag;
};

bool forward_phase(Phase p) { return p == Phase::Forward || p == Phase::Loss; }

// strategy.remat: the micro-batched step re-materialized (workloads/remat.h) with one segment per (stage,
// micro-batch) and nothing saved: a stage keeps only the values it receives (and the step's inputs) and recomputes
// its forward for a micro-batch just before that micro-batch's backward (workload.remat: full, per stage).
Microbatched stage_remat(Microbatched mb, bool remat, int64_t M, const std::function<int(const Op&)>& stage_of_op) {
  if (!remat) return mb;
  const ModelGraph& U = mb.graph;
  auto segment = [&](OpId o) -> int64_t {
    return mb.instance[o] < 0 ? -1 : stage_of_op(U.op(o)) * M + mb.instance[o];
  };
  Rematerialized r = rematerialize(U, segment, [](TensorId) { return false; }, false);
  Microbatched out;
  out.graph = std::move(r.graph);
  for (OpId o : r.source_op) out.instance.push_back(mb.instance[o]);
  for (size_t t = 0; t < r.source_tensor.size(); ++t) {
    const TensorId src = r.source_tensor[t];
    const bool copy = static_cast<TensorId>(t) != src;  // a recomputed micro-batch value: never a step tensor
    out.origin.push_back(copy ? -1 : mb.origin[src]);
    out.slice_of.push_back(mb.slice_of[src]);
    out.sum_of.push_back(copy ? -1 : mb.sum_of[src]);
  }
  return out;
}

}  // namespace

std::vector<int64_t> balance_stages(const std::vector<double>& costs, int64_t k) {
  const int64_t n = static_cast<int64_t>(costs.size());
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0);
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + costs[i];
  auto sum = [&](int64_t a, int64_t b) { return prefix[b] - prefix[a]; };  // cells [a, b)
  // best[j][i]: (largest stage, sum of squares) cutting the first i cells into j stages.
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<std::vector<std::pair<double, double>>> best(
      static_cast<size_t>(k) + 1, std::vector<std::pair<double, double>>(static_cast<size_t>(n) + 1, {inf, inf}));
  std::vector<std::vector<int64_t>> cut(static_cast<size_t>(k) + 1, std::vector<int64_t>(static_cast<size_t>(n) + 1, 0));
  best[0][0] = {0, 0};
  for (int64_t j = 1; j <= k; ++j)
    for (int64_t i = j; i <= n; ++i)
      for (int64_t c = j - 1; c < i; ++c) {
        if (!std::isfinite(best[j - 1][c].first)) continue;
        const double s = sum(c, i);
        std::pair<double, double> v{std::max(best[j - 1][c].first, s), best[j - 1][c].second + s * s};
        const auto& b = best[j][i];
        if (v.first < b.first - 1e-15 || (v.first <= b.first + 1e-15 && v.second < b.second - 1e-15)) {
          best[j][i] = v;
          cut[j][i] = c;
        }
      }
  std::vector<int64_t> starts(static_cast<size_t>(k), 0);
  for (int64_t j = k, i = n; j >= 1; --j) {
    starts[j - 1] = cut[j][i];
    i = cut[j][i];
  }
  return std::vector<int64_t>(starts.begin() + 1, starts.end());
}

PipelineResult pipeline_step(const PipelineInput& in) {
  const ModelGraph& G = in.logical;
  const PipelineOptions& opt = in.options;
  const int64_t K = in.mesh.axis_size(opt.axis), M = opt.micro_batches;
  PipelineResult res;

  // 1. Cells and their costs; the cut into K stages.
  std::vector<int32_t> cells;
  for (const Op& op : G.ops())
    if (op.cell >= 0) cells.push_back(op.cell);
  std::sort(cells.begin(), cells.end());
  cells.erase(std::unique(cells.begin(), cells.end()), cells.end());
  if (static_cast<int64_t>(cells.size()) < K)
    throw Error(Err::StrategyMismatch, "the pipeline has " + std::to_string(K) + " stages but the " + G.name() +
                                           " step has only " + std::to_string(cells.size()) +
                                           " cells (layers) to place on them; use fewer stages");
  std::map<int32_t, size_t> cell_index;
  for (size_t i = 0; i < cells.size(); ++i) cell_index[cells[i]] = i;
  std::vector<double> cost(cells.size(), 0);
  for (const Op& op : G.ops())
    if (op.cell >= 0) cost[cell_index[op.cell]] += in.op_seconds ? in.op_seconds(G, op) : op_flops(G, op);
  std::vector<int64_t> starts = opt.boundaries;
  if (starts.empty()) {
    starts = balance_stages(cost, K);
  } else {
    if (static_cast<int64_t>(starts.size()) != K - 1)
      throw Error(Err::StrategyMismatch, "the pipeline's stage boundaries list " + std::to_string(starts.size()) +
                                             " cells; " + std::to_string(K) + " stages need " + std::to_string(K - 1));
    for (size_t i = 0; i < starts.size(); ++i)
      if (starts[i] <= (i ? starts[i - 1] : 0) || starts[i] >= static_cast<int64_t>(cells.size()))
        throw Error(Err::StrategyMismatch, "the pipeline's stage boundaries must be increasing cells between 1 and " +
                                               std::to_string(cells.size() - 1));
  }
  std::vector<int> stage_of_cell(cells.size(), 0);
  res.cells.assign(static_cast<size_t>(K), {});
  res.stage_seconds.assign(static_cast<size_t>(K), 0);
  for (size_t c = 0, s = 0; c < cells.size(); ++c) {
    while (s + 1 < static_cast<size_t>(K) && static_cast<int64_t>(c) >= starts[s]) ++s;
    stage_of_cell[c] = static_cast<int>(s);
    res.cells[s].push_back(cells[c]);
    res.stage_seconds[s] += cost[c];
  }

  auto stage_of_op = [&](const Op& op) { return op.cell >= 0 ? stage_of_cell[cell_index.at(op.cell)] : 0; };

  // 2. The mini-batch as micro-batches.
  // Gradients add up in the order the schedule finishes the micro-batches' backward passes: GPipe runs them last
  // to first, 1F1B first to last.
  std::vector<int64_t> acc_order;
  for (int64_t m = 0; m < M; ++m) acc_order.push_back(opt.schedule == "1f1b" ? m : M - 1 - m);
  // Every replica splits its own rows into micro-batches: the batch's shards over the batch axes are the outer
  // blocks of the step's per-example results, the micro-batches inside each (microbatch()'s `batch_shards`).
  std::vector<std::string> batch_axes;
  for (const auto& [t, s] : in.annotations)
    if ((G.tensor(t).role == TensorRole::Input || G.tensor(t).role == TensorRole::Label) && s.rank() > 0 &&
        !s.dims[0].empty()) {
      batch_axes = s.dims[0];
      break;
    }
  int64_t batch_shards = 1;
  for (const std::string& a : batch_axes) batch_shards *= in.mesh.axis_size(a);
  const Microbatched mb = stage_remat(microbatch(G, M, acc_order, batch_shards), opt.remat, M, stage_of_op);
  const ModelGraph& U = mb.graph;
  // Recomputed ops (strategy.remat, or the step's own re-materialization: workload.remat) run as a unit of their
  // own just before their micro-batch's backward.
  bool has_recompute = false;
  for (const Op& op : U.ops()) has_recompute = has_recompute || op.recompute;

  // 3. Stage graphs; values crossing a cut become boundaries.
  std::vector<Stage> stages(static_cast<size_t>(K));
  std::vector<Boundary> boundaries;
  std::map<std::pair<TensorId, int>, size_t> boundary_index;  // (tensor, receiving stage)
  const std::vector<OpId> order = U.topological_order();
  auto add_tensor = [&](Stage& s, TensorId u) {
    TensorInfo info = U.tensor(u);
    if (info.updates >= 0) info.updates = s.of_u.count(info.updates) ? s.of_u[info.updates] : -1;
    TensorId id = s.g.add_tensor(info);
    s.u_of.push_back(u);
    return id;
  };
  auto input_of = [&](int k, TensorId u) -> TensorId {
    Stage& s = stages[k];
    auto it = s.of_u.find(u);
    if (it != s.of_u.end()) return it->second;
    TensorId id = add_tensor(s, u);
    s.of_u[u] = id;
    OpId p = U.producer(u);
    if (p >= 0) {  // produced by another stage: received
      const int from = stage_of_op(U.op(p));
      boundary_index[{u, k}] = boundaries.size();
      boundaries.push_back({u, from, k, static_cast<int64_t>(boundaries.size())});
    }
    return id;
  };
  for (OpId id : order) {
    const Op& op = U.op(id);
    const int k = stage_of_op(op);
    const int32_t m = mb.instance[id];
    const Group group = m < 0              ? Group::Step
                        : op.recompute     ? Group::Recompute
                        : forward_phase(op.phase) ? Group::Forward
                                                  : Group::Backward;
    Stage& s = stages[k];
    Op c = op;
    for (TensorId& t : c.inputs) t = input_of(k, t);
    for (TensorId& t : c.outputs) {
      const TensorId u = t;
      t = add_tensor(s, u);
      s.of_u[u] = t;
    }
    bool accumulation = false;
    if (op.kind == OpKind::Add && m < 0)
      for (TensorId u : op.inputs) accumulation = accumulation || mb.sum_of[u] >= 0;
    s.g.add_op(c);
    s.ops[c.name] = {m, group, accumulation};
  }

  // 4. Specs for each stage: the strategies' annotations of the logical tensors, applied to the values that hold
  // them or their micro-batches; boundaries split their batch like the step's inputs, the same on both sides.
  auto spec_of_u = [&](TensorId u) -> std::optional<ShardSpec> {
    TensorId l = mb.origin[u] >= 0 ? mb.origin[u] : mb.slice_of[u];
    if (l < 0) return std::nullopt;
    auto it = in.annotations.find(l);
    if (it == in.annotations.end() || it->second.rank() != U.tensor(u).shape.size()) return std::nullopt;
    return it->second;
  };
  // A running sum of gradients over the micro-batches is stored as its gradient is when the parameter itself is
  // stored split over an axis it is gathered over for use (fsdp): each micro-batch's partial gradient is
  // reduce-scattered into the shard as soon as its backward pass ends (ZeRO-3 and FSDP with gradient
  // accumulation; GSPMD with a sharded accumulator), never held whole: a stage's whole gradients would outweigh
  // its sharded weights many times. Elsewhere (data parallel, weight-update sharding) the whole sum is reduced
  // once, after the last micro-batch.
  std::set<std::string> gathered_axes;
  for (const auto& [l, use] : in.gathered_for_use) {
    auto it = in.annotations.find(l);
    if (it == in.annotations.end()) continue;
    for (const auto& dim : it->second.dims)
      for (const std::string& a : dim)
        if (!use.uses(a)) gathered_axes.insert(a);
  }
  auto sum_spec = [&](TensorId u) -> std::optional<ShardSpec> {
    if (mb.sum_of[u] < 0) return std::nullopt;
    auto it = in.annotations.find(mb.sum_of[u]);
    if (it == in.annotations.end() || it->second.rank() != U.tensor(u).shape.size()) return std::nullopt;
    for (const std::string& a : gathered_axes)
      if (it->second.uses(a)) return it->second;
    return std::nullopt;
  };
  auto boundary_spec = [&](TensorId u) {
    if (auto s = spec_of_u(u)) return *s;
    ShardSpec s = ShardSpec::replicated(U.tensor(u).shape.size());
    if (mb.origin[u] < 0 && s.rank() > 0) s.dims[0] = batch_axes;  // a micro-batch's values: batch first
    return s;
  };

  // 5. Partition every stage over the other axes.
  std::vector<PartitionResult> parts;
  for (int k = 0; k < K; ++k) {
    Stage& s = stages[k];
    PartitionInput pi{s.g, in.mesh};
    for (size_t t = 0; t < s.g.num_tensors(); ++t)
      if (auto spec = spec_of_u(s.u_of[t]); spec || (spec = sum_spec(s.u_of[t])))
        pi.annotations[static_cast<TensorId>(t)] = *spec;
    for (size_t t = 0; t < s.g.num_tensors(); ++t) {
      const TensorId o = mb.origin[s.u_of[t]];
      auto it = o >= 0 ? in.gathered_for_use.find(o) : in.gathered_for_use.end();
      if (it != in.gathered_for_use.end() && it->second.rank() == s.g.tensor(static_cast<TensorId>(t)).shape.size())
        pi.gathered_for_use[static_cast<TensorId>(t)] = it->second;
    }
    for (const Boundary& b : boundaries) {
      if (b.to == k) pi.annotations[s.of_u.at(b.u)] = boundary_spec(b.u);
      if (b.from == k) pi.annotations[s.of_u.at(b.u)] = boundary_spec(b.u);
    }
    pi.keep_gathered = in.keep_gathered;
    pi.role = "stage" + std::to_string(k);
    pi.algorithms = in.algorithms;
    pi.flops_per_comm_byte = in.flops_per_comm_byte;
    parts.push_back(partition_step(pi));
    s.g = ModelGraph("stage");  // partitioned: only its maps are used from here on (the step's largest copy)
    for (const std::string& n : parts.back().notes)
      if (std::find(res.notes.begin(), res.notes.end(), n) == res.notes.end()) res.notes.push_back(n);
  }

  // 6. Send and receive the boundaries along the pipeline axis.
  for (const Boundary& b : boundaries) {
    PartitionResult& snd = parts[b.from];
    PartitionResult& rcv = parts[b.to];
    const TensorId s_local = snd.annotated_local.at(stages[b.from].of_u.at(b.u));
    const TensorId r_local = rcv.annotated_local.at(stages[b.to].of_u.at(b.u));
    const std::string name = U.tensor(b.u).name;
    ModelGraph& sg = snd.program.graph;
    TensorId token = sg.add_tensor({name + "/sent", {1}, DType::F32, TensorRole::Temporary});
    Op send;
    send.name = name + "/send to stage " + std::to_string(b.to);
    send.kind = OpKind::Send;
    send.phase = Phase::Communication;
    send.inputs = {s_local};
    send.outputs = {token};
    send.attrs.axes = {opt.axis};
    send.attrs.shift = b.to - b.from;
    send.attrs.tag = b.tag;
    snd.program.order.push_back(sg.add_op(send));
    ModelGraph& rg = rcv.program.graph;
    Op recv;
    recv.name = name + "/recv from stage " + std::to_string(b.from);
    recv.kind = OpKind::Recv;
    recv.phase = Phase::Communication;
    recv.outputs = {r_local};
    recv.attrs.axes = {opt.axis};
    recv.attrs.shift = b.from - b.to;
    recv.attrs.tag = b.tag;
    rcv.program.order.push_back(rg.add_op(recv));
    auto& ins = rcv.program.inputs;
    ins.erase(std::remove_if(ins.begin(), ins.end(), [&](const TensorBinding& x) { return x.local == r_local; }),
              ins.end());
  }

  // 7. Each stage's schedule: an issue order, and control dependencies where the schedule changes between forward
  // and backward work.
  for (int k = 0; k < K; ++k) {
    Program& prog = parts[k].program;
    ModelGraph& g = prog.graph;
    const Stage& s = stages[k];
    // The sequence of (group, micro-batch) this stage runs.
    std::vector<std::pair<Group, int32_t>> seq;
    auto backward = [&](int32_t m) {
      if (has_recompute) seq.push_back({Group::Recompute, m});
      seq.push_back({Group::Backward, m});
    };
    if (opt.schedule == "1f1b") {
      const int32_t warm = static_cast<int32_t>(std::min<int64_t>(K - 1 - k, M));
      for (int32_t m = 0; m < warm; ++m) seq.push_back({Group::Forward, m});
      for (int32_t i = 0; i + warm < M; ++i) {
        seq.push_back({Group::Forward, i + warm});
        backward(i);
      }
      for (int32_t i = static_cast<int32_t>(M) - warm; i < M; ++i) backward(i);
    } else {
      for (int32_t m = 0; m < M; ++m) seq.push_back({Group::Forward, m});
      for (int32_t m = static_cast<int32_t>(M) - 1; m >= 0; --m) backward(m);
    }
    std::map<std::pair<Group, int32_t>, int64_t> pos;
    for (size_t i = 0; i < seq.size(); ++i) pos[seq[i]] = static_cast<int64_t>(i);
    const int64_t after_all = static_cast<int64_t>(seq.size());
    // Keys: ops of the stage graph by their item; optimizer updates last; every other op (reshards, transfers,
    // accumulations) with the latest of its inputs, or the earliest of its consumers when it has no inputs.
    const size_t n = g.num_ops();
    std::vector<int64_t> key(n, -1);
    std::vector<int64_t> item(n, -1);
    for (size_t i = 0; i < n; ++i) {
      const Op& op = g.op(static_cast<OpId>(i));
      auto it = s.ops.find(op.name);
      if (it == s.ops.end()) continue;
      if (it->second.group == Group::Step) {
        if (op.phase == Phase::Optimizer) key[i] = after_all;
        continue;
      }
      key[i] = pos.at({it->second.group, it->second.instance});
      item[i] = key[i];
    }
    const std::vector<OpId> topo = g.topological_order();
    // The unit each op is part of, for the report: the ops of the micro-batched step by their item, and the
    // reshards the partitioner put among them with the latest item whose values they take; not the transfers
    // between stages, nor what works on the accumulated gradients.
    std::vector<int32_t> unit(n, -1);
    for (OpId id : topo) {
      const Op& op = g.op(id);
      if (item[id] >= 0) {
        unit[id] = static_cast<int32_t>(item[id]);
      } else if (!s.ops.count(op.name) && op.kind != OpKind::Send && op.kind != OpKind::Recv) {
        for (OpId p : g.predecessors(id)) unit[id] = std::max(unit[id], unit[p]);
      }
    }
    for (OpId id : topo)
      if (key[id] < 0)
        for (OpId p : g.predecessors(id)) key[id] = std::max(key[id], key[p]);
    for (auto it = topo.rbegin(); it != topo.rend(); ++it)
      if (key[*it] < 0) {
        int64_t k2 = std::numeric_limits<int64_t>::max();
        for (OpId c : g.successors(*it)) k2 = std::min(k2, key[c]);
        key[*it] = k2 == std::numeric_limits<int64_t>::max() ? 0 : k2;
      }
    // Kahn's order by (key, op id), except that a gradient accumulation goes first among the ready ops of its
    // key: a micro-batch's gradient is added into the running sum as soon as it is made and freed, as a training
    // loop over micro-batches does, rather than held with the whole sum until the unit's last op (which would
    // keep two sets of the stage's gradients live during every backward pass).
    std::vector<bool> accumulation(n, false);
    for (size_t i = 0; i < n; ++i) {
      auto it = s.ops.find(g.op(static_cast<OpId>(i)).name);
      accumulation[i] = it != s.ops.end() && it->second.accumulation;
    }
    auto issue_order = [&] {
      std::vector<int> indeg(n, 0);
      for (size_t i = 0; i < n; ++i) indeg[i] = static_cast<int>(g.predecessors(static_cast<OpId>(i)).size());
      using Entry = std::tuple<int64_t, bool, OpId>;  // key, not an accumulation, op id
      std::priority_queue<Entry, std::vector<Entry>, std::greater<>> ready;
      auto push = [&](OpId o) { ready.push({key[o], !accumulation[o], o}); };
      for (size_t i = 0; i < n; ++i)
        if (indeg[i] == 0) push(static_cast<OpId>(i));
      std::vector<OpId> out;
      while (!ready.empty()) {
        OpId o = std::get<2>(ready.top());
        ready.pop();
        out.push_back(o);
        for (OpId c : g.successors(o))
          if (--indeg[c] == 0) push(c);
      }
      return out;
    };
    // Gathers of fully sharded parameters (fsdp) are issued one unit ahead: a gather that the schedule's unit i
    // first reads is ordered with unit i - 1 and waits (below) for unit i - 2's last op, so it overlaps unit i - 1
    // (its gathered copy then serves every later unit of its pass).
    std::vector<std::pair<OpId, int64_t>> prefetched;  // a gather and the unit it serves
    for (const std::vector<OpId>& chain : parts[k].gathers) {
      const int64_t i = key[chain.front()];
      if (i < 1 || i >= static_cast<int64_t>(seq.size())) continue;
      for (OpId o : chain) key[o] = i - 1;
      prefetched.push_back({chain.front(), i});
    }
    std::vector<OpId> ord = issue_order();
    // Control dependencies between consecutive items: the next item's entry ops (compute ops none of whose inputs
    // come from the same item) wait for the last op of the previous, so that a stage works on one micro-batch at a
    // time, in the schedule's order (dispatching every ready op at once would interleave the micro-batches and
    // finish the first one, which the next stage waits for, last).
    std::vector<OpId> last_of(seq.size(), -1);
    std::vector<size_t> at(n, 0);
    for (size_t i = 0; i < ord.size(); ++i) {
      at[ord[i]] = i;
      if (item[ord[i]] >= 0) last_of[item[ord[i]]] = ord[i];
    }
    std::vector<std::vector<OpId>> ops_of_item(seq.size());  // in issue order
    for (OpId o : ord)
      if (item[o] >= 0) ops_of_item[static_cast<size_t>(item[o])].push_back(o);
    for (size_t i = 1; i < seq.size(); ++i) {
      if (last_of[i - 1] < 0) continue;
      for (OpId o : ops_of_item[i]) {
        if (is_communication(g.op(o).kind)) continue;
        bool entry = true;
        for (OpId p : g.predecessors(o)) entry = entry && item[p] != static_cast<int64_t>(i);
        if (entry && at[o] > at[last_of[i - 1]]) g.add_control(last_of[i - 1], o);
      }
    }
    for (const auto& [gather, i] : prefetched)
      if (i >= 2 && last_of[i - 2] >= 0) g.add_control(last_of[i - 2], gather);
    // A stage's work on a micro-batch is one unit, as in GPipe: what it sends for that micro-batch (activations
    // forward, input gradients backward) leaves when the unit is done, not as soon as its value exists: after
    // every op of the unit that no other op of the unit follows (the last in issue order may end first, e.g. an
    // input gradient on the VPU while a weight gradient is still on the MXU).
    std::vector<std::vector<OpId>> finals(seq.size());
    for (size_t i = 0; i < n; ++i) {
      if (item[i] < 0 || is_communication(g.op(static_cast<OpId>(i)).kind)) continue;
      bool last = true;
      for (OpId c : g.successors(static_cast<OpId>(i))) last = last && item[c] != item[i];
      if (last) finals[static_cast<size_t>(item[i])].push_back(static_cast<OpId>(i));
    }
    for (size_t i = 0; i < n; ++i) {
      const Op& op = g.op(static_cast<OpId>(i));
      if (op.kind != OpKind::Send || key[i] < 0 || key[i] >= static_cast<int64_t>(seq.size())) continue;
      for (OpId f : finals[static_cast<size_t>(key[i])]) g.add_control(f, static_cast<OpId>(i));
    }
    // The update follows the stage's last unit, with what that unit sends and the gradient accumulations it
    // completes, as in GPipe, where the update applies the gradients the stage's loop over the micro-batches
    // returns. Run as soon as each gradient is final, it would share the chip with that work and delay the input
    // gradients the previous stage waits for (and the accumulations still to do).
    if (!seq.empty()) {
      const int64_t last_item = static_cast<int64_t>(seq.size()) - 1;
      std::vector<OpId> ends, updates;  // the last unit's final ops; the update's first ops
      for (size_t i = 0; i < n; ++i) {
        const OpId o = static_cast<OpId>(i);
        if (key[i] == last_item && g.op(o).kind != OpKind::Recv) {
          bool end = true;
          for (OpId c : g.successors(o)) end = end && key[c] == after_all;
          if (end) ends.push_back(o);
        } else if (key[i] == after_all && !is_communication(g.op(o).kind)) {
          bool first = true;
          for (OpId p : g.predecessors(o)) first = first && key[p] < after_all;
          if (first) updates.push_back(o);
        }
      }
      for (OpId u : updates)
        for (OpId e : ends) g.add_control(e, u);
    }
    prog.order = issue_order();
    prog.role = "stage" + std::to_string(k);
    res.unit_of_op.push_back(std::move(unit));
    std::vector<PipelineUnit>& units = res.units.emplace_back();
    for (const auto& [group, m] : seq)
      units.push_back({group == Group::Forward     ? PipelinePass::Forward
                       : group == Group::Recompute ? PipelinePass::Recompute
                                                   : PipelinePass::Backward,
                       m});
  }

  // 8. Bindings refer to the logical step.
  for (int k = 0; k < K; ++k) {
    Program& prog = parts[k].program;
    for (auto* list : {&prog.inputs, &prog.results}) {
      std::vector<TensorBinding> kept;
      for (TensorBinding b : *list) {
        const TensorId o = mb.origin[stages[k].u_of[b.logical]];
        if (o < 0) continue;
        b.logical = o;
        kept.push_back(b);
      }
      *list = kept;
    }
    res.programs.push_back(std::move(prog));
  }
  std::vector<std::string> sizes;
  for (int k = 0; k < K; ++k)
    sizes.push_back(strprintf("%zu cells (%.3g%%)", res.cells[k].size(),
                              100.0 * res.stage_seconds[k] /
                                  std::max(1e-300, std::accumulate(res.stage_seconds.begin(), res.stage_seconds.end(), 0.0))));
  res.notes.insert(res.notes.begin(), strprintf("pipeline: %lld stages x %lld micro-batches (%s%s); stages: ",
                                                static_cast<long long>(K), static_cast<long long>(M),
                                                opt.schedule.c_str(), opt.remat ? ", re-materialized" : "") +
                                          join(sizes, ", "));
  return res;
}

}  // namespace podsim
