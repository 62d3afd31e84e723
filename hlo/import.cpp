#include "hlo/import.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <set>
#include <unordered_map>

#include "base/error.h"
#include "base/text.h"
#include "hlo/attributes.h"
#include "hlo/devices.h"
#include "hlo/issue_order.h"
#include "workloads/op_def.h"

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

namespace {

bool is_collective(const std::string& op) {
  static const std::set<std::string> k = {"all-reduce",          "all-gather",        "reduce-scatter",
                                          "all-to-all",          "collective-permute", "collective-broadcast",
                                          "all-reduce-start",    "all-gather-start",  "collective-permute-start",
                                          "ragged-all-to-all"};
  return k.count(op) > 0;
}

// The value an instruction produces: an array (a tensor of the graph), a tuple of values, or nothing (a token).
struct Value {
  TensorId t = -1;
  int32_t pending = -1;  // a cheap producer not emitted yet: each consumer recomputes it (Importer::defer)
  bool tuple = false;
  std::vector<Value> elems;
};

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
      {"count-leading-zeros", ArrayFn::PopulationCount}, {"stochastic-convert", ArrayFn::Copy}};
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
      "round-nearest-afz", "round-nearest-even", "erf", "cbrt", "tan", "popcnt"};
  if (elementwise.count(opcode)) return "non-fusion elementwise";
  return opcode;
}

class Importer {
 public:
  Importer(const Module& m, const ImportOptions& o) : m_m(m), m_o(o) {}

  Imported run() {
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
    return std::move(m_out);
  }

 private:
  const Module& m_m;
  const ImportOptions& m_o;
  Imported m_out;
  DeviceMesh m_mesh;
  bool m_partitioned = true;
  std::unordered_map<std::string, std::vector<int>> m_axes_memo;  // group text -> mesh axes
  std::map<std::pair<int32_t, int32_t>, int32_t> m_origin;         // (computation, instruction) -> origin
  std::vector<OpId>* m_fusion = nullptr;                           // the fusion being inlined, if any
  int32_t m_fusion_origin = -1;
  std::unordered_map<TensorId, double> m_scalar;                    // scalar constants' values (trip counts)
  std::vector<Value> m_entry_args;                                  // the entry's parameters
  std::string m_core_axis;  // the mesh axis of a chip's own devices (TPU v2/v3), "" when a chip is one device
  int m_depth = 0;

  // ---- errors ----

  SourceLocation at(const Instruction& in) const { return SourceLocation{m_m.file, in.pos.line, in.pos.column, ""}; }
  [[noreturn]] void fail(const Instruction& in, Err e, const std::string& what) const {
    throw Error(e, at(in), "instruction '" + in.name + "' (" + in.opcode + "): " + what);
  }

  // ---- the devices ----

  std::vector<int32_t> called(const Instruction& in) const {
    std::vector<int32_t> out;
    for (const Attribute& a : in.attrs) {
      static const std::set<std::string> names = {"to_apply", "calls", "condition", "body", "true_computation",
                                                  "false_computation", "branch_computations", "called_computations"};
      if (!names.count(a.name)) continue;
      std::string v = a.value;
      for (char& ch : v)
        if (ch == '{' || ch == '}' || ch == ',') ch = ' ';
      size_t i = 0;
      while (i < v.size()) {
        while (i < v.size() && v[i] == ' ') ++i;
        size_t b = i;
        while (i < v.size() && v[i] != ' ') ++i;
        if (i == b) continue;
        std::string name = v.substr(b, i - b);
        int32_t c = m_m.find(name);
        if (c < 0)
          throw Error(Err::HloInvalid, SourceLocation{m_m.file, a.value_pos.line, a.value_pos.column, ""},
                      "instruction '" + in.name + "' calls computation '" + name + "', which the module does not define");
        out.push_back(c);
      }
    }
    return out;
  }

  // Computations reachable from the entry, each once.
  std::vector<int32_t> reachable() const {
    std::vector<int32_t> out{m_m.entry};
    std::vector<bool> seen(m_m.computations.size(), false);
    seen[m_m.entry] = true;
    for (size_t i = 0; i < out.size(); ++i)
      for (const Instruction& in : m_m.computations[out[i]].instructions)
        for (int32_t c : called(in))
          if (!seen[c]) {
            seen[c] = true;
            out.push_back(c);
          }
    return out;
  }

  Groups groups_of(const Instruction& in) const {
    if (in.opcode.rfind("collective-permute", 0) == 0) return permute_groups(in);
    return replica_groups(in, m_m.file);
  }

  // A permutation's cycles (or chains), each in the order data moves.
  Groups permute_groups(const Instruction& in) const {
    auto pairs = source_target_pairs(in, m_m.file);
    std::map<int64_t, int64_t> next, prev;
    for (auto [s, t] : pairs) {
      if (next.count(s) || prev.count(t)) fail(in, Err::HloUnsupported, "a device sends or receives twice");
      next[s] = t;
      prev[t] = s;
    }
    Groups g;
    std::set<int64_t> done;
    for (auto [s, t] : pairs) {
      if (done.count(s)) continue;
      int64_t first = s;  // walk back to a chain's start (or once round a cycle)
      while (prev.count(first) && prev[first] != s) first = prev[first];
      if (prev.count(first) && prev[first] == s) first = s;
      std::vector<int64_t> grp;
      for (int64_t d = first; !done.count(d);) {
        grp.push_back(d);
        done.insert(d);
        if (!next.count(d)) break;
        d = next[d];
      }
      g.push_back(grp);
    }
    return g;
  }

