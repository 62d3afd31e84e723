#include "workloads/remat.h"

#include <fnmatch.h>

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "base/error.h"
#include "workloads/op_def.h"

namespace podsim {
namespace {

bool forward_phase(Phase p) { return p == Phase::Forward || p == Phase::Loss; }

}  // namespace

namespace {

constexpr RematPolicy kPolicies[] = {RematPolicy::None,          RematPolicy::Full,        RematPolicy::Dots,
                                     RematPolicy::Names,         RematPolicy::Minimal,     RematPolicy::SaveQkvProj,
                                     RematPolicy::SaveOutProj,   RematPolicy::SaveDotExceptMlp,
                                     RematPolicy::QkvProjOffloaded, RematPolicy::MinimalOffloaded,
                                     RematPolicy::Custom};

}  // namespace

RematPolicy remat_policy(const std::string& name) {
  for (RematPolicy p : kPolicies)
    if (name == remat_policy_name(p)) return p;
  throw Error(Err::Internal, "unknown re-materialization policy '" + name + "'");
}

const char* remat_policy_name(RematPolicy p) {
  switch (p) {
    case RematPolicy::None: return "none";
    case RematPolicy::Full: return "full";
    case RematPolicy::Dots: return "dots";
    case RematPolicy::Names: return "names";
    case RematPolicy::Minimal: return "minimal";
    case RematPolicy::SaveQkvProj: return "save_qkv_proj";
    case RematPolicy::SaveOutProj: return "save_out_proj";
    case RematPolicy::SaveDotExceptMlp: return "save_dot_except_mlp";
    case RematPolicy::QkvProjOffloaded: return "qkv_proj_offloaded";
    case RematPolicy::MinimalOffloaded: return "minimal_offloaded";
    case RematPolicy::Custom: return "custom";
  }
  return "none";
}

// MaxText's policies (its decoders' get_remat_policy, jax.checkpoint_policies.save_only_these_names of the names
// its layers tag with checkpoint_name; "qkv_proj", a fused projection's name, has no counterpart here).
std::vector<std::string> remat_checkpoint_names(RematPolicy p) {
  switch (p) {
    case RematPolicy::SaveQkvProj:
    case RematPolicy::QkvProjOffloaded: return {"query_proj", "key_proj", "value_proj"};
    case RematPolicy::SaveOutProj: return {"out_proj"};
    case RematPolicy::SaveDotExceptMlp: return {"query_proj", "key_proj", "value_proj", "out_proj"};
    default: return {};
  }
}

const std::vector<std::string>& remat_custom_names() {
  static const std::vector<std::string> names = {"decoder_layer_input", "query_proj", "key_proj", "value_proj",
                                                 "context",             "out_proj",   "mlpwi_0",  "mlpwi_1",
                                                 "mlpwi",               "mlpwo"};
  return names;
}

RematPlace remat_place(const std::string& name) {
  if (name == "device") return RematPlace::Device;
  if (name == "offload") return RematPlace::Offload;
  if (name == "remat") return RematPlace::Remat;
  throw Error(Err::Internal, "unknown re-materialization place '" + name + "'");
}

bool remat_name_kept(const std::string& name, const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns)
    if (fnmatch(p.c_str(), name.c_str(), 0) == 0) return true;
  return false;
}

