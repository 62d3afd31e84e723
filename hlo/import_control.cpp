// The HLO importer's control flow (while loops and their trip counts, conditionals), collectives and custom
// calls.
#include "hlo/importer.h"

namespace podsim::hlo::import_detail {

// The constant a value was made from, if it was (through converts and copies).
std::optional<double> Importer::constant_of(const Computation& c, int32_t idx, const std::vector<Value>* vals) const {
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
int64_t Importer::counter_index(const Computation& c, int32_t idx) const {
  const Instruction& in = c.instructions[idx];
  if (in.opcode == "get-tuple-element" && in.operands.size() == 1 &&
      c.instructions[in.operands[0]].opcode == "parameter")
    return integer(in, "index", m_m.file).value_or(-1);
  if ((in.opcode == "convert" || in.opcode == "copy") && in.operands.size() == 1) return counter_index(c, in.operands[0]);
  return -1;
}

int64_t Importer::trip_count(const Instruction& in, const Value& init, int32_t cond, int32_t body) {
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

Value Importer::while_loop(const Instruction& in, const std::vector<Value>& vals) {
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

Value Importer::conditional(const Instruction& in, const std::vector<Value>& vals) {
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

Value Importer::collective(const Instruction& in, const std::vector<Value>& vals) {
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

Value Importer::custom_call(const Instruction& in, const std::vector<Value>& vals) {
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
Value Importer::gemm(const Instruction& in, const std::vector<TensorId>& xs, const Value& out,
                     const std::vector<TensorId>& outs) {
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

}  // namespace podsim::hlo::import_detail
