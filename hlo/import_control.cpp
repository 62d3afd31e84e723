// The HLO importer's control flow (while loops and their trip counts; conditionals in import_conditional.cpp),
// collectives and custom calls.
#include "hlo/importer.h"

#include <cstring>
#include <iomanip>
#include <sstream>

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
  const std::string why = "; give its count as `workload: {trip_counts: [\"" + in.name +
                          "=1\"]}` with the real count for 1";
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
  const double at_start = static_cast<double>(m_out.graph.num_ops());
  for (int64_t i = 0; i < n; ++i) {
    const size_t before = m_out.graph.num_ops();
    v = emit(body, {v}, base + "[" + std::to_string(i) + "]/", -1);
    const double per_iteration = static_cast<double>(m_out.graph.num_ops() - before);
    if (static_cast<double>(m_out.graph.num_ops()) + per_iteration * static_cast<double>(n - i - 1) > kMaxOps) {
      const int64_t fits = std::max<int64_t>(1, static_cast<int64_t>((kMaxOps - at_start) / std::max(1.0, per_iteration)));
      fail(in, Err::HloUnsupported, "unrolled " + std::to_string(n) + " times its body would make more than " +
                                        std::to_string(static_cast<int64_t>(kMaxOps)) +
                                        " podsim ops; give it fewer iterations as `workload: {trip_counts: [\"" +
                                        in.name + "=" + std::to_string(std::min(fits, n - 1)) + "\"]}`");
    }
  }
  return v;
}

Value Importer::collective(const Instruction& in, const std::vector<Value>& vals) {
  std::string op = in.opcode;
  const bool async = op.size() > 6 && op.compare(op.size() - 6, 6, "-start") == 0;
  if (async) op.resize(op.size() - 6);
  if (op == "ragged-all-to-all") fail(in, Err::HloUnsupported, "ragged-all-to-all (variable sizes per peer)");
  const Attribute* ga = in.attr(op == "collective-permute" ? "source_target_pairs" : "replica_groups");
  Groups groups = groups_of(in);
  bool trivial = groups.empty() ? m_out.devices == 1 : groups[0].size() == 1;
  // A collective-permute whose pairs are no shift along mesh axes: point-to-point transfers over every axis, each
  // device to its target (attrs.targets; the group's ranks over every axis are the device ids).
  const bool permute = op == "collective-permute";
  const bool free = permute && m_partitioned && m_free_permutes.count(ga ? ga->value : "{}");
  if (permute)
    trivial = std::all_of(groups.begin(), groups.end(), [](const std::vector<int64_t>& g) { return g.size() == 1; });
  std::vector<std::string> axes = trivial ? std::vector<std::string>{}
                                  : free  ? m_out.mesh_names
                                          : axis_names(groups, ga ? ga->value : "{}");
  if (!trivial && axes.empty()) fail(in, Err::Internal, "its groups map to no mesh axis");
  // The operands (several for a combined all-reduce) and where the results go.
  std::vector<TensorId> xs;
  for (const Value& o : vals)
    if (!o.tuple && (o.t >= 0 || o.pending >= 0)) xs.push_back(need(o));
  if (xs.empty()) fail(in, Err::HloInvalid, "a collective without array operands");
  const Shape* result = &in.shape;
  // The async forms whose start gives (operand, result, ...): all-gather, collective-permute, and an all-reduce of
  // one array written so (older XLA).
  const bool pair = async && in.shape.is_tuple() && in.shape.tuple.size() >= 2 &&
                    (op == "all-gather" || op == "collective-permute" ||
                     (op == "all-reduce" && xs.size() == 1 && in.shape.tuple.size() == 2 &&
                      in.shape.tuple[0].is_array() && in.shape.tuple[1].is_array()));
  if (pair) result = &in.shape.tuple[1];
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
    const Permutation p = permutation(in);
    a.shift = p.shift;
    if (free && !trivial) {
      if (!m_core_axis.empty())
        fail(in, Err::HloUnsupported,
             "its source_target_pairs are no shift along mesh axes, and podsim runs such pairs between chips of one "
             "device each; set workload.devices_per_chip: 1");
      a.targets.assign(static_cast<size_t>(m_out.devices), -1);
      for (auto [s, t] : p.pairs) {
        if (s < 0 || t < 0 || s >= m_out.devices || t >= m_out.devices)
          fail(in, Err::HloInvalid,
               "its source_target_pairs name device " + std::to_string(s < 0 || s >= m_out.devices ? s : t) +
                   ", which a module of " +
                   std::to_string(m_out.devices) + " devices does not have");
        a.targets[static_cast<size_t>(s)] = t;
      }
    } else if (!trivial && !p.cycles) {  // chips of two devices: timed as the ring the chain is part of
      no_kernel(in, "a collective-permute along an open chain");
    }
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
  if (pair) {
    Value v;
    v.tuple = true;
    v.elems.push_back(vals[0]);
    v.elems.push_back(out);
    for (size_t i = 2; i < in.shape.tuple.size(); ++i) v.elems.push_back(Value{});
    return v;
  }
  return out;
}

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