Rematerialized rematerialize(const ModelGraph& g, const std::function<int64_t(OpId)>& segment,
                             const std::function<bool(TensorId)>& saved, bool gate,
                             const std::function<bool(TensorId)>& offloaded,
                             const std::function<bool(TensorId)>& offloaded_input) {
  auto off = [&](TensorId t) { return offloaded && offloaded(t); };
  auto off_in = [&](TensorId t) { return offloaded_input && offloaded_input(t); };
  const size_t n = g.num_ops();
  std::vector<int64_t> seg(n, -1);
  for (size_t i = 0; i < n; ++i) seg[i] = segment(static_cast<OpId>(i));
  // 1. The forward ops to recompute: those making an unsaved value of their segment that the segment's backward
  // reads, and, in turn, those making the unsaved values of the segment they read.
  std::vector<uint8_t> mark(n, 0);
  std::vector<OpId> stack;
  auto need = [&](TensorId t, int64_t s) {
    const OpId p = g.producer(t);
    if (p < 0 || mark[p] || seg[p] != s || !forward_phase(g.op(p).phase) || saved(t) || off(t)) return;
    mark[p] = 1;
    stack.push_back(p);
  };
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.op(static_cast<OpId>(i));
    if (op.phase != Phase::Backward || seg[i] < 0) continue;
    for (TensorId t : op.inputs) need(t, seg[i]);
  }
  while (!stack.empty()) {
    const OpId o = stack.back();
    stack.pop_back();
    for (TensorId t : g.op(o).inputs) need(t, seg[o]);
  }
  const std::vector<OpId> order = g.topological_order();
  std::map<int64_t, std::vector<OpId>> pending;  // per segment, its recomputed ops in order
  for (OpId o : order)
    if (mark[o]) pending[seg[o]].push_back(o);
  // Host offload: the offloaded values of a segment that its backward ops or its copies read. Each goes to the host
  // right after the op that makes it, and comes back (prefetched) as the backward of the cell before the segment's
  // in backward order begins, so that the transfer overlaps that cell's backward (XLA's host offloading: the copy
  // to the host starts when the value is produced, the copy back is scheduled ahead of its use).
  // A value made outside a segment (its input) and read by the segment's backward or copies goes the same way when
  // offloaded_input says so: one copy to the host, one back per segment reading it.
  std::set<TensorId> to_move;
  std::set<std::pair<TensorId, int64_t>> moves;     // (value, the segment it comes back for)
  std::map<int64_t, std::vector<TensorId>> moved;  // per segment, in the order they are made
  auto wants = [&](TensorId t, int64_t s) {
    const OpId p = g.producer(t);
    if (p < 0 || s < 0 || !forward_phase(g.op(p).phase)) return;
    if ((seg[p] == s && off(t)) || (seg[p] != s && off_in(t))) to_move.insert(t), moves.insert({t, s});
  };
  for (size_t i = 0; i < n; ++i)
    if ((g.op(static_cast<OpId>(i)).phase == Phase::Backward || mark[i]) && seg[i] >= 0)
      for (TensorId t : g.op(static_cast<OpId>(i)).inputs) wants(t, seg[i]);
  std::map<OpId, std::vector<int64_t>> prefetch_at;  // op -> segments whose values come back right before it
  if (!to_move.empty()) {
    for (OpId o : order)
      for (TensorId t : g.op(o).outputs)
        for (auto it = moves.lower_bound({t, INT64_MIN}); it != moves.end() && it->first == t; ++it)
          moved[it->second].push_back(t);
    OpId run_start = -1, previous_run = -1;
    int32_t run_cell = INT32_MIN;
    std::set<int64_t> seen;
    for (OpId o : order) {
      const Op& op = g.op(o);
      if (op.phase != Phase::Backward) continue;
      if (op.cell != run_cell) previous_run = run_start, run_start = o, run_cell = op.cell;
      const int64_t s = seg[o];
      if (s < 0 || seen.count(s) || !moved.count(s)) continue;
      seen.insert(s);
      prefetch_at[previous_run >= 0 ? previous_run : o].push_back(s);
    }
  }

  // 2. The new step: the same tensors (same ids), the copies' outputs after them.
  Rematerialized out;
  out.graph = ModelGraph(g.name());
  ModelGraph& r = out.graph;
  for (const TensorInfo& t : g.tensors()) {
    r.add_tensor(t);
    out.source_tensor.push_back(static_cast<TensorId>(out.source_tensor.size()));
  }
  std::map<TensorId, TensorId> copy_of;  // recomputed value of each original
  // What an op of segment s reads for `t`: the recomputed value, unless `t` is kept (an op recomputed for another
  // of its outputs leaves its kept outputs to the originals).
  std::map<TensorId, TensorId> host_of;  // an offloaded value's copy in host memory
  std::map<std::pair<TensorId, int64_t>, TensorId> reload_of;  // ... and back in HBM for a segment
  auto read = [&](TensorId t, int64_t s) {
    const OpId p = g.producer(t);
    if (auto r = reload_of.find({t, s}); p >= 0 && s >= 0 && r != reload_of.end()) return r->second;
    auto it = copy_of.find(t);
    return p >= 0 && s >= 0 && seg[p] == s && it != copy_of.end() && !saved(t) ? it->second : t;
  };
  // A transfer of `t` (its producer's cell and segment) to or from the host, with a fresh output tensor; a layer's
  // input comes back in the cell of the layer reading it.
  std::map<int64_t, int32_t> cell_of;  // per segment, the cell of its backward ops
  for (size_t i = 0; i < n; ++i) {
    const Op& op = g.op(static_cast<OpId>(i));
    if (op.phase == Phase::Backward && seg[i] >= 0) cell_of.emplace(seg[i], op.cell);
  }
  auto transfer = [&](TensorId t, TensorId from, OpKind kind, const char* suffix, int64_t s) {
    TensorInfo info = g.tensor(t);
    info.name += suffix;
    info.checkpoint.clear();
    const TensorId y = r.add_tensor(info);
    out.source_tensor.push_back(t);
    Op c;
    c.name = info.name;
    c.kind = kind;
    c.phase = kind == OpKind::ToHost ? g.op(g.producer(t)).phase : Phase::Backward;
    c.cell = g.op(g.producer(t)).cell;
    if (kind == OpKind::FromHost && seg[g.producer(t)] != s && cell_of.count(s)) c.cell = cell_of.at(s);
    c.inputs = {from};
    c.outputs = {y};
    const OpId id = r.add_op(c);
    out.source_op.push_back(g.producer(t));
    return std::make_pair(id, y);
  };
  std::set<int64_t> placed;
  std::set<TensorId> cast_copies;  // outputs of recomputed parameter casts
  OpId last_backward = -1;
  for (OpId o : order) {
    const Op& op = g.op(o);
    if (auto it = prefetch_at.find(o); it != prefetch_at.end()) {
      // The values of these segments come back now, after whatever ran before (a control edge), so that the
      // copies back wait for the backward pass to get here.
      const OpId before = static_cast<OpId>(r.num_ops()) - 1;
      for (int64_t s : it->second)
        for (TensorId t : moved[s]) {
          const auto [id, y] = transfer(t, host_of.at(t), OpKind::FromHost, "/reload", s);
          reload_of[{t, s}] = y;
          if (gate && before >= 0) r.add_control(before, id);
        }
    }
    const int64_t s = op.phase == Phase::Backward ? seg[o] : -1;
    if (s >= 0 && !placed.count(s)) {
      placed.insert(s);
      for (OpId f : pending[s]) {
        Op c = g.op(f);
        c.name += "/remat";
        c.recompute = true;
        // An entry op reads nothing the segment recomputes before it, except the bf16 copies of its parameters:
        // those casts wait for nothing (below), so the ops reading them must still wait for the backward pass.
        bool entry = true;
        for (TensorId& t : c.inputs) {
          const TensorId x = read(t, s);
          entry = entry && (x == t || cast_copies.count(x));
          t = x;
        }
        for (TensorId& t : c.outputs) {
          TensorInfo info = g.tensor(t);
          info.name += "/remat";
          const TensorId id = r.add_tensor(info);
          out.source_tensor.push_back(t);
          copy_of[t] = id;
          t = id;
        }
        const OpId id = r.add_op(c);
        out.source_op.push_back(f);
        // A mixed-precision cast of a parameter reads nothing the pass makes: it waits for no backward op (a fully
        // sharded step issues it with its gather, one layer ahead).
        const bool cast = c.kind == OpKind::Convert && g.tensor(g.op(f).inputs[0]).role == TensorRole::Parameter;
        if (cast) cast_copies.insert(c.outputs.begin(), c.outputs.end());
        if (gate && entry && !cast && last_backward >= 0) r.add_control(last_backward, id);
      }
    }
    Op c = op;
    for (TensorId& t : c.inputs) t = read(t, s);
    const OpId id = r.add_op(c);
    out.source_op.push_back(o);
    if (op.phase == Phase::Backward) last_backward = id;
    for (TensorId t : op.outputs)
      if (to_move.count(t)) host_of[t] = transfer(t, t, OpKind::ToHost, ".host", -1).second;
  }
  return out;
}

