// Array ops with kernels: the instructions of an imported HLO module (hlo/) that podsim computes in numeric mode —
// elementwise functions, broadcast, transpose, bitcast, reduce, iota, constant, slices, pad, concatenate and the
// dynamic slices. Values are held as fp32 (workloads/tensor.h); integer outputs are truncated to whole numbers and
// predicates are 0 or 1, bf16 outputs rounded (ops::put).
//
// Costs: each op reads its inputs and writes its output once through the vector unit, as XLA's kernels do.
// Elementwise functions, broadcasts, iotas and constants are fusible (a loop fusion's members; a broadcast's input
// is read once however many times it is repeated). A reduction fuses as one. A bitcast moves nothing: no cost, and
// its output is a view of its input's buffer (OpCost::view). Slices read only what they keep; a dynamic update
// writes only its update, in place.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "workloads/ops/kernel_util.h"
#include "workloads/ops/special_math.h"

namespace podsim {

const char* array_fn_name(ArrayFn f) {
  switch (f) {
    case ArrayFn::Add: return "add";
    case ArrayFn::Subtract: return "subtract";
    case ArrayFn::Multiply: return "multiply";
    case ArrayFn::Divide: return "divide";
    case ArrayFn::Maximum: return "maximum";
    case ArrayFn::Minimum: return "minimum";
    case ArrayFn::Power: return "power";
    case ArrayFn::Remainder: return "remainder";
    case ArrayFn::Atan2: return "atan2";
    case ArrayFn::And: return "and";
    case ArrayFn::Or: return "or";
    case ArrayFn::Xor: return "xor";
    case ArrayFn::ShiftLeft: return "shift_left";
    case ArrayFn::ShiftRightArithmetic: return "shift_right_arithmetic";
    case ArrayFn::ShiftRightLogical: return "shift_right_logical";
    case ArrayFn::CompareEq: return "compare_eq";
    case ArrayFn::CompareNe: return "compare_ne";
    case ArrayFn::CompareLt: return "compare_lt";
    case ArrayFn::CompareLe: return "compare_le";
    case ArrayFn::CompareGt: return "compare_gt";
    case ArrayFn::CompareGe: return "compare_ge";
    case ArrayFn::Select: return "select";
    case ArrayFn::Clamp: return "clamp";
    case ArrayFn::Copy: return "copy";
    case ArrayFn::Negate: return "negate";
    case ArrayFn::Abs: return "abs";
    case ArrayFn::Exp: return "exponential";
    case ArrayFn::Expm1: return "exponential_minus_one";
    case ArrayFn::Log: return "log";
    case ArrayFn::Log1p: return "log_plus_one";
    case ArrayFn::Sqrt: return "sqrt";
    case ArrayFn::Rsqrt: return "rsqrt";
    case ArrayFn::Cbrt: return "cbrt";
    case ArrayFn::Tanh: return "tanh";
    case ArrayFn::Logistic: return "logistic";
    case ArrayFn::Sine: return "sine";
    case ArrayFn::Cosine: return "cosine";
    case ArrayFn::Tan: return "tan";
    case ArrayFn::Floor: return "floor";
    case ArrayFn::Ceil: return "ceil";
    case ArrayFn::RoundAwayFromZero: return "round_nearest_afz";
    case ArrayFn::RoundNearestEven: return "round_nearest_even";
    case ArrayFn::Sign: return "sign";
    case ArrayFn::Not: return "not";
    case ArrayFn::IsFinite: return "is_finite";
    case ArrayFn::Erf: return "erf";
    case ArrayFn::PopulationCount: return "popcnt";
    case ArrayFn::ReducePrecision: return "reduce_precision";
    case ArrayFn::Lgamma: return "lgamma";
    case ArrayFn::Digamma: return "digamma";
    case ArrayFn::ErfInv: return "erf_inv";
    case ArrayFn::Other: return "other";
  }
  return "?";
}

int array_fn_arity(ArrayFn f) {
  if (f == ArrayFn::Other) return 0;
  if (f == ArrayFn::Select || f == ArrayFn::Clamp) return 3;
  if (f >= ArrayFn::Copy) return 1;
  return 2;
}

namespace {

using ops::in;

// Row-major strides of a shape.
std::vector<int64_t> strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Calls f(index, flat) over every element of `shape` in row-major order.
template <class F>
void for_each_index(const std::vector<int64_t>& shape, F f) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n == 0) return;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0; k < n; ++k) {
    f(idx, k);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

// Stores output `i`: whole numbers for integer types (truncated toward zero), 0/1 for predicates, bf16 rounded.
void put_typed(const ModelGraph& g, const Op& op, TensorStore& s, Tensor t, size_t i = 0) {
  const DType dt = g.tensor(op.outputs.at(i)).dtype;
  if (dt == DType::Pred)
    for (float& x : t.data) x = x != 0.0f ? 1.0f : 0.0f;
  else if (dtype_is_integer(dt))
    for (float& x : t.data) x = std::isfinite(x) ? std::trunc(x) : 0.0f;
  ops::put(g, op, s, std::move(t), i);
}

OpCost vector_op(const ModelGraph& g, const Op& op, double simple, double trans = 0, double div = 0) {
  return ops::vpu_cost(g, op, simple, trans, div, 0, simple + trans + div);
}

// ---- elementwise ----

OpCost elementwise_cost(const ModelGraph& g, const Op& op) {
  switch (op.attrs.fn) {
    case ArrayFn::Exp: case ArrayFn::Expm1: case ArrayFn::Log: case ArrayFn::Log1p: case ArrayFn::Tanh:
    case ArrayFn::Logistic: case ArrayFn::Sine: case ArrayFn::Cosine: case ArrayFn::Tan:
    case ArrayFn::Rsqrt: case ArrayFn::Sqrt: case ArrayFn::Cbrt:
      return ops::elementwise(vector_op(g, op, 0, 1));
    case ArrayFn::Erf:  // XLA's expansion (elemental_ir_emitter's EmitErfF32): 2 clamps, 22 multiply-adds, 1 divide
      return ops::elementwise(vector_op(g, op, 24, 0, 1));
    // CHLO's lgamma, digamma and erf_inv: the work of XLA's decompositions (chlo_legalize_to_hlo.cc,
    // materializeLgamma / materializeDigamma, Lanczos' approximation with g = 7 and 8 terms plus the reflection for
    // x < 1/2; materializeErfInvF32, Giles' polynomials of degree 8 on both branches), counted in
    // workloads/ops/special_math.h.
    case ArrayFn::Lgamma:
      return ops::elementwise(vector_op(g, op, kLgammaWork.simple, kLgammaWork.transcendental, kLgammaWork.divide));
    case ArrayFn::Digamma:
      return ops::elementwise(vector_op(g, op, kDigammaWork.simple, kDigammaWork.transcendental, kDigammaWork.divide));
    case ArrayFn::ErfInv:
      return ops::elementwise(vector_op(g, op, kErfInvWork.simple, kErfInvWork.transcendental, kErfInvWork.divide));
    case ArrayFn::Power: case ArrayFn::Atan2:
      return ops::elementwise(vector_op(g, op, 1, 2));
    case ArrayFn::Divide: case ArrayFn::Remainder:
      return ops::elementwise(vector_op(g, op, 0, 0, 1));
    default:
      return ops::elementwise(vector_op(g, op, 1));
  }
}

double apply1(ArrayFn f, double a, bool integer) {
  switch (f) {
    case ArrayFn::Copy: case ArrayFn::ReducePrecision: return a;
    case ArrayFn::Negate: return -a;
    case ArrayFn::Abs: return std::fabs(a);
    case ArrayFn::Exp: return std::exp(a);
    case ArrayFn::Expm1: return std::expm1(a);
    case ArrayFn::Log: return std::log(a);
    case ArrayFn::Log1p: return std::log1p(a);
    case ArrayFn::Sqrt: return std::sqrt(a);
    case ArrayFn::Rsqrt: return 1.0 / std::sqrt(a);
    case ArrayFn::Cbrt: return std::cbrt(a);
    case ArrayFn::Tanh: return std::tanh(a);
    case ArrayFn::Logistic: return 1.0 / (1.0 + std::exp(-a));
    case ArrayFn::Sine: return std::sin(a);
    case ArrayFn::Cosine: return std::cos(a);
    case ArrayFn::Tan: return std::tan(a);
    case ArrayFn::Floor: return std::floor(a);
    case ArrayFn::Ceil: return std::ceil(a);
    case ArrayFn::RoundAwayFromZero: return std::round(a);
    case ArrayFn::RoundNearestEven: return std::nearbyint(a);
    case ArrayFn::Sign: return a > 0 ? 1.0 : a < 0 ? -1.0 : a;
    case ArrayFn::Not: return integer ? static_cast<double>(~static_cast<int64_t>(a)) : (a == 0.0 ? 1.0 : 0.0);
    case ArrayFn::IsFinite: return std::isfinite(a) ? 1.0 : 0.0;
    case ArrayFn::Erf: return std::erf(a);
    case ArrayFn::Lgamma: return std::lgamma(a);
    case ArrayFn::Digamma: return digamma(a);
    case ArrayFn::ErfInv: return erf_inv(a);
    case ArrayFn::PopulationCount: return static_cast<double>(__builtin_popcountll(static_cast<uint64_t>(static_cast<int64_t>(a))));
    default: return a;
  }
}

double apply2(ArrayFn f, double a, double b, bool integer) {
  const int64_t ia = static_cast<int64_t>(a), ib = static_cast<int64_t>(b);
  switch (f) {
    case ArrayFn::Add: return a + b;
    case ArrayFn::Subtract: return a - b;
    case ArrayFn::Multiply: return a * b;
    case ArrayFn::Divide:
      if (integer) return ib == 0 ? -1.0 : static_cast<double>(ia / ib);  // XLA: x / 0 = -1 for integers
      return a / b;
    case ArrayFn::Maximum: return std::isnan(a) || std::isnan(b) ? std::nan("") : std::max(a, b);
    case ArrayFn::Minimum: return std::isnan(a) || std::isnan(b) ? std::nan("") : std::min(a, b);
    case ArrayFn::Power: return std::pow(a, b);
    case ArrayFn::Remainder:
      if (integer) return ib == 0 ? a : static_cast<double>(ia % ib);
      return std::fmod(a, b);
    case ArrayFn::Atan2: return std::atan2(a, b);
    case ArrayFn::And: return integer ? static_cast<double>(ia & ib) : ((a != 0 && b != 0) ? 1.0 : 0.0);
    case ArrayFn::Or: return integer ? static_cast<double>(ia | ib) : ((a != 0 || b != 0) ? 1.0 : 0.0);
    case ArrayFn::Xor: return integer ? static_cast<double>(ia ^ ib) : (((a != 0) != (b != 0)) ? 1.0 : 0.0);
    case ArrayFn::ShiftLeft: return ib < 0 || ib >= 63 ? 0.0 : static_cast<double>(ia << ib);
    case ArrayFn::ShiftRightArithmetic: return ib < 0 || ib >= 63 ? (ia < 0 ? -1.0 : 0.0) : static_cast<double>(ia >> ib);
    case ArrayFn::ShiftRightLogical:
      return ib < 0 || ib >= 63 ? 0.0 : static_cast<double>(static_cast<uint64_t>(ia) >> ib);
    case ArrayFn::CompareEq: return a == b ? 1.0 : 0.0;
    case ArrayFn::CompareNe: return a != b ? 1.0 : 0.0;
    case ArrayFn::CompareLt: return a < b ? 1.0 : 0.0;
    case ArrayFn::CompareLe: return a <= b ? 1.0 : 0.0;
    case ArrayFn::CompareGt: return a > b ? 1.0 : 0.0;
    case ArrayFn::CompareGe: return a >= b ? 1.0 : 0.0;
    default: return a;
  }
}

void elementwise_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor y = ops::out_like(g, op);
  const size_t n = y.data.size();
  const ArrayFn f = op.attrs.fn;
  ops::check(f != ArrayFn::Other && op.inputs.size() == static_cast<size_t>(array_fn_arity(f)), op,
             "elementwise op with the wrong number of inputs");
  std::vector<const Tensor*> x;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    x.push_back(&in(s, op, i));
    ops::check(x.back()->data.size() == n || x.back()->data.size() == 1, op, "elementwise inputs of other sizes");
  }
  // Integer semantics follow the inputs' type (a comparison of integers yields a predicate).
  const bool integer = dtype_is_integer(g.tensor(op.inputs.back()).dtype);
  auto at = [&](size_t i, size_t k) { return static_cast<double>(x[i]->data.size() == 1 ? x[i]->data[0] : x[i]->data[k]); };
  for (size_t k = 0; k < n; ++k) {
    double v;
    if (f == ArrayFn::Select) v = at(0, k) != 0.0 ? at(1, k) : at(2, k);
    else if (f == ArrayFn::Clamp) v = std::min(std::max(at(1, k), at(0, k)), at(2, k));
    else if (x.size() == 1) v = apply1(f, at(0, k), integer);
    else v = apply2(f, at(0, k), at(1, k), integer);
    y.data[k] = static_cast<float>(v);
  }
  put_typed(g, op, s, std::move(y));
}