std::string lower_case(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

// Markers of the SPMD partitioner, layouts, bounds and placement: the operand itself.
const std::set<std::string>& identity_calls() {
  static const std::set<std::string> k = {
      "Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape", "LayoutConstraint", "AllocateBuffer", "SetBound", "AssumeGatherIndicesInBound",
      "xla.sdy.GlobalToLocalShape", "xla.sdy.LocalToGlobalShape", "xla.sdy.FuncResultSharding",
      "xla.sdy.PropagationBarrier", "xla.sdy.ShardingGroup"};
  return k;
}

// Threefry-2x32 (Salmon et al., SC'11; JAX's GPU kernel jaxlib/gpu/prng_kernels.cu.cc): per pair of 32-bit
// outputs 20 rounds of add, rotate (two shifts and an or) and xor, the key schedule's two xors, the first key
// injection's two adds and five more injections of three adds each.
constexpr double kThreefryOpsPerPair = 20 * 5 + 2 + 2 + 5 * 3;

}  // namespace

}  // namespace podsim::hlo::import_detail

namespace podsim::hlo {

const std::vector<KnownCustomCall>& known_custom_calls() {
  static const std::vector<KnownCustomCall> k = {
      {"Sharding", "the operand (a sharding annotation)", "XLA's SPMD partitioner (xla/service/spmd)"},
      {"SPMDFullToShardShape", "the operand (the local shape of a manual region)", "XLA's SPMD partitioner"},
      {"SPMDShardToFullShape", "the operand (back to the global shape)", "XLA's SPMD partitioner"},
      {"LayoutConstraint", "the operand", "XLA's layout assignment"},
      {"annotate_device_placement",
       "with a host memory kind (_xla_buffer_placement pinned_host or unpinned_host) as MoveToHost, else as "
       "MoveToDevice", "JAX's memory kinds (jax.device_put to a host memory kind, compute_on)"},
      {"MoveToHost", "a to_host transfer over the host link: the value is held in host memory, not HBM",
       "XLA's host offloading (xla/service/host_offloader)"},
      {"MoveToDevice", "a from_host transfer of a value in host memory (a value in HBM: the value itself)",
       "XLA's host offloading"},
      {"AllocateBuffer", "an uninitialized buffer (no work)", "XLA (xla/service/hlo_creation_utils)"},
      {"SetBound", "the operand (a bound on a dynamic dimension)", "XLA's dynamic padder"},
      {"AssumeGatherIndicesInBound", "the operand (a hint that a gather's indices need no clamping)",
       "XLA's TPU backend"},
      {"xla.sdy.GlobalToLocalShape", "the operand", "Shardy's round trip through HLO (xla/service/spmd/shardy)"},
      {"xla.sdy.LocalToGlobalShape", "the operand", "Shardy's round trip"},
      {"xla.sdy.FuncResultSharding", "the operand", "Shardy's round trip"},
      {"xla.sdy.PropagationBarrier", "the operand", "Shardy's round trip"},
      {"xla.sdy.ShardingGroup", "nothing", "Shardy's round trip"},
      {"X64SplitLow", "a vector op per element: the low 32 bits of a 64-bit integer",
       "XLA's 64-bit integer emulation on TPU (JAX's lowering of 64-bit values)"},
      {"X64SplitHigh", "a vector op per element: the high 32 bits", "XLA's 64-bit integer emulation on TPU"},
      {"X64Combine", "two vector ops per element (shift and or) joining two 32-bit halves",
       "XLA's 64-bit integer emulation on TPU"},
      {"TopK", "a sort of the last dimension", "XLA's TopK rewriter (xla/service/topk_rewriter)"},
      {"__cublas$gemm", "the dot of its backend_config's dot_dimension_numbers (matrix unit)",
       "XLA's GPU GEMM rewriter (xla/service/gpu/transforms/gemm_rewriter)"},
      {"__cublas$lt$matmul", "the dot of its dot_dimension_numbers", "XLA's GPU GEMM rewriter (cuBLASLt)"},
      {"__cublas$lt$matmul$f8", "the dot of its dot_dimension_numbers", "XLA's GPU GEMM rewriter (fp8)"},
      {"__onednn$matmul", "the dot of its operands' last two dimensions (transpose_a, transpose_b)",
       "XLA's CPU oneDNN rewriter (xla/service/cpu/onednn_matmul_rewriter)"},
      {"__cudnn$convForward", "the convolution of its window and dim_labels",
       "XLA's GPU convolution rewriter (xla/service/gpu/transforms/conv_rewriter)"},
      {"__cudnn$convBackwardInput", "the convolution computing the input's gradient", "XLA's GPU convolution rewriter"},
      {"__cudnn$convBackwardFilter", "the convolution computing the filter's gradient",
       "XLA's GPU convolution rewriter"},
      {"__cudnn$convBiasActivationForward", "the convolution (bias and activation fused)",
       "XLA's GPU convolution rewriter"},
      {"__onednn$convolution", "the convolution of its window and dim_labels", "XLA's CPU oneDNN rewriter"},
      {"cu_threefry2x32", "the Threefry-2x32 hash: 119 vector ops per pair of 32-bit outputs",
       "JAX's GPU random numbers (jaxlib/gpu/prng_kernels)"},
      {"cu_threefry2x32_ffi", "as cu_threefry2x32", "JAX's GPU random numbers (FFI)"},
      {"cuda_threefry2x32", "as cu_threefry2x32", "JAX's GPU random numbers (older name)"},
      {"hip_threefry2x32", "as cu_threefry2x32", "JAX's ROCm random numbers"},
      {"te_fused_attn_forward_ffi", "fused (flash) attention", "NVIDIA Transformer Engine"},
      {"te_fused_attn_backward_ffi", "fused attention's gradient", "NVIDIA Transformer Engine"},
      {"__cudnn$fmhaSoftmax", "fused attention (any target naming fmha, flash or fused_attn)",
       "XLA's GPU cuDNN fused attention"},
      {"tpu_custom_call", "fused attention when its backend_config names flash (a Pallas kernel)",
       "JAX's Pallas on TPU"},
  };
  return k;
}

}  // namespace podsim::hlo