ModelGraph rematerialize_layers(const ModelGraph& g, const RematOptions& opt) {
  if (opt.policy == RematPolicy::None) return g;
  std::set<int32_t> loss_cells;
  for (const Op& op : g.ops())
    if (op.phase == Phase::Loss) loss_cells.insert(op.cell);
  auto segment = [&](OpId o) -> int64_t {
    const int32_t c = g.op(o).cell;
    return c < 0 || loss_cells.count(c) ? -1 : c;
  };
  const std::vector<std::string> names = remat_checkpoint_names(opt.policy);
  // Matmuls with no batch dimension: a layer's projections and FFN matmuls, not attention's batched scores and
  // context, nor a fused attention kernel's output (not a dot: recomputed, as under JAX).
  auto dot = [&](TensorId t) {
    const Op& op = g.op(g.producer(t));
    return op.kind == OpKind::MatMul && gemm_dims(g, op).batch == 1;
  };
  auto named = [&](TensorId t) {
    return std::find(names.begin(), names.end(), g.tensor(t).checkpoint) != names.end();
  };
  // MaxText's custom policy: each name's place; a name not given is recomputed.
  auto place = [&](TensorId t) {
    const std::string& c = g.tensor(t).checkpoint;
    for (const auto& [name, where] : opt.custom)
      if (name == c) return where;
    return RematPlace::Remat;
  };
  const bool custom = opt.policy == RematPolicy::Custom;
  auto offloaded = [&](TensorId t) {
    return (opt.policy == RematPolicy::QkvProjOffloaded && named(t)) ||
           (opt.policy == RematPolicy::MinimalOffloaded && dot(t)) || (custom && place(t) == RematPlace::Offload);
  };
  // The layer's input (made by the layer before, or the embedding) is kept on the device as a scanned layer's carry
  // is, unless the custom policy offloads decoder_layer_input.
  auto offloaded_input = [&](TensorId t) {
    return custom && g.tensor(t).checkpoint == "decoder_layer_input" && place(t) == RematPlace::Offload;
  };
  auto saved = [&](TensorId t) {
    switch (opt.policy) {
      case RematPolicy::Dots:
      case RematPolicy::Minimal: return dot(t);
      case RematPolicy::Names: return remat_name_kept(g.tensor(t).name, opt.keep);
      case RematPolicy::SaveQkvProj:
      case RematPolicy::SaveOutProj:
      case RematPolicy::SaveDotExceptMlp: return named(t);
      case RematPolicy::Custom: return place(t) == RematPlace::Device;
      default: return false;
    }
  };
  return rematerialize(g, segment, saved, true, offloaded, offloaded_input).graph;
}

}  // namespace podsim
