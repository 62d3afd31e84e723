// The HLO importer's computation emitter: a computation's instructions in order, each by its opcode.
#include "hlo/importer.h"

namespace podsim::hlo::import_detail {

std::vector<Value> Importer::entry_parameters(const Computation& entry) {
  std::vector<Value> args;
  for (int32_t p : entry.parameters) {
    const Instruction& in = entry.instructions[p];
    Value v;
    if (in.shape.is_tuple()) {
      v = array_value(in.name, in.shape);
    } else if (in.shape.is_array() && in.shape.elements() > 0) {
      const bool integer = in.shape.type == Type::Pred || is_integer(in.shape.type);
      v.t = tensor(in.name, in.shape, integer ? TensorRole::Input : TensorRole::Parameter);
      ShardedInput si;
      si.local = v.t;
      si.global_shape = in.shape.dims;
      std::optional<Sharding> s = m_partitioned ? sharding(in, m_m.file) : std::nullopt;
      if (s && s->kind == Sharding::Kind::Replicated) {
        si.replicated = true;
        m_out.inputs.push_back(si);
      } else if (s && s->kind == Sharding::Kind::Tiled && s->tile_dims.size() == in.shape.dims.size() + (s->replicated_last ? 1 : 0)) {
        si.axes.assign(in.shape.dims.size(), {});
        std::vector<Groups> gs = tile_groups(*s, in);
        size_t k = 0;
        for (size_t d = 0; d < in.shape.dims.size(); ++d) {
          if (s->tile_dims[d] <= 1) continue;
          const std::vector<int> ax = m_mesh.axes_of(gs[k++]);
          si.axes[d] = ax;
          si.global_shape[d] *= s->tile_dims[d];
        }
        m_out.inputs.push_back(si);
      }
    }
    args.push_back(v);
  }
  return args;
}

// Step results: updated in place of the parameter they alias (input_output_alias), else kept to the end.
void Importer::mark_results(const Computation& entry, const Value& root) {
  std::map<int64_t, int64_t> alias;  // output index -> parameter number
  if (const Attribute* a = m_m.attr("input_output_alias")) {
    const std::string& v = a->value;
    size_t i = 0;
    while ((i = v.find('{', i + 1)) != std::string::npos) {
      size_t close = v.find('}', i);
      size_t paren = v.find('(', close);
      if (close == std::string::npos || paren == std::string::npos) break;
      try {
        std::string out = v.substr(i + 1, close - i - 1);
        int64_t o = out.empty() ? 0 : std::stoll(out);
        int64_t p = std::stoll(v.substr(paren + 1));
        alias[o] = p;
      } catch (const std::exception&) {
      }
      i = v.find(')', paren);
      if (i == std::string::npos) break;
    }
  }
  std::vector<Value> outs = root.tuple ? root.elems : std::vector<Value>{root};
  for (size_t k = 0; k < outs.size(); ++k) {
    std::vector<TensorId> ts;
    need_leaves(outs[k], ts);
    for (TensorId t : ts) {
      m_out.results.push_back(t);
      if (m_out.graph.producer(t) < 0) continue;  // a parameter passed through
      TensorInfo& info = m_out.graph.tensor(t);
      auto it = alias.find(static_cast<int64_t>(k));
      if (it != alias.end() && it->second < static_cast<int64_t>(entry.parameters.size())) {
        const TensorId pt = m_entry_args[it->second].t;
        if (pt >= 0 && m_out.graph.tensor(pt).bytes() == info.bytes() && info.role != TensorRole::Updated) {
          info.role = TensorRole::Updated;
          info.updates = pt;
          continue;
        }
      }
      info.role = TensorRole::Loss;
    }
  }
}

Value Importer::emit(int32_t comp, const std::vector<Value>& args, const std::string& prefix, int32_t call_site) {
  if (++m_depth > 64) {
    --m_depth;
    throw Error(Err::HloUnsupported, "computations call each other more than 64 deep (recursion?)");
  }
  const Computation& c = m_m.computations.at(static_cast<size_t>(comp));
  if (args.size() != c.parameters.size())
    throw Error(Err::HloInvalid, SourceLocation{m_m.file, c.pos.line, c.pos.column, ""},
                "computation '" + c.name + "' takes " + std::to_string(c.parameters.size()) + " parameters, called with " +
                    std::to_string(args.size()));
  (void)call_site;
  std::vector<Value> vals(c.instructions.size());
  const std::string saved = m_prefix;
  const int32_t saved_comp = m_cur_comp, saved_idx = m_cur_idx;
  std::vector<Value> ops;
  for (size_t i = 0; i < c.instructions.size(); ++i) {
    const Instruction& in = c.instructions[i];
    ops.clear();
    for (int32_t o : in.operands) ops.push_back(vals[o]);
    m_prefix = prefix;
    m_cur_comp = comp;
    m_cur_idx = static_cast<int32_t>(i);
    if (deferrable(in, ops)) {
      vals[i] = defer(comp, static_cast<int32_t>(i), prefix, ops);
    } else {
      m_made.clear();
      vals[i] = instruction(c, in, ops, args);
    }
  }
  m_prefix = saved;
  m_cur_comp = saved_comp;
  m_cur_idx = saved_idx;
  --m_depth;
  return vals[c.root];
}

Value Importer::value_of(TensorId t) {
  Value v;
  v.t = t;
  return v;
}

// `vals`: the values of the instruction's operands, in order.
Value Importer::instruction(const Computation& c, const Instruction& in, const std::vector<Value>& vals,
                            const std::vector<Value>& args) {
  const std::string& op = in.opcode;
  const std::string& file = m_m.file;
  if (in.shape.dynamic()) fail(in, Err::HloUnsupported, "a dimension of unbounded size ('?'): podsim needs sizes");
  // An array of no elements (bf16[0], an operand XLA passes for its shape alone) holds nothing and costs nothing.
  if (in.shape.is_array() && in.shape.type != Type::Invalid && in.shape.elements() == 0 && op != "parameter")
    return Value{};
  // ---- structure ----
  if (op == "parameter") {
    int64_t n = std::stoll(in.literal);
    return args.at(static_cast<size_t>(n));
  }
  if (op == "tuple") {
    Value v;
    v.tuple = true;
    for (const Value& o : vals) v.elems.push_back(o);
    return v;
  }
  if (op == "get-tuple-element") {
    need_operands(in, 1);
    const Value& t = vals[0];
    int64_t k = required_integer(in, "index", file);
    if (!t.tuple || k < 0 || k >= static_cast<int64_t>(t.elems.size()))
      fail(in, Err::HloInvalid, "index " + std::to_string(k) + " of an operand that is not a tuple that long");
    return t.elems[k];
  }
  if (op == "opt-barrier" || op == "optimization-barrier") return barrier(in, vals);
  if (op == "domain" || op == "add-dependency" || op == "async-update" || op == "all-reduce-done" ||
      op == "copy-done") {
    if (in.operands.empty()) return Value{};
    const Value& v = vals[0];
    if (op == "copy-done" && v.tuple && !v.elems.empty()) return v.elems[0];
    // An all-reduce-start of the (operand, result) form: its done gives the result.
    if (op == "all-reduce-done" && v.tuple && v.elems.size() == 2 && in.shape.is_array()) return v.elems[1];
    return v;
  }
  if (op == "all-gather-done" || op == "collective-permute-done" || op == "async-done") {
    need_operands(in, 1);
    const Value& v = vals[0];
    if (v.tuple && v.elems.size() >= 2) return v.elems[1];
    return v;
  }
  if (op == "after-all" || op == "create-token" || op == "trace") return Value{};
  if (op == "call") {
    std::vector<int32_t> cs = called(in);
    if (cs.size() != 1) fail(in, Err::HloInvalid, "a call names one computation (to_apply=)");
    std::vector<Value> a;
    for (const Value& o : vals) a.push_back(o);
    return emit(cs[0], a, m_prefix, -1);
  }
  if (op == "fusion") return fusion(in, vals);
  if (op == "while") return while_loop(in, vals);
  if (op == "conditional") return conditional(in, vals);
  if (op == "async-start") {
    std::vector<int32_t> cs = called(in);
    if (cs.size() != 1) fail(in, Err::HloInvalid, "an async-start names one computation (calls=)");
    Value operands;
    operands.tuple = true;
    for (const Value& o : vals) operands.elems.push_back(o);
    Value v;
    v.tuple = true;
    v.elems.push_back(operands);
    v.elems.push_back(emit(cs[0], operands.elems, m_prefix + in.name + "/", -1));
    v.elems.push_back(Value{});
    return v;
  }
  if (op == "copy-start") {
    Value v;
    v.tuple = true;
    v.elems.push_back(copy(in, vals, in.shape.is_tuple() && !in.shape.tuple.empty() ? in.shape.tuple[0] : in.shape));
    v.elems.push_back(vals.at(0));
    v.elems.push_back(Value{});
    return v;
  }
  // ---- arrays ----
  if (op == "constant") return constant(in);
  if (op == "iota") {
    OpAttrs a;
    a.dims = {required_integer(in, "iota_dimension", file)};
    if (a.dims[0] < 0 || a.dims[0] >= static_cast<int64_t>(in.shape.dims.size())) fail(in, Err::HloInvalid, "iota_dimension out of range");
    return value_of(make(in, OpKind::Iota, {}, a));
  }
  if (op == "partition-id" || op == "replica-id") {
    OpAttrs a;
    a.axes = m_out.mesh_names;
    if (!m_core_axis.empty()) {
      no_kernel(in, op + " with two devices per chip");
      a.axes.pop_back();
    }
    return value_of(make(in, OpKind::DeviceId, {}, a));
  }
  if (op == "get-dimension-size") {
    need_operands(in, 1);
    int64_t d = required_integer(in, "dimensions", file);
    const auto& s = shape_of(arr(in, vals, 0));
    if (d < 0 || d >= static_cast<int64_t>(s.size())) fail(in, Err::HloInvalid, "dimension out of range");
    OpAttrs a;
    a.values = {static_cast<float>(s[d])};
    TensorId t = make(in, OpKind::Constant, {}, a);
    m_scalar[t] = static_cast<double>(s[d]);
    return value_of(t);
  }
  if (op == "dot") return value_of(dot(in, vals));
  if (op == "convolution") return value_of(convolution(in, vals));
  if (op == "convert") {
    need_operands(in, 1);
    return value_of(make(in, OpKind::Convert, {arr(in, vals, 0)}));
  }
  if (op == "bitcast-convert") {
    need_operands(in, 1);
    no_kernel(in, "bitcast-convert (a reinterpretation of bits)");
    return value_of(make(in, OpKind::Bitcast, {arr(in, vals, 0)}));
  }
  if (op == "bitcast") {
    need_operands(in, 1);
    return value_of(make(in, OpKind::Bitcast, {arr(in, vals, 0)}));
  }
  if (op == "reshape" || op == "dynamic-reshape") {
    const Shape& from = c.instructions[in.operands.at(0)].shape;
    TensorId x = arr(in, vals, 0);
    if (m_out.graph.tensor(x).elements() != in.shape.elements()) fail(in, Err::HloInvalid, "changes the element count");
    return value_of(make(in, row_major(from) && row_major(in.shape) ? OpKind::Bitcast : OpKind::Reshape, {x}));
  }
  if (op == "transpose") return value_of(transpose(c, in, vals));
  if (op == "copy") return copy(in, vals, in.shape);
  if (op == "broadcast") {
    need_operands(in, 1);
    OpAttrs a;
    a.dims = int_list(in, "dimensions", file).value_or(std::vector<int64_t>{});
    TensorId x = arr(in, vals, 0);
    if (a.dims.size() != shape_of(x).size()) fail(in, Err::HloInvalid, "dimensions={...} must list one output dimension per operand dimension");
    for (size_t i = 0; i < a.dims.size(); ++i)
      if (a.dims[i] < 0 || a.dims[i] >= static_cast<int64_t>(in.shape.dims.size()) ||
          in.shape.dims[a.dims[i]] != shape_of(x)[i])
        fail(in, Err::HloInvalid, "dimensions={...} do not map the operand's shape into the output's");
    return value_of(make(in, OpKind::BroadcastInDim, {x}, a));
  }
  if (op == "reduce") return reduce(in, vals);
  if (op == "slice") {
    need_operands(in, 1);
    SliceDims s = slice_dims(in, file);
    TensorId x = arr(in, vals, 0);
    const auto& xs = shape_of(x);
    if (s.start.size() != xs.size()) fail(in, Err::HloInvalid, "slice={...} needs one range per dimension");
    for (size_t d = 0; d < xs.size(); ++d) {
      const int64_t n = s.stride[d] > 0 ? (s.limit[d] - s.start[d] + s.stride[d] - 1) / s.stride[d] : -1;
      if (s.start[d] < 0 || s.limit[d] > xs[d] || s.stride[d] < 1 || n != in.shape.dims[d])
        fail(in, Err::HloInvalid, "slice={...} does not give the output's shape from the operand's");
    }
    OpAttrs a;
    a.lo = s.start;
    a.hi = s.limit;
    a.stride = s.stride;
    return value_of(make(in, OpKind::StridedSlice, {x}, a));
  }
  if (op == "pad") {
    need_operands(in, 2);
    PadDims p = pad_dims(in, file);
    TensorId x = arr(in, vals, 0);
    if (p.low.size() != shape_of(x).size()) fail(in, Err::HloInvalid, "padding needs one entry per dimension");
    for (size_t d = 0; d < p.low.size(); ++d) {
      const int64_t n = shape_of(x)[d];
      if (p.interior[d] < 0 || p.low[d] + p.high[d] + n + std::max<int64_t>(0, n - 1) * p.interior[d] != in.shape.dims[d])
        fail(in, Err::HloInvalid, "padding does not give the output's shape");
    }
    OpAttrs a;
    a.lo = p.low;
    a.hi = p.high;
    a.stride = p.interior;
    return value_of(make(in, OpKind::Pad, {x, arr(in, vals, 1)}, a));
  }
  if (op == "concatenate") {
    OpAttrs a;
    a.dims = required_ints(in, "dimensions", file);
    if (a.dims.size() != 1 || a.dims[0] < 0 || a.dims[0] >= static_cast<int64_t>(in.shape.dims.size()))
      fail(in, Err::HloInvalid, "dimensions={d} names one dimension of the output");
    std::vector<TensorId> xs;
    int64_t total = 0;
    for (size_t k = 0; k < in.operands.size(); ++k) {
      xs.push_back(arr(in, vals, k));
      total += shape_of(xs.back()).at(static_cast<size_t>(a.dims[0]));
    }
    if (total != in.shape.dims[a.dims[0]]) fail(in, Err::HloInvalid, "the operands do not add up to the output");
    return value_of(make(in, OpKind::Concatenate, xs, a));
  }
  if (op == "dynamic-slice") {
    std::vector<TensorId> xs;
    for (size_t k = 0; k < in.operands.size(); ++k) xs.push_back(arr(in, vals, k));
    if (xs.size() != 1 + in.shape.dims.size()) fail(in, Err::HloInvalid, "takes the operand and one offset per dimension");
    return value_of(make(in, OpKind::DynamicSlice, xs));
  }
  if (op == "dynamic-update-slice") {
    std::vector<TensorId> xs;
    for (size_t k = 0; k < in.operands.size(); ++k) xs.push_back(arr(in, vals, k));
    if (xs.size() != 2 + in.shape.dims.size()) fail(in, Err::HloInvalid, "takes the operand, the update and one offset per dimension");
    return value_of(make(in, OpKind::DynamicUpdateSlice, xs));
  }
  if (op == "gather") {
    need_operands(in, 2);
    no_kernel(in, "gather");
    OpAttrs a;
    a.dims = int_list(in, "slice_sizes", file).value_or(std::vector<int64_t>{});
    return value_of(make(in, OpKind::Gather, {arr(in, vals, 0), arr(in, vals, 1)}, a));
  }
  if (op == "scatter" || op == "select-and-scatter") {
    no_kernel(in, op);
    std::vector<TensorId> xs;
    for (size_t k = 0; k < in.operands.size(); ++k) xs.push_back(arr(in, vals, k));
    if (xs.size() < 3) fail(in, Err::HloInvalid, "takes the operand, indices (or source) and updates");
    if (in.shape.is_tuple()) fail(in, Err::HloUnsupported, "a scatter of several operands");
    OpAttrs a;
    a.dims = shape_of(xs.back());
    return value_of(make(in, OpKind::Scatter, {xs[0], xs[1], xs.back()}, a));
  }
  if (op == "sort") {
    no_kernel(in, "sort");
    std::vector<TensorId> xs;
    for (size_t k = 0; k < in.operands.size(); ++k) xs.push_back(arr(in, vals, k));
    OpAttrs a;
    a.dims = {int_list(in, "dimensions", file).value_or(std::vector<int64_t>{0}).at(0)};
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    add(in, OpKind::Sort, xs, outs, a);
    return out;
  }
  if (op == "reduce-window") {
    no_kernel(in, "reduce-window");
    if (in.shape.is_tuple()) fail(in, Err::HloUnsupported, "a reduce-window of several operands");
    need_operands(in, 2);
    Window w = window(in, file, shape_of(arr(in, vals, 0)).size());
    OpAttrs a;
    a.dims = w.size;
    a.stride = w.stride;
    return value_of(make(in, OpKind::ReduceWindow, {arr(in, vals, 0), arr(in, vals, 1)}, a));
  }
  if (op == "rng" || op == "rng-bit-generator" || op == "rng-get-and-update-state") {
    no_kernel(in, op);
    std::vector<TensorId> xs;
    for (const Value& o : vals)
      if (!o.tuple && (o.t >= 0 || o.pending >= 0)) xs.push_back(need(o));
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    OpAttrs a;
    for (TensorId t : outs) {
      a.flops += 8.0 * static_cast<double>(m_out.graph.tensor(t).elements());  // a Philox round per element
      a.bytes += m_out.graph.tensor(t).bytes();
    }
    add(in, OpKind::CustomCost, xs, outs, a);
    return out;
  }
  if (op == "select" || op == "clamp") {
    need_operands(in, 3);
    OpAttrs a;
    a.fn = op == "select" ? ArrayFn::Select : ArrayFn::Clamp;
    return value_of(make(in, OpKind::Elementwise, {elem_arr(in, vals, 0), elem_arr(in, vals, 1), elem_arr(in, vals, 2)}, a));
  }
  if (op == "compare") {
    need_operands(in, 2);
    std::string d = required_word(in, "direction", file);
    OpAttrs a;
    if (d == "EQ") a.fn = ArrayFn::CompareEq;
    else if (d == "NE") a.fn = ArrayFn::CompareNe;
    else if (d == "LT") a.fn = ArrayFn::CompareLt;
    else if (d == "LE") a.fn = ArrayFn::CompareLe;
    else if (d == "GT") a.fn = ArrayFn::CompareGt;
    else if (d == "GE") a.fn = ArrayFn::CompareGe;
    else fail(in, Err::HloSyntax, "direction=" + d + " (valid: EQ, NE, LT, LE, GT, GE)");
    return value_of(make(in, OpKind::Elementwise, {elem_arr(in, vals, 0), elem_arr(in, vals, 1)}, a));
  }
  bool ok = false;
  ArrayFn f = unary_fn(op, ok);
  if (ok) {
    need_operands(in, 1);
    OpAttrs a;
    a.fn = f;
    return value_of(make(in, OpKind::Elementwise, {arr(in, vals, 0)}, a));
  }
  f = binary_fn(op, ok);
  if (ok) {
    need_operands(in, 2);
    OpAttrs a;
    a.fn = f;
    TensorId x = elem_arr(in, vals, 0), y = elem_arr(in, vals, 1);
    for (TensorId t : {x, y})
      if (m_out.graph.tensor(t).elements() != in.shape.elements() && m_out.graph.tensor(t).elements() != 1)
        fail(in, Err::HloInvalid, "operands of another shape than the result " + in.shape.text());
    return value_of(make(in, OpKind::Elementwise, {x, y}, a));
  }
  if (is_collective(op)) return collective(in, vals);
  if (op == "custom-call") return custom_call(in, vals);
  if (op == "infeed") return infeed(in);
  if (op == "outfeed") return outfeed(in, vals);
  if (op == "send" || op == "recv" || op == "send-done" || op == "recv-done") return send_recv(in, vals);
  static const std::set<std::string> unsupported = {
                                                    "map", "cholesky", "triangular-solve", "fft", "batch-norm-training",
                                                    "batch-norm-inference", "batch-norm-grad", "ragged-dot"};
  if (unsupported.count(op))
    fail(in, Err::HloUnsupported, "podsim has no model for '" + op + "' (docs/hlo.md lists what it runs)");
  fail(in, Err::HloUnsupported, "unknown opcode '" + op + "' (docs/hlo.md lists what podsim runs)");
}

}  // namespace podsim::hlo::import_detail
