// The HLO importer's internals (hlo/import.h is its interface): the Importer that walks a module's entry
// computation and emits the graph, its values, and the helpers its parts share. Its members are defined by concept:
// import.cpp (the run, tensors and ops, cheap producers recomputed where used), import_devices.cpp (the devices
// and mesh), import_emit.cpp (the computation emitter and its instruction switch), import_ops.cpp (dots,
// convolutions and the other instructions with a method of their own), import_control.cpp (control flow,
// collectives, custom calls), import_host.cpp (host transfers: infeed, outfeed, host offloading).
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "hlo/import.h"
#include "base/error.h"
#include "base/text.h"
#include "hlo/attributes.h"
#include "hlo/devices.h"
#include "hlo/issue_order.h"
#include "workloads/op_def.h"

namespace podsim::hlo::import_detail {

// The value an instruction produces: an array (a tensor of the graph), a tuple of values, or nothing (a token).
struct Value {
  TensorId t = -1;
  int32_t pending = -1;  // a cheap producer not emitted yet: each consumer recomputes it (Importer::defer)
  bool tuple = false;
  std::vector<Value> elems;
};

bool is_collective(const std::string& op);
void leaves(const Value& v, std::vector<TensorId>& out);
std::vector<int64_t> physical(const Shape& s);
bool row_major(const Shape& s);
bool literal_values(const std::string& lit, std::vector<float>& out);
ArrayFn unary_fn(const std::string& op, bool& ok);
ArrayFn binary_fn(const std::string& op, bool& ok);
ArrayFn combiner(const Computation& c);
std::string category(const std::string& opcode);

class Importer {
 public:
  Importer(const Module& m, const ImportOptions& o) : m_m(m), m_o(o) {}

  Imported run();

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
  [[noreturn]] void fail(const Instruction& in, Err e, const std::string& what) const;

  // ---- the devices ----

  std::vector<int32_t> called(const Instruction& in) const;

  // Computations reachable from the entry, each once.
  std::vector<int32_t> reachable() const;

  Groups groups_of(const Instruction& in) const;

  // A collective-permute as a shift: its cycles (or chains), each group's devices in rank order, and the steps
  // every pair moves along its group (-1: a ring run backwards). Pairs that are no one shift (`arbitrary`), or
  // whose groups are no mesh axes (m_free_permutes), run as point-to-point transfers between any devices: the
  // permute spans every mesh axis and attrs.targets names each device's target.
  struct Permutation {
    Groups groups;
    int64_t shift = 1;
    bool cycles = true;      // every group closed (a ring), else open chains
    bool arbitrary = false;  // the pairs move devices by different steps
    std::vector<std::pair<int64_t, int64_t>> pairs;
  };
  Permutation permutation(const Instruction& in) const;
  Groups permute_groups(const Instruction& in) const { return permutation(in).groups; }
  std::set<std::string> m_free_permutes;  // source_target_pairs texts whose groups are no mesh axes

  // The device count and mesh: from the header, else the collectives' groups; shardings add the digits they split.
  void find_devices();

  // Per split dimension of a tile assignment: the groups of devices along it (the others' tiles fixed), in order.
  std::vector<Groups> tile_groups(const Sharding& s, const Instruction& in) const;

  std::vector<std::string> axis_names(const Groups& g, const std::string& key);

  // ---- tensors and ops ----

  TensorId tensor(const std::string& name, const Shape& s, TensorRole role = TensorRole::Activation);

  Value array_value(const std::string& name, const Shape& s);

  int32_t origin(int32_t comp, int32_t idx, const Instruction& in);

  int32_t m_cur_comp = -1, m_cur_idx = -1;
  std::string m_prefix;

  OpId add(const Instruction& in, OpKind kind, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
           OpAttrs attrs = {}, const std::string& suffix = "");

  // A new tensor for `in`'s (array) result and the op that makes it.
  TensorId make(const Instruction& in, OpKind kind, std::vector<TensorId> inputs, OpAttrs attrs = {});

  TensorId arr(const Instruction& in, const std::vector<Value>& vals, size_t k);

  const std::vector<int64_t>& shape_of(TensorId t) const { return m_out.graph.tensor(t).shape; }

  void need_operands(const Instruction& in, size_t n) const;

  void no_kernel(const Instruction& in, const std::string& what);

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

  static bool cheap_opcode(const std::string& op);

  bool deferrable(const Instruction& in, const std::vector<Value>& ops) const;

  Value defer(int32_t comp, int32_t idx, const std::string& prefix, const std::vector<Value>& ops);

  // The tensor of an array value, emitting a pending producer (once per consumer) where it is needed.
  TensorId need(const Value& v);
  std::string m_copy_suffix;  // names a pending producer's second and later copies

  void need_leaves(const Value& v, std::vector<TensorId>& out);

  // An elementwise operand: a pending broadcast of a single value is that value (the kernel broadcasts it).
  TensorId elem_arr(const Instruction& in, const std::vector<Value>& vals, size_t k);

  // The value of a scalar constant, emitted or pending.
  std::optional<double> scalar_of(const Value& v) const;

  // ---- the computation emitter ----

