// Uniform quantization (hlo/stablehlo_lower.h). A quantized type `tensor<4x!quant.uniform<i8:f32, 0.1:-3>>` is read
// as its storage type (tensor<4xi8>); `uniform_quantize` and `uniform_dequantize` are the elementwise ops StableHLO's
// quant-to-math legalization writes (stablehlo/transforms/StablehloLegalizeQuantToMath.cpp):
//  - dequantize: (convert(q) - zero_point) * scale, in the expressed type;
//  - quantize: convert(clamp(storage_min, round_nearest_even(x / scale + zero_point), storage_max)) to the storage
//    type; from a quantized operand (a requantization), the operand dequantized first.
// Per-axis types (`!quant.uniform<i8:f32:1, {0.1:-3, 0.2:1}>`) take their scales and zero points as constants
// broadcast along the axis. Other ops on quantized values run on the storage integers (docs/hlo.md, "StableHLO").
#include "hlo/stablehlo_lower.h"

namespace podsim::hlo::mlir {
namespace {

std::string number(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

}  // namespace

std::vector<Val> Lowerer::quantization(Build& b, const Op& op, std::vector<Val>& vals) {
  const bool quantize = op.name.size() > 16 && op.name.compare(op.name.size() - 16, 16, "uniform_quantize") == 0;
  if (vals.size() != 1 || op.result_types.size() != 1) fail(op, Err::HloInvalid, "takes one operand and gives one result");
  if (op.operand_quant.size() != 1 || op.result_quant.size() != 1)
    fail(op, Err::HloSyntax, "expected its operand's and its result's types ((T) -> R)");
  const Quant& qin = op.operand_quant[0];
  const Quant& qout = op.result_quant[0];
  if (quantize ? !qout.any : !qin.any)
    fail(op, Err::HloInvalid, std::string("its ") + (quantize ? "result" : "operand") + " is not of a quantized type (!quant.uniform<...>)");
  std::string h = "quant";
  if (!op.results.empty()) {
    const std::string& r = op.results[0];
    const size_t hash = r.find('#');
    h.push_back('.');
    h.append(r, 1, hash == std::string::npos ? std::string::npos : hash - 1);
  }
  if (qin.axis >= 0 || qout.axis >= 0) need_whole(op, vals);
  Val x = vals[0];
  const Shape local_in = b.c.instructions.at(static_cast<size_t>(x.idx)).shape;
  // A scale or zero point at shape `f`: one value broadcast, or one per index along the axis.
  auto param = [&](const Quant& q, bool scale, const Shape& f) {
    Shape s;
    s.type = f.type;
    std::string lit;
    const size_t n = q.scales.size();
    for (size_t i = 0; i < n; ++i) {
      if (i) lit += ", ";
      lit += number(scale ? q.scales[i] : static_cast<double>(q.zeros[i]));
    }
    int32_t c;
    std::string dims = "{}";
    if (q.axis < 0) {
      c = emit(b, "constant", s, {}, op.at, h + (scale ? ".scale" : ".zero"), {}, lit);
    } else {
      if (q.axis >= static_cast<int64_t>(f.dims.size()) || f.dims[static_cast<size_t>(q.axis)] != static_cast<int64_t>(n))
        fail(op, Err::HloInvalid, "its quantized type's axis " + std::to_string(q.axis) + " does not hold " + std::to_string(n) + " values");
      s.dims = {static_cast<int64_t>(n)};
      c = emit(b, "constant", s, {}, op.at, h + (scale ? ".scale" : ".zero"), {}, "{" + lit + "}");
      dims = int_set({q.axis});
    }
    return emit(b, "broadcast", f, {c}, op.at, h + (scale ? ".scale" : ".zero"), {{"dimensions", dims}});
  };
  auto dequantize = [&](int32_t v, const Quant& q, Type to) {
    Shape f = local_in;
    f.type = to;
    const int32_t c = emit(b, "convert", f, {v}, op.at, h + ".convert");
    const int32_t s = emit(b, "subtract", f, {c, param(q, false, f)}, op.at, h + ".subtract");
    return emit(b, "multiply", f, {s, param(q, true, f)}, op.at, h + ".multiply");
  };
  Val out;
  out.lay = x.lay;
  out.global = op.result_types[0];
  if (!quantize) {
    out.idx = dequantize(x.idx, qin, op.result_types[0].type);
    return {out};
  }
  int32_t v = x.idx;
  Shape f = local_in;
  if (qin.any) {  // a requantization
    f.type = qout.expressed;
    v = dequantize(v, qin, qout.expressed);
  }
  v = emit(b, "divide", f, {v, param(qout, true, f)}, op.at, h + ".divide");
  v = emit(b, "add", f, {v, param(qout, false, f)}, op.at, h + ".add");
  v = emit(b, "round-nearest-even", f, {v}, op.at, h + ".round");
  Shape sc;
  sc.type = f.type;
  const int32_t lo = emit(b, "constant", sc, {}, op.at, h + ".min", {}, number(static_cast<double>(qout.lo)));
  const int32_t hi = emit(b, "constant", sc, {}, op.at, h + ".max", {}, number(static_cast<double>(qout.hi)));
  v = emit(b, "clamp", f, {lo, v, hi}, op.at, h + ".clamp");
  Shape st = f;
  st.type = op.result_types[0].type;
  out.idx = emit(b, "convert", st, {v}, op.at, h);
  return {out};
}

}  // namespace podsim::hlo::mlir
