// The HLO importer's instructions with a method of their own: constants, dots, convolutions, transposes,
// optimization barriers, copies, reductions and fusions.
#include "hlo/importer.h"

namespace podsim::hlo::import_detail {

Value Importer::constant(const Instruction& in) {
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

TensorId Importer::dot(const Instruction& in, const std::vector<Value>& vals) {
  need_operands(in, 2);
  const std::string& file = m_m.file;
  TensorId l = arr(in, vals, 0), r = arr(in, vals, 1);
  const auto lb = int_list(in, "lhs_batch_dims", file).value_or(std::vector<int64_t>{});
  const auto rb = int_list(in, "rhs_batch_dims", file).value_or(std::vector<int64_t>{});
  const auto lc = int_list(in, "lhs_contracting_dims", file).value_or(std::vector<int64_t>{});
  const auto rc = int_list(in, "rhs_contracting_dims", file).value_or(std::vector<int64_t>{});
  return matmul(in, l, r, lb, rb, lc, rc);
}

TensorId Importer::matmul(const Instruction& in, TensorId l, TensorId r, const std::vector<int64_t>& lb,
                          const std::vector<int64_t>& rb, const std::vector<int64_t>& lc,
                          const std::vector<int64_t>& rc, TensorId out_tensor) {
  const auto &ls = shape_of(l), &rs = shape_of(r);
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
  const std::vector<int64_t>& got = out_tensor >= 0 ? shape_of(out_tensor) : in.shape.dims;
  if (expect != got) {
    std::string want = in.shape.text();
    if (out_tensor >= 0) want = m_out.graph.tensor(out_tensor).shape_text();
    fail(in, Err::HloInvalid, "its operands' shapes give another result shape than " + want);
  }
  if (out_tensor < 0) return make(in, OpKind::MatMul, {l, r}, a);
  add(in, OpKind::MatMul, {l, r}, {out_tensor}, a);
  return out_tensor;
}

std::vector<int64_t> Importer::conv_gemm(const Instruction& in, const std::vector<int64_t>& xs,
                                         const std::vector<int64_t>& ws, const std::vector<int64_t>& os) {
  const std::string& file = m_m.file;
  ConvLabels l = conv_labels(in, file);
  if (static_cast<size_t>(l.in_spatial.size() + 2) != xs.size() || ws.size() != xs.size() || os.size() != xs.size())
    fail(in, Err::HloInvalid, "dim_labels do not match the operands' ranks");
  const int64_t fg = integer(in, "feature_group_count", file).value_or(1), bg = integer(in, "batch_group_count", file).value_or(1);
  if (fg < 1 || bg < 1) fail(in, Err::HloInvalid, "group counts below 1");
  int64_t positions = 1, window = 1;
  for (int64_t d : l.out_spatial) positions *= os[d];
  for (int64_t d : l.k_spatial) window *= ws[d];
  const int64_t groups = fg * bg;
  return {groups, os[l.out_batch] * positions, ws[l.k_in] * window, std::max<int64_t>(1, ws[l.k_out] / groups)};
}

TensorId Importer::convolution(const Instruction& in, const std::vector<Value>& vals) {
  need_operands(in, 2);
  no_kernel(in, "convolution");
  TensorId x = arr(in, vals, 0), w = arr(in, vals, 1);
  OpAttrs a;
  a.dims = conv_gemm(in, shape_of(x), shape_of(w), in.shape.dims);
  return make(in, OpKind::Convolution, {x, w}, a);
}

TensorId Importer::transpose(const Computation& c, const Instruction& in, const std::vector<Value>& vals) {
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
Value Importer::barrier(const Instruction& in, const std::vector<Value>& vals) {
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
Value Importer::copy(const Instruction& in, const std::vector<Value>& vals, const Shape& shape) {
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

Value Importer::reduce(const Instruction& in, const std::vector<Value>& vals) {
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

Value Importer::fusion(const Instruction& in, const std::vector<Value>& vals) {
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

}  // namespace podsim::hlo::import_detail
