#include "partition/partitioner.h"

#include <algorithm>
#include <optional>
#include <set>

#include "plan/op_sharding.h"
#include "base/error.h"
#include "base/text.h"

namespace podsim {
namespace {

class Partitioner {
 public:
  explicit Partitioner(const PartitionInput& in) : m_in(in), m_g(in.logical), m_m(in.mesh) {
    m_res.program.role = in.role;
    m_res.program.graph = ModelGraph(m_g.name());
    m_versions.resize(m_g.num_tensors());
    m_input_local.assign(m_g.num_tensors(), -1);
  }

  PartitionResult run() {
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

 private:
  struct Version {
    ShardSpec spec;
    TensorId local;
    int pass = -1;  // a gathered copy of a fully sharded parameter: the pass it serves (gather_pass); else -1
  };

  // The ops that gathered a fully sharded parameter for one pass, and the cell of the op that first read it.
  struct GatherChain {
    std::vector<OpId> ops;  // the all-gather and the crop of its padding, in order
    int pass = 0;
    int32_t cell = -1;
  };

  // Forward ops (and the loss) share one gathered copy, backward ops another (with the forward ops
  // re-materialization recomputes during the backward pass); other phases read the shard.
  int gather_pass(const Op& op) const {
    const bool forward = op.phase == Phase::Forward || op.phase == Phase::Loss;
    if (forward && !op.recompute) return 0;
    if (forward || op.phase == Phase::Backward) return m_in.keep_gathered ? 0 : 1;
    return -1;
  }

  // The spec a tensor is annotated with; optimizer state without one follows its parameter's.
  std::optional<ShardSpec> annotation(TensorId t) const {
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

  void check_annotations() const {
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

  // A new local tensor holding logical tensor `t` in spec `s` (shape from the spec; partial axes do not change it).
  TensorId add_local(TensorId t, const ShardSpec& s, const std::string& name, TensorRole role) {
    const TensorInfo& info = m_g.tensor(t);
    TensorInfo li;
    li.name = name;
    li.shape = s.per_device ? info.shape : local_shape(info.shape, s, m_m);
    li.dtype = info.dtype;
    li.role = role;
    if (role == TensorRole::Updated && info.updates >= 0) li.updates = m_input_local[info.updates];
    TensorId id = m_res.program.graph.add_tensor(li);
    m_res.local_logical.push_back(t);
    m_res.local_spec.push_back(s);
    return id;
  }

  // Role of a reshard's output: copies of step inputs are working values, not persistent state.
  static TensorRole copy_role(TensorRole r) {
    switch (r) {
      case TensorRole::Parameter: case TensorRole::OptimizerState: case TensorRole::Input: case TensorRole::Label:
        return TensorRole::Activation;
      default: return r;
    }
  }

  TensorId temp(TensorId t, std::vector<int64_t> shape, const std::string& name) {
    TensorInfo li;
    li.name = name;
    li.shape = std::move(shape);
    li.dtype = m_g.tensor(t).dtype;
    li.role = copy_role(m_g.tensor(t).role);
    TensorId id = m_res.program.graph.add_tensor(li);
    m_res.local_logical.push_back(-1);
    m_res.local_spec.push_back(ShardSpec{});
    return id;
  }

  void emit(Op op) {
    OpId id = m_res.program.graph.add_op(std::move(op));
    m_res.program.order.push_back(id);
    m_last_op = id;
  }

  // A schedule's control edges of the logical step (an op ordered after another without reading its values, as a
  // re-materialization's recomputation after the backward op before it: workloads/remat.h) order the local ops too.
  void carry_control_edges() {
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

  std::string op_name(TensorId t, const std::string& what) {
    return m_g.tensor(t).name + "/" + what + "#" + std::to_string(m_counter++);
  }

  // Emits a one-input op on local tensor `x` producing `y`.
  void emit1(const std::string& name, OpKind kind, TensorId x, TensorId y, OpAttrs at) {
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

  static std::string axes_text(const std::vector<std::string>& a) { return join(a, ","); }

  // Local shape of `t` under `s`, with dimension `d` set to `n`.
  std::vector<int64_t> shape_with(TensorId t, const ShardSpec& s, size_t d, int64_t n) const {
    std::vector<int64_t> sh = local_shape(m_g.tensor(t).shape, s, m_m);
    sh[d] = n;
    return sh;
  }

  // Pads (or crops) dimension `d` of local tensor `x` to `n` with a static slice; returns the new tensor.
  TensorId resize(TensorId t, TensorId x, size_t d, int64_t n) {
    std::vector<int64_t> sh = m_res.program.graph.tensor(x).shape;
    if (sh[d] == n) return x;
    sh[d] = n;
    TensorId y = temp(t, sh, m_g.tensor(t).name + "/resized" + std::to_string(m_counter));
    OpAttrs at;
    at.dim = static_cast<int64_t>(d);
    emit1(op_name(t, n > m_res.program.graph.tensor(x).shape[d] ? "pad" : "crop"), OpKind::Slice, x, y, at);
    return y;
  }

  Version record(TensorId t, const ShardSpec& s, TensorId local) {
    m_versions[t].push_back({s, local, m_pass});
    return m_versions[t].back();
  }

  // The local tensor holding logical `t` in spec `want`, resharding the current (primary) version if needed.
  TensorId get(TensorId t, const ShardSpec& want) {
    for (const Version& v : m_versions[t])
      if (v.spec == want && (v.pass < 0 || v.pass == m_pass)) return v.local;
    if (m_versions[t].empty()) throw Error(Err::Internal, "partitioner: tensor '" + m_g.tensor(t).name + "' used before it exists");
    Version cur = m_versions[t].front();
    const std::vector<int64_t>& global = m_g.tensor(t).shape;
    const std::string base = m_g.tensor(t).name;
    const TensorRole role = copy_role(m_g.tensor(t).role);
    auto version_name = [&](const ShardSpec& s) { return base + "@" + s.text(); };
    // 1. A pending sum: reduce-scatter into every dimension the target splits further by pending axes (after the
    //    axes that already split it, if any), then all-reduce over the axes still pending. A sum is never reduced
    //    whole only to be sliced.
    if (cur.spec.is_partial() && cur.spec.partial != want.partial) {
      for (size_t d = 0; d < want.rank() && want.partial.empty() && cur.spec.is_partial(); ++d) {
        std::vector<std::string> axes;
        if (!extends(cur.spec.dims[d], want.dims[d], global[d], axes)) continue;
        bool pending = true;
        for (const auto& a : axes)
          pending = pending && std::find(cur.spec.partial.begin(), cur.spec.partial.end(), a) != cur.spec.partial.end();
        if (!pending) continue;
        ShardSpec next = cur.spec;
        for (const auto& a : axes) next.partial.erase(std::find(next.partial.begin(), next.partial.end(), a));
        next.dims[d] = want.dims[d];
        OpAttrs at;
        at.axes = axes;
        at.dim = static_cast<int64_t>(d);
        const int64_t p = m_m.size(axes), local = local_shape(global, next, m_m)[d];
        TensorId x = resize(t, cur.local, d, local * p);
        TensorId y = add_local(t, next, version_name(next), role);
        emit1(op_name(t, "reduce_scatter[" + axes_text(at.axes) + "]"), OpKind::ReduceScatter, x, y, at);
        cur = record(t, next, y);
      }
      if (cur.spec.is_partial() && cur.spec.partial != want.partial) {
        ShardSpec next = cur.spec;
        next.partial.clear();
        OpAttrs at;
        at.axes = cur.spec.partial;
        TensorId y = add_local(t, next, version_name(next), role);
        emit1(op_name(t, "all_reduce[" + axes_text(at.axes) + "]"), OpKind::AllReduce, cur.local, y, at);
        cur = record(t, next, y);
      }
      if (cur.spec == want) return cur.local;
    }
    if (cur.spec.is_partial())
      throw Error(Err::Internal, "partitioner: cannot turn " + cur.spec.text() + " of '" + base + "' into " + want.text());
    // 2. A split moving from one dimension to another over the same axes: all-to-all. The axes moved are the
    //    innermost of the source dimension's split and become the innermost of the target's, so a dimension split
    //    over (data, expert) can hand `expert` to another dimension and keep `data` (each device's blocks stay
    //    contiguous). With other axes on either dimension, both must divide evenly (else step 3 gathers).
    for (size_t q = 0; q < want.rank(); ++q) {
      for (size_t p = 0; p < want.rank(); ++p) {
        std::vector<std::string> moved;
        if (p == q || !moves_innermost(cur.spec, want, p, q, moved)) continue;
        const bool whole = cur.spec.dims[q].empty() && want.dims[p].empty();
        if (!whole && (global[q] % m_m.size(want.dims[q]) != 0 || global[p] % m_m.size(cur.spec.dims[p]) != 0)) continue;
        OpAttrs at;
        at.axes = moved;
        at.dim = static_cast<int64_t>(q);   // split
        at.dim2 = static_cast<int64_t>(p);  // concatenated
        const int64_t n = m_m.size(at.axes);
        ShardSpec next = cur.spec;
        next.dims[p] = want.dims[p];
        next.dims[q] = want.dims[q];
        const int64_t local_q = m_res.program.graph.tensor(cur.local).shape[q];
        TensorId x = resize(t, cur.local, q, ceil_div64(local_q, n) * n);
        std::vector<int64_t> sh = m_res.program.graph.tensor(x).shape;
        sh[q] /= n;
        sh[p] *= n;
        TensorId y = temp(t, sh, base + "/all_to_all" + std::to_string(m_counter));
        emit1(op_name(t, "all_to_all[" + axes_text(at.axes) + "]"), OpKind::AllToAll, x, y, at);
        TensorId z = resize(t, y, p, local_shape(global, next, m_m)[p]);
        // Name the result as the version it is.
        m_res.program.graph.tensor(z).name = version_name(next);
        m_res.program.graph.tensor(z).role = role;
        m_res.local_logical[z] = t;
        m_res.local_spec[z] = next;
        cur = record(t, next, z);
        break;
      }
    }
    // 3. Gather every dimension whose split differs: only the innermost axes when the target keeps the outer ones,
    //    none when it splits the dimension further (step 4 slices it).
    for (size_t d = 0; d < want.rank(); ++d) {
      if (cur.spec.dims[d].empty() || cur.spec.dims[d] == want.dims[d]) continue;
      std::vector<std::string> inner;
      if (extends(cur.spec.dims[d], want.dims[d], global[d], inner)) continue;
      OpAttrs at;
      at.axes = cur.spec.dims[d];
      ShardSpec next = cur.spec;
      next.dims[d].clear();
      if (extends(want.dims[d], cur.spec.dims[d], global[d], inner)) {
        at.axes = inner;
        next.dims[d] = want.dims[d];
      }
      at.dim = static_cast<int64_t>(d);
      const int64_t p = m_m.size(at.axes);
      std::vector<int64_t> sh = m_res.program.graph.tensor(cur.local).shape;
      sh[d] *= p;
      const int64_t whole = local_shape(global, next, m_m)[d];
      TensorId y = sh[d] == whole ? add_local(t, next, version_name(next), role)
                                  : temp(t, sh, base + "/gathered" + std::to_string(m_counter));
      emit1(op_name(t, "all_gather[" + axes_text(at.axes) + "]"), OpKind::AllGather, cur.local, y, at);
      if (sh[d] != whole) {
        y = resize(t, y, d, whole);
        m_res.program.graph.tensor(y).name = version_name(next);
        m_res.program.graph.tensor(y).role = role;
        m_res.local_logical[y] = t;
        m_res.local_spec[y] = next;
      }
      cur = record(t, next, y);
    }
    // 4. Slice every dimension the target splits further than the current value (whole, or split over the
    //    target's outer axes): each device keeps its piece, no communication.
    for (size_t d = 0; d < want.rank(); ++d) {
      std::vector<std::string> axes;
      if (!extends(cur.spec.dims[d], want.dims[d], global[d], axes)) continue;
      ShardSpec next = cur.spec;
      next.dims[d] = want.dims[d];
      OpAttrs at;
      at.axes = axes;
      at.dim = static_cast<int64_t>(d);
      TensorId y = add_local(t, next, version_name(next), role);
      emit1(op_name(t, "slice[" + axes_text(at.axes) + "]"), OpKind::Slice, cur.local, y, at);
      cur = record(t, next, y);
    }
    if (cur.spec != want)
      throw Error(Err::Internal, "partitioner: resharding '" + base + "' ended at " + cur.spec.text() + ", not " + want.text());
    return cur.local;
  }

  // Whether the split `to` of a dimension of `n` elements is the split `from` followed by more (inner) axes,
  // returned in `inner`, with every device's piece of `to` inside its piece of `from`: always when `from` is empty,
  // else when `to` divides the dimension evenly (padding would move the pieces' boundaries).
  bool extends(const std::vector<std::string>& from, const std::vector<std::string>& to, int64_t n,
               std::vector<std::string>& inner) const {
    if (to.size() <= from.size() || !std::equal(from.begin(), from.end(), to.begin())) return false;
    if (!from.empty() && n % m_m.size(to) != 0) return false;
    inner.assign(to.begin() + static_cast<std::ptrdiff_t>(from.size()), to.end());
    return true;
  }

  // Whether `to` takes axes from dimension p of `from` to dimension q: to.dims[q] = from.dims[q] + moved and
  // from.dims[p] = to.dims[p] + moved, `moved` not empty.
  static bool moves_innermost(const ShardSpec& from, const ShardSpec& to, size_t p, size_t q,
                              std::vector<std::string>& moved) {
    const auto &fq = from.dims[q], &tq = to.dims[q], &fp = from.dims[p], &tp = to.dims[p];
    if (tq.size() <= fq.size() || !std::equal(fq.begin(), fq.end(), tq.begin())) return false;
    moved.assign(tq.begin() + static_cast<std::ptrdiff_t>(fq.size()), tq.end());
    return fp.size() == tp.size() + moved.size() && std::equal(tp.begin(), tp.end(), fp.begin()) &&
           std::equal(moved.begin(), moved.end(), fp.begin() + static_cast<std::ptrdiff_t>(tp.size()));
  }

  // The spec an op's output should end up with, when something asks for one.
  std::optional<ShardSpec> wanted(TensorId t) const {
    if (auto a = annotation(t)) return a;
    const TensorInfo& info = m_g.tensor(t);
    if (info.role == TensorRole::Updated && info.updates >= 0) {
      if (auto a = annotation(info.updates)) return a;
      return ShardSpec::replicated(info.shape.size());
    }
    return std::nullopt;
  }

  // For a rule, the spec an output will be taken in, when something asks for one: what wanted() says, or for a
  // parameter's gradient the spec of its parameter, in which the update takes it. A hint only: the gradient is
  // resharded where the update reads it, but a rule can produce it in its parameter's split (each device then
  // reduces only its own piece).
  // A part of a gradient (a tied parameter's gradient is the sum of its uses' parts; a mixed-precision one is cast
  // to the master's type) takes the hint of the gradient it becomes, and a value only cast (mixed precision's
  // embedding rows) the hint of its cast.
  std::optional<ShardSpec> hint(TensorId t) const {
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

  void partition_op(const Op& op) {
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

  // An op the rule runs as several local steps (OpSharding::steps) on the local inputs and outputs of `local` and
  // the rule's scratch values.
  void emit_steps(const Op& op, const Op& local, const OpSharding& dec) {
    std::vector<TensorId> slot = local.inputs;
    slot.insert(slot.end(), local.outputs.begin(), local.outputs.end());
    for (const OpSharding::Scratch& s : dec.scratch) {
      TensorInfo li;
      li.name = s.name;
      li.shape = s.shape;
      li.dtype = s.dtype;
      li.role = TensorRole::Activation;
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

  // Every logical tensor the program computes is bound to a version that holds its value whole or split; results
  // that are still pending sums (the loss, products nobody consumed, what the update reads) are reduced first. A
  // loss something still adds to (a micro-batch's, accumulated into the step's) is not a result of its own.
  void bind_results() {
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

  // Issues each cell's parameter gathers one cell ahead, per pass: with the pass's cells c0, c1, ... in the order
  // it first gathers for them, the gathers of c0 and c1 move to just before c0's first op in the pass, those of c2
  // to just before c1's first op, and so on; each moved gather waits for the last compute op issued before it, so
  // it starts when the previous cell's compute is done and overlaps the current cell's (FSDP's forward and
  // backward prefetch, XLA's asynchronous all-gather scheduled one layer early).
  void prefetch_gathers() {
    std::vector<OpId>& order = m_res.program.order;
    ModelGraph& pg = m_res.program.graph;
    std::vector<int> chain_of(pg.num_ops(), -1);
    for (size_t c = 0; c < m_chains.size(); ++c)
      for (OpId o : m_chains[c].ops) chain_of[o] = static_cast<int>(c);
    // The first compute op of each cell in each pass.
    std::map<std::pair<int, int32_t>, OpId> first_op;
    for (OpId o : order) {
      const Op& op = pg.op(o);
      if (chain_of[o] >= 0 || is_communication(op.kind) || op.cell < 0 || gather_pass(op) < 0) continue;
      first_op.emplace(std::make_pair(gather_pass(op), op.cell), o);
    }
    // Before each anchor (an op of the original order), the chains to issue there.
    std::map<OpId, std::vector<int>> before;
    for (int pass : {0, 1}) {
      std::vector<int32_t> cells;                 // in order of first gather
      std::map<int32_t, std::vector<int>> chains;  // per cell
      for (size_t c = 0; c < m_chains.size(); ++c) {
        const GatherChain& ch = m_chains[c];
        if (ch.pass != pass) continue;
        if (!chains.count(ch.cell)) cells.push_back(ch.cell);
        chains[ch.cell].push_back(static_cast<int>(c));
      }
      for (size_t k = 0; k < cells.size(); ++k) {
        auto anchor = first_op.find({pass, cells[k]});
        // A cell without ops of its own in the pass (cannot happen: a gather is made for an op of the cell).
        if (anchor == first_op.end()) return;
        std::vector<int>& here = before[anchor->second];
        if (k == 0) here.insert(here.end(), chains[cells[0]].begin(), chains[cells[0]].end());
        if (k + 1 < cells.size()) here.insert(here.end(), chains[cells[k + 1]].begin(), chains[cells[k + 1]].end());
      }
    }
    std::vector<OpId> out;
    out.reserve(order.size());
    OpId last_compute = -1;
    for (OpId o : order) {
      if (chain_of[o] >= 0) continue;
      auto it = before.find(o);
      if (it != before.end())
        for (int c : it->second) {
          const std::vector<OpId>& ops = m_chains[static_cast<size_t>(c)].ops;
          if (last_compute >= 0) pg.add_control(last_compute, ops.front());
          out.insert(out.end(), ops.begin(), ops.end());
        }
      out.push_back(o);
      if (!is_communication(pg.op(o).kind)) last_compute = o;
    }
    if (out.size() != order.size()) throw Error(Err::Internal, "partitioner: prefetching the gathers lost ops");
    order = std::move(out);
  }

  void note_padding(TensorId t, const ShardSpec& s) {
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

  const PartitionInput& m_in;
  const ModelGraph& m_g;
  const Mesh& m_m;
  PartitionResult m_res;
  std::vector<std::vector<Version>> m_versions;  // per logical tensor; front() is what consumers start from
  std::vector<TensorId> m_input_local;           // local tensor of each step input
  int64_t m_counter = 0;
  bool m_fallback_noted = false;
  int m_pass = -1;                   // while gathering a fully sharded parameter: the pass the copy serves
  std::vector<GatherChain> m_chains;  // every such gather, in issue order
  std::set<OpId> m_chained;           // casts moved with a gather (one gather takes each)
  std::vector<OpId> m_local_op;    // per logical op: the (last) local op computing it
  std::vector<OpId> m_local_first;  // per logical op: its first local op (they differ for an op run in steps)
  OpId m_last_op = -1;    // the last op emitted
  OpId m_main_op = -1;    // the last logical op's own (last) local op
  OpId m_main_first = -1;  // and its first
};

}  // namespace

PartitionResult partition_step(const PartitionInput& in) { return Partitioner(in).run(); }

}  // namespace podsim