// ---- broadcast ----

OpCost broadcast_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(vector_op(g, op, 0)); }

void broadcast_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  const std::vector<int64_t> xs = strides(x.shape);
  ops::check(op.attrs.dims.size() == x.shape.size(), op, "broadcast dimensions do not match its input");
  for_each_index(y.shape, [&](const std::vector<int64_t>& idx, int64_t k) {
    int64_t off = 0;
    for (size_t i = 0; i < op.attrs.dims.size(); ++i) off += idx[op.attrs.dims[i]] * xs[i];
    y.data[k] = x.data[off];
  });
  ops::put(g, op, s, std::move(y));
}

// ---- transpose and bitcast ----

OpCost transpose_cost(const ModelGraph& g, const Op& op) { return vector_op(g, op, 1); }

// Output dimension i is input dimension perm[i]; an empty permutation keeps the order (a reshape).
void permute_into(const Tensor& x, const std::vector<int64_t>& perm, Tensor& y) {
  if (perm.empty()) {
    y.data = x.data;
    return;
  }
  const std::vector<int64_t> xs = strides(x.shape);
  for_each_index(y.shape, [&](const std::vector<int64_t>& idx, int64_t k) {
    int64_t off = 0;
    for (size_t i = 0; i < perm.size(); ++i) off += idx[i] * xs[perm[i]];
    y.data[k] = x.data[off];
  });
}