  // The device count and mesh: from the header, else the collectives' groups; shardings add the digits they split.
  void find_devices() {
    const std::vector<int32_t> comps = reachable();
    int64_t header = 1;
    bool has_header = false;
    for (const char* k : {"num_partitions", "replica_count"})
      if (const Attribute* a = m_m.attr(k)) {
        try {
          header *= std::max<int64_t>(1, std::stoll(a->value));
          has_header = true;
        } catch (const std::exception&) {
          throw Error(Err::HloSyntax, SourceLocation{m_m.file, a->value_pos.line, a->value_pos.column, ""},
                      std::string("HloModule attribute ") + k + "=" + a->value + " is not a whole number");
        }
      }
    int64_t from_groups = 0;
    bool collectives = false, annotated = false;
    for (int32_t c : comps)
      for (const Instruction& in : m_m.computations[c].instructions) {
        if (in.opcode == "custom-call" && word(in, "custom_call_target").value_or("") == "Sharding") annotated = true;
        if (!is_collective(in.opcode)) continue;
        collectives = true;
        for (const auto& g : groups_of(in))
          for (int64_t d : g) from_groups = std::max(from_groups, d + 1);
      }
    if (annotated || (!collectives && has_header && header > 1)) {
      // Before SPMD partitioning: global shapes and sharding annotations, no collectives yet.
      m_partitioned = false;
      m_out.devices = 1;
      m_out.notes.push_back("the module is not SPMD-partitioned (it has sharding annotations but no collectives): "
                            "podsim runs it as one device's program and ignores the annotations");
    } else {
      m_out.devices = has_header ? header : std::max<int64_t>(1, from_groups);
    }
    if (m_o.devices > 0 && m_partitioned && !has_header && !collectives) m_out.devices = m_o.devices;
    m_mesh = DeviceMesh(m_out.devices);
    if (m_o.devices_per_chip > 1 && m_out.devices % m_o.devices_per_chip == 0) m_mesh.cut(m_o.devices_per_chip);
    if (m_partitioned) {
      std::set<std::string> seen;
      for (int32_t c : comps)
        for (const Instruction& in : m_m.computations[c].instructions) {
          if (is_collective(in.opcode)) {
            const Attribute* a = in.attr(in.opcode.rfind("collective-permute", 0) == 0 ? "source_target_pairs"
                                                                                       : "replica_groups");
            const std::string key = a ? a->value : "{}";
            if (!seen.insert(key).second) continue;
            Groups g = groups_of(in);
            if (g.size() == 1 && g[0].size() == 1) continue;
            std::string why = m_mesh.add(g);
            if (!why.empty())
              fail(in, Err::HloUnsupported,
                   "its groups are not the axes of a device mesh: " + why + " (podsim runs collectives over mesh axes)");
          }
        }
      for (int32_t p : m_m.entry_computation().parameters) {
        const Instruction& in = m_m.entry_computation().instructions[p];
        std::optional<Sharding> s = sharding(in, m_m.file);
        if (!s || s->kind != Sharding::Kind::Tiled || !in.shape.is_array()) continue;
        for (const auto& g : tile_groups(*s, in)) m_mesh.add(g);
      }
    }
    std::string why = m_mesh.build();
    if (!why.empty()) throw Error(Err::HloUnsupported, SourceLocation{m_m.file, 1, 1, ""}, "the module's " + why);
    m_out.mesh_sizes = m_mesh.sizes();
    for (size_t a = 0; a < m_out.mesh_sizes.size(); ++a) {
      std::string name = "d";
      name += std::to_string(a);
      m_out.mesh_names.push_back(name);
    }
    // The devices of one chip: the innermost axis, when it is exactly them.
    if (m_o.devices_per_chip > 1 && !m_out.mesh_sizes.empty() && m_out.mesh_sizes.back() == m_o.devices_per_chip)
      m_core_axis = m_out.mesh_names.back();
  }

  // Per split dimension of a tile assignment: the groups of devices along it (the others' tiles fixed), in order.
  std::vector<Groups> tile_groups(const Sharding& s, const Instruction& in) const {
    std::vector<Groups> out;
    const size_t rank = in.shape.dims.size();
    if (s.tile_dims.size() != rank + (s.replicated_last ? 1 : 0)) return out;
    std::vector<int64_t> strides(s.tile_dims.size(), 1);
    for (size_t i = s.tile_dims.size(); i-- > 1;) strides[i - 1] = strides[i] * s.tile_dims[i];
    const int64_t total = static_cast<int64_t>(s.devices.size());
    for (size_t d = 0; d < rank; ++d) {
      if (s.tile_dims[d] <= 1) continue;
      Groups g;
      for (int64_t k = 0; k < total; ++k) {
        if ((k / strides[d]) % s.tile_dims[d] != 0) continue;  // the first tile along d
        std::vector<int64_t> grp;
        for (int64_t j = 0; j < s.tile_dims[d]; ++j) grp.push_back(s.devices[k + j * strides[d]]);
        g.push_back(grp);
      }
      out.push_back(g);
    }
    return out;
  }

  std::vector<std::string> axis_names(const Groups& g, const std::string& key) {
    auto it = m_axes_memo.find(key);
    if (it == m_axes_memo.end()) it = m_axes_memo.emplace(key, m_mesh.axes_of(g)).first;
    std::vector<std::string> out;
    for (int a : it->second) out.push_back(m_out.mesh_names[a]);
    return out;
  }

  // ---- tensors and ops ----

  TensorId tensor(const std::string& name, const Shape& s, TensorRole role = TensorRole::Activation) {
    TensorInfo t;
    t.name = name;
    t.shape = s.dims;
    t.dtype = dtype_of(s.type);
    t.role = role;
    return m_out.graph.add_tensor(t);
  }

  Value array_value(const std::string& name, const Shape& s) {
    Value v;
    if (s.is_tuple()) {
      v.tuple = true;
      for (size_t i = 0; i < s.tuple.size(); ++i) v.elems.push_back(array_value(name + "." + std::to_string(i), s.tuple[i]));
    } else if (s.is_array() && s.elements() > 0) {
      v.t = tensor(name, s);
    }
    return v;
  }

  int32_t origin(int32_t comp, int32_t idx, const Instruction& in) {
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
    m_out.origins.push_back({in.name, opcode, cat});
    int32_t o = static_cast<int32_t>(m_out.origins.size() - 1);
    m_origin.emplace(key, o);
    return o;
  }

  int32_t m_cur_comp = -1, m_cur_idx = -1;
  std::string m_prefix;