  std::vector<Value> entry_parameters(const Computation& entry);

  // Step results: updated in place of the parameter they alias (input_output_alias), else kept to the end.
  void mark_results(const Computation& entry, const Value& root);

  Value emit(int32_t comp, const std::vector<Value>& args, const std::string& prefix, int32_t call_site);

  Value value_of(TensorId t);

  // `vals`: the values of the instruction's operands, in order.
  Value instruction(const Computation& c, const Instruction& in, const std::vector<Value>& vals,
                    const std::vector<Value>& args);

  Value constant(const Instruction& in);

  TensorId dot(const Instruction& in, const std::vector<Value>& vals);

  TensorId convolution(const Instruction& in, const std::vector<Value>& vals);

  // A product of `l` and `r` over the dot dimensions given, into `out` (a new tensor of `result` when -1).
  TensorId matmul(const Instruction& in, TensorId l, TensorId r, const std::vector<int64_t>& lb,
                  const std::vector<int64_t>& rb, const std::vector<int64_t>& lc, const std::vector<int64_t>& rc,
                  TensorId out = -1);

  // A convolution's GEMM (groups, output rows, reduction, columns) from the forward convolution's input, filter and
  // output shapes and the instruction's dim_labels and group counts.
  std::vector<int64_t> conv_gemm(const Instruction& in, const std::vector<int64_t>& xs, const std::vector<int64_t>& ws,
                                 const std::vector<int64_t>& os);

  TensorId transpose(const Computation& c, const Instruction& in, const std::vector<Value>& vals);

  // An optimization barrier: its results are its operands, available only once every operand is computed (XLA's
  // semantics: nothing that reads a result runs before all of the barrier's operands are evaluated). JAX's
  // re-materialization puts the backward pass's cotangent into the barrier beside the saved residuals, so that the
  // forward's recomputation runs in the backward pass rather than where its inputs are first ready. Each array
  // operand comes out as a view (no buffer of its own, no work) ordered after the producers of all of them; a
  // pending cheap producer passes through (its readers recompute it).
  Value barrier(const Instruction& in, const std::vector<Value>& vals);

  // A copy: nothing to move when the layouts agree (a view), else a transpose to the new layout.
  Value copy(const Instruction& in, const std::vector<Value>& vals, const Shape& shape);

  Value reduce(const Instruction& in, const std::vector<Value>& vals);

  Value fusion(const Instruction& in, const std::vector<Value>& vals);

  // ---- control flow ----

  // The constant a value was made from, if it was (through converts and copies).
  std::optional<double> constant_of(const Computation& c, int32_t idx, const std::vector<Value>* vals) const;

  // The tuple index a value of the condition or body reads from its parameter (through converts).
  int64_t counter_index(const Computation& c, int32_t idx) const;

  int64_t trip_count(const Instruction& in, const Value& init, int32_t cond, int32_t body);

  Value while_loop(const Instruction& in, const std::vector<Value>& vals);

  Value conditional(const Instruction& in, const std::vector<Value>& vals);
  std::set<std::string> m_noted_branch;

  // ---- collectives ----

  Value collective(const Instruction& in, const std::vector<Value>& vals);

  // ---- custom calls ----

  Value custom_call(const Instruction& in, const std::vector<Value>& vals);

  // A GEMM library call (cuBLAS, cuBLASLt, oneDNN): the dot its backend_config's dot_dimension_numbers give.
  Value gemm(const Instruction& in, const std::vector<TensorId>& xs);

  // A cuDNN convolution (forward, backward input or filter): the convolution its window and dim_labels give.
  Value library_convolution(const Instruction& in, const std::vector<TensorId>& xs, const std::string& target);

  // Custom-call results: the first array of the result the op writes; the others (a library's workspace) hold
  // nothing.
  Value first_result(const Instruction& in, TensorId& out);

  // ---- host transfers ----

  // infeed: the data arrive from the host over the host link; outfeed: they leave for it.
  Value infeed(const Instruction& in);
  Value outfeed(const Instruction& in, const std::vector<Value>& vals);
  // The arrays of `data` arriving from the host (from_host transfers), and those of `v` leaving for it (to_host).
  Value from_host(const Instruction& in, const Shape& data);
  void to_host(const Instruction& in, const Value& v);
  // Host offloading (XLA's host memory space, JAX's memory kinds): MoveToHost, or annotate_device_placement with a
  // host memory kind, moves its operand to the host over the host link (a to_host transfer: the value takes no
  // HBM there); MoveToDevice (or the annotation with the device kind) of a value in host memory brings it back (a
  // from_host transfer), and of a value already in HBM is the value itself. What stays on the host: a to_host's
  // result, its views and slices, and a buffer updated with host values (add() keeps m_on_host).
  Value host_placement(const Instruction& in, const std::vector<Value>& vals, bool to_host);
  std::set<TensorId> m_on_host;
  // send and recv: with is_host_transfer=true, a transfer to or from the host (TensorFlow's host transfers); between
  // devices only when nothing moves (an empty tuple).
  Value send_recv(const Instruction& in, const std::vector<Value>& vals);
};

}  // namespace podsim::hlo::import_detail
