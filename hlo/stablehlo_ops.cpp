// StableHLO operations as HLO instructions (hlo/stablehlo_lower.h): each op's HLO opcode, its attributes written in
// HLO's text syntax (dimensions={1}, window={size=3x3 stride=2x2}, dim_labels=b01f_01io->b01f, ...), and its
// results' layouts. docs/hlo.md ("StableHLO") lists the operations read.
#include <cmath>
#include <cstring>
#include <set>

#include "base/text.h"
#include "hlo/stablehlo_lower.h"

namespace podsim::hlo::mlir {
namespace {

// Ops that are the HLO opcode of the same name with '_' as '-'.
const std::set<std::string>& elementwise_ops() {
  static const std::set<std::string> k = {
      "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "complex", "convert", "cosine", "count_leading_zeros",
      "divide", "exponential", "exponential_minus_one", "floor", "imag", "is_finite", "log", "log_plus_one",
      "logistic", "maximum", "minimum", "multiply", "negate", "not", "or", "popcnt", "power", "real", "remainder",
      "round_nearest_afz", "round_nearest_even", "rsqrt", "select", "shift_left", "shift_right_arithmetic",
      "shift_right_logical", "sign", "sine", "sqrt", "subtract", "tan", "tanh", "xor", "bitcast_convert",
      "reduce_precision", "compare"};
  return k;
}

// Ops copied as the HLO opcode of the same name (with '-'), their operands whole or manual.
const std::set<std::string>& plain_ops() {
  static const std::set<std::string> k = {"slice", "pad", "concatenate", "dynamic_slice", "dynamic_update_slice",
                                          "gather", "scatter", "sort", "reduce_window", "select_and_scatter",
                                          "iota", "rng", "rng_bit_generator", "partition_id", "replica_id",
                                          "after_all", "create_token", "get_dimension_size", "dot", "tuple",
                                          "get_tuple_element", "optimization_barrier"};
  return k;
}

std::string dashed(std::string s) {
  for (char& c : s)
    if (c == '_') c = '-';
  return s;
}

// The text inside the first `<...>` after `dense` (or the whole text).
std::string dense_body(const std::string& v) {
  const size_t b = v.find('<');
  if (b == std::string::npos) return v;
  int depth = 0;
  for (size_t i = b; i < v.size(); ++i) {
    if (v[i] == '<') ++depth;
    else if (v[i] == '>' && --depth == 0) return v.substr(b + 1, i - b - 1);
    else if (v[i] == '"') i = v.find('"', i + 1);
  }
  return v.substr(b + 1);
}

std::string number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

// Raw little-endian bytes (`0x...`) as values of element type `t`; "" when podsim does not decode the type.
std::string hex_values(const std::string& hex, Type t) {
  const int bits = t == Type::Pred ? 8 : type_bits(t);
  if (bits < 8 || bits % 8 != 0 || t == Type::C64 || t == Type::C128) return "";
  const size_t bytes = static_cast<size_t>(bits / 8);
  std::vector<uint8_t> raw;
  for (size_t i = 2; i + 1 < hex.size(); i += 2) raw.push_back(static_cast<uint8_t>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  std::string out = "{";
  for (size_t k = 0; k + bytes <= raw.size(); k += bytes) {
    uint64_t u = 0;
    for (size_t j = 0; j < bytes; ++j) u |= static_cast<uint64_t>(raw[k + j]) << (8 * j);
    double v = 0;
    if (t == Type::F32) {
      float f;
      uint32_t w = static_cast<uint32_t>(u);
      std::memcpy(&f, &w, 4);
      v = f;
    } else if (t == Type::BF16) {
      float f;
      uint32_t w = static_cast<uint32_t>(u) << 16;
      std::memcpy(&f, &w, 4);
      v = f;
    } else if (t == Type::F64) {
      std::memcpy(&v, &u, 8);
    } else if (t == Type::F16) {
      const int e = static_cast<int>((u >> 10) & 0x1f), m = static_cast<int>(u & 0x3ff);
      const double sign = (u >> 15) ? -1 : 1;
      v = e == 0 ? sign * std::ldexp(m, -24) : e == 31 ? (m ? NAN : sign * INFINITY) : sign * std::ldexp(m + 1024, e - 25);
    } else if (is_float(t)) {
      return "";  // fp8: not decoded
    } else if (t == Type::U8 || t == Type::U16 || t == Type::U32 || t == Type::U64 || t == Type::Pred) {
      v = static_cast<double>(u);
    } else {
      const int sh = 64 - bits;
      v = static_cast<double>(static_cast<int64_t>(u << sh) >> sh);
    }
    if (k) out += ", ";
    out += number(v);
  }
  return out + "}";
}

}  // namespace

const Attr* Lowerer::attr(const Op& op, const char* a, const char* b) const {
  auto it = op.attrs.find(a);
  if (it != op.attrs.end()) return &it->second;
  if (b && (it = op.attrs.find(b)) != op.attrs.end()) return &it->second;
  return nullptr;
}

std::vector<int64_t> Lowerer::ints(const Op& op, const char* a, const char* b) const {
  const Attr* x = attr(op, a, b);
  return x ? int_array(m_l, *x) : std::vector<int64_t>{};
}

namespace {

std::string hint(const Op& op, const std::string& opcode, const Lines& l) {
  if (op.results.empty()) return opcode + ".l" + std::to_string(l.pos(op.at).line);
  std::string r = op.results[0].substr(1);
  return opcode + "." + r.substr(0, r.find('#'));
}

Layout plain_layout(const std::vector<Val>& vals) {
  Layout l;
  for (const Val& v : vals)
    if (v.lay.kind == Layout::Kind::Manual) l.kind = Layout::Kind::Manual;
  return l;
}

}  // namespace

std::vector<Val> Lowerer::op(Build& b, const Op& op) {
  const std::string& n = op.name;
  const size_t dot = n.find('.');
  const std::string dialect = dot == std::string::npos ? "" : n.substr(0, dot);
  const std::string base = dot == std::string::npos ? n : n.substr(dot + 1);
  std::vector<Val> vals = operands(b, op);
  if (n == "call" || n == "func.call") return call(b, op, vals);
  if (dialect == "sdy") {
    if (base == "manual_computation") return manual_computation(b, op, vals);
    if (base == "named_computation") return named_computation(b, op, vals);
    if (base == "constant") return constant(b, op);
    if (base == "sharding_constraint" || base == "reshard") {
      const std::string text = op.groups.empty() ? (attr(op, "sharding") ? attr(op, "sharding")->value : "") : op.groups[0].value;
      const Layout want = sdy_layout(text, op.at);
      Val v = vals.at(0);
      if (v.lay.same(want)) return {v};
      if (!v.lay.split() && want.split()) {
        v.idx = localize(b, v, want, op);
        v.lay = want;
        return {v};
      }
      fail(op, Err::HloUnsupported, "changes a value's sharding from " + v.lay.text() + " to " + want.text() +
                                        ": podsim does not reshard; give the per-device HLO");
    }
    if (base == "propagation_barrier") return {vals.at(0)};
    if (base == "sharding_group") return {};
  }
  if (dialect == "chlo") return chlo(b, op, vals);
  const std::set<std::string> known_dialects = {"stablehlo", "mhlo"};
  const bool ours = known_dialects.count(dialect) > 0;
  if (ours && elementwise_ops().count(base)) return simple(b, op, base, vals);
  if (ours && base == "constant") return constant(b, op);
  if (ours && base == "reduce") return reduce(b, op, vals);
  if (ours && base == "dot_general") return dot_general(b, op, vals);
  if (ours && base == "convolution") return convolution(b, op, vals);
  if (ours && base == "custom_call") return custom_call(b, op, vals);
  if (ours && base == "while") return while_loop(b, op, vals);
  if (ours && (base == "case" || base == "if")) return conditional(b, op, vals);
  if (ours && (base == "uniform_quantize" || base == "uniform_dequantize")) return quantization(b, op, vals);
  if (ours && base == "composite") return call(b, op, vals);
  if (ours && (base == "all_reduce" || base == "all_gather" || base == "reduce_scatter" || base == "all_to_all" ||
               base == "collective_permute" || base == "collective_broadcast"))
    return collective(b, op, base, vals);
  if (ours && (base == "broadcast_in_dim" || base == "broadcast" || base == "transpose" || base == "reshape"))
    return simple(b, op, base, vals);
  if (ours && plain_ops().count(base)) return simple(b, op, base, vals);
  // Unknown: the nearest operation podsim reads.
  std::vector<std::string> names;
  for (const auto* set : {&elementwise_ops(), &plain_ops()})
    for (const std::string& k : *set) names.push_back("stablehlo." + k);
  for (const char* k : {"constant", "reduce", "dot_general", "convolution", "custom_call", "while", "case", "if",
                        "uniform_quantize", "uniform_dequantize", "composite",
                        "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "collective_permute",
                        "collective_broadcast", "broadcast_in_dim", "broadcast", "transpose", "reshape"})
    names.push_back(std::string("stablehlo.") + k);
  std::string near;
  size_t best = SIZE_MAX;
  const std::string want = ours ? "stablehlo." + base : n;
  for (const std::string& k : names)
    if (size_t d = edit_distance(want, k); d < best) {
      best = d;
      near = k;
    }
  fail(op.at, Err::HloUnsupported,
       "operation '" + n + "' is not one podsim reads (the nearest it reads is '" + near +
           "'; docs/hlo.md, \"StableHLO\", lists them all)");
}

std::vector<Val> Lowerer::simple(Build& b, const Op& op, const std::string& opcode, std::vector<Val>& vals) {
  const std::string h = hint(op, dashed(opcode), m_l);
  Attrs a;
  Layout lay;
  if (opcode == "broadcast_in_dim" || opcode == "broadcast") {
    std::vector<int64_t> dims = ints(op, "dims", "broadcast_dimensions");
    const size_t rank = op.result_types.at(0).dims.size();
    if (opcode == "broadcast") {  // broadcast_sizes: new leading dimensions
      dims.clear();
      const size_t k = vals.at(0).global.dims.size();
      for (size_t i = 0; i < k; ++i) dims.push_back(static_cast<int64_t>(rank - k + i));
    }
    std::vector<int64_t> from(rank, -1);
    for (size_t i = 0; i < dims.size(); ++i)
      if (dims[i] >= 0 && dims[i] < static_cast<int64_t>(rank)) from[dims[i]] = static_cast<int64_t>(i);
    lay = vals.at(0).lay.split() ? remap(vals[0].lay, from, {}) : vals.at(0).lay;
    Val v;
    v.lay = lay;
    v.global = op.result_types.at(0);
    const Shape out = local(v.global, lay);
    // StableHLO broadcasts a dimension of size 1 to any size, HLO does not: such dimensions are reshaped away first.
    int32_t x = vals[0].idx;
    const Shape& xs = b.c.instructions[x].shape;
    if (dims.size() != xs.dims.size()) fail(op, Err::HloInvalid, "dims must name one result dimension per operand dimension");
    std::vector<int64_t> kept;
    Shape squeezed = xs;
    squeezed.dims.clear();
    for (size_t i = 0; i < dims.size(); ++i) {
      if (dims[i] < 0 || dims[i] >= static_cast<int64_t>(out.dims.size()))
        fail(op, Err::HloInvalid, "dims names a dimension the result does not have");
      if (xs.dims[i] == 1 && out.dims[dims[i]] != 1) continue;
      kept.push_back(dims[i]);
      squeezed.dims.push_back(xs.dims[i]);
    }
    if (kept.size() != dims.size()) x = emit(b, "reshape", squeezed, {x}, op.at, h + ".squeeze");
    a.push_back({"dimensions", int_set(kept)});
    v.idx = emit(b, "broadcast", out, {x}, op.at, h, a);
    if (!vals[0].lay.split()) {
      v.bcast_of = vals[0].idx;
      v.bcast_dims = dims;
    }
    return {v};
  }
  if (opcode == "transpose") {
    const std::vector<int64_t> perm = ints(op, "dims", "permutation");
    lay = vals.at(0).lay.split() ? remap(vals[0].lay, perm, {}) : vals.at(0).lay;
    a.push_back({"dimensions", int_set(perm)});
  } else if (opcode == "reshape") {
    lay = vals.at(0).lay;
    if (lay.split()) {  // only size-1 dimensions come or go: the others keep their tiles
      const Shape& from_s = vals[0].global;
      const Shape& to_s = op.result_types.at(0);
      std::vector<int64_t> from(to_s.dims.size(), -1);
      size_t i = 0;
      bool ok = true;
      for (size_t j = 0; j < to_s.dims.size() && ok; ++j) {
        if (to_s.dims[j] == 1) continue;
        while (i < from_s.dims.size() && from_s.dims[i] == 1) ++i;
        ok = i < from_s.dims.size() && from_s.dims[i] == to_s.dims[j];
        if (ok) from[j] = static_cast<int64_t>(i++);
      }
      Layout r = ok ? remap(lay, from, {}) : Layout{};
      if (!r.split())
        fail(op, Err::HloUnsupported, "reshapes a split value other than by adding or removing dimensions of size 1: "
                                      "podsim does not reshard; give the per-device HLO");
      lay = r;
    }
  } else if (elementwise_ops().count(opcode)) {
    lay = elementwise(b, op, vals);
    if (opcode == "compare") {
      std::string dir;
      for (const std::string& w : op.words)
        if (w == "EQ" || w == "NE" || w == "LT" || w == "LE" || w == "GT" || w == "GE") dir = w;
      if (const Attr* d = attr(op, "comparison_direction"))
        for (const char* k : {"EQ", "NE", "LT", "LE", "GT", "GE"})
          if (d->value.find(std::string(" ") + k) != std::string::npos || d->value == k) dir = k;
      if (dir.empty()) fail(op, Err::HloSyntax, "a compare without its direction (EQ, NE, LT, LE, GT, GE)");
      a.push_back({"direction", dir});
    }
  } else {
    need_whole(op, vals);
    lay = plain_layout(vals);
    if (opcode == "iota") {
      a.push_back({"iota_dimension", std::to_string(int_value(m_l, *[&] {
                     const Attr* d = attr(op, "dim", "iota_dimension");
                     if (!d) fail(op, Err::HloInvalid, "an iota without its dimension");
                     return d;
                   }()))});
    } else if (opcode == "concatenate") {
      const Attr* d = attr(op, "dim", "dimension");
      if (!d) fail(op, Err::HloInvalid, "a concatenate without its dimension");
      a.push_back({"dimensions", int_set({int_value(m_l, *d)})});
    } else if (opcode == "slice") {
      std::vector<int64_t> start, limit, stride;
      if (!op.groups.empty()) {  // [0:33, 0:79:2]
        std::string g = op.groups[0].value;
        size_t p = 0;
        while (p < g.size()) {
          size_t e = g.find(',', p);
          if (e == std::string::npos) e = g.size();
          std::vector<int64_t> v = ints_in(g.substr(p, e - p));
          if (v.size() < 2) fail(op.groups[0].at, Err::HloSyntax, "expected start:limit[:stride] in a slice");
          start.push_back(v[0]);
          limit.push_back(v[1]);
          stride.push_back(v.size() > 2 ? v[2] : 1);
          p = e + 1;
        }
      } else {
        start = ints(op, "start_indices");
        limit = ints(op, "limit_indices");
        stride = ints(op, "strides");
        if (stride.empty()) stride.assign(start.size(), 1);
      }
      if (start.size() != limit.size() || start.size() != stride.size()) fail(op, Err::HloInvalid, "slice bounds of different lengths");
      std::string s = "{";
      for (size_t d = 0; d < start.size(); ++d) {
        s += d ? ", [" : "[";
        s += std::to_string(start[d]) + ":" + std::to_string(limit[d]) + ":" + std::to_string(stride[d]) + "]";
      }
      a.push_back({"slice", s + "}"});
    } else if (opcode == "pad") {
      const std::vector<int64_t> lo = ints(op, "low", "edge_padding_low"), hi = ints(op, "high", "edge_padding_high");
      std::vector<int64_t> in = ints(op, "interior", "interior_padding");
      if (in.empty()) in.assign(lo.size(), 0);
      if (lo.size() != hi.size() || lo.size() != in.size()) fail(op, Err::HloInvalid, "padding of different lengths");
      std::string s;
      for (size_t d = 0; d < lo.size(); ++d) {
        if (d) s += "x";
        s += std::to_string(lo[d]) + "_" + std::to_string(hi[d]) + "_" + std::to_string(in[d]);
      }
      a.push_back({"padding", s});
    } else if (opcode == "dynamic_slice") {
      a.push_back({"dynamic_slice_sizes", int_set(ints(op, "sizes", "slice_sizes"))});
    } else if (opcode == "gather") {
      const Attr* d = attr(op, "dimension_numbers");
      const std::string t = d ? d->value : "";
      for (const char* k : {"offset_dims", "collapsed_slice_dims", "start_index_map", "operand_batching_dims",
                            "start_indices_batching_dims"})
        if (!field(t, k).empty()) a.push_back({k, int_set(ints_in(field(t, k)))});
      a.push_back({"index_vector_dim", field(t, "index_vector_dim").empty() ? "0" : field(t, "index_vector_dim")});
      a.push_back({"slice_sizes", int_set(ints(op, "slice_sizes"))});
    } else if (opcode == "scatter") {
      const Attr* d = attr(op, "scatter_dimension_numbers");
      const std::string t = d ? d->value : "";
      for (const char* k : {"update_window_dims", "inserted_window_dims", "scatter_dims_to_operand_dims",
                            "input_batching_dims", "scatter_indices_batching_dims"})
        if (!field(t, k).empty()) a.push_back({k, int_set(ints_in(field(t, k)))});
      a.push_back({"index_vector_dim", field(t, "index_vector_dim").empty() ? "0" : field(t, "index_vector_dim")});
      if (op.regions.empty()) fail(op, Err::HloInvalid, "a scatter without its update region");
      a.push_back({"to_apply", region(*op.regions[0], h + ".update", op.at, false, false)});
    } else if (opcode == "sort") {
      const Attr* d = attr(op, "dimension");
      a.push_back({"dimensions", int_set({d ? int_value(m_l, *d) : 0})});
      if (op.regions.empty()) fail(op, Err::HloInvalid, "a sort without its comparator");
      a.push_back({"to_apply", region(*op.regions[0], h + ".compare", op.at, false, false)});
    } else if (opcode == "reduce_window") {
      const size_t rank = vals.at(0).global.dims.size();
      a.push_back({"window", window(op, rank, ints(op, "window_dimensions"))});
      if (op.regions.empty()) fail(op, Err::HloInvalid, "a reduce_window without its region");
      a.push_back({"to_apply", region(*op.regions[0], h + ".apply", op.at, false, false)});
    } else if (opcode == "select_and_scatter") {
      const size_t rank = vals.at(0).global.dims.size();
      a.push_back({"window", window(op, rank, ints(op, "window_dimensions"))});
      if (op.regions.size() != 2) fail(op, Err::HloInvalid, "a select_and_scatter without its two regions");
      a.push_back({"select", region(*op.regions[0], h + ".select", op.at, false, false)});
      a.push_back({"scatter", region(*op.regions[1], h + ".scatter", op.at, false, false)});
    } else if (opcode == "get_tuple_element") {
      const Attr* d = attr(op, "index");
      const int64_t k = d ? int_value(m_l, *d) : op.groups.empty() ? -1 : ints_in(op.groups[0].value).at(0);
      if (k < 0) fail(op, Err::HloInvalid, "a get_tuple_element without its index");
      a.push_back({"index", std::to_string(k)});
    } else if (opcode == "dot") {
      const size_t r = vals.at(0).global.dims.size();
      a.push_back({"lhs_contracting_dims", int_set({static_cast<int64_t>(r > 0 ? r - 1 : 0)})});
      a.push_back({"rhs_contracting_dims", "{0}"});
    } else if (opcode == "get_dimension_size") {
      const Attr* d = attr(op, "dimension");
      a.push_back({"dimensions", std::to_string(d ? int_value(m_l, *d) : 0)});
    } else if (opcode == "optimization_barrier") {
      Shape t;
      t.type = Type::Tuple;
      std::vector<int32_t> xs;
      for (const Val& v : vals) {
        xs.push_back(v.idx);
        t.tuple.push_back(b.c.instructions[v.idx].shape);
      }
      const int32_t tup = emit(b, "tuple", t, xs, op.at, h + ".operands");
      const int32_t bar = emit(b, "opt-barrier", t, {tup}, op.at, h);
      std::vector<Val> out = untuple(b, bar, t, op.at, h);
      for (size_t i = 0; i < out.size(); ++i) {
        out[i].lay = vals[i].lay;
        out[i].global = vals[i].global;
      }
      return out;
    }
  }
  std::vector<int32_t> xs;
  for (const Val& v : vals) xs.push_back(v.idx);
  const size_t n = std::max<size_t>(1, op.results.size());
  if (op.result_types.size() != n) fail(op, Err::HloSyntax, "expected the type of each of its results");
  Shape shape;
  if (n == 1) {
    shape = local(op.result_types[0], lay);
  } else {
    shape.type = Type::Tuple;
    for (const Shape& s : op.result_types) shape.tuple.push_back(local(s, lay));
  }
  Val v;
  v.lay = lay;
  v.global = n == 1 ? op.result_types[0] : shape;
  v.idx = emit(b, dashed(opcode), shape, xs, op.at, h, a);
  if (n == 1 || op.results.empty()) return op.results.empty() ? std::vector<Val>{} : std::vector<Val>{v};
  std::vector<Val> out = untuple(b, v.idx, shape, op.at, h);
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].lay = lay;
    out[i].global = op.result_types[i];
  }
  return out;
}