  OpId add(const Instruction& in, OpKind kind, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
           OpAttrs attrs = {}, const std::string& suffix = "") {
    Op op;
    op.name = m_prefix + in.name + m_copy_suffix + suffix;
    op.kind = kind;
    op.phase = is_communication(kind) ? Phase::Communication : Phase::Forward;
    op.inputs = std::move(inputs);
    op.outputs = std::move(outputs);
    op.attrs = std::move(attrs);
    OpId id = m_out.graph.add_op(std::move(op));
    m_out.origin_of_op.push_back(origin(m_cur_comp, m_cur_idx, in));
    if (m_fusion) m_fusion->push_back(id);
    return id;
  }

  // A new tensor for `in`'s (array) result and the op that makes it.
  TensorId make(const Instruction& in, OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs = {}) {
    if (!in.shape.is_array()) fail(in, Err::HloInvalid, "expected an array shape, found " + in.shape.text());
    TensorId out = tensor(m_prefix + in.name + m_copy_suffix, in.shape);
    add(in, kind, std::move(inputs), {out}, std::move(attrs));
    return out;
  }

  TensorId arr(const Instruction& in, const std::vector<Value>& vals, size_t k) {
    if (k >= vals.size()) fail(in, Err::HloInvalid, "has " + std::to_string(vals.size()) + " operands");
    const Value& v = vals[k];
    if (v.tuple || (v.t < 0 && v.pending < 0)) fail(in, Err::HloInvalid, "operand " + std::to_string(k) + " is not an array");
    return need(v);
  }

  const std::vector<int64_t>& shape_of(TensorId t) const { return m_out.graph.tensor(t).shape; }

  void need_operands(const Instruction& in, size_t n) const {
    if (in.operands.size() != n)
      fail(in, Err::HloInvalid, "takes " + std::to_string(n) + " operands, it has " + std::to_string(in.operands.size()));
  }

  void no_kernel(const Instruction& in, const std::string& what) {
    if (m_o.numeric)
      fail(in, Err::HloNumeric,
           "podsim has no numeric kernel for " + what + "; run without run.numeric to time the module");
  }

  // ---- cheap producers, recomputed where they are used ----
  //
  // Before XLA's optimizations nothing is fused, and a module materializes broadcasts, iotas, one-hot comparisons
  // and converts of whole activations that XLA's fusion never writes: it duplicates such cheap producers into each
  // consumer's kernel (producer-consumer fusion; an "expensive" op such as exp, log or a division is not
  // duplicated). podsim does the same for modules without fusions of their own: a cheap elementwise instruction,
  // broadcast, iota, constant, convert or bitcast that makes a large value out of small ones (each operand an eighth of its
  // result or less, or itself such a producer) is emitted right before each op that reads it (podsim's fusion pass
  // then fuses it there), never on its own; chains of them at most kDeferDepth deep. An elementwise op reads a broadcast
  // scalar as the scalar itself (its kernel broadcasts it).

  struct Pending {
    int32_t comp = -1, idx = -1;
    std::string prefix;
    std::vector<Value> operands;
    int depth = 1;
    int copies = 0;
  };
  static constexpr int kDeferDepth = 6;
  static constexpr double kMaxOps = 2e7;  // ops of an unrolled module
  bool m_defer = false;                           // the module has no fusions of its own
  std::vector<Pending> m_pending;
  std::unordered_map<int32_t, TensorId> m_made;  // pending -> its tensor for the consumer being emitted

  static bool cheap_opcode(const std::string& op) {
    static const std::set<std::string> k = {"broadcast", "iota", "constant", "convert", "bitcast", "reshape", "compare",
                                            "select", "add", "subtract", "multiply", "maximum", "minimum", "negate",
                                            "abs", "and", "or", "xor", "not", "sign", "floor", "ceil", "clamp",
                                            "is-finite", "round-nearest-afz", "round-nearest-even", "reduce-precision"};
    return k.count(op) > 0;
  }

