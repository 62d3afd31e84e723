// CHLO operations (the "client HLO" dialect JAX and PyTorch/XLA leave in lowered text) as the HLO ops XLA lowers
// them to (hlo/stablehlo_lower.h). The source is XLA's CHLO legalization (xla/mlir_hlo, chlo_legalize_to_hlo and
// its high-level variant, ChloLegalizeToHighLevelMhlo), which podsim follows op for op, so that the work and the
// numeric results are those of XLA's decomposition:
//  - `chlo.broadcast_<op>` (add, subtract, multiply, divide, maximum, minimum, power, remainder, atan2, and, or,
//    xor, shift_*, compare, select, complex): each operand broadcast to the result's shape (`broadcast_dimensions`,
//    else NumPy's alignment of trailing dimensions), then the StableHLO op;
//  - `chlo.erf`, `chlo.tan` and `chlo.top_k` as HLO's erf and tan and the TopK custom call: the high-level
//    legalization's mhlo.erf, mhlo.tan and mhlo.topk, one HLO instruction each (which XLA's TPU backend expands or
//    sorts). An erf is one elementwise op, fused as one, its work that of XLA's expansion (Eigen's float erf: x
//    clamped to [-4, 4], x P(x^2) / Q(x^2) by Horner's rule, clamped to [-1, 1]; workloads/ops/array.cpp). Written
//    out as chlo_legalize_to_hlo does (25 ops), podsim's fusion pass, which takes at most 16 ops per kernel, would
//    split it and write its intermediates to HBM, which XLA does not;
//  - `chlo.lgamma`, `chlo.digamma` and `chlo.erf_inv`: one elementwise op each, its work that of XLA's
//    decomposition (chlo_legalize_to_hlo: Lanczos' approximation with its reflection; Giles' polynomials), counted
//    in workloads/ops/special_math.h; written out, 60-80 ops, the fusion pass would split them as it would erf;
//  - `chlo.is_inf`, `is_pos_inf`, `is_neg_inf`: a comparison of |x|, x with infinity;
//  - `chlo.cosh`: e^(x + log 1/2) + e^(log 1/2 - x); `chlo.sinh`: e^(x + log 1/2) - e^(log 1/2 - x), and for
//    |x| < 1 (e + e / (e + 1)) / 2 with e = expm1(x), selected by |x| < 1 (materializeCosh/SinhApproximation);
//  - `chlo.constant_like` and `chlo.constant`: a constant.
// Other CHLO ops (polygamma, zeta, the Bessel functions, acos and the other inverse trigonometric and hyperbolic
// functions...) are an error at the op naming those read.
#include <cmath>
#include <set>

#include "hlo/stablehlo_lower.h"

