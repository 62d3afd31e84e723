// The HLO importer (hlo/import.h): the run over a module, the tensors and ops it emits, and the cheap producers
// each consumer recomputes; the rest of the Importer is in the files hlo/importer.h names.
#include "hlo/importer.h"
#include "hlo/reduce_scatter.h"

namespace podsim::hlo {

DType dtype_of(Type t) {
  switch (t) {
    case Type::Pred: return DType::Pred;
    case Type::S2: case Type::S4: case Type::S8: case Type::U2: case Type::U4: case Type::U8: return DType::I8;
    case Type::S16: case Type::U16: return DType::I16;
    case Type::S32: case Type::U32: return DType::I32;
    case Type::S64: case Type::U64: return DType::I64;
    case Type::F16: return DType::F16;
    case Type::BF16: return DType::BF16;
    case Type::F32: return DType::F32;
    case Type::F64: case Type::C64: return DType::F64;
    default: return DType::F8;
  }
}

namespace import_detail {

bool is_collective(const std::string& op) {
  static const std::set<std::string> k = {"all-reduce",          "all-gather",        "reduce-scatter",
                                          "all-to-all",          "collective-permute", "collective-broadcast",
                                          "all-reduce-start",    "all-gather-start",  "collective-permute-start",
                                          "ragged-all-to-all"};
  return k.count(op) > 0;
}

void leaves(const Value& v, std::vector<TensorId>& out) {
  if (v.tuple) {
    for (const Value& e : v.elems) leaves(e, out);
  } else if (v.t >= 0) {
    out.push_back(v.t);
  }
}

// Dimensions of size 1 carry no order: the physical order of the others, major to minor.
std::vector<int64_t> physical(const Shape& s) {
  std::vector<int64_t> out;
  for (int64_t d : s.major_to_minor())
    if (s.dims.at(static_cast<size_t>(d)) != 1) out.push_back(d);
  return out;
}

bool row_major(const Shape& s) {
  std::vector<int64_t> p = physical(s);
  return std::is_sorted(p.begin(), p.end());
}

// The values a constant's literal lists, in row-major order ({1, 2}, {{1,2},{3,4}}, -inf, true, nan).
bool literal_values(const std::string& lit, std::vector<float>& out) {
  size_t i = 0;
  while (i < lit.size()) {
    char c = lit[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == '{' || c == '}' || c == ',') {
      ++i;
      continue;
    }
    size_t b = i;
    while (i < lit.size() && !std::isspace(static_cast<unsigned char>(lit[i])) && lit[i] != ',' && lit[i] != '}' &&
           lit[i] != '{')
      ++i;
    std::string w = lit.substr(b, i - b);
    if (w == "true") out.push_back(1.0f);
    else if (w == "false") out.push_back(0.0f);
    else if (w == "inf") out.push_back(std::numeric_limits<float>::infinity());
    else if (w == "-inf") out.push_back(-std::numeric_limits<float>::infinity());
    else if (w == "nan" || w == "-nan") out.push_back(std::numeric_limits<float>::quiet_NaN());
    else {
      try {
        size_t used = 0;
        double v = std::stod(w, &used);
        if (used != w.size()) return false;
        out.push_back(static_cast<float>(v));
      } catch (const std::exception&) {
        return false;
      }
    }
  }
  return true;
}

ArrayFn unary_fn(const std::string& op, bool& ok) {
  static const std::unordered_map<std::string, ArrayFn> k = {
      {"negate", ArrayFn::Negate}, {"abs", ArrayFn::Abs}, {"exponential", ArrayFn::Exp},
      {"exponential-minus-one", ArrayFn::Expm1}, {"log", ArrayFn::Log}, {"log-plus-one", ArrayFn::Log1p},
      {"sqrt", ArrayFn::Sqrt}, {"rsqrt", ArrayFn::Rsqrt}, {"cbrt", ArrayFn::Cbrt}, {"tanh", ArrayFn::Tanh},
      {"logistic", ArrayFn::Logistic}, {"sine", ArrayFn::Sine}, {"cosine", ArrayFn::Cosine}, {"tan", ArrayFn::Tan},
      {"floor", ArrayFn::Floor}, {"ceil", ArrayFn::Ceil}, {"round-nearest-afz", ArrayFn::RoundAwayFromZero},
      {"round-nearest-even", ArrayFn::RoundNearestEven}, {"sign", ArrayFn::Sign}, {"not", ArrayFn::Not},
      {"is-finite", ArrayFn::IsFinite}, {"erf", ArrayFn::Erf}, {"popcnt", ArrayFn::PopulationCount},
      {"reduce-precision", ArrayFn::ReducePrecision}, {"real", ArrayFn::Copy}, {"imag", ArrayFn::Copy},
      {"count-leading-zeros", ArrayFn::PopulationCount}, {"stochastic-convert", ArrayFn::Copy},
      // CHLO's special functions as the StableHLO reader emits them (hlo/stablehlo_chlo.cpp; not HLO opcodes)
      {"lgamma", ArrayFn::Lgamma}, {"digamma", ArrayFn::Digamma}, {"erf-inv", ArrayFn::ErfInv}};
  auto it = k.find(op);
  ok = it != k.end();
  return ok ? it->second : ArrayFn::Copy;
}

ArrayFn binary_fn(const std::string& op, bool& ok) {
  static const std::unordered_map<std::string, ArrayFn> k = {
      {"add", ArrayFn::Add}, {"subtract", ArrayFn::Subtract}, {"multiply", ArrayFn::Multiply},
      {"divide", ArrayFn::Divide}, {"maximum", ArrayFn::Maximum}, {"minimum", ArrayFn::Minimum},
      {"power", ArrayFn::Power}, {"remainder", ArrayFn::Remainder}, {"atan2", ArrayFn::Atan2}, {"and", ArrayFn::And},
      {"or", ArrayFn::Or}, {"xor", ArrayFn::Xor}, {"shift-left", ArrayFn::ShiftLeft},
      {"shift-right-arithmetic", ArrayFn::ShiftRightArithmetic}, {"shift-right-logical", ArrayFn::ShiftRightLogical},
      {"complex", ArrayFn::Add}};
  auto it = k.find(op);
  ok = it != k.end();
  return ok ? it->second : ArrayFn::Copy;
}

// How a reduction computation (to_apply) combines: its root applied to its two parameters.
ArrayFn combiner(const Computation& c) {
  const Instruction& r = c.instructions.at(static_cast<size_t>(c.root));
  if (c.parameters.size() != 2 || r.operands.size() != 2) return ArrayFn::Other;
  std::set<int32_t> ops(r.operands.begin(), r.operands.end());
  if (ops != std::set<int32_t>(c.parameters.begin(), c.parameters.end())) return ArrayFn::Other;
  if (r.opcode == "add") return ArrayFn::Add;
  if (r.opcode == "multiply") return ArrayFn::Multiply;
  if (r.opcode == "maximum") return ArrayFn::Maximum;
  if (r.opcode == "minimum") return ArrayFn::Minimum;
  if (r.opcode == "and") return ArrayFn::And;
  if (r.opcode == "or") return ArrayFn::Or;
  return ArrayFn::Other;
}

std::string category(const std::string& opcode) {
  if (opcode == "dot" || opcode == "convolution") return "convolution";
  if (opcode == "copy" || opcode == "transpose" || opcode == "reshape" || opcode == "bitcast" ||
      opcode == "copy-start" || opcode == "copy-done")
    return "data formatting";
  if (is_collective(opcode)) {
    std::string base = opcode;
    if (base.size() > 6 && base.compare(base.size() - 6, 6, "-start") == 0) base.resize(base.size() - 6);
    return base;
  }
  static const std::set<std::string> elementwise = {
      "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "remainder", "atan2", "and", "or", "xor",
      "compare", "select", "clamp", "negate", "abs", "exponential", "log", "sqrt", "rsqrt", "tanh", "logistic",
      "sine", "cosine", "convert", "floor", "ceil", "sign", "not", "broadcast", "iota", "constant", "exponential-minus-one",
      "log-plus-one", "is-finite", "reduce-precision", "shift-left", "shift-right-logical", "shift-right-arithmetic",
      "round-nearest-afz", "round-nearest-even", "erf", "cbrt", "tan", "popcnt", "lgamma", "digamma", "erf-inv"};
  if (elementwise.count(opcode)) return "non-fusion elementwise";
  return opcode;
}

Imported Importer::run() {
  m_out.scheduled = m_m.attr("is_scheduled") && m_m.attr("is_scheduled")->value == "true";
  m_defer = true;
  for (int32_t c : reachable())
    for (const Instruction& in : m_m.computations[c].instructions) m_defer = m_defer && in.opcode != "fusion";
  m_defer = m_defer && !m_out.scheduled;
  find_devices();
  const Computation& entry = m_m.entry_computation();
  m_entry_args = entry_parameters(entry);
  Value root = emit(m_m.entry, m_entry_args, "", -1);
  mark_results(entry, root);
  if (m_defer) {
    m_out.order = unscheduled_order(m_out.graph);
  } else {
    for (size_t i = 0; i < m_out.graph.num_ops(); ++i) m_out.order.push_back(static_cast<OpId>(i));
  }
  if (m_out.scheduled) add_schedule_edges(m_out);
  else add_overlap_limits(m_out);
  return std::move(m_out);
}

void Importer::fail(const Instruction& in, Err e, const std::string& what) const {
  throw Error(e, at(in), "instruction '" + in.name + "' (" + in.opcode + "): " + what);
}

TensorId Importer::tensor(const std::string& name, const Shape& s, TensorRole role) {
  TensorInfo t;
  t.name = name;
  t.shape = s.dims;
  t.dtype = dtype_of(s.type);
  t.role = role;
  if (!s.tiles.empty() && s.dims.size() >= 1) {  // a TPU layout: stored padded to its tiles
    t.tile_order = s.major_to_minor();
    t.tiles = s.tiles;
  }
  return m_out.graph.add_tensor(t);
}

Value Importer::array_value(const std::string& name, const Shape& s) {
  Value v;
  if (s.is_tuple()) {
    v.tuple = true;
    for (size_t i = 0; i < s.tuple.size(); ++i) v.elems.push_back(array_value(name + "." + std::to_string(i), s.tuple[i]));
  } else if (s.is_array() && s.elements() > 0) {
    v.t = tensor(name, s);
  }
  return v;
}

int32_t Importer::origin(int32_t comp, int32_t idx, const Instruction& in) {
  if (m_fusion) return m_fusion_origin;
  auto key = std::make_pair(comp, idx);
  auto it = m_origin.find(key);
  if (it != m_origin.end()) return it->second;
  std::string opcode = in.opcode;
  std::string cat = category(opcode);
  if (opcode == "fusion") {
    std::string kind = word(in, "kind").value_or("kLoop");
    cat = kind == "kLoop" ? "loop fusion" : kind == "kInput" ? "input fusion" : kind == "kOutput" ? "output fusion"
                                                                                   : "custom fusion";
    if (const Attribute* b = in.attr("backend_config"); b && b->value.find("gemm") != std::string::npos)
      cat = "convolution fusion";
  }
  if (opcode == "custom-call") {  // library GEMMs and convolutions are what the profile calls convolution
    const std::string t = word(in, "custom_call_target").value_or("");
    if (t.find("cublas") != std::string::npos || t.find("cudnn$conv") != std::string::npos ||
        t.rfind("__onednn$", 0) == 0)
      cat = "convolution";
  }
  m_out.origins.push_back({in.name, opcode, cat});
  int32_t o = static_cast<int32_t>(m_out.origins.size() - 1);
  m_origin.emplace(key, o);
  return o;
}

OpId Importer::add(const Instruction& in, OpKind kind, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
                   OpAttrs attrs, const std::string& suffix) {
  Op op;
  op.name = m_prefix + in.name + m_copy_suffix + suffix;
  op.kind = kind;
  op.phase = is_communication(kind) ? Phase::Communication : Phase::Forward;
  op.inputs = std::move(inputs);
  op.outputs = std::move(outputs);
  op.attrs = std::move(attrs);
  const bool host = kind == OpKind::ToHost ||
                    ((kind == OpKind::Bitcast || kind == OpKind::DynamicSlice || kind == OpKind::Slice) &&
                     !op.inputs.empty() && m_on_host.count(op.inputs[0])) ||
                    (kind == OpKind::DynamicUpdateSlice && op.inputs.size() > 1 && m_on_host.count(op.inputs[1]));
  if (host) m_on_host.insert(op.outputs.begin(), op.outputs.end());
  OpId id = m_out.graph.add_op(std::move(op));
  m_out.origin_of_op.push_back(origin(m_cur_comp, m_cur_idx, in));
  if (m_fusion) m_fusion->push_back(id);
  return id;
}

// A new tensor for `in`'s (array) result and the op that makes it.
TensorId Importer::make(const Instruction& in, OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs) {
  if (!in.shape.is_array()) fail(in, Err::HloInvalid, "expected an array shape, found " + in.shape.text());
  TensorId out = tensor(m_prefix + in.name + m_copy_suffix, in.shape);
  add(in, kind, std::move(inputs), {out}, std::move(attrs));
  return out;
}

TensorId Importer::arr(const Instruction& in, const std::vector<Value>& vals, size_t k) {
  if (k >= vals.size()) fail(in, Err::HloInvalid, "has " + std::to_string(vals.size()) + " operands");
  const Value& v = vals[k];
  if (v.tuple || (v.t < 0 && v.pending < 0)) fail(in, Err::HloInvalid, "operand " + std::to_string(k) + " is not an array");
  return need(v);
}

void Importer::need_operands(const Instruction& in, size_t n) const {
  if (in.operands.size() != n)
    fail(in, Err::HloInvalid, "takes " + std::to_string(n) + " operands, it has " + std::to_string(in.operands.size()));
}

void Importer::no_kernel(const Instruction& in, const std::string& what) {
  if (m_o.numeric)
    fail(in, Err::HloNumeric,
         "podsim has no numeric kernel for " + what + "; run without run.numeric to time the module");
}

bool Importer::cheap_opcode(const std::string& op) {
  static const std::set<std::string> k = {"broadcast", "iota", "constant", "convert", "bitcast", "reshape", "compare",
                                          "select", "add", "subtract", "multiply", "maximum", "minimum", "negate",
                                          "abs", "and", "or", "xor", "not", "sign", "floor", "ceil", "clamp",
                                          "is-finite", "round-nearest-afz", "round-nearest-even", "reduce-precision"};
  return k.count(op) > 0;
}

bool Importer::deferrable(const Instruction& in, const std::vector<Value>& ops) const {
  if (!m_defer || m_fusion || !cheap_opcode(in.opcode) || !in.shape.is_array() || in.shape.elements() == 0)
    return false;
  if (in.opcode == "reshape" && m_cur_comp >= 0) {  // only when it is a view
    const Computation& c = m_m.computations[m_cur_comp];
    if (!row_major(c.instructions[in.operands.at(0)].shape) || !row_major(in.shape)) return false;
  }
  // Only producers of large values from small ones (broadcasts, iotas, one-hot comparisons and what is made of
  // them): an op that reads a large operand stays where it is, as XLA fuses it at most once.
  int depth = 1;
  for (const Value& v : ops) {
    if (v.tuple) return false;
    if (v.pending >= 0) depth = std::max(depth, m_pending[v.pending].depth + 1);
    else if (v.t >= 0 && m_out.graph.tensor(v.t).bytes() * 8 > in.shape.bytes()) return false;
  }
  return depth <= kDeferDepth;
}

Value Importer::defer(int32_t comp, int32_t idx, const std::string& prefix, const std::vector<Value>& ops) {
  Pending p;
  p.comp = comp;
  p.idx = idx;
  p.prefix = prefix;
  p.operands = ops;
  for (const Value& v : ops)
    if (v.pending >= 0) p.depth = std::max(p.depth, m_pending[v.pending].depth + 1);
  m_pending.push_back(std::move(p));
  Value v;
  v.pending = static_cast<int32_t>(m_pending.size() - 1);
  return v;
}

// The tensor of an array value, emitting a pending producer (once per consumer) where it is needed.
TensorId Importer::need(const Value& v) {
  if (v.pending < 0) return v.t;
  if (auto it = m_made.find(v.pending); it != m_made.end()) return it->second;
  const int32_t id = v.pending;
  const int32_t comp = m_pending[id].comp, idx = m_pending[id].idx;
  const std::vector<Value> operands = m_pending[id].operands;
  const int copy = m_pending[id].copies++;
  const Computation& c = m_m.computations[comp];
  const Instruction& in = c.instructions[idx];
  const std::string saved_prefix = m_prefix;
  const int32_t saved_comp = m_cur_comp, saved_idx = m_cur_idx;
  m_prefix = m_pending[id].prefix;
  m_cur_comp = comp;
  m_cur_idx = idx;
  const std::string saved_suffix = m_copy_suffix;
  m_copy_suffix = copy > 0 ? "~" + std::to_string(copy + 1) : "";
  Value made = instruction(c, in, operands, {});
  m_copy_suffix = saved_suffix;
  m_prefix = saved_prefix;
  m_cur_comp = saved_comp;
  m_cur_idx = saved_idx;
  const TensorId t = need(made);
  m_made[id] = t;
  return t;
}

void Importer::need_leaves(const Value& v, std::vector<TensorId>& out) {
  if (v.tuple) {
    for (const Value& e : v.elems) need_leaves(e, out);
  } else if (v.t >= 0 || v.pending >= 0) {
    out.push_back(need(v));
  }
}

// An elementwise operand: a pending broadcast of a single value is that value (the kernel broadcasts it).
TensorId Importer::elem_arr(const Instruction& in, const std::vector<Value>& vals, size_t k) {
  if (k < vals.size() && vals[k].pending >= 0) {
    const Pending& p = m_pending[vals[k].pending];
    const Instruction& src = m_m.computations[p.comp].instructions[p.idx];
    if (src.opcode == "broadcast" && p.operands.size() == 1 && !p.operands[0].tuple) {
      const TensorId x = need(p.operands[0]);
      if (x >= 0 && m_out.graph.tensor(x).elements() == 1) return x;
    }
  }
  return arr(in, vals, k);
}

// The value of a scalar constant, emitted or pending.
std::optional<double> Importer::scalar_of(const Value& v) const {
  if (v.t >= 0) {
    auto it = m_scalar.find(v.t);
    if (it != m_scalar.end()) return it->second;
    return std::nullopt;
  }
  if (v.pending < 0) return std::nullopt;
  const Pending& p = m_pending[v.pending];
  return constant_of(m_m.computations[p.comp], p.idx, nullptr);
}

}  // namespace import_detail

Imported import_module(const Module& m, const ImportOptions& opts) {
  // XLA's reduce-scatter creator first (hlo/reduce_scatter.h), on a copy: only modules with an all-reduce pay it.
  bool any = false;
  for (const Computation& c : m.computations)
    for (const Instruction& in : c.instructions) any = any || in.opcode == "all-reduce";
  if (!any) return import_detail::Importer(m, opts).run();
  int64_t devices = opts.devices;
  if (const Attribute* a = m.attr("num_partitions"); a && devices <= 0) {
    try {
      devices = std::stoll(a->value);
    } catch (const std::exception&) {
      devices = 0;  // the importer reports the bad header
    }
  }
  Module rewritten = m;
  const int64_t made = create_reduce_scatters(rewritten, devices);
  if (made == 0) return import_detail::Importer(m, opts).run();
  Imported out = import_detail::Importer(rewritten, opts).run();
  out.notes.push_back(std::to_string(made) + " all-reduce" + (made > 1 ? "s" : "") +
                      " whose only reader keeps each device's block of the group ran as reduce-scatters, as XLA's "
                      "reduce-scatter creator rewrites them (docs/hlo.md)");
  return out;
}

}  // namespace podsim::hlo