std::vector<Val> Lowerer::constant(Build& b, const Op& op) {
  const Attr* value = attr(op, "value");
  if (!value) fail(op, Err::HloSyntax, "a constant without its value (dense<...>)");
  if (op.result_types.size() != 1) fail(op, Err::HloSyntax, "expected the constant's type");
  const Shape& s = op.result_types[0];
  const std::string& v = value->value;
  Val out;
  out.global = s;
  const std::string h = hint(op, "constant", m_l);
  if (v.rfind("dense_resource<", 0) == 0) {
    // Data the text leaves out (`dense_resource<__elided__>`: weights JAX's export elides): in the entry, a
    // parameter the step reads (numeric mode draws it from run.seed); elsewhere a constant without values.
    if (b.entry) {
      out.idx = emit(b, "parameter", s, {}, op.at, h, {}, std::to_string(b.c.parameters.size()));
      b.c.parameters.push_back(out.idx);
    } else {
      out.idx = emit(b, "constant", s, {}, op.at, h, {}, "");
    }
    return {out};
  }
  if (v.rfind("dense<", 0) != 0)
    fail(value->at, Err::HloUnsupported, "constant value '" + v.substr(0, 40) + "': podsim reads dense<...> and dense_resource<...>");
  std::string body = dense_body(v);
  std::string lit;
  if (body.rfind("\"0x", 0) == 0) {
    lit = s.elements() <= (int64_t{1} << 24) ? hex_values(body.substr(1, body.size() - 2), s.type) : "";
  } else if (body.rfind("0x", 0) == 0) {
    lit = hex_values(body, s.type);
  } else {
    for (char c : body) lit += c == '[' ? '{' : c == ']' ? '}' : c;
  }
  const bool one = lit.find(',') == std::string::npos;
  if (one) {
    std::string t = lit;
    t.erase(std::remove_if(t.begin(), t.end(), [](char c) { return c == '{' || c == '}' || c == ' '; }), t.end());
    lit = t;
    out.splat = t;
  }
  out.idx = emit(b, "constant", s, {}, op.at, h, {}, lit);
  return {out};
}

