// CHLO operations (the "client HLO" dialect JAX and PyTorch/XLA leave in lowered text) as the HLO ops XLA lowers
// them to (hlo/stablehlo_lower.h). The source is XLA's CHLO legalization (xla/mlir_hlo, chlo_legalize_to_hlo and
// its high-level variant, ChloLegalizeToHighLevelMhlo), which podsim follows op for op, so that the work and the
// numeric results are those of XLA's decomposition:
//  - `chlo.broadcast_<op>` (add, subtract, multiply, divide, maximum, minimum, power, remainder, atan2, and, or,
//    xor, shift_*, compare, select, complex): each operand broadcast to the result's shape (`broadcast_dimensions`,
//    else NumPy's alignment of trailing dimensions), then the StableHLO op;
//  - `chlo.erf`: for f32 the rational approximation of Eigen's float erf that XLA materializes
//    (materializeErfApproximationF32): x clamped to [-4, 4], x * P(x^2) / Q(x^2) with P of degree 6 and Q of
//    degree 4 in x^2 by Horner's rule, clamped to [-1, 1]: 25 vector ops per element; f16 and bf16 upcast to f32
//    and back, as XLA does (materializeWithUpcast); f64 as HLO's erf;
//  - `chlo.tan` as HLO's tan and `chlo.top_k` as the TopK custom call (the high-level legalization's mhlo.tan and
//    mhlo.topk, which XLA's TPU backend sorts);
//  - `chlo.is_inf`, `is_pos_inf`, `is_neg_inf`: a comparison of |x|, x with infinity;
//  - `chlo.cosh`: e^(x + log 1/2) + e^(log 1/2 - x); `chlo.sinh`: e^(x + log 1/2) - e^(log 1/2 - x), and for
//    |x| < 1 (e + e / (e + 1)) / 2 with e = expm1(x), selected by |x| < 1 (materializeCosh/SinhApproximation);
//  - `chlo.constant_like` and `chlo.constant`: a constant.
// Other CHLO ops (lgamma, digamma, erf_inv, the Bessel functions...) are an error at the op naming those read.
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
  if (base == "erf") {
    if (xs.type == Type::F64) {
      res.idx = emit(b, "erf", xs, {x0.idx}, op.at, h);
      return {res};
    }
    int32_t x = x0.idx;
    if (xs.type != Type::F32) {
      f.type = Type::F32;
      x = emit(b, "convert", f, {x}, op.at, h + ".f32");
    }
    auto clamp = [&](double lo, int32_t v, double hi) {
      Shape s;
      s.type = Type::F32;
      const int32_t l = emit(b, "constant", s, {}, op.at, h + ".lo", {}, number(lo));
      const int32_t u = emit(b, "constant", s, {}, op.at, h + ".hi", {}, number(hi));
      return emit(b, "clamp", f, {l, v, u}, op.at, h + ".clamp");
    };
    // Eigen's generic_fast_erf_float coefficients, highest power first, as XLA writes them.
    static const double alpha[] = {-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
                                   -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
                                   -1.60960333262415e-02};
    static const double beta[] = {-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
                                  -7.37332916720468e-03, -1.42647390514189e-02};
    x = clamp(-4.0, x, 4.0);
    const int32_t x2 = bin("multiply", x, x);
    auto horner = [&](const double* c, size_t n) {
      int32_t p = scalar(static_cast<float>(c[0]), Type::F32);
      for (size_t i = 1; i < n; ++i) p = bin("add", bin("multiply", p, x2), scalar(static_cast<float>(c[i]), Type::F32));
      return p;
    };
    const int32_t p = horner(alpha, 7), q = horner(beta, 5);
    int32_t r = clamp(-1.0, bin("divide", bin("multiply", x, p), q), 1.0);
    if (xs.type != Type::F32) r = emit(b, "convert", xs, {r}, op.at, h + ".back");
    res.idx = r;
    return {res};
  }
  fail(op.at, Err::HloUnsupported,
       "operation '" + op.name + "' is not one podsim reads: of CHLO it reads broadcast_* (add, subtract, multiply, "
       "divide, maximum, minimum, power, remainder, atan2, and, or, xor, shift_*, compare, select, complex), erf, "
       "tan, top_k, is_inf, is_pos_inf, is_neg_inf, cosh, sinh, constant and constant_like (docs/hlo.md, "
       "\"StableHLO\")");
}

}  // namespace podsim::hlo::mlir