namespace podsim::hlo::mlir {
namespace {

const std::set<std::string>& broadcast_ops() {
  static const std::set<std::string> k = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "power",
                                          "remainder", "atan2", "and", "or", "xor", "shift_left",
                                          "shift_right_arithmetic", "shift_right_logical", "compare", "select",
                                          "complex"};
  return k;
}

// The op's fields but its regions (an Op owns its regions and is not copied).
Op shallow(const Op& op, const std::string& name) {
  Op o;
  o.name = name;
  o.at = op.at;
  o.pos = op.pos;
  o.results = op.results;
  o.operands = op.operands;
  o.operand_at = op.operand_at;
  o.attrs = op.attrs;
  o.words = op.words;
  o.groups = op.groups;
  o.operand_types = op.operand_types;
  o.result_types = op.result_types;
  return o;
}

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::vector<Val> Lowerer::chlo(Build& b, const Op& op, std::vector<Val>& vals) {
  const std::string base = op.name.substr(op.name.find('.') + 1);
  const std::string h = op.results.empty() ? base : base + "." + op.results[0].substr(1, op.results[0].find('#') - 1);
  auto result = [&]() -> const Shape& {
    if (op.result_types.empty()) fail(op, Err::HloSyntax, "expected the type of its result");
    return op.result_types[0];
  };
  if (base.rfind("broadcast_", 0) == 0 && broadcast_ops().count(base.substr(10))) {
    const std::string kind = base.substr(10);
    const Shape& out = result();
    const std::vector<int64_t> bdims = ints(op, "broadcast_dimensions");
    std::vector<Val> xs;
    for (size_t i = 0; i < vals.size(); ++i) {
      const Shape& s = vals[i].global;
      if (s.dims == out.dims) {
        xs.push_back(vals[i]);
        continue;
      }
      if (s.dims.size() > out.dims.size())
        fail(op.operand_at.at(i), Err::HloInvalid, "'" + op.name + "': operand " + s.text() + " has more dimensions than its result " + out.text());
      std::vector<int64_t> dims = bdims;
      if (dims.empty() || s.dims.size() != dims.size()) {  // NumPy: the trailing dimensions align
        dims.clear();
        for (size_t d = 0; d < s.dims.size(); ++d) dims.push_back(static_cast<int64_t>(out.dims.size() - s.dims.size() + d));
      }
      Op bc;
      bc.name = "stablehlo.broadcast_in_dim";
      bc.at = op.at;
      bc.pos = op.pos;
      bc.results = {"%" + h + ".operand" + std::to_string(i)};
      bc.attrs["broadcast_dimensions"] = Attr{"array<i64: " + joined(dims, ", ") + ">", op.at};
      Shape t = out;
      t.type = s.type;
      bc.result_types = {t};
      std::vector<Val> one = {vals[i]};
      xs.push_back(simple(b, bc, "broadcast_in_dim", one).at(0));
    }
    Op e = shallow(op, "stablehlo." + kind);
    return simple(b, e, kind, xs);
  }
  if (base == "constant" || base == "constant_like") {
    const Attr* v = attr(op, "value");
    if (!v) fail(op, Err::HloSyntax, "expected its value");
    Op c = shallow(op, "stablehlo.constant");
    if (base == "constant_like") {  // `1.0 : f32`: a splat of the operand's shape
      std::string x = v->value.substr(0, v->value.find(':'));
      while (!x.empty() && x.back() == ' ') x.pop_back();
      c.attrs["value"] = Attr{"dense<" + x + ">", v->at};
    }
    return constant(b, c);
  }
  if (vals.size() != 1) fail(op, Err::HloInvalid, "takes one operand");
  const Val& x0 = vals[0];
  const Shape xs = b.c.instructions.at(static_cast<size_t>(x0.idx)).shape;  // local
  Val res;
  res.lay = x0.lay;
  res.global = op.result_types.empty() ? x0.global : op.result_types[0];
  if (base == "top_k") {
    need_whole(op, vals);
    if (op.result_types.size() != 2) fail(op, Err::HloSyntax, "expected the types of its values and indices");
    Shape t;
    t.type = Type::Tuple;
    t.tuple = op.result_types;
    const int32_t k = emit(b, "custom-call", t, {x0.idx}, op.at, h, {{"custom_call_target", "\"TopK\""}});
    std::vector<Val> out = untuple(b, k, t, op.at, h);
    for (Val& o : out) o.lay = x0.lay;
    return out;
  }
  if (base == "tan") {
    res.idx = emit(b, "tan", xs, {x0.idx}, op.at, h);
    return {res};
  }
  // Element by element on the operand's local shape: constants broadcast from scalars.
  Shape f = xs;
  auto scalar = [&](double v, Type t) {
    Shape s;
    s.type = t;
    const int32_t c = emit(b, "constant", s, {}, op.at, h + ".c", {}, number(v));
    Shape full = f;
    full.type = t;
    return emit(b, "broadcast", full, {c}, op.at, h + ".c", {{"dimensions", "{}"}});
  };
  auto un = [&](const char* opcode, int32_t a) { return emit(b, opcode, f, {a}, op.at, h + "." + opcode); };
  auto bin = [&](const char* opcode, int32_t a, int32_t c) { return emit(b, opcode, f, {a, c}, op.at, h + "." + opcode); };
  auto cmp = [&](int32_t a, int32_t c, const char* dir) {
    Shape p = f;
    p.type = Type::Pred;
    return emit(b, "compare", p, {a, c}, op.at, h + ".compare", {{"direction", dir}});
  };
  if (base == "is_inf" || base == "is_pos_inf" || base == "is_neg_inf") {
    int32_t a = x0.idx;
    if (base == "is_inf") a = un("abs", a);
    res.idx = cmp(a, scalar(base == "is_neg_inf" ? -INFINITY : INFINITY, xs.type), "EQ");
    return {res};
  }
  if (!is_float(xs.type)) fail(op, Err::HloInvalid, "takes a floating-point operand, not " + xs.text());
  if (base == "cosh" || base == "sinh") {
    const int32_t half = scalar(std::log(0.5), xs.type);
    const int32_t up = un("exponential", bin("add", x0.idx, half));
    const int32_t down = un("exponential", bin("subtract", half, x0.idx));
    if (base == "cosh") {
      res.idx = bin("add", up, down);
      return {res};
    }
    const int32_t large = bin("subtract", up, down);
    const int32_t e = un("exponential-minus-one", x0.idx);
    const int32_t small = bin("multiply", scalar(0.5, xs.type),
                              bin("add", e, bin("divide", e, bin("add", e, scalar(1.0, xs.type)))));
    res.idx = emit(b, "select", f, {cmp(un("abs", x0.idx), scalar(1.0, xs.type), "LT"), small, large}, op.at, h);
    return {res};
  }
  if (base == "erf") {  // the high-level legalization's mhlo.erf: one HLO erf, its work XLA's expansion's
    res.idx = emit(b, "erf", xs, {x0.idx}, op.at, h);
    return {res};
  }
  if (base == "lgamma" || base == "digamma" || base == "erf_inv") {  // one op, the decomposition's work
    res.idx = emit(b, base == "erf_inv" ? "erf-inv" : base, xs, {x0.idx}, op.at, h);
    return {res};
  }
  fail(op.at, Err::HloUnsupported,
       "operation '" + op.name + "' is not one podsim reads: of CHLO it reads broadcast_* (add, subtract, multiply, "
       "divide, maximum, minimum, power, remainder, atan2, and, or, xor, shift_*, compare, select, complex), erf, "
       "erf_inv, lgamma, digamma, tan, top_k, is_inf, is_pos_inf, is_neg_inf, cosh, sinh, constant and constant_like (docs/hlo.md, "
       "\"StableHLO\")");
}

}  // namespace podsim::hlo::mlir