namespace podsim::hlo::import_detail {

Value Importer::first_result(const Instruction& in, TensorId& out) {
  const Shape& s = in.shape.is_tuple() && !in.shape.tuple.empty() ? in.shape.tuple[0] : in.shape;
  if (!s.is_array() || s.elements() == 0) fail(in, Err::HloInvalid, "a library call without an array result");
  out = tensor(m_prefix + in.name + m_copy_suffix, s);
  Value v = value_of(out);
  if (!in.shape.is_tuple()) return v;
  Value t;
  t.tuple = true;
  t.elems.push_back(v);
  for (size_t i = 1; i < in.shape.tuple.size(); ++i) t.elems.push_back(Value{});  // workspace: nothing written
  return t;
}

Value Importer::custom_call(const Instruction& in, const std::vector<Value>& vals) {
  const std::string target = word(in, "custom_call_target").value_or("");
  if (target == "MoveToHost" || target == "MoveToDevice") return host_placement(in, vals, target == "MoveToHost");
  if (target == "annotate_device_placement") {
    const Attribute* fa = in.attr("frontend_attributes");
    const bool host = fa && (fa->value.find("pinned_host") != std::string::npos);  // pinned_host, unpinned_host
    return host_placement(in, vals, host);
  }
  std::vector<TensorId> xs;
  for (const Value& o : vals) need_leaves(o, xs);
  if (identity_calls().count(target)) {
    if (vals.size() == 1 && !vals[0].tuple && (vals[0].t >= 0 || vals[0].pending >= 0) && in.shape.is_array()) {
      const TensorId x = need(vals[0]);
      if (m_out.graph.tensor(x).elements() == in.shape.elements()) {
        if (shape_of(x) == in.shape.dims) return value_of(x);
        return value_of(make(in, OpKind::Bitcast, {x}));
      }
    }
    if (target == "AllocateBuffer") return array_value(m_prefix + in.name, in.shape);
    if (in.shape.is_tuple() && in.shape.tuple.empty()) return Value{};  // a marker with no result (ShardingGroup)
    if (!in.shape.is_array() && vals.size() <= 1 && (vals.empty() || vals[0].tuple)) return vals.empty() ? Value{} : vals[0];
    if (vals.size() == 1 && in.shape.is_tuple() && vals[0].tuple) return vals[0];
    fail(in, Err::HloUnsupported, "custom call '" + target + "' changes its operand's shape: the module is not "
                                                             "SPMD-partitioned (podsim runs per-device modules)");
  }
  const std::string lower = lower_case(target);
  if (auto it = m_o.custom_calls.find(target); it != m_o.custom_calls.end()) {
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    OpAttrs a;
    a.flops = it->second.flops;
    a.bytes = it->second.bytes;
    a.pattern = it->second.mxu ? "mxu" : "vpu";
    no_kernel(in, "custom call '" + target + "'");
    add(in, OpKind::CustomCost, xs, outs, a);
    return out;
  }
  const bool attention = contains(lower, "fused_attn") || contains(lower, "fmha") || contains(lower, "flash") ||
                         (lower == "tpu_custom_call" && in.attr("backend_config") &&
                          in.attr("backend_config")->value.find("flash") != std::string::npos);
  if (attention) {
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    no_kernel(in, "custom call '" + target + "' (fused attention)");
    const bool backward = contains(lower, "backward") || contains(lower, "bwd");
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
  if ((contains(lower, "cublas") && (contains(lower, "gemm") || contains(lower, "matmul"))) ||
      target == "__onednn$matmul")
    return gemm(in, xs);
  if (contains(lower, "cudnn$conv") || target == "__onednn$convolution") return library_convolution(in, xs, target);
  if (target == "X64SplitLow" || target == "X64SplitHigh" || target == "X64Combine") {
    // TPUs hold a 64-bit integer as two 32-bit words: a split reads the value and writes one word, a combine
    // shifts the high word and ors the low one in.
    no_kernel(in, "custom call '" + target + "' (64-bit integer halves)");
    const bool combine = target == "X64Combine";
    if (xs.size() != (combine ? 2u : 1u) || !in.shape.is_array())
      fail(in, Err::HloInvalid, "custom call '" + target + "' takes " + (combine ? "two operands" : "one operand") +
                                    " and gives one array");
    OpAttrs a;
    a.flops = static_cast<double>(in.shape.elements()) * (combine ? 2 : 1);
    a.bytes = in.shape.bytes();
    for (TensorId x : xs) a.bytes += m_out.graph.tensor(x).bytes();
    a.pattern = "vpu";
    return value_of(make(in, OpKind::CustomCost, xs, a));
  }
  if (contains(lower, "threefry2x32")) {
    no_kernel(in, "custom call '" + target + "' (random bits)");
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    if (outs.empty()) fail(in, Err::HloInvalid, "a random-number call without results");
    OpAttrs a;
    a.flops = kThreefryOpsPerPair * static_cast<double>(m_out.graph.tensor(outs[0]).elements());
    for (TensorId t : xs) a.bytes += m_out.graph.tensor(t).bytes();
    for (TensorId t : outs) a.bytes += m_out.graph.tensor(t).bytes();
    a.pattern = "vpu";
    add(in, OpKind::CustomCost, xs, outs, a);
    return out;
  }
  if (target == "TopK" || lower == "topk") {
    Value out = array_value(m_prefix + in.name, in.shape);
    std::vector<TensorId> outs;
    leaves(out, outs);
    no_kernel(in, "custom call TopK");
    OpAttrs a;
    a.dims = {static_cast<int64_t>(shape_of(xs.at(0)).size()) - 1};
    add(in, OpKind::Sort, {xs.at(0)}, outs, a);
    return out;
  }
  // Unknown: the hint is the parameter as written, with the call's operands and results as its bytes.
  double bytes = in.shape.bytes();
  for (TensorId t : xs) bytes += m_out.graph.tensor(t).bytes();
  std::vector<std::string> names;
  for (const KnownCustomCall& k : known_custom_calls()) names.push_back(k.target);
  std::string near;
  size_t best = std::numeric_limits<size_t>::max();
  for (const std::string& n : names) {
    const size_t d = edit_distance(lower, lower_case(n));
    if (d < best) {
      best = d;
      near = n;
    }
  }
  std::ostringstream b;
  b << std::setprecision(12) << bytes;
  fail(in, Err::HloCustomCall,
       "custom call '" + target + "' is no kernel podsim knows (the nearest it knows is '" + near +
           "'; docs/hlo.md lists them all); give its cost as `workload: {custom_calls: [\"" + target +
           "=flops:0,bytes:" + b.str() + "\"]}` (bytes: its operands and results; put in the FLOPs it does)");
}

// A GEMM library call: its dot dimensions in backend_config ("lhs_contracting_dimensions":["1"], ...); oneDNN's
// matmul multiplies its operands' last two dimensions (transpose_a, transpose_b), the others batch.
Value Importer::gemm(const Instruction& in, const std::vector<TensorId>& xs) {
  no_kernel(in, "a GEMM custom call");
  if (xs.size() < 2) fail(in, Err::HloUnsupported, "a GEMM call without two operands");
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
    std::istringstream is(s);
    for (int64_t x; is >> x;) v.push_back(x);
    return v;
  };
  const auto &ls = shape_of(xs[0]), &rs = shape_of(xs[1]);
  std::vector<int64_t> lc = dims("lhs_contracting_dimensions"), rc = dims("rhs_contracting_dimensions");
  std::vector<int64_t> lb = dims("lhs_batch_dimensions"), rb = dims("rhs_batch_dimensions");
  if (in.attr("custom_call_target") && word(in, "custom_call_target").value_or("") == "__onednn$matmul") {
    if (ls.size() < 2 || rs.size() != ls.size()) fail(in, Err::HloUnsupported, "a oneDNN matmul of operands of other ranks");
    auto flag = [&](const char* key) {
      const size_t k = cfg.find(key);
      return k != std::string::npos && cfg.find("true", k) == cfg.find_first_of("tf", k + std::strlen(key));
    };
    const int64_t r = static_cast<int64_t>(ls.size());
    lc = {flag("transpose_a") ? r - 2 : r - 1};
    rc = {flag("transpose_b") ? r - 1 : r - 2};
    lb.clear();
    rb.clear();
    for (int64_t d = 0; d + 2 < r; ++d) {
      lb.push_back(d);
      rb.push_back(d);
    }
  } else if (lc.empty() && rc.empty()) {
    fail(in, Err::HloUnsupported, "a GEMM call whose backend_config gives no dot_dimension_numbers");
  }
  TensorId out = -1;
  Value v = first_result(in, out);
  const double beta = config_number(in, "beta").value_or(0);
  if (xs.size() >= 3 && beta != 0 && m_out.graph.tensor(xs[2]).elements() == m_out.graph.tensor(out).elements()) {
    // D = alpha A B + beta C: the product, then C added in.
    TensorInfo t = m_out.graph.tensor(out);
    t.name += ".product";
    const TensorId product = m_out.graph.add_tensor(t);
    matmul(in, xs[0], xs[1], lb, rb, lc, rc, product);
    OpAttrs a;
    a.fn = ArrayFn::Add;
    add(in, OpKind::Elementwise, {product, xs[2]}, {out}, a, ".beta");
    return v;
  }
  matmul(in, xs[0], xs[1], lb, rb, lc, rc, out);
  return v;
}

// cuDNN's and oneDNN's convolutions carry the convolution's own window and dim_labels; the backward ones compute
// the forward input's gradient (operands: the output's gradient and the filter) or the filter's (operands: the
// forward input and the output's gradient) with the forward convolution's GEMM.
Value Importer::library_convolution(const Instruction& in, const std::vector<TensorId>& xs, const std::string& target) {
  no_kernel(in, "a convolution custom call");
  if (xs.size() < 2) fail(in, Err::HloUnsupported, "a convolution call without two operands");
  TensorId out = -1;
  Value v = first_result(in, out);
  const auto &a0 = shape_of(xs[0]), &a1 = shape_of(xs[1]), &r = shape_of(out);
  OpAttrs a;
  if (contains(target, "BackwardInput")) a.dims = conv_gemm(in, r, a1, a0);
  else if (contains(target, "BackwardFilter")) a.dims = conv_gemm(in, a0, r, a1);
  else a.dims = conv_gemm(in, a0, a1, r);
  add(in, OpKind::Convolution, {xs[0], xs[1]}, {out}, a);
  return v;
}

}  // namespace podsim::hlo::import_detail
