// The HLO importer's conditionals (hlo/import.h). A conditional runs one branch: XLA evaluates its selector (a
// predicate, true_computation then false_computation, or a branch index, an index out of range taking the last
// branch) and runs the branch it picks. The graph is built before any value exists, so podsim runs:
//  - the branch `workload.branches` names;
//  - else the branch a constant selector picks (a constant, or converts and reshapes of one);
//  - else, in numeric mode, every branch, the results chosen element by element by the selector's value (select
//    ops), so that the results are those of the branch the value picks (the timing then counts every branch);
//  - else branch 0 (a note says so).
#include "hlo/importer.h"

namespace podsim::hlo::import_detail {

Value Importer::conditional(const Instruction& in, const std::vector<Value>& vals) {
  std::vector<int32_t> branches;
  const bool indexed = in.attr("branch_computations") != nullptr;
  if (indexed) {
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
  if (branches.empty()) fail(in, Err::HloInvalid, "a conditional without branches");
  if (in.operands.size() != branches.size() + 1) fail(in, Err::HloInvalid, "takes a selector and one operand per branch");
  const int64_t n = static_cast<int64_t>(branches.size());
  int64_t b = 0;
  if (auto it = m_o.branches.find(in.name); it != m_o.branches.end()) {
    b = it->second;
    if (b < 0 || b >= n)
      fail(in, Err::HloUnsupported, "workload.branches picks branch " + std::to_string(b) + " of " +
                                        std::to_string(n) + "; pick one as `workload: {branches: [\"" + in.name +
                                        "=0\"]}` (0 to " + std::to_string(n - 1) + ")");
  } else if (auto s = scalar_of(vals.at(0))) {
    if (!indexed) b = *s != 0 ? 0 : 1;
    else b = *s < 0 || *s >= static_cast<double>(n) ? n - 1 : static_cast<int64_t>(*s);
  } else if (m_o.numeric && n > 1) {
    // Every branch, then per result a select of the branch the selector picks.
    std::vector<std::vector<TensorId>> res;
    for (int64_t k = 0; k < n; ++k) {
      const Value r = emit(branches[k], {vals[k + 1]}, m_prefix + in.name + "[" + std::to_string(k) + "]/", -1);
      res.emplace_back();
      need_leaves(r, res.back());
    }
    const TensorId sel = arr(in, vals, 0);
    std::vector<TensorId> picks;  // per branch but the last: a predicate, "the selector picks branch k"
    if (!indexed) {
      picks.push_back(sel);
    } else {
      Shape scalar;
      scalar.type = Type::S32;
      Shape pred;
      pred.type = Type::Pred;
      for (int64_t k = 0; k + 1 < n; ++k) {
        const std::string sfx = ".is" + std::to_string(k);
        const TensorId c = tensor(m_prefix + in.name + sfx + ".k", scalar);
        OpAttrs ca;
        ca.values = {static_cast<float>(k)};
        add(in, OpKind::Constant, {}, {c}, ca, sfx + ".k");
        m_scalar[c] = static_cast<double>(k);
        const TensorId eq = tensor(m_prefix + in.name + sfx, pred);
        OpAttrs ea;
        ea.fn = ArrayFn::CompareEq;
        add(in, OpKind::Elementwise, {sel, c}, {eq}, ea, sfx);
        picks.push_back(eq);
      }
    }
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    for (const auto& r : res)
      if (r.size() != outs.size()) fail(in, Err::HloInvalid, "its branches give results of other shapes than its own");
    for (size_t i = 0; i < outs.size(); ++i) {
      TensorId acc = res[static_cast<size_t>(n - 1)][i];
      for (int64_t k = n - 2; k >= 0; --k) {
        const std::string sfx = ".pick" + std::to_string(i) + "." + std::to_string(k);
        TensorInfo like = m_out.graph.tensor(outs[i]);
        like.name = m_prefix + in.name + sfx;
        const TensorId t = k == 0 ? outs[i] : m_out.graph.add_tensor(like);
        OpAttrs a;
        a.fn = ArrayFn::Select;
        add(in, OpKind::Elementwise, {picks[static_cast<size_t>(k)], res[static_cast<size_t>(k)][i], acc}, {t}, a, sfx);
        acc = t;
      }
    }
    return out;
  } else if (m_noted_branch.insert(in.name).second) {
    m_out.notes.push_back("conditional '" + in.name + "' runs branch 0 (" + m_m.computations[branches[0]].name +
                          ") of " + std::to_string(n) + "; workload.branches picks another");
  }
  return emit(branches[b], {vals[b + 1]}, m_prefix + in.name + "/", -1);
}

}  // namespace podsim::hlo::import_detail
