// The walk over the logical step (partitioner_impl.h): each op's rule, its inputs resharded (reshard.cpp), the op on
// local shapes, the results bound.
#include <algorithm>
#include <optional>
#include <set>

#include "base/error.h"
#include "base/text.h"
#include "partition/partitioner_impl.h"

namespace podsim {
namespace partition_detail {

Partitioner::Partitioner(const PartitionInput& in) : m_in(in), m_g(in.logical), m_m(in.mesh) {
  m_res.program.role = in.role;
  m_res.program.graph = ModelGraph(m_g.name());
  m_versions.resize(m_g.num_tensors());
  m_input_local.assign(m_g.num_tensors(), -1);
}

PartitionResult Partitioner::run() {
  check_annotations();
  for (size_t t = 0; t < m_g.num_tensors(); ++t) {
    TensorId id = static_cast<TensorId>(t);
    if (m_g.producer(id) >= 0) continue;
    ShardSpec s = annotation(id).value_or(ShardSpec::replicated(m_g.tensor(id).shape.size()));
    TensorId local = add_local(id, s, m_g.tensor(id).name, m_g.tensor(id).role);
    m_versions[id].push_back({s, local});
    m_input_local[id] = local;
    m_res.program.inputs.push_back({local, id, s});
    note_padding(id, s);
  }
  m_local_op.assign(m_g.num_ops(), -1);
  m_local_first.assign(m_g.num_ops(), -1);
  for (OpId id : m_g.topological_order()) {
    partition_op(m_g.op(id));
    m_local_op[id] = m_main_op;
    m_local_first[id] = m_main_first;
  }
  carry_control_edges();
  bind_results();
  if (m_in.prefetch) prefetch_gathers();
  for (const GatherChain& c : m_chains) m_res.gathers.push_back(c.ops);
  for (const auto& [t, s] : m_in.annotations)
    for (const Version& v : m_versions[t])
      if (v.spec == s) m_res.annotated_local[t] = v.local;
  return std::move(m_res);
}

std::optional<ShardSpec> Partitioner::annotation(TensorId t) const {
  auto it = m_in.annotations.find(t);
  if (it != m_in.annotations.end()) return it->second;
  if (m_g.tensor(t).role == TensorRole::OptimizerState)
    for (OpId c : m_g.consumers(t))
      if (m_g.op(c).phase == Phase::Optimizer) {
        auto p = m_in.annotations.find(m_g.op(c).inputs.front());
        if (p != m_in.annotations.end()) return p->second;
      }
  return std::nullopt;
}

void Partitioner::check_annotations() const {
  for (const auto& [t, s] : m_in.annotations) {
    const TensorInfo& info = m_g.tensor(t);
    if (s.per_device || s.is_partial())
      throw Error(Err::BadSharding, "the sharding of '" + info.name + "' cannot be per_device or partial");
    if (s.rank() != info.shape.size())
      throw Error(Err::BadSharding, "the sharding " + s.text() + " of '" + info.name + "' has " +
                                        std::to_string(s.rank()) + " entries but the tensor is " +
                                        info.shape_text() + " (one entry per dimension)");
    for (const auto& a : s.axes())
      if (m_m.axis_index(a) < 0)
        throw Error(Err::BadSharding, "the sharding " + s.text() + " of '" + info.name + "' names mesh axis '" + a +
                                          "', which the mesh (" + m_m.describe() + ") does not have");
  }
}

TensorId Partitioner::add_local(TensorId t, const ShardSpec& s, const std::string& name, TensorRole role) {
  const TensorInfo& info = m_g.tensor(t);
  TensorInfo li;
  li.name = name;
  li.shape = s.per_device ? info.shape : local_shape(info.shape, s, m_m);
  li.dtype = info.dtype;
  li.role = role;
  li.layout = info.layout;
  li.result = info.result;
  if (role == TensorRole::Updated && info.updates >= 0) li.updates = m_input_local[info.updates];
  TensorId id = m_res.program.graph.add_tensor(li);
  m_res.local_logical.push_back(t);
  m_res.local_spec.push_back(s);
  return id;
}

TensorRole Partitioner::copy_role(TensorRole r) {
  switch (r) {
    case TensorRole::Parameter: case TensorRole::OptimizerState: case TensorRole::Input: case TensorRole::Label:
    case TensorRole::KvCache:
      return TensorRole::Activation;
    default: return r;
  }
}

TensorId Partitioner::temp(TensorId t, std::vector<int64_t> shape, const std::string& name) {
  TensorInfo li;
  li.name = name;
  li.shape = std::move(shape);
  li.dtype = m_g.tensor(t).dtype;
  li.role = copy_role(m_g.tensor(t).role);
  li.layout = m_g.tensor(t).layout;
  TensorId id = m_res.program.graph.add_tensor(li);
  m_res.local_logical.push_back(-1);
  m_res.local_spec.push_back(ShardSpec{});
  return id;
}

void Partitioner::emit(Op op) {
  OpId id = m_res.program.graph.add_op(std::move(op));
  m_res.program.order.push_back(id);
  m_last_op = id;
}

void Partitioner::carry_control_edges() {
  ModelGraph& lg = m_res.program.graph;
  for (size_t b = 0; b < m_g.num_ops(); ++b) {
    const Op& op = m_g.op(static_cast<OpId>(b));
    for (OpId a : m_g.predecessors(static_cast<OpId>(b))) {
      bool data = false;
      for (TensorId t : m_g.op(a).outputs)
        data = data || std::find(op.inputs.begin(), op.inputs.end(), t) != op.inputs.end();
      if (!data && m_local_op[a] >= 0 && m_local_first[b] >= 0) lg.add_control(m_local_op[a], m_local_first[b]);
    }
  }
}

std::string Partitioner::op_name(TensorId t, const std::string& what) {
  return m_g.tensor(t).name + "/" + what + "#" + std::to_string(m_counter++);
}

void Partitioner::emit1(const std::string& name, OpKind kind, TensorId x, TensorId y, OpAttrs at) {
  Op op;
  op.name = name;
  op.kind = kind;
  op.phase = is_communication(kind) ? Phase::Communication : Phase::Backward;
  // Local data movement takes the phase of the value it moves.
  if (!is_communication(kind)) {
    OpId p = m_res.program.graph.producer(x);
    op.phase = p >= 0 ? m_res.program.graph.op(p).phase : Phase::Forward;
  }
  // Moving a recomputed value is part of the recomputation (a tensor-parallel layer's forward all-reduce).
  if (OpId p = m_res.program.graph.producer(x); p >= 0) op.recompute = m_res.program.graph.op(p).recompute;
  op.inputs = {x};
  op.outputs = {y};
  if (is_communication(kind)) {
    auto it = m_in.algorithms.find(op_kind_name(kind));
    if (it != m_in.algorithms.end()) at.algorithm = it->second;
  }
  op.attrs = std::move(at);
  emit(std::move(op));
}

std::optional<ShardSpec> Partitioner::wanted(TensorId t) const {
  if (auto a = annotation(t)) return a;
  const TensorInfo& info = m_g.tensor(t);
  if (info.role == TensorRole::Updated && info.updates >= 0) {
    if (auto a = annotation(info.updates)) return a;
    return ShardSpec::replicated(info.shape.size());
  }
  return std::nullopt;
}

std::optional<ShardSpec> Partitioner::hint(TensorId t) const {
  if (auto w = wanted(t)) return w;
  for (OpId c : m_g.consumers(t)) {
    const Op& u = m_g.op(c);
    const bool plumbing = u.kind == OpKind::Convert || (u.phase == Phase::Backward && u.kind == OpKind::Add);
    if (plumbing && u.outputs.size() == 1 && m_g.tensor(u.outputs[0]).shape == m_g.tensor(t).shape &&
        m_g.consumers(t).size() == 1)
      return hint(u.outputs[0]);
    if (u.phase != Phase::Optimizer || u.inputs.size() < 2 || u.inputs[1] != t) continue;
    const TensorId param = u.inputs.front();
    return annotation(param).value_or(ShardSpec::replicated(m_g.tensor(param).shape.size()));
  }
  return std::nullopt;
}

void Partitioner::partition_op(const Op& op) {
  OpShardingQuery q{m_g, op, m_m, {}, {}, m_in.flops_per_comm_byte};
  const int pass = gather_pass(op);
  for (TensorId t : op.inputs) {
    auto g = m_in.gathered_for_use.find(t);
    q.in.push_back(g != m_in.gathered_for_use.end() && pass >= 0 ? g->second : m_versions[t].front().spec);
  }
  for (TensorId t : op.outputs) q.want.push_back(hint(t));
  PartitionRule rule = partition_rule(op.kind);
  OpSharding dec = rule ? rule(q) : sharding::replicated(q);
  if (!rule && !m_fallback_noted) {
    m_res.notes.push_back(std::string("op kind '") + op_kind_name(op.kind) + "' has no partition rule; it runs on whole tensors");
    m_fallback_noted = true;
  }
  if (dec.in.size() != op.inputs.size() || dec.out.size() != op.outputs.size())
    throw Error(Err::Internal, "the partition rule of '" + op.name + "' returned the wrong number of specs");
  // A mesh axis splits one dimension of a value at most: a rule naming one twice would give each device a piece that
  // no single split describes (and its collectives would mix the devices' pieces).
  for (const std::vector<ShardSpec>* specs : {&dec.in, &dec.out})
    for (const ShardSpec& s : *specs) {
      std::vector<std::string> seen = s.axes();
      std::sort(seen.begin(), seen.end());
      if (std::adjacent_find(seen.begin(), seen.end()) != seen.end())
        throw Error(Err::Internal, "the partition rule of '" + op.name + "' splits two dimensions over one mesh axis: " +
                                       s.text());
    }
  Op local = op;
  local.attrs = dec.attrs;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const TensorId t = op.inputs[i];
    if (pass < 0 || !m_in.gathered_for_use.count(t)) {
      local.inputs[i] = get(t, dec.in[i]);
      continue;
    }
    // A fully sharded parameter: its gathered copy for this pass, made here if this is the pass's first use.
    const size_t before = m_res.program.order.size();
    m_pass = pass;
    local.inputs[i] = get(t, dec.in[i]);
    m_pass = -1;
    // The gathered copy and the steps to it are communication buffers (temporaries), not activations: they are
    // freed after their last use in this pass, and the memory plan shows them apart.
    for (size_t k = before; k < m_res.program.order.size(); ++k)
      for (TensorId o : m_res.program.graph.op(m_res.program.order[k]).outputs)
        m_res.program.graph.tensor(o).role = TensorRole::Temporary;
    if (m_res.program.order.size() > before) {
      GatherChain chain{{m_res.program.order.begin() + static_cast<std::ptrdiff_t>(before), m_res.program.order.end()},
                        pass, op.cell};
      // A mixed-precision compute copy is cast on the shard in the pass that gathers it: the cast moves with its
      // gather when the gather is issued early.
      const OpId cast = m_g.producer(t);
      if (cast >= 0 && m_g.op(cast).kind == OpKind::Convert && gather_pass(m_g.op(cast)) == pass &&
          m_local_op[cast] >= 0 && m_chained.insert(m_local_op[cast]).second)
        chain.ops.insert(chain.ops.begin(), m_local_op[cast]);
      m_chains.push_back(std::move(chain));
    }
  }
  for (size_t j = 0; j < op.outputs.size(); ++j) {
    TensorId t = op.outputs[j];
    local.outputs[j] = add_local(t, dec.out[j], m_g.tensor(t).name, m_g.tensor(t).role);
  }
  const size_t first = m_res.program.order.size();
  if (dec.steps.empty()) emit(local);
  else emit_steps(op, local, dec);
  // An op run as several local steps is ordered by its first step and orders what follows by its last.
  m_main_first = m_res.program.order.at(first);
  m_main_op = m_last_op;
  for (size_t j = 0; j < op.outputs.size(); ++j) {
    TensorId t = op.outputs[j];
    m_versions[t].push_back({dec.out[j], local.outputs[j]});
    if (auto w = wanted(t); w && *w != dec.out[j]) {
      TensorId v = get(t, *w);
      // The wanted version is what consumers start from.
      auto it = std::find_if(m_versions[t].begin(), m_versions[t].end(), [&](const Version& x) { return x.local == v; });
      std::iter_swap(m_versions[t].begin(), it);
    }
  }
}

void Partitioner::emit_steps(const Op& op, const Op& local, const OpSharding& dec) {
  std::vector<TensorId> slot = local.inputs;
  slot.insert(slot.end(), local.outputs.begin(), local.outputs.end());
  for (const OpSharding::Scratch& s : dec.scratch) {
    TensorInfo li;
    li.name = s.name;
    li.shape = s.shape;
    li.dtype = s.dtype;
    li.role = TensorRole::Activation;
    // Scratch (a halo window, say) is laid out as the op's first operand is.
    const TensorInfo& first = m_res.program.graph.tensor(local.inputs.at(0));
    if (first.shape.size() == s.shape.size()) li.layout = first.layout;
    slot.push_back(m_res.program.graph.add_tensor(li));
    m_res.local_logical.push_back(-1);
    m_res.local_spec.push_back(ShardSpec{});
  }
  for (const LocalStep& st : dec.steps) {
    Op o;
    o.kind = st.kind;
    o.cell = op.cell;
    o.attrs = st.attrs;
    for (int i : st.in) o.inputs.push_back(slot.at(static_cast<size_t>(i)));
    for (int i : st.out) o.outputs.push_back(slot.at(static_cast<size_t>(i)));
    if (is_communication(st.kind)) {
      o.phase = Phase::Communication;
      o.name = m_res.program.graph.tensor(o.inputs.front()).name + "/" + op_kind_name(st.kind) + "[" +
               axes_text(st.attrs.axes) + "]#" + std::to_string(m_counter++);
      auto it = m_in.algorithms.find(op_kind_name(st.kind));
      if (it != m_in.algorithms.end()) o.attrs.algorithm = it->second;
    } else {
      o.phase = op.phase;
      o.name = st.name.empty() ? op.name : op.name + "/" + st.name;
    }
    emit(std::move(o));
  }
}

void Partitioner::bind_results() {
  for (size_t t = 0; t < m_g.num_tensors(); ++t) {
    TensorId id = static_cast<TensorId>(t);
    if (m_g.producer(id) < 0 || m_versions[id].empty()) continue;
    const Version* best = nullptr;
    for (const Version& v : m_versions[id])
      if (!v.spec.is_partial() && (!best || sharding::pieces(v.spec, m_m) > sharding::pieces(best->spec, m_m))) best = &v;
    if (!best) {
      const TensorInfo& info = m_g.tensor(id);
      bool needed = info.role == TensorRole::Updated || m_g.consumers(id).empty();
      for (OpId c : m_g.consumers(id)) needed = needed || m_g.op(c).phase == Phase::Optimizer;
      if (!needed) continue;
      ShardSpec s = sharding::settled(m_versions[id].front().spec);
      TensorId local = get(id, s);
      m_res.program.results.push_back({local, id, s});
      continue;
    }
    m_res.program.results.push_back({best->local, id, best->spec});
  }
}

void Partitioner::note_padding(TensorId t, const ShardSpec& s) {
  const TensorInfo& info = m_g.tensor(t);
  for (size_t d = 0; d < s.rank(); ++d) {
    int64_t p = split_count(s, d, m_m);
    if (p <= 1 || info.shape[d] % p == 0) continue;
    int64_t padded = ceil_div64(info.shape[d], p) * p;
    m_res.notes.push_back(strprintf("'%s' dimension %zu: %lld over %lld devices, padded to %lld", info.name.c_str(), d,
                                    static_cast<long long>(info.shape[d]), static_cast<long long>(p),
                                    static_cast<long long>(padded)));
  }
  int64_t pad = padding_elements(info.shape, s, m_m);
  if (pad > 0)
    m_res.padding_bytes += static_cast<double>(pad) / static_cast<double>(sharding::pieces(s, m_m)) *
                           dtype_bytes(info.dtype);
}

}  // namespace partition_detail

PartitionResult partition_step(const PartitionInput& in) { return partition_detail::Partitioner(in).run(); }

}  // namespace podsim