void transpose_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  ops::check(x.data.size() == y.data.size(), op, "transpose changes the element count");
  permute_into(x, op.attrs.dims, y);
  ops::put(g, op, s, std::move(y));
}

// A view: inside a fusion it reads its input and writes its output as the fusion's other members see them; alone it
// costs nothing (hw/compiler: a fusion of views moves no data).
OpCost bitcast_cost(const ModelGraph& g, const Op& op) {
  OpCost c;
  c.unit = Unit::Vpu;
  c.bytes_read = input_bytes(g, op);
  c.bytes_written = output_bytes(g, op);
  c.fusible = true;
  c.view = true;
  return c;
}

// ---- reduce ----

OpCost reduce_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::reduction(vector_op(g, op, 1));
  c.bytes_read = g.tensor(op.inputs[0]).bytes();  // the init value is a constant the kernel holds
  return c;
}

double combine(ArrayFn f, double a, double b) {
  switch (f) {
    case ArrayFn::Add: return a + b;
    case ArrayFn::Multiply: return a * b;
    case ArrayFn::Maximum: return std::max(a, b);
    case ArrayFn::Minimum: return std::min(a, b);
    case ArrayFn::And: return (a != 0 && b != 0) ? 1.0 : 0.0;
    case ArrayFn::Or: return (a != 0 || b != 0) ? 1.0 : 0.0;
    default: return a;
  }
}

