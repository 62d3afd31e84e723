#include "partition/microbatch.h"

#include "partition/partitioner.h"
#include "base/error.h"

namespace podsim {
namespace {

bool uses_micro(const ShardSpec& s) { return s.uses("micro"); }

}  // namespace

Microbatched microbatch(const ModelGraph& g, int64_t M, std::vector<int64_t> accumulation_order, int64_t batch_shards) {
  if (accumulation_order.empty())
    for (int64_t m = 0; m < M; ++m) accumulation_order.push_back(m);
  Microbatched out;
  out.graph = ModelGraph(g.name());
  ModelGraph& u = out.graph;
  // 1. The step over a virtual axis `micro`: the batch of every input split M ways.
  const Mesh micro = Mesh::layout({"micro"}, {M}, Torus({M, 1}, {false, false}), {});
  PartitionInput in{g, micro};
  for (size_t t = 0; t < g.num_tensors(); ++t) {
    const TensorInfo& info = g.tensor(static_cast<TensorId>(t));
    // The batch, and state kept per example row (batch-norm moving averages: state no parameter owns), which each
    // micro-batch updates for its own rows.
    bool per_example = info.role == TensorRole::OptimizerState;
    for (OpId c : g.consumers(static_cast<TensorId>(t)))
      per_example = per_example && g.tensor(g.op(c).inputs.front()).role != TensorRole::Parameter;
    if (g.producer(static_cast<TensorId>(t)) >= 0 ||
        (info.role != TensorRole::Input && info.role != TensorRole::Label && !per_example))
      continue;
    if (info.shape.empty() || info.shape[0] % M != 0)
      throw Error(Err::NotDivisible, "the pipeline's " + std::to_string(M) + " micro-batches do not divide the batch of '" +
                                         info.name + "' " + info.shape_text() + "; choose micro-batches that divide it");
    ShardSpec s = ShardSpec::replicated(info.shape.size());
    s.dims[0] = {"micro"};
    in.annotations[static_cast<TensorId>(t)] = s;
  }
  in.role = "microbatched";
  PartitionResult p = partition_step(in);
  const ModelGraph& pg = p.program.graph;

  // 2. Unroll: local tensors holding micro shards get M instances; the rest one.
  const size_t nt = pg.num_tensors();
  std::vector<std::vector<TensorId>> map(nt);  // per local tensor: its U tensor per instance (1 entry if shared)
  auto is_micro = [&](TensorId t) { return p.local_logical[t] >= 0 && uses_micro(p.local_spec[t]); };
  auto add = [&](TensorId local, const std::string& name, TensorId origin) {
    TensorInfo info = pg.tensor(local);
    info.name = name;
    if (info.updates >= 0) info.updates = map[info.updates].empty() ? -1 : map[info.updates].front();
    TensorId id = u.add_tensor(info);
    out.origin.push_back(origin);
    // A micro-batch's piece of a logical tensor (its batch split, not a partial sum).
    const ShardSpec& s = p.local_spec[local];
    const bool piece = origin < 0 && p.local_logical[local] >= 0 && !s.is_partial() && s.rank() > 0 &&
                       s.dims[0] == std::vector<std::string>{"micro"};
    out.slice_of.push_back(piece ? p.local_logical[local] : -1);
    out.sum_of.push_back(-1);
    return id;
  };
  auto logical_name = [&](TensorId local) {
    TensorId l = p.local_logical[local];
    return l >= 0 ? g.tensor(l).name : pg.tensor(local).name;
  };
  // Step inputs: a batch input becomes the whole logical tensor, sliced per micro-batch where it is used.
  for (const TensorBinding& b : p.program.inputs) {
    const TensorInfo& li = g.tensor(b.logical);
    TensorInfo whole = li;
    TensorId id = u.add_tensor(whole);
    out.origin.push_back(b.logical);
    out.slice_of.push_back(-1);
    out.sum_of.push_back(-1);
    if (!uses_micro(b.spec)) {
      map[b.local] = {id};
      continue;
    }
    int32_t cell = -1;
    for (OpId c : g.consumers(b.logical)) cell = cell < 0 ? g.op(c).cell : std::min(cell, g.op(c).cell);
    for (int64_t m = 0; m < M; ++m) {
      TensorInfo part = pg.tensor(b.local);
      part.name = li.name + "/mb" + std::to_string(m);
      part.role = TensorRole::Activation;
      TensorId pid = u.add_tensor(part);
      out.origin.push_back(-1);
      out.slice_of.push_back(b.logical);
      out.sum_of.push_back(-1);
      Op s;
      s.name = part.name;
      s.kind = OpKind::Slice;
      s.phase = Phase::Forward;
      s.cell = cell;
      s.inputs = {id};
      s.outputs = {pid};
      s.attrs.dim = 0;
      s.attrs.offset = m;
      u.add_op(s);
      out.instance.push_back(static_cast<int32_t>(m));
      map[b.local].push_back(pid);
    }
  }
  auto input_of = [&](TensorId local, int64_t m) {
    const auto& v = map[local];
    if (v.empty()) throw Error(Err::Internal, "micro-batching: '" + pg.tensor(local).name + "' used before it exists");
    return v.size() == 1 ? v.front() : v.at(static_cast<size_t>(m));
  };
  for (OpId id : p.program.order) {
    const Op& op = pg.op(id);
    bool micro_op = false;
    for (TensorId t : op.inputs) micro_op = micro_op || map[t].size() > 1;
    for (TensorId t : op.outputs) micro_op = micro_op || is_micro(t);
    if (is_communication(op.kind)) {
      if (op.kind != OpKind::AllReduce || op.attrs.axes != std::vector<std::string>{"micro"})
        throw Error(Err::StrategyMismatch, std::string("the pipeline cannot split '") + op.name +
                                               "' along the batch (it would need a " + op_kind_name(op.kind) +
                                               " between micro-batches)");
      // The sum over micro-batches: accumulated in the order given (that in which their backward passes end).
      const TensorId x = op.inputs.front(), y = op.outputs.front();
      TensorId acc = input_of(x, accumulation_order.front());
      if (M > 1)  // each micro-batch's value is a part of the sum
        for (int64_t m = 0; m < M; ++m) out.sum_of[input_of(x, m)] = p.local_logical[y];
      int32_t cell = u.op(u.producer(acc)).cell;
      for (int64_t m = 1; m < M; ++m) {
        const bool last = m == M - 1;
        TensorId next = add(y, last ? logical_name(y) : logical_name(y) + "/sum" + std::to_string(m),
                            last ? p.local_logical[y] : -1);
        if (!last) out.sum_of[next] = p.local_logical[y];
        Op a;
        a.name = logical_name(y) + "/accumulate" + std::to_string(m);
        a.kind = OpKind::Add;
        a.phase = u.op(u.producer(acc)).phase;
        a.cell = cell;
        a.inputs = {acc, input_of(x, accumulation_order[static_cast<size_t>(m)])};
        a.outputs = {next};
        u.add_op(a);
        out.instance.push_back(-1);
        acc = next;
      }
      if (M == 1) {  // nothing to add: the one micro-batch's value is the step's
        u.tensor(acc).name = logical_name(y);
        out.origin[acc] = p.local_logical[y];
      }
      map[y] = {acc};
      continue;
    }
    const int64_t copies = micro_op ? M : 1;
    std::vector<std::vector<TensorId>> outs(op.outputs.size());
    for (int64_t m = 0; m < copies; ++m) {
      Op c = op;
      if (micro_op) c.name = op.name + "/mb" + std::to_string(m);
      if (c.kind == OpKind::Slice && c.attrs.axes == std::vector<std::string>{"micro"}) {
        c.attrs.axes.clear();  // the micro-batch's own piece, at a fixed place
        c.attrs.offset = m;
      }
      for (auto& t : c.inputs) t = input_of(t, m);
      for (size_t j = 0; j < op.outputs.size(); ++j) {
        const TensorId lt = op.outputs[j];
        c.outputs[j] = micro_op ? add(lt, logical_name(lt) + "/mb" + std::to_string(m), -1)
                                : add(lt, logical_name(lt), p.local_logical[lt]);
        outs[j].push_back(c.outputs[j]);
      }
      u.add_op(c);
      out.instance.push_back(micro_op ? static_cast<int32_t>(m) : -1);
    }
    for (size_t j = 0; j < op.outputs.size(); ++j) {
      map[op.outputs[j]] = outs[j];
      // A step result updated per example row (batch-norm moving averages), in M pieces: joined into the logical
      // tensor. Each piece is viewed as D rows, one per batch shard (D = batch_shards: a data replica's part of the
      // micro-batch), the pieces' rows concatenated: for each shard, its micro-batches in order, as each replica
      // splits its own rows into micro-batches.
      const TensorId lt = op.outputs[j], logical = p.local_logical[lt];
      if (!micro_op || logical < 0 || g.tensor(logical).role != TensorRole::Updated) continue;
      const int64_t D = pg.tensor(lt).shape.empty() || pg.tensor(lt).shape[0] % batch_shards != 0 ? 1 : batch_shards;
      const int64_t piece = pg.tensor(lt).elements() / D;
      std::vector<TensorId> rows;
      auto step = [&](const std::string& name, OpKind kind, std::vector<TensorId> ins, std::vector<int64_t> shape,
                      TensorId origin) {
        TensorInfo info = pg.tensor(lt);
        info.name = name;
        info.shape = std::move(shape);
        if (origin < 0) info.role = TensorRole::Activation, info.updates = -1;
        else if (info.updates >= 0) info.updates = map[info.updates].empty() ? -1 : map[info.updates].front();
        const TensorId t = u.add_tensor(info);
        out.origin.push_back(origin);
        out.slice_of.push_back(-1);
        out.sum_of.push_back(-1);
        Op o;
        o.name = name;
        o.kind = kind;
        o.phase = op.phase;
        o.cell = op.cell;
        o.inputs = std::move(ins);
        o.outputs = {t};
        u.add_op(o);
        out.instance.push_back(-1);
        return t;
      };
      for (int64_t m = 0; m < M; ++m)
        rows.push_back(step(logical_name(lt) + "/row" + std::to_string(m), OpKind::Reshape, {outs[j][m]}, {D, piece}, -1));
      const TensorId joined = step(logical_name(lt) + "/join", OpKind::Concat, rows, {D, piece * M}, -1);
      map[lt] = {step(logical_name(lt), OpKind::Reshape, {joined}, g.tensor(logical).shape, logical)};
    }
  }
  return out;
}

}  // namespace podsim