  bool deferrable(const Instruction& in, const std::vector<Value>& ops) const {
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

  Value defer(int32_t comp, int32_t idx, const std::string& prefix, const std::vector<Value>& ops) {
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
  TensorId need(const Value& v) {
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
  std::string m_copy_suffix;  // names a pending producer's second and later copies

  void need_leaves(const Value& v, std::vector<TensorId>& out) {
    if (v.tuple) {
      for (const Value& e : v.elems) need_leaves(e, out);
    } else if (v.t >= 0 || v.pending >= 0) {
      out.push_back(need(v));
    }
  }

  // An elementwise operand: a pending broadcast of a single value is that value (the kernel broadcasts it).
  TensorId elem_arr(const Instruction& in, const std::vector<Value>& vals, size_t k) {
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
  std::optional<double> scalar_of(const Value& v) const {
    if (v.t >= 0) {
      auto it = m_scalar.find(v.t);
      if (it != m_scalar.end()) return it->second;
      return std::nullopt;
    }
    if (v.pending < 0) return std::nullopt;
    const Pending& p = m_pending[v.pending];
    return constant_of(m_m.computations[p.comp], p.idx, nullptr);
  }

  // ---- the computation emitter ----

  std::vector<Value> entry_parameters(const Computation& entry) {
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
  void mark_results(const Computation& entry, const Value& root) {
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

  Value emit(int32_t comp, const std::vector<Value>& args, const std::string& prefix, int32_t call_site) {
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

  Value value_of(TensorId t) {
    Value v;
    v.t = t;
    return v;
  }

  // `vals`: the values of the instruction's operands, in order.
  Value instruction(const Computation& c, const Instruction& in, const std::vector<Value>& vals,
                    const std::vector<Value>& args) {
    const std::string& op = in.opcode;
    const std::string& file = m_m.file;
    if (in.shape.dynamic()) fail(in, Err::HloUnsupported, "a dimension of unbounded size ('?'): podsim needs sizes");
    // An array of no elements (a placeholder operand, bf16[0]) holds nothing and costs nothing.
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
    static const std::set<std::string> unsupported = {"send", "recv", "send-done", "recv-done", "infeed", "outfeed",
                                                      "map", "cholesky", "triangular-solve", "fft", "batch-norm-training",
                                                      "batch-norm-inference", "batch-norm-grad", "ragged-dot"};
    if (unsupported.count(op))
      fail(in, Err::HloUnsupported, "podsim has no model for '" + op + "' (docs/hlo.md lists what it runs)");
    fail(in, Err::HloUnsupported, "unknown opcode '" + op + "' (docs/hlo.md lists what podsim runs)");
  }

  Value constant(const Instruction& in) {
    if (!in.shape.is_array()) {
      no_kernel(in, "a tuple constant");
      return array_value(m_prefix + in.name, in.shape);
    }
    OpAttrs a;
    if (!literal_values(in.literal, a.values) ||
        (a.values.size() != 1 && static_cast<int64_t>(a.values.size()) != in.shape.elements())) {
      no_kernel(in, "a constant whose literal podsim cannot read");
      a.values = {0.0f};
    }
    if (in.shape.elements() == 0) a.values.clear();
    if (a.values.empty()) a.values = {0.0f};
    TensorId t = make(in, OpKind::Constant, {}, a);
    if (in.shape.elements() == 1) m_scalar[t] = a.values[0];
    return value_of(t);
  }

  TensorId dot(const Instruction& in, const std::vector<Value>& vals) {
    need_operands(in, 2);
    const std::string& file = m_m.file;
    TensorId l = arr(in, vals, 0), r = arr(in, vals, 1);
    const auto &ls = shape_of(l), &rs = shape_of(r);
    const auto lb = int_list(in, "lhs_batch_dims", file).value_or(std::vector<int64_t>{});
    const auto rb = int_list(in, "rhs_batch_dims", file).value_or(std::vector<int64_t>{});
    const auto lc = int_list(in, "lhs_contracting_dims", file).value_or(std::vector<int64_t>{});
    const auto rc = int_list(in, "rhs_contracting_dims", file).value_or(std::vector<int64_t>{});
    if (lb.size() != rb.size() || lc.size() != rc.size())
      fail(in, Err::HloInvalid, "the two operands list different numbers of batch or contracting dimensions");
    if (ls.size() + rs.size() - lb.size() - lc.size() > 26) fail(in, Err::HloUnsupported, "a dot of more than 26 dimensions");
    std::string le(ls.size(), '?'), re(rs.size(), '?'), out;
    char next = 'a';
    auto check = [&](int64_t d, size_t rank) {
      if (d < 0 || d >= static_cast<int64_t>(rank)) fail(in, Err::HloInvalid, "a dimension number out of range");
    };
    for (size_t i = 0; i < lb.size(); ++i) {
      check(lb[i], ls.size());
      check(rb[i], rs.size());
      le[lb[i]] = re[rb[i]] = next;
      out += next++;
    }
    for (size_t i = 0; i < lc.size(); ++i) {
      check(lc[i], ls.size());
      check(rc[i], rs.size());
      if (ls[lc[i]] != rs[rc[i]]) fail(in, Err::HloInvalid, "contracting dimensions of different sizes");
      le[lc[i]] = re[rc[i]] = next++;
    }
    for (char& ch : le)
      if (ch == '?') out += (ch = next++);
    for (char& ch : re)
      if (ch == '?') out += (ch = next++);
    OpAttrs a;
    a.equation = le + "," + re + "->" + out;
    // The output's shape must be batch, lhs free, rhs free.
    std::vector<int64_t> expect;
    for (char ch : out) {
      size_t p = le.find(ch);
      expect.push_back(p != std::string::npos ? ls[p] : rs[re.find(ch)]);
    }
    if (expect != in.shape.dims) fail(in, Err::HloInvalid, "its operands' shapes give another result shape than " + in.shape.text());
    return make(in, OpKind::MatMul, {l, r}, a);
  }

  TensorId convolution(const Instruction& in, const std::vector<Value>& vals) {
    need_operands(in, 2);
    no_kernel(in, "convolution");
    const std::string& file = m_m.file;
    TensorId x = arr(in, vals, 0), w = arr(in, vals, 1);
    const auto &xs = shape_of(x), &ws = shape_of(w);
    ConvLabels l = conv_labels(in, file);
    const auto& os = in.shape.dims;
    if (static_cast<size_t>(l.in_spatial.size() + 2) != xs.size() || ws.size() != xs.size() || os.size() != xs.size())
      fail(in, Err::HloInvalid, "dim_labels do not match the operands' ranks");
    const int64_t fg = integer(in, "feature_group_count", file).value_or(1), bg = integer(in, "batch_group_count", file).value_or(1);
    if (fg < 1 || bg < 1) fail(in, Err::HloInvalid, "group counts below 1");
    int64_t positions = 1, window = 1;
    for (int64_t d : l.out_spatial) positions *= os[d];
    for (int64_t d : l.k_spatial) window *= ws[d];
    OpAttrs a;
    const int64_t groups = fg * bg;
    a.dims = {groups, os[l.out_batch] * positions, ws[l.k_in] * window, std::max<int64_t>(1, ws[l.k_out] / groups)};
    return make(in, OpKind::Convolution, {x, w}, a);
  }

  TensorId transpose(const Computation& c, const Instruction& in, const std::vector<Value>& vals) {
    need_operands(in, 1);
    OpAttrs a;
    a.dims = required_ints(in, "dimensions", m_m.file);
    TensorId x = arr(in, vals, 0);
    const auto& xs = shape_of(x);
    std::vector<int64_t> sorted = a.dims;
    std::sort(sorted.begin(), sorted.end());
    bool perm = sorted.size() == xs.size();
    for (size_t i = 0; perm && i < sorted.size(); ++i) perm = sorted[i] == static_cast<int64_t>(i) && xs[a.dims[i]] == in.shape.dims[i];
    if (!perm) fail(in, Err::HloInvalid, "dimensions={...} is not a permutation that gives the output's shape");
    // A bitcast when the output's physical order, read through the permutation, is the operand's.
    const Shape& from = c.instructions[in.operands[0]].shape;
    std::vector<int64_t> po = physical(in.shape), pi = physical(from);
    for (int64_t& d : po) d = a.dims[d];
    return make(in, po == pi ? OpKind::Bitcast : OpKind::Transpose, {x}, a);
  }

  // An optimization barrier: its results are its operands, available only once every operand is computed (XLA's
  // semantics: nothing that reads a result runs before all of the barrier's operands are evaluated). JAX's
  // re-materialization puts the backward pass's cotangent into the barrier beside the saved residuals, so that the
  // forward's recomputation runs in the backward pass rather than where its inputs are first ready. Each array
  // operand comes out as a view (no buffer of its own, no work) ordered after the producers of all of them; a
  // pending cheap producer passes through (its readers recompute it).
  Value barrier(const Instruction& in, const std::vector<Value>& vals) {
    if (in.operands.empty()) return Value{};
    std::vector<TensorId> ts;
    std::function<void(const Value&)> collect = [&](const Value& v) {
      if (v.tuple)
        for (const Value& e : v.elems) collect(e);
      else if (v.t >= 0)
        ts.push_back(v.t);
    };
    collect(vals.at(0));
    std::set<OpId> after;
    for (TensorId t : ts)
      if (const OpId p = m_out.graph.producer(t); p >= 0) after.insert(p);
    size_t k = 0;
    std::function<Value(const Value&)> gate = [&](const Value& v) -> Value {
      if (v.tuple) {
        Value out = v;
        for (Value& e : out.elems) e = gate(e);
        return out;
      }
      if (v.t < 0) return v;
      const TensorInfo& src = m_out.graph.tensor(v.t);
      std::string index = ".";
      index += std::to_string(k++);
      TensorInfo t;
      t.name = m_prefix + in.name + m_copy_suffix + index;
      t.shape = src.shape;
      t.dtype = src.dtype;
      const TensorId out = m_out.graph.add_tensor(t);
      const OpId view = add(in, OpKind::Bitcast, {v.t}, {out}, {}, index);
      for (OpId p : after) m_out.graph.add_control(p, view);
      return value_of(out);
    };
    return gate(vals[0]);
  }

  // A copy: nothing to move when the layouts agree (a view), else a transpose to the new layout.
  Value copy(const Instruction& in, const std::vector<Value>& vals, const Shape& shape) {
    need_operands(in, 1);
    const Value& v = vals[0];
    if (v.tuple) return v;  // a tuple copy copies its buffers' pointers
    TensorId x = arr(in, vals, 0);
    const Computation& c = m_m.computations[m_cur_comp];
    const Shape& from = c.instructions[in.operands[0]].shape;
    OpAttrs a;
    for (size_t i = 0; i < shape.dims.size(); ++i) a.dims.push_back(static_cast<int64_t>(i));
    TensorId out = tensor(m_prefix + in.name, shape);
    add(in, physical(from) == physical(shape) ? OpKind::Bitcast : OpKind::Transpose, {x}, {out}, a);
    return value_of(out);
  }

  Value reduce(const Instruction& in, const std::vector<Value>& vals) {
    const std::string& file = m_m.file;
    std::vector<int32_t> cs = called(in);
    if (cs.size() != 1) fail(in, Err::HloInvalid, "a reduce names its computation (to_apply=)");
    OpAttrs a;
    a.dims = required_ints(in, "dimensions", file);
    a.fn = combiner(m_m.computations[cs[0]]);
    const size_t n = in.operands.size() / 2;
    if (n == 0 || in.operands.size() % 2 != 0) fail(in, Err::HloInvalid, "a reduce takes inputs and as many initial values");
    std::vector<TensorId> xs;
    for (size_t k = 0; k < in.operands.size(); ++k) xs.push_back(arr(in, vals, k));
    for (int64_t d : a.dims)
      if (d < 0 || d >= static_cast<int64_t>(shape_of(xs[0]).size())) fail(in, Err::HloInvalid, "a reduced dimension out of range");
    if (n > 1) a.fn = ArrayFn::Other;
    if (a.fn == ArrayFn::Other) no_kernel(in, "a reduction by computation '" + m_m.computations[cs[0]].name + "'");
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    add(in, OpKind::Reduce, xs, outs, a);
    return out;
  }

  Value fusion(const Instruction& in, const std::vector<Value>& vals) {
    std::vector<int32_t> cs = called(in);
    if (cs.size() != 1) fail(in, Err::HloInvalid, "a fusion names its computation (calls=)");
    std::vector<Value> a;
    for (const Value& o : vals) a.push_back(o);
    const bool outer = m_fusion == nullptr;
    std::vector<OpId> members;
    if (outer) {
      m_fusion_origin = origin(m_cur_comp, m_cur_idx, in);
      m_fusion = &members;
    }
    Value v = emit(cs[0], a, m_prefix + in.name + "/", -1);
    if (outer) {
      m_fusion = nullptr;
      if (!members.empty()) m_out.fusions.push_back(members);
    }
    return v;
  }

  // ---- control flow ----

  // The constant a value was made from, if it was (through converts and copies).
  std::optional<double> constant_of(const Computation& c, int32_t idx, const std::vector<Value>* vals) const {
    const Instruction& in = c.instructions[idx];
    if (in.opcode == "constant") {
      std::vector<float> v;
      if (literal_values(in.literal, v) && v.size() == 1) return v[0];
      return std::nullopt;
    }
    if ((in.opcode == "convert" || in.opcode == "copy" || in.opcode == "reshape") && in.operands.size() == 1)
      return constant_of(c, in.operands[0], vals);
    return std::nullopt;
  }

  // The tuple index a value of the condition or body reads from its parameter (through converts).
  int64_t counter_index(const Computation& c, int32_t idx) const {
    const Instruction& in = c.instructions[idx];
    if (in.opcode == "get-tuple-element" && in.operands.size() == 1 &&
        c.instructions[in.operands[0]].opcode == "parameter")
      return integer(in, "index", m_m.file).value_or(-1);
    if ((in.opcode == "convert" || in.opcode == "copy") && in.operands.size() == 1) return counter_index(c, in.operands[0]);
    return -1;
  }

  int64_t trip_count(const Instruction& in, const Value& init, int32_t cond, int32_t body) {
    if (auto it = m_o.trip_counts.find(in.name); it != m_o.trip_counts.end()) return it->second;
    if (auto k = known_trip_count(in)) return *k;
    const Computation& c = m_m.computations[cond];
    const Instruction& root = c.instructions[c.root];
    const std::string why = "; give it in workload.trip_counts: {" + in.name + ": N}";
    if (root.opcode != "compare" || root.operands.size() != 2)
      fail(in, Err::HloTripCount, "has no known_trip_count and its condition '" + c.name +
                                      "' is not a comparison of the counter with a constant" + why);
    std::string dir = word(root, "direction").value_or("");
    std::optional<double> limit = constant_of(c, root.operands[1], nullptr);
    int64_t k = counter_index(c, root.operands[0]);
    if (!limit) {  // constant < counter
      limit = constant_of(c, root.operands[0], nullptr);
      k = counter_index(c, root.operands[1]);
      dir = dir == "LT" ? "GT" : dir == "LE" ? "GE" : dir == "GT" ? "LT" : dir == "GE" ? "LE" : dir;
    }
    if (!limit || k < 0)
      fail(in, Err::HloTripCount, "has no known_trip_count and its condition '" + c.name +
                                      "' does not compare a loop counter with a constant" + why);
    // The counter's start (a constant passed in) and step (the body adds a constant to it).
    double start = 0, step = 1;
    bool guessed = true;
    if (init.tuple && k < static_cast<int64_t>(init.elems.size())) {
      if (auto v = scalar_of(init.elems[k])) {
        start = *v;
        guessed = false;
      }
    }
    const Computation& b = m_m.computations[body];
    const Instruction& broot = b.instructions[b.root];
    if (broot.opcode == "tuple" && k < static_cast<int64_t>(broot.operands.size())) {
      const Instruction& upd = b.instructions[broot.operands[k]];
      if ((upd.opcode == "add" || upd.opcode == "subtract") && upd.operands.size() == 2) {
        for (int s = 0; s < 2; ++s) {
          if (counter_index(b, upd.operands[s]) != k) continue;
          if (auto v = constant_of(b, upd.operands[1 - s], nullptr)) step = upd.opcode == "add" ? *v : -*v;
        }
      }
    }
    double n = 0;
    if (step == 0) fail(in, Err::HloTripCount, "has a counter that never changes" + why);
    if (dir == "LT") n = std::ceil((*limit - start) / step);
    else if (dir == "LE") n = std::floor((*limit - start) / step) + 1;
    else if (dir == "GT") n = std::ceil((start - *limit) / -step);
    else if (dir == "GE") n = std::floor((start - *limit) / -step) + 1;
    else if (dir == "NE") n = (*limit - start) / step;
    else fail(in, Err::HloTripCount, "has a condition with direction " + dir + why);
    if (!std::isfinite(n) || n < 0 || n > 1e7) fail(in, Err::HloTripCount, "would run " + std::to_string(n) + " times" + why);
    if (guessed)
      m_out.notes.push_back("while loop '" + in.name + "': its counter's start is not a constant; taken as 0 (" +
                            std::to_string(static_cast<int64_t>(n)) + " iterations; workload.trip_counts sets it)");
    return static_cast<int64_t>(n);
  }

  Value while_loop(const Instruction& in, const std::vector<Value>& vals) {
    need_operands(in, 1);
    std::string cond_name = required_word(in, "condition", m_m.file), body_name = required_word(in, "body", m_m.file);
    int32_t cond = m_m.find(cond_name), body = m_m.find(body_name);
    if (cond < 0 || body < 0) fail(in, Err::HloInvalid, "names a condition or body the module does not define");
    Value v = vals[0];
    const int64_t n = trip_count(in, v, cond, body);
    const std::string base = m_prefix + in.name;
    for (int64_t i = 0; i < n; ++i) {
      const size_t before = m_out.graph.num_ops();
      v = emit(body, {v}, base + "[" + std::to_string(i) + "]/", -1);
      const double per_iteration = static_cast<double>(m_out.graph.num_ops() - before);
      if (static_cast<double>(m_out.graph.num_ops()) + per_iteration * static_cast<double>(n - i - 1) > kMaxOps)
        fail(in, Err::HloUnsupported, "unrolled " + std::to_string(n) + " times its body would make more than " +
                                          std::to_string(static_cast<int64_t>(kMaxOps)) +
                                          " podsim ops; give it fewer iterations in workload.trip_counts");
    }
    return v;
  }

  Value conditional(const Instruction& in, const std::vector<Value>& vals) {
    std::vector<int32_t> branches;
    if (in.attr("branch_computations")) {
      for (int32_t c : called(in)) branches.push_back(c);
    } else {
      for (const char* k : {"true_computation", "false_computation"}) {
        auto w = word(in, k);
        if (!w) fail(in, Err::HloInvalid, std::string("has no ") + k);
        int32_t c = m_m.find(*w);
        if (c < 0) fail(in, Err::HloInvalid, "names computation '" + *w + "', which the module does not define");
        branches.push_back(c);
      }
    }
    if (in.operands.size() != branches.size() + 1) fail(in, Err::HloInvalid, "takes a selector and one operand per branch");
    int64_t b = 0;
    if (auto it = m_o.branches.find(in.name); it != m_o.branches.end()) {
      b = it->second;
      if (b < 0 || b >= static_cast<int64_t>(branches.size()))
        fail(in, Err::HloUnsupported, "workload.branches picks branch " + std::to_string(b) + " of " +
                                          std::to_string(branches.size()));
    } else if (m_noted_branch.insert(in.name).second) {
      m_out.notes.push_back("conditional '" + in.name + "' runs branch 0 (" + m_m.computations[branches[0]].name +
                            ") of " + std::to_string(branches.size()) + "; workload.branches picks another");
    }
    return emit(branches[b], {vals[b + 1]}, m_prefix + in.name + "/", -1);
  }
  std::set<std::string> m_noted_branch;

  // ---- collectives ----

  Value collective(const Instruction& in, const std::vector<Value>& vals) {
    std::string op = in.opcode;
    const bool async = op.size() > 6 && op.compare(op.size() - 6, 6, "-start") == 0;
    if (async) op.resize(op.size() - 6);
    if (op == "ragged-all-to-all") fail(in, Err::HloUnsupported, "ragged-all-to-all (variable sizes per peer)");
    const Attribute* ga = in.attr(op == "collective-permute" ? "source_target_pairs" : "replica_groups");
    Groups groups = groups_of(in);
    const bool trivial = groups.empty() ? m_out.devices == 1 : groups[0].size() == 1;
    std::vector<std::string> axes = trivial ? std::vector<std::string>{} : axis_names(groups, ga ? ga->value : "{}");
    if (!trivial && axes.empty()) fail(in, Err::Internal, "its groups map to no mesh axis");
    // The operands (several for a combined all-reduce) and where the results go.
    std::vector<TensorId> xs;
    for (const Value& o : vals)
      if (!o.tuple && (o.t >= 0 || o.pending >= 0)) xs.push_back(need(o));
    if (xs.empty()) fail(in, Err::HloInvalid, "a collective without array operands");
    const Shape* result = &in.shape;
    if (async && in.shape.is_tuple() && (op == "all-gather" || op == "collective-permute") && in.shape.tuple.size() >= 2)
      result = &in.shape.tuple[1];  // (operand, result, ...)
    Value out = array_value(m_prefix + in.name, *result);
    std::vector<TensorId> outs;
    leaves(out, outs);
    if (outs.size() != xs.size()) fail(in, Err::HloInvalid, "as many results as operands");
    OpAttrs a;
    a.axes = axes;
    OpKind kind = OpKind::AllReduce;
    const std::string& file = m_m.file;
    if (op == "all-reduce" || op == "reduce-scatter") {
      std::vector<int32_t> cs = called(in);
      ArrayFn f = cs.size() == 1 ? combiner(m_m.computations[cs[0]]) : ArrayFn::Other;
      if (f == ArrayFn::Maximum) a.reduce_max = true;
      else if (f != ArrayFn::Add) {
        no_kernel(in, "an all-reduce combining by '" + std::string(array_fn_name(f)) + "'");
        m_out.notes.push_back("collective '" + in.name + "' combines by " + array_fn_name(f) +
                              "; podsim times it as a sum");
      }
      kind = op == "all-reduce" ? OpKind::AllReduce : OpKind::ReduceScatter;
      if (kind == OpKind::ReduceScatter) a.dim = required_ints(in, "dimensions", file).at(0);
    } else if (op == "all-gather") {
      kind = OpKind::AllGather;
      a.dim = required_ints(in, "dimensions", file).at(0);
    } else if (op == "all-to-all") {
      kind = OpKind::AllToAll;
      auto d = int_list(in, "dimensions", file);
      if (!d || d->size() != 1) fail(in, Err::HloUnsupported, "an all-to-all of several operands (the tuple form)");
      a.dim = a.dim2 = d->at(0);
    } else if (op == "collective-permute") {
      kind = OpKind::CollectivePermute;
      a.shift = 1;
      bool cycle = false;
      auto pairs = source_target_pairs(in, file);
      for (auto [s, t] : pairs) cycle = cycle || (!groups.empty() && t == groups[0].front() && s == groups[0].back());
      if (!trivial && !cycle) no_kernel(in, "a collective-permute along an open chain");
    } else if (op == "collective-broadcast") {
      kind = OpKind::Broadcast;
      a.root = 0;
    }
    // A chip's own devices (TPU v2/v3) exchange without ICI: their axis leaves the group. What stays is a chip-level
    // collective moving both devices' data, except a reduction over the chip's devices, which the chip sums first.
    bool spans_chip = false;
    if (!trivial && !m_core_axis.empty()) {
      auto it = std::find(a.axes.begin(), a.axes.end(), m_core_axis);
      if (it != a.axes.end()) {
        spans_chip = true;
        a.axes.erase(it);
      }
      const bool reduces = kind == OpKind::AllReduce || kind == OpKind::ReduceScatter;
      a.chip_copies = spans_chip && reduces ? 1 : m_o.devices_per_chip;
    }
    if (!trivial && spans_chip && a.axes.empty()) {  // within the chip: through HBM
      for (size_t i = 0; i < xs.size(); ++i) {
        OpAttrs c;
        c.bytes = m_out.graph.tensor(xs[i]).bytes() + m_out.graph.tensor(outs[i]).bytes();
        add(in, OpKind::CustomCost, {xs[i]}, {outs[i]}, c, xs.size() > 1 ? "." + std::to_string(i) : "");
      }
    } else if (trivial) {  // a group of one device: its own value
      for (size_t i = 0; i < xs.size(); ++i) {
        OpAttrs c;
        for (size_t d = 0; d < shape_of(outs[i]).size(); ++d) c.dims.push_back(static_cast<int64_t>(d));
        add(in, m_out.graph.tensor(xs[i]).elements() == m_out.graph.tensor(outs[i]).elements() ? OpKind::Bitcast : OpKind::Transpose,
            {xs[i]}, {outs[i]}, c, xs.size() > 1 ? "." + std::to_string(i) : "");
      }
    } else if (kind == OpKind::AllReduce) {
      add(in, kind, xs, outs, a);
    } else {
      for (size_t i = 0; i < xs.size(); ++i) add(in, kind, {xs[i]}, {outs[i]}, a, xs.size() > 1 ? "." + std::to_string(i) : "");
    }
    if (async && in.shape.is_tuple() && (op == "all-gather" || op == "collective-permute")) {
      Value v;
      v.tuple = true;
      v.elems.push_back(vals[0]);
      v.elems.push_back(out);
      for (size_t i = 2; i < in.shape.tuple.size(); ++i) v.elems.push_back(Value{});
      return v;
    }
    return out;
  }

  // ---- custom calls ----

  Value custom_call(const Instruction& in, const std::vector<Value>& vals) {
    const std::string target = word(in, "custom_call_target").value_or("");
    std::vector<TensorId> xs;
    for (const Value& o : vals) need_leaves(o, xs);
    // Markers of the SPMD partitioner and layout: the operand itself.
    static const std::set<std::string> identity = {"Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape",
                                                   "LayoutConstraint", "annotate_device_placement", "MoveToHost",
                                                   "MoveToDevice", "X64Combine", "AllocateBuffer"};
    if (identity.count(target)) {
      if (vals.size() == 1 && !vals[0].tuple && (vals[0].t >= 0 || vals[0].pending >= 0) && in.shape.is_array()) {
        const TensorId x = need(vals[0]);
        if (m_out.graph.tensor(x).elements() == in.shape.elements()) {
          if (shape_of(x) == in.shape.dims) return value_of(x);
          return value_of(make(in, OpKind::Bitcast, {x}));
        }
      }
      if (target == "AllocateBuffer") return array_value(m_prefix + in.name, in.shape);
      fail(in, Err::HloUnsupported, "custom call '" + target + "' changes its operand's shape: the module is not "
                                                               "SPMD-partitioned (podsim runs per-device modules)");
    }
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    std::string lower = target;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    const bool attention = lower.find("fused_attn") != std::string::npos || lower.find("fmha") != std::string::npos ||
                           lower.find("flash") != std::string::npos ||
                           (lower == "tpu_custom_call" && in.attr("backend_config") &&
                            in.attr("backend_config")->value.find("flash") != std::string::npos);
    if (auto it = m_o.custom_calls.find(target); it != m_o.custom_calls.end()) {
      OpAttrs a;
      a.flops = it->second.flops;
      a.bytes = it->second.bytes;
      a.pattern = it->second.mxu ? "mxu" : "vpu";
      no_kernel(in, "custom call '" + target + "'");
      add(in, OpKind::CustomCost, xs, outs, a);
      return out;
    }
    if (attention) {
      no_kernel(in, "custom call '" + target + "' (fused attention)");
      const bool backward = lower.find("backward") != std::string::npos || lower.find("bwd") != std::string::npos;
      if (xs.size() < 3 || shape_of(xs[0]).size() != 4 || shape_of(xs[1]).size() != 4)
        fail(in, Err::HloUnsupported, "fused attention '" + target + "' whose first operands are not q, k, v of shape "
                                                                     "[batch, sequence, heads, head_dim]");
      OpAttrs a;
      const double mask = config_number(in, "mask_type").value_or(0);
      // Transformer Engine's mask_type: 0 none, 1 padding, 2 causal, 3 padding + causal, 4 and 5 bottom-right causal.
      a.causal = mask >= 2 || config_number(in, "is_causal").value_or(0) > 0;
      add(in, backward ? OpKind::FusedAttentionGrad : OpKind::FusedAttention, xs, outs, a);
      return out;
    }
    if (lower.find("cublas") != std::string::npos && lower.find("gemm") != std::string::npos) return gemm(in, xs, out, outs);
    if (lower.find("cublas") != std::string::npos && lower.find("matmul") != std::string::npos) return gemm(in, xs, out, outs);
    if (target == "TopK" || lower == "topk") {
      no_kernel(in, "custom call TopK");
      OpAttrs a;
      a.dims = {static_cast<int64_t>(shape_of(xs.at(0)).size()) - 1};
      add(in, OpKind::Sort, {xs.at(0)}, outs, a);
      return out;
    }
    fail(in, Err::HloCustomCall, "custom call '" + target + "' is no kernel podsim knows; give its cost in "
                                 "workload.custom_calls: {\"" + target + "\": {flops: F, bytes: B}}");
  }

  // A GEMM library call: its dot dimensions in backend_config ("lhs_contracting_dimensions":["1"], ...).
  Value gemm(const Instruction& in, const std::vector<TensorId>& xs, const Value& out, const std::vector<TensorId>& outs) {
    no_kernel(in, "a GEMM custom call");
    if (xs.size() < 2 || outs.empty()) fail(in, Err::HloUnsupported, "a GEMM call without two operands and a result");
    const std::string cfg = in.attr("backend_config") ? in.attr("backend_config")->value : "";
    auto dims = [&](const std::string& key) {
      std::vector<int64_t> v;
      size_t k = cfg.find(key);
      if (k == std::string::npos) return v;
      size_t b = cfg.find('[', k), e = cfg.find(']', k);
      if (b == std::string::npos || e == std::string::npos || e < b) return v;
      std::string s = cfg.substr(b + 1, e - b - 1);
      for (char& ch : s)
        if (!std::isdigit(static_cast<unsigned char>(ch))) ch = ' ';
      size_t i = 0;
      while (i < s.size()) {
        while (i < s.size() && s[i] == ' ') ++i;
        size_t j = i;
        while (j < s.size() && s[j] != ' ') ++j;
        if (j > i) v.push_back(std::stoll(s.substr(i, j - i)));
        i = j;
      }
      return v;
    };
    const auto lc = dims("lhs_contracting_dimensions"), rc = dims("rhs_contracting_dimensions");
    const auto lb = dims("lhs_batch_dimensions"), rb = dims("rhs_batch_dimensions");
    const auto &ls = shape_of(xs[0]), &rs = shape_of(xs[1]);
    double batch = 1, k = 1, mm = 1, nn = 1;
    for (int64_t d : lb) batch *= static_cast<double>(ls.at(d));
    for (int64_t d : lc) k *= static_cast<double>(ls.at(d));
    for (size_t d = 0; d < ls.size(); ++d)
      if (std::find(lb.begin(), lb.end(), d) == lb.end() && std::find(lc.begin(), lc.end(), d) == lc.end())
        mm *= static_cast<double>(ls[d]);
    for (size_t d = 0; d < rs.size(); ++d)
      if (std::find(rb.begin(), rb.end(), d) == rb.end() && std::find(rc.begin(), rc.end(), d) == rc.end())
        nn *= static_cast<double>(rs[d]);
    OpAttrs a;
    a.flops = 2 * batch * mm * k * nn;
    a.bytes = m_out.graph.tensor(xs[0]).bytes() + m_out.graph.tensor(xs[1]).bytes() + m_out.graph.tensor(outs[0]).bytes();
    a.pattern = "mxu";
    add(in, OpKind::CustomCost, {xs[0], xs[1]}, outs, a);
    return out;
  }
};

}  // namespace

Imported import_module(const Module& m, const ImportOptions& opts) { return Importer(m, opts).run(); }

}  // namespace podsim::hlo