void reduce_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const Tensor& init = in(s, op, 1);
  Tensor y = ops::out_like(g, op);
  ops::check(op.attrs.fn != ArrayFn::Other, op, "reduction without a kernel");
  std::vector<bool> reduced(x.shape.size(), false);
  for (int64_t d : op.attrs.dims) reduced.at(static_cast<size_t>(d)) = true;
  std::vector<int64_t> kept_strides;
  {
    std::vector<int64_t> ys = strides(y.shape);
    size_t j = 0;
    for (size_t d = 0; d < x.shape.size(); ++d) kept_strides.push_back(reduced[d] ? 0 : ys.at(j++));
  }
  std::vector<double> acc(y.data.size(), static_cast<double>(init.data.at(0)));
  for_each_index(x.shape, [&](const std::vector<int64_t>& idx, int64_t k) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * kept_strides[d];
    acc[off] = combine(op.attrs.fn, acc[off], x.data[k]);
  });
  for (size_t k = 0; k < acc.size(); ++k) y.data[k] = static_cast<float>(acc[k]);
  put_typed(g, op, s, std::move(y));
}

// ---- iota, constant ----

OpCost source_cost(const ModelGraph& g, const Op& op) { return ops::elementwise(vector_op(g, op, 1)); }

void iota_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor y = ops::out_like(g, op);
  const size_t d = static_cast<size_t>(op.attrs.dims.at(0));
  for_each_index(y.shape, [&](const std::vector<int64_t>& idx, int64_t k) { y.data[k] = static_cast<float>(idx.at(d)); });
  put_typed(g, op, s, std::move(y));
}