std::string Lowerer::window(const Op& op, size_t rank, const std::vector<int64_t>& size) const {
  auto dims = [&](const char* a, const char* b) {
    std::vector<int64_t> v = ints(op, a, b);
    if (v.empty()) v.assign(rank, 1);
    return v;
  };
  std::vector<int64_t> stride = dims("window_strides", nullptr), lhs = dims("base_dilations", nullptr),
                       rhs = dims("window_dilations", nullptr);
  std::vector<int64_t> pad;
  if (const Attr* p = attr(op, "padding")) pad = int_array(m_l, *p);
  if (pad.size() == 1) pad.assign(2 * rank, pad[0]);
  if (pad.empty()) pad.assign(2 * rank, 0);
  if (size.size() != rank || stride.size() != rank || pad.size() != 2 * rank)
    fail(op, Err::HloInvalid, "a window whose sizes, strides or padding do not have one entry per dimension");
  auto join = [](const std::vector<int64_t>& v) { return joined(v, "x"); };
  std::string p;
  for (size_t d = 0; d < rank; ++d) {
    if (d) p += "x";
    p += std::to_string(pad[2 * d]) + "_" + std::to_string(pad[2 * d + 1]);
  }
  return "{size=" + join(size) + " stride=" + join(stride) + " pad=" + p + " lhs_dilate=" + join(lhs) +
         " rhs_dilate=" + join(rhs) + "}";
}

}  // namespace podsim::hlo::mlir
