// Partition rules: how one op of the logical step runs on sharded tensors (GSPMD's per-op partitioning). Each op
// kind registers its rule beside its cost, kernel and gradient (workloads/ops/*.cpp); the SPMD partitioner
// (partition/) asks the rule, reshards the inputs to what it requires (inserting collectives or local slices) and
// emits the op on local shapes.
//
// Contract: given the current specs of the inputs (possibly partial) and the specs wanted for the outputs (if
// any), a rule returns specs for the inputs that the op can run on locally, the specs its outputs then have
// (possibly partial: a pending sum over axes), and the local op's attributes. Running the op on every device's
// shards of those inputs must give every device its shard of the logical outputs. A rule may ignore what is
// wanted; the partitioner reshards the outputs afterwards.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "plan/mesh.h"
#include "plan/sharding.h"
#include "workloads/graph.h"

namespace podsim {

struct OpShardingQuery {
  const ModelGraph& g;  // the logical graph (global shapes)
  const Op& op;
  const Mesh& mesh;
  std::vector<ShardSpec> in;                 // current spec of each input
  // Wanted spec of each output, when something asks for one (an annotation; for a parameter's gradient, its
  // parameter's spec, in which the update takes it).
  std::vector<std::optional<ShardSpec>> want;
  // Exchange rate between compute and communication for rules that weigh choices: how many FLOPs a device does in
  // the time one byte crosses its ICI (peak FLOP/s over the chip's total link bandwidth).
  double flops_per_comm_byte = 300;
};

// One step of an op that runs as several local steps (OpSharding::steps). Slots number the op's inputs first, then
// its outputs, then the rule's scratch values. A communication step (an all-reduce over attrs.axes) reduces one
// slot into another.
struct LocalStep {
  // Appended to the op's name ("loss" -> "loss/max"; empty: the op's name); a collective is named after its input.
  std::string name;
  OpKind kind = OpKind::Add;
  std::vector<int> in, out;
  OpAttrs attrs;
};

struct OpSharding {
  std::vector<ShardSpec> in;
  std::vector<ShardSpec> out;
  OpAttrs attrs;
  // When the shards need values from one another mid-way (a cross-entropy over classes split across devices
  // needs each row's max and sums from all of them, Megatron-LM's vocab-parallel cross-entropy), the rule gives
  // the local steps that replace the op, in order, and the local shapes and names of the scratch values between
  // them (activations). Empty: the op runs as one local op with `attrs`.
  std::vector<LocalStep> steps;
  struct Scratch {
    std::string name;
    std::vector<int64_t> shape;
    DType dtype = DType::F32;
  };
  std::vector<Scratch> scratch;
};

using PartitionRule = OpSharding (*)(const OpShardingQuery& q);

// The rule of an op kind (registered in workloads/ops/); nullptr when the kind has none (it then runs on whole
// tensors: sharding::replicated).
PartitionRule partition_rule(OpKind k);

namespace sharding {

// The spec without its partial axes.
ShardSpec settled(ShardSpec s);
// How many devices hold distinct pieces of the tensor (product of the split axes' sizes).
int64_t pieces(const ShardSpec& s, const Mesh& m);
// Bytes of the logical tensor.
double tensor_bytes(const ModelGraph& g, TensorId t);

// Every input, output and the op as one device would run it: nothing split (the fallback for kinds without a rule).
OpSharding replicated(const OpShardingQuery& q);
// Elementwise ops: every operand and output with one spec, that of the most split input (or the wanted output's,
// when it is at least as split). `linear` ops (add, scale) keep inputs that are all partial over the same axes
// partial.
OpSharding elementwise(const OpShardingQuery& q, bool linear);
// Ops that act along the last dimension (softmax, layer norm): the input's spec with its last `whole` dimensions
// not split.
ShardSpec unsplit_last(ShardSpec s, size_t whole);
// The partial axes a reduction over dimensions `reduced` of a tensor with spec `s` produces (their split axes,
// plus what `s` was already partial over), sorted.
std::vector<std::string> reduced_axes(const ShardSpec& s, const std::vector<size_t>& reduced);
// Padding records for the dimensions of `global` that `s` splits unevenly (for ops that must mask padded rows).
std::vector<OpAttrs::Padded> padding(const std::vector<int64_t>& global, const ShardSpec& s, const Mesh& m,
                                     size_t first_dims);

}  // namespace sharding
}  // namespace podsim