void constant_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor y = ops::out_like(g, op);
  const auto& v = op.attrs.values;
  ops::check(v.size() == 1 || v.size() == y.data.size(), op, "constant with the wrong number of values");
  for (size_t k = 0; k < y.data.size(); ++k) y.data[k] = v.size() == 1 ? v[0] : v[k];
  put_typed(g, op, s, std::move(y));
}

// ---- slices, pad, concatenate ----

OpCost slice_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::elementwise(vector_op(g, op, 0));
  c.bytes_read = output_bytes(g, op);  // only what it keeps
  return c;
}

void strided_slice_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  const std::vector<int64_t> xs = strides(x.shape);
  for_each_index(y.shape, [&](const std::vector<int64_t>& idx, int64_t k) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += (op.attrs.lo[d] + idx[d] * op.attrs.stride[d]) * xs[d];
    y.data[k] = x.data[off];
  });
  ops::put(g, op, s, std::move(y));
}

OpCost pad_cost(const ModelGraph& g, const Op& op) {
  OpCost c = ops::elementwise(vector_op(g, op, 0));
  c.bytes_read = std::min(g.tensor(op.inputs[0]).bytes(), output_bytes(g, op));
  return c;
}

void pad_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const float value = in(s, op, 1).data.at(0);
  Tensor y = ops::out_like(g, op);
  std::fill(y.data.begin(), y.data.end(), value);
  const std::vector<int64_t> ys = strides(y.shape);
  for_each_index(x.shape, [&](const std::vector<int64_t>& idx, int64_t k) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) {
      const int64_t p = op.attrs.lo[d] + idx[d] * (op.attrs.stride[d] + 1);
      if (p < 0 || p >= y.shape[d]) return;
      off += p * ys[d];
    }
    y.data[off] = x.data[k];
  });
  ops::put(g, op, s, std::move(y));
}

OpCost concatenate_cost(const ModelGraph& g, const Op& op) { return vector_op(g, op, 0); }

void concatenate_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor y = ops::out_like(g, op);
  const size_t d = static_cast<size_t>(op.attrs.dims.at(0));
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < d; ++k) outer *= y.shape[k];
  for (size_t k = d + 1; k < y.shape.size(); ++k) inner *= y.shape[k];
  int64_t at = 0;
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const Tensor& x = in(s, op, i);
    const int64_t n = x.shape.at(d);
    for (int64_t o = 0; o < outer; ++o)
      std::copy_n(x.data.begin() + o * n * inner, n * inner, y.data.begin() + (o * y.shape[d] + at) * inner);
    at += n;
  }
  ops::put(g, op, s, std::move(y));
}

