// The partitioner's state, shared by the files that implement partition_step (internal to partition/):
//   partitioner.cpp      the walk over the logical step: annotations, each op's rule, its local op, the results
//   reshard.cpp          turning a tensor's version into another spec: reduce-scatter, all-reduce, all-to-all,
//                        all-gather, slice (partitioner.h lists the cases)
//   gather_prefetch.cpp  fully sharded parameters: the pass a gathered copy serves, and the gathers issued one cell
//                        ahead
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "base/text.h"
#include "partition/partitioner.h"
#include "plan/op_sharding.h"

namespace podsim::partition_detail {

class Partitioner {
 public:
  explicit Partitioner(const PartitionInput& in);

  PartitionResult run();

 private:
  struct Version {
    ShardSpec spec;
    TensorId local;
    int pass = -1;  // a gathered copy of a fully sharded parameter: the pass it serves (gather_pass); else -1
  };

  // The ops that gathered a fully sharded parameter for one pass, and the cell of the op that first read it.
  struct GatherChain {
    std::vector<OpId> ops;  // the all-gather and the crop of its padding, in order
    int pass = 0;
    int32_t cell = -1;
  };

  // ---- the walk (partitioner.cpp) ----

  // The spec a tensor is annotated with; optimizer state without one follows its parameter's.
  std::optional<ShardSpec> annotation(TensorId t) const;

  void check_annotations() const;

  // The spec an op's output should end up with, when something asks for one.
  std::optional<ShardSpec> wanted(TensorId t) const;

  // For a rule, the spec an output will be taken in, when something asks for one: what wanted() says, or for a
  // parameter's gradient the spec of its parameter, in which the update takes it. A hint only: the gradient is
  // resharded where the update reads it, but a rule can produce it in its parameter's split (each device then
  // reduces only its own piece).
  // A part of a gradient (a tied parameter's gradient is the sum of its uses' parts; a mixed-precision one is cast
  // to the master's type) takes the hint of the gradient it becomes, and a value only cast (mixed precision's
  // embedding rows) the hint of its cast.
  std::optional<ShardSpec> hint(TensorId t) const;

  void partition_op(const Op& op);

  // An op the rule runs as several local steps (OpSharding::steps) on the local inputs and outputs of `local` and
  // the rule's scratch values.
  void emit_steps(const Op& op, const Op& local, const OpSharding& dec);

  // A schedule's control edges of the logical step (an op ordered after another without reading its values, as a
  // re-materialization's recomputation after the backward op before it: workloads/remat.h) order the local ops too.
  void carry_control_edges();

  // Every logical tensor the program computes is bound to a version that holds its value whole or split; results
  // that are still pending sums (the loss, products nobody consumed, what the update reads) are reduced first. A
  // loss something still adds to (a micro-batch's, accumulated into the step's) is not a result of its own.
  void bind_results();

  void note_padding(TensorId t, const ShardSpec& s);

  // A new local tensor holding logical tensor `t` in spec `s` (shape from the spec; partial axes do not change it).
  TensorId add_local(TensorId t, const ShardSpec& s, const std::string& name, TensorRole role);

  // Role of a reshard's output: copies of step inputs are working values, not persistent state.
  static TensorRole copy_role(TensorRole r);

  TensorId temp(TensorId t, std::vector<int64_t> shape, const std::string& name);

  void emit(Op op);

  std::string op_name(TensorId t, const std::string& what);

  // Emits a one-input op on local tensor `x` producing `y`.
  void emit1(const std::string& name, OpKind kind, TensorId x, TensorId y, OpAttrs at);

  // ---- resharding (reshard.cpp) ----

  // The local tensor holding logical `t` in spec `want`, resharding the current (primary) version if needed.
  TensorId get(TensorId t, const ShardSpec& want);

  // Pads (or crops) dimension `d` of local tensor `x` to `n` with a static slice; returns the new tensor.
  TensorId resize(TensorId t, TensorId x, size_t d, int64_t n);

  Version record(TensorId t, const ShardSpec& s, TensorId local);

  // Whether the split `to` of a dimension of `n` elements is the split `from` followed by more (inner) axes,
  // returned in `inner`, with every device's piece of `to` inside its piece of `from`: always when `from` is empty,
  // else when `to` divides the dimension evenly (padding would move the pieces' boundaries).
  bool extends(const std::vector<std::string>& from, const std::vector<std::string>& to, int64_t n,
               std::vector<std::string>& inner) const;

  // Whether `to` takes axes from dimension p of `from` to dimension q: to.dims[q] = from.dims[q] + moved and
  // from.dims[p] = to.dims[p] + moved, `moved` not empty.
  static bool moves_innermost(const ShardSpec& from, const ShardSpec& to, size_t p, size_t q,
                              std::vector<std::string>& moved);

  // ---- fully sharded parameters (gather_prefetch.cpp) ----

  // Forward ops (and the loss) share one gathered copy, backward ops another (with the forward ops
  // re-materialization recomputes during the backward pass); other phases read the shard.
  int gather_pass(const Op& op) const;

  // Issues each cell's parameter gathers one cell ahead, per pass: with the pass's cells c0, c1, ... in the order
  // it first gathers for them, the gathers of c0 and c1 move to just before c0's first op in the pass, those of c2
  // to just before c1's first op, and so on; each moved gather waits for the last compute op issued before it, so
  // it starts when the previous cell's compute is done and overlaps the current cell's (FSDP's forward and
  // backward prefetch, XLA's asynchronous all-gather scheduled one layer early).
  void prefetch_gathers();

  static std::string axes_text(const std::vector<std::string>& a) { return join(a, ","); }

  const PartitionInput& m_in;
  const ModelGraph& m_g;
  const Mesh& m_m;
  PartitionResult m_res;
  std::vector<std::vector<Version>> m_versions;  // per logical tensor; front() is what consumers start from
  std::vector<TensorId> m_input_local;           // local tensor of each step input
  int64_t m_counter = 0;
  bool m_fallback_noted = false;
  int m_pass = -1;                   // while gathering a fully sharded parameter: the pass the copy serves
  std::vector<GatherChain> m_chains;  // every such gather, in issue order
  std::set<OpId> m_chained;           // casts moved with a gather (one gather takes each)
  std::vector<OpId> m_local_op;    // per logical op: the (last) local op computing it
  std::vector<OpId> m_local_first;  // per logical op: its first local op (they differ for an op run in steps)
  OpId m_last_op = -1;    // the last op emitted
  OpId m_main_op = -1;    // the last logical op's own (last) local op
  OpId m_main_first = -1;  // and its first
};

}  // namespace podsim::partition_detail