// Offsets of a dynamic slice (inputs from `first` on, one scalar per dimension), clamped so the window fits.
std::vector<int64_t> offsets(const TensorStore& s, const Op& op, size_t first, const std::vector<int64_t>& whole,
                             const std::vector<int64_t>& window) {
  std::vector<int64_t> o(whole.size(), 0);
  for (size_t d = 0; d < whole.size(); ++d) {
    const int64_t v = static_cast<int64_t>(in(s, op, first + d).data.at(0));
    o[d] = std::clamp<int64_t>(v, 0, whole[d] - window[d]);
  }
  return o;
}

void dynamic_slice_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  Tensor y = ops::out_like(g, op);
  const std::vector<int64_t> o = offsets(s, op, 1, x.shape, y.shape), xs = strides(x.shape);
  for_each_index(y.shape, [&](const std::vector<int64_t>& idx, int64_t k) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += (o[d] + idx[d]) * xs[d];
    y.data[k] = x.data[off];
  });
  ops::put(g, op, s, std::move(y));
}

OpCost dynamic_update_cost(const ModelGraph& g, const Op& op) {
  OpCost c = vector_op(g, op, 0);
  c.vector.elements = static_cast<double>(g.tensor(op.inputs[1]).elements());
  c.bytes_read = g.tensor(op.inputs[1]).bytes();  // the update; the rest stays where it is (in place)
  c.bytes_written = g.tensor(op.inputs[1]).bytes();
  c.in_place = true;
  return c;
}

void dynamic_update_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  const Tensor& x = in(s, op, 0);
  const Tensor& u = in(s, op, 1);
  Tensor y = x;
  const std::vector<int64_t> o = offsets(s, op, 2, x.shape, u.shape), ys = strides(y.shape);
  for_each_index(u.shape, [&](const std::vector<int64_t>& idx, int64_t k) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += (o[d] + idx[d]) * ys[d];
    y.data[off] = u.data[k];
  });
  ops::put(g, op, s, std::move(y));
}

// ---- device id ----

OpCost device_id_cost(const ModelGraph& g, const Op& op) { return vector_op(g, op, 1); }

void device_id_kernel(const ModelGraph& g, const Op& op, TensorStore& s) {
  Tensor y = ops::out_like(g, op);
  std::fill(y.data.begin(), y.data.end(), static_cast<float>(s.device_index(op.attrs.axes)));
  ops::put(g, op, s, std::move(y));
}

const bool registered = [] {
  register_op_kind({OpKind::Elementwise, "elementwise", Unit::Vpu, elementwise_cost, elementwise_kernel, nullptr});
  register_op_kind({OpKind::BroadcastInDim, "broadcast_in_dim", Unit::Vpu, broadcast_cost, broadcast_kernel, nullptr});
  register_op_kind({OpKind::Transpose, "transpose", Unit::Vpu, transpose_cost, transpose_kernel, nullptr});
  register_op_kind({OpKind::Bitcast, "bitcast", Unit::Vpu, bitcast_cost, transpose_kernel, nullptr});
  register_op_kind({OpKind::Reduce, "reduce", Unit::Vpu, reduce_cost, reduce_kernel, nullptr});
  register_op_kind({OpKind::Iota, "iota", Unit::Vpu, source_cost, iota_kernel, nullptr});
  register_op_kind({OpKind::Constant, "constant", Unit::Vpu, source_cost, constant_kernel, nullptr});
  register_op_kind({OpKind::StridedSlice, "strided_slice", Unit::Vpu, slice_cost, strided_slice_kernel, nullptr});
  register_op_kind({OpKind::Pad, "pad", Unit::Vpu, pad_cost, pad_kernel, nullptr});
  register_op_kind({OpKind::Concatenate, "concatenate", Unit::Vpu, concatenate_cost, concatenate_kernel, nullptr});
  register_op_kind({OpKind::DynamicSlice, "dynamic_slice", Unit::Vpu, slice_cost, dynamic_slice_kernel, nullptr});
  register_op_kind({OpKind::DynamicUpdateSlice, "dynamic_update_slice", Unit::Vpu, dynamic_update_cost,
                    dynamic_update_kernel, nullptr});
  register_op_kind({OpKind::DeviceId, "device_id", Unit::Vpu, device_id_cost, device_id_kernel, nullptr});
  return true;
}();

}  // namespace
}  // namespace podsim
